/* The hang rule the host applies to every node's view (see hang_rule.h). */
#include "rdzv/hang_rule.h"
#include "amldist.h"

static int64_t latest(const amldist__rz_view_t *v)
{
    return v->last_progress_ns > v->last_line_ns ? v->last_progress_ns
                                                 : v->last_line_ns;
}

int amldist__rz_hang_decide(const amldist__rz_view_t *v, size_t n,
                            int64_t now_ns, int64_t timeout_ns,
                            uint32_t *stalled, size_t *nstalled,
                            int64_t *next_ns)
{
    int per_rank = 0, alive = 0;
    *nstalled = 0;
    *next_ns = INT64_MAX;
    for (size_t i = 0; i < n; i++)
        if (v[i].flags & AMLDIST_RDZV_VIEW_ALIVE) {
            alive = 1;
            per_rank |= (v[i].flags & AMLDIST_RDZV_VIEW_API) != 0;
        }
    if (!alive)
        return 0;
    if (per_rank) {
        for (size_t i = 0; i < n; i++) {
            unsigned want = AMLDIST_RDZV_VIEW_ALIVE | AMLDIST_RDZV_VIEW_API;
            if ((v[i].flags & want) != want)
                continue;
            /* Not yet a call: its start (its first line time) counts. */
            int64_t t = v[i].last_progress_ns >= 0 ? v[i].last_progress_ns
                                                   : v[i].last_line_ns;
            if (t < 0)
                continue;
            if (now_ns - t > timeout_ns)
                stalled[(*nstalled)++] = v[i].rank;
            else if (t + timeout_ns < *next_ns)
                *next_ns = t + timeout_ns;
        }
        return *nstalled > 0;
    }
    int64_t last = -1;
    for (size_t i = 0; i < n; i++)
        if ((v[i].flags & AMLDIST_RDZV_VIEW_ALIVE) && latest(&v[i]) > last)
            last = latest(&v[i]);
    if (last < 0)
        return 0;
    if (now_ns - last > timeout_ns)
        return 1;
    *next_ns = last + timeout_ns;
    return 0;
}
