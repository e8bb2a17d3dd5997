/*
 * The hang rule of --hang-timeout (issue 20, item 1) as the host applies
 * it to every node's view: a pure function of the ranks' views, the time
 * and the timeout.  It stands for lib/progress/hang.h's decision (branch
 * `hang`), which amlrun applies to one node's ranks; the host calls this
 * one until that one lands, then that one through this shape.
 *   - Where some live rank uses the progress API, progress is per rank:
 *     a live rank of the API whose last progress is older than the
 *     timeout has stalled, even if it still prints; the job is hung when
 *     one has.
 *   - Else the job is hung when no live rank has shown progress (a call or
 *     an output line; its start counts as one) for the timeout.
 */
#ifndef AMLDIST_RDZV_HANG_RULE_H
#define AMLDIST_RDZV_HANG_RULE_H

#include <stddef.h>
#include <stdint.h>

#include "rdzv/rdzv_internal.h"

/* 1 when hung (the stalled ranks, where progress is per rank, in
 * stalled[0 .. *nstalled), room for n), else 0.  *next_ns: when the
 * verdict could next change with no new view (INT64_MAX: never). */
int amldist__rz_hang_decide(const amldist__rz_view_t *v, size_t n,
                            int64_t now_ns, int64_t timeout_ns,
                            uint32_t *stalled, size_t *nstalled,
                            int64_t *next_ns);

#endif /* AMLDIST_RDZV_HANG_RULE_H */
