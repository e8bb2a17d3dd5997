/*
 * What the supervisor watches besides exits, on its loop's timers, each
 * armed only when it is asked for (no timer, no cost otherwise):
 *   - --hang-timeout: a look when a hang could first be due, deciding with
 *     lib/progress/hang.h over this node's ranks (their output lines, and
 *     their calls of the progress API); on a hang, every rank's stack is
 *     read and merged, printed (and written, --hang-report), and the
 *     attempt stops as a failure: exit status 124, or a restart;
 *   - --timeout: the job's wall time; the stacks first, then the job ends
 *     (124) whatever restarts are left; across nodes the rendezvous host's
 *     node gathers every node's stacks for one report (job_gather), and
 *     another node's timer is only a fallback, 30 s later;
 *   - ranks still running after others ended: a notice soon after, then
 *     at doubling intervals.
 */
#ifndef AMLRUN_HANGWATCH_H
#define AMLRUN_HANGWATCH_H

#include "progress/hang.h"
#include "run/job.h"

/* The job begins (--timeout's timer). */
void watch_job(struct job *j);
/* An attempt's workers have started (--hang-timeout's first look). */
void watch_attempt(struct job *j);
/* A worker of the attempt ended well while others run (the notices). */
void watch_worker_done(struct job *j);
/* The attempt's workers have all ended: its timers go. */
void watch_attempt_end(struct job *j);

/* This node's ranks of the attempt, as the hang decision sees them (room
 * for j->n in v; each one's worker index in idx[], which may be NULL); the
 * count. */
size_t hang_view(const struct job *j, amldist__hang_rank_t *v, int *idx);
/* Every running rank's stack (stk_capture: each stopped only while it is
 * read), its last progress from its calls or else its lines, appended to
 * *set: 0, or -1 when out of memory.  Hangs, --timeout and --stacks. */
struct stk_set;
int job_stacks(struct job *j, struct stk_set *set);

/* The ranks of this node's workers still running, as "0-6,8,10-11". */
void running_ranks(const struct job *j, char *buf, size_t size);

#endif /* AMLRUN_HANGWATCH_H */
