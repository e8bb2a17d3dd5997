/*
 * The progress page of this node's workers (lib/progress/page.h): amlrun
 * makes it with the job, gives each worker its descriptor and slot (the
 * worker's index) in the environment, empties the slot at every start, and,
 * while some worker calls amldist_progress(), reads the slots' rings from a
 * timer of the supervisor's loop into a history per worker, for the
 * straggler statistics (lib/progress/straggler.h): every worker's lag now
 * (progress_lags(), for --status) and, at the end of a job on one node,
 * the line "amlrun: slowest rank R: ..." when one rank was consistently
 * last.
 *
 * The timer: without a call yet it looks every 1, 2, 4 ... up to 16 s (a
 * few loads, no system call but the loop's wake-up); once a worker calls,
 * often enough that no slot's ring (64 steps) fills between two looks
 * (10 ms to 1 s).  A job that never calls the API costs nothing else.
 */
#ifndef AMLRUN_PROGRESSPAGE_H
#define AMLRUN_PROGRESSPAGE_H

#include <stdint.h>

struct job;
struct progress_watch;

/* The page for j->n workers, in j->progress; without one (a failure,
 * said under -v), the workers simply get no page. */
void progress_job_init(struct job *j);
void progress_job_free(struct job *j);

/* Worker `index` is about to start: its slot emptied, its history
 * forgotten, the two variables in *env.  -1 when out of memory. */
int progress_worker_env(struct job *j, int index, char ***env);

/* An attempt's workers started / all ended (the timer armed / cancelled,
 * the slots read one last time). */
void progress_attempt_start(struct job *j);
void progress_attempt_end(struct job *j);

/* The page itself (page.h: amldist__progress_page_read() of a worker's
 * slot, its calls, last step and time), or NULL without one. */
struct amldist__progress_page;
const struct amldist__progress_page *progress_page(const struct job *j);
/* The page's descriptor, which every worker inherits (its number is in
 * the worker's environment); -1 when there is no page. */
int progress_fd(const struct job *j);

/* Every local worker's progress now. */
struct progress_lag {
    uint64_t calls;  /* amldist_progress() calls in this attempt; 0: none */
    uint64_t step;   /* the last call's step */
    int64_t t_ns;    /* its CLOCK_MONOTONIC time */
    int64_t lag_ns;  /* its lag behind the median of the workers' times for
                        the steps they all reached (straggler.h) */
    unsigned steps;  /* those common steps, 0: no lag known */
    int last;        /* it is the consistently last one */
};
/* out[j->n]; -1 when there is no page, or out of memory. */
int progress_lags(struct job *j, struct progress_lag *out);

/* At the end of the job on one node: "amlrun: slowest rank R: node N
 * (host H), M ms behind the median over K steps", when one was (not
 * under -q, nor with a control plane, whose host compares every node). */
void progress_report_slowest(struct job *j);

#endif /* AMLRUN_PROGRESSPAGE_H */
