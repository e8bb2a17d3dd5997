/*
 * The hang decision (amlrun --hang-timeout): a pure function over a view of
 * every rank, so that one node's amlrun and the control plane's host (with
 * every node's view, on its own clock) decide the same way.  No clock is
 * read here: the caller gives the times, all on one monotonic clock, in
 * nanoseconds.
 *
 * Progress is a call of the progress API (amldist_progress) or, for a job
 * whose ranks do not call it, a complete output line.
 *   - Per rank: once any rank has called the API, every live rank is judged
 *     by its own last call (by its start while it has made none): older
 *     than the timeout, it is stalled, even if it still prints.
 *   - Otherwise the job: it is hung when no rank has shown any sign of life
 *     (its start, a line, its end) for the timeout.
 *
 * amlrun links this file as an object of its own (as net/loop.c).
 */
#ifndef AMLDIST_PROGRESS_HANG_H
#define AMLDIST_PROGRESS_HANG_H

#include <stddef.h>
#include <stdint.h>

/* No look needed again (no live rank). */
#define AMLDIST__HANG_NEVER INT64_MAX

/* One rank as its node sees it; times in ns on the caller's one clock. */
typedef struct {
    int rank;
    int alive;           /* still running */
    int uses_api;        /* has called the progress API in this attempt */
    int64_t start_ns;    /* when it started (this attempt) */
    int64_t progress_ns; /* its last API call (with uses_api) */
    int64_t line_ns;     /* its last complete output line; 0: none */
    int64_t end_ns;      /* when it ended (not alive); 0: not ended */
} amldist__hang_rank_t;

typedef struct {
    int hung;            /* the job is hung */
    int per_rank;        /* judged per rank (the API is in use) */
    size_t nstalled;     /* per rank: the stalled ranks written */
    int single_out;      /* per rank, some live ranks still progress: the
                            stalled ones are the culprits.  0 when every
                            live rank stalled (in a collective, all stop
                            within a step of the one that hung): the
                            stacks, not the progress, must tell them */
    int64_t idle_ns;     /* how long the progress that decided is old:
                            the job's (by lines) or the oldest stalled
                            rank's */
    int64_t next_ns;     /* when a look may first find a hang, given no
                            more progress; AMLDIST__HANG_NEVER: never */
} amldist__hang_verdict_t;

/* Decide over n ranks at `now_ns` with timeout `timeout_ns` (> 0).  Per
 * rank, the stalled ranks' numbers go to stalled[] (room for n), in the
 * view's order.  Returns v->hung. */
int amldist__hang_check(const amldist__hang_rank_t *r, size_t n,
                        int64_t now_ns, int64_t timeout_ns, int *stalled,
                        amldist__hang_verdict_t *v);

#endif /* AMLDIST_PROGRESS_HANG_H */
