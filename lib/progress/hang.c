/* The hang decision (see hang.h). */
#include "progress/hang.h"

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* The last sign of life of a rank: its start, a line, its end. */
static int64_t last_activity(const amldist__hang_rank_t *r)
{
    return max64(r->start_ns, max64(r->line_ns, r->alive ? 0 : r->end_ns));
}

/* A rank's last progress where it is judged per rank: its last call, or
 * its start while it has made none. */
static int64_t last_progress(const amldist__hang_rank_t *r)
{
    return r->uses_api ? max64(r->progress_ns, r->start_ns) : r->start_ns;
}

/* The time at which `last` is timeout old, without overflow. */
static int64_t due(int64_t last, int64_t timeout_ns)
{
    return last > AMLDIST__HANG_NEVER - timeout_ns ? AMLDIST__HANG_NEVER
                                                   : last + timeout_ns;
}

int amldist__hang_check(const amldist__hang_rank_t *r, size_t n,
                        int64_t now_ns, int64_t timeout_ns, int *stalled,
                        amldist__hang_verdict_t *v)
{
    v->hung = v->per_rank = v->single_out = 0;
    v->nstalled = 0;
    v->idle_ns = 0;
    v->next_ns = AMLDIST__HANG_NEVER;
    size_t live = 0;
    for (size_t i = 0; i < n; i++) {
        live += r[i].alive != 0;
        v->per_rank |= r[i].uses_api != 0;
    }
    if (live == 0 || timeout_ns <= 0)
        return 0;
    if (v->per_rank) {
        for (size_t i = 0; i < n; i++) {
            if (!r[i].alive)
                continue;
            int64_t last = last_progress(&r[i]);
            if (now_ns - last >= timeout_ns) {
                stalled[v->nstalled++] = r[i].rank;
                v->idle_ns = max64(v->idle_ns, now_ns - last);
            } else if (due(last, timeout_ns) < v->next_ns) {
                v->next_ns = due(last, timeout_ns);
            }
        }
        v->hung = v->nstalled > 0;
        v->single_out = v->hung && v->nstalled < live;
        return v->hung;
    }
    int64_t last = 0;
    for (size_t i = 0; i < n; i++)
        last = max64(last, last_activity(&r[i]));
    v->idle_ns = now_ns - last;
    v->hung = v->idle_ns >= timeout_ns;
    if (!v->hung)
        v->next_ns = due(last, timeout_ns);
    return v->hung;
}
