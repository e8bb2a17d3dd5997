/*
 * The hang decision (amlrun --hang-timeout): a pure function over a view of
 * every rank, so that one node's amlrun and the control plane's host (with
 * every node's view, on its own clock) decide the same way.  No clock is
 * read here: the caller gives the times, all on one monotonic clock, in
 * nanoseconds.
 *
 * Progress is a call of the progress API (amldist_progress) once a rank
 * has made one, and its output (any bytes, a line or a "\r" bar's redraw)
 * until then.
 *   - A rank that has called the API (or announced a long step with
 *     amldist_progress_expect) is judged by its own last call: older than
 *     the timeout, and past the end of the step it announced, it is
 *     stalled, even if it still prints.
 *   - A rank that never called it is alive while it writes, and is never
 *     singled out as stalled: silence is what most ranks of a job that
 *     logs on rank 0 alone do.  It can only take part in the job-wide
 *     hang: no rank has shown any sign of life (its start, output, a call,
 *     an announced step, its end) for the timeout.
 *   - The stalled ranks: every rank judged by the API whose last progress
 *     is within a small margin of the oldest stalled one's (ranks stuck in
 *     one collective stop within a step of each other: the stacks, not
 *     50 ms of progress, tell which of them is the cause).
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
    int64_t line_ns;     /* its last output, any bytes (the name is the
                            control plane's wire's); 0: none */
    int64_t end_ns;      /* when it ended (not alive); 0: not ended */
    int64_t until_ns;    /* the end of the long step it announced after its
                            last call (amldist_progress_expect); 0: none */
} amldist__hang_rank_t;

typedef struct {
    int hung;            /* the job is hung */
    int per_rank;        /* judged per rank (the API is in use) */
    size_t nstalled;     /* per rank: the stalled ranks written, only
                            when single_out (0 otherwise) */
    int single_out;      /* per rank, the stalled ranks are at most half
                            of the ranks that show progress (by their calls,
                            or by their output for ranks that never called):
                            they are the culprits.  0 when more stalled (in
                            a collective, all stop within a step of the one
                            that hung): the stacks, not the progress, must
                            tell them */
    int64_t idle_ns;     /* how long the progress that decided is old:
                            the job's (by lines) or the oldest stalled
                            rank's */
    int64_t next_ns;     /* when a look may first find a hang, given no
                            more progress; AMLDIST__HANG_NEVER: never */
} amldist__hang_verdict_t;

/* Decide over n ranks at `now_ns` with timeout `timeout_ns` (> 0).  Per
 * rank, the stalled ranks' numbers go to stalled[] (room for n), in the
 * view's order (none for a job-wide hang).  Returns v->hung. */
/* The rule's reading of one rank, for a caller that sums ranks up (the
 * control plane's host, per node):
 *   the time at which `last` is timeout_ns old (AMLDIST__HANG_NEVER past
 *   the clock's end);
 *   a rank judged by the API: its last call (its start before any), moved
 *   on by a long step it announced since, as if it had called at the
 *   step's end less the timeout;
 *   any rank: its last sign of life (its start, output, end, and for a rank
 *   judged by the API its last progress). */
int64_t amldist__hang_due(int64_t last, int64_t timeout_ns);
int64_t amldist__hang_api_last(const amldist__hang_rank_t *r,
                               int64_t timeout_ns);
int64_t amldist__hang_last_life(const amldist__hang_rank_t *r,
                                int64_t timeout_ns);

int amldist__hang_check(const amldist__hang_rank_t *r, size_t n,
                        int64_t now_ns, int64_t timeout_ns, int *stalled,
                        amldist__hang_verdict_t *v);

#endif /* AMLDIST_PROGRESS_HANG_H */
