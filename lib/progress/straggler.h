/*
 * Stragglers: how late each rank reaches its steps, from the progress marks
 * (page.h) of every rank, as pure functions (no clock, no I/O), so that
 * amlrun on one node and the control plane's host across nodes decide the
 * same way.  The marks of all ranks must be on one clock: across nodes the
 * caller has already moved each node's marks by its estimated offset.
 *
 * The statistic, over the steps that every rank reached ("common steps";
 * when a rank recorded a step twice, its latest time counts; at most
 * AMLDIST__STRAGGLER_MAX_STEPS, the newest, fewer for very many ranks):
 *   - a step's time is the median of the ranks' times for it;
 *   - a rank's lag at a step is its time minus the step's time (with two
 *     ranks, half the gap between them), and its lag
 *     is the median of those over the common steps (robust to a few odd
 *     steps: a checkpoint, a pause);
 *   - a rank is last at a step when its time is the one latest (a tie is
 *     nobody's);
 *   - the step time is the median, over consecutive common steps, of the
 *     difference of their times divided by the steps between them.
 * One rank is "consistently last" when, with at least 2 ranks and at least
 * AMLDIST__STRAGGLER_MIN_STEPS common steps, it was last in at least 3/4 of
 * them and its lag is material: at least 1 ms and at least a tenth of the
 * step time.  No rank is named otherwise.
 */
#ifndef AMLDIST_PROGRESS_STRAGGLER_H
#define AMLDIST_PROGRESS_STRAGGLER_H

#include <stddef.h>
#include <stdint.h>

#include "progress/page.h"

#define AMLDIST__STRAGGLER_MIN_STEPS 8u
#define AMLDIST__STRAGGLER_MAX_STEPS 1024u
#define AMLDIST__STRAGGLER_MIN_LAG_NS 1000000 /* 1 ms */

/* One rank's marks, in any order, on the common clock. */
typedef struct {
    const amldist__progress_mark_t *marks;
    size_t n;
} amldist__straggler_rank_t;

/* One rank's result. */
typedef struct {
    int64_t lag_ns;  /* median lag behind the steps' median times; 0
                        without common steps */
    unsigned last;   /* common steps where it was the one latest */
} amldist__straggler_lag_t;

typedef struct {
    unsigned steps;  /* common steps K */
    int64_t step_ns; /* median step time, 0 when unknown */
    int slowest;     /* the consistently last rank's index, or -1 */
} amldist__straggler_t;

/* Every rank's lag (lags[nranks]) and the verdict.  0, or -1 with errno
 * (ENOMEM; EINVAL for a NULL argument). */
int amldist__straggler_compute(const amldist__straggler_rank_t *ranks,
                               size_t nranks, amldist__straggler_lag_t *lags,
                               amldist__straggler_t *out);

#endif /* AMLDIST_PROGRESS_STRAGGLER_H */
