/* The hang decision (see hang.h). */
#include "progress/hang.h"

/*
 * The margin of the stalled ranks: every rank whose last progress is within
 * it of the oldest stalled rank's stalled with it.  Ranks that wait in one
 * collective for the rank that hung reached it within a step of each other
 * (a rank that reported 50 ms before the others is no more the cause than
 * they are), so the margin is a step's worth: an eighth of the timeout
 * (a watch is set well above a step), and at most a second, so that a
 * rank that truly stopped a step early beside ranks that went on is still
 * told apart under a long timeout.
 */
#define MARGIN_DIV 8
#define MARGIN_MAX_NS 1000000000LL

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

int64_t amldist__hang_due(int64_t last, int64_t timeout_ns)
{
    return last > AMLDIST__HANG_NEVER - timeout_ns ? AMLDIST__HANG_NEVER
                                                   : last + timeout_ns;
}

int64_t amldist__hang_api_last(const amldist__hang_rank_t *r,
                               int64_t timeout_ns)
{
    int64_t last = max64(r->progress_ns, r->start_ns);
    if (r->until_ns > timeout_ns)
        last = max64(last, r->until_ns - timeout_ns);
    return last;
}

int64_t amldist__hang_last_life(const amldist__hang_rank_t *r,
                                int64_t timeout_ns)
{
    int64_t t = max64(r->start_ns, max64(r->line_ns, r->alive ? 0 : r->end_ns));
    return r->uses_api ? max64(t, amldist__hang_api_last(r, timeout_ns)) : t;
}

/* The ranks judged by the API: the oldest live one's progress in *oldest,
 * the earliest due of those not stalled in *next; how many live ranks
 * show progress (by their calls, or by output within the timeout). */
static size_t scan(const amldist__hang_rank_t *r, size_t n, int64_t now_ns,
                   int64_t timeout_ns, int64_t *oldest, int64_t *next)
{
    size_t showing = 0;
    *oldest = AMLDIST__HANG_NEVER;
    *next = AMLDIST__HANG_NEVER;
    for (size_t i = 0; i < n; i++) {
        if (!r[i].alive)
            continue;
        if (!r[i].uses_api) {
            showing += now_ns - amldist__hang_last_life(&r[i], timeout_ns) <
                       timeout_ns;
            continue;
        }
        showing++;
        int64_t last = amldist__hang_api_last(&r[i], timeout_ns);
        *oldest = min64(*oldest, last);
        if (now_ns - last < timeout_ns)
            *next = min64(*next, amldist__hang_due(last, timeout_ns));
    }
    return showing;
}

/* Per rank: the ranks judged by the API within the margin of the oldest,
 * or timeout old themselves, into stalled[]. */
static void take_stalled(const amldist__hang_rank_t *r, size_t n,
                         int64_t now_ns, int64_t timeout_ns, int64_t oldest,
                         int *stalled, amldist__hang_verdict_t *v)
{
    int64_t margin = min64(timeout_ns / MARGIN_DIV, MARGIN_MAX_NS);
    int64_t upto = max64(oldest + margin, now_ns - timeout_ns);
    for (size_t i = 0; i < n; i++) {
        if (!r[i].alive || !r[i].uses_api ||
            amldist__hang_api_last(&r[i], timeout_ns) > upto)
            continue;
        stalled[v->nstalled++] = r[i].rank;
        v->idle_ns = max64(v->idle_ns,
                           now_ns - max64(r[i].progress_ns, r[i].start_ns));
    }
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
    int64_t life = 0;
    for (size_t i = 0; i < n; i++) {
        live += r[i].alive != 0;
        v->per_rank |= r[i].uses_api != 0;
        life = max64(life, amldist__hang_last_life(&r[i], timeout_ns));
    }
    if (live == 0 || timeout_ns <= 0)
        return 0;
    int64_t oldest, next;
    size_t showing = scan(r, n, now_ns, timeout_ns, &oldest, &next);
    if (oldest != AMLDIST__HANG_NEVER && now_ns - oldest >= timeout_ns) {
        take_stalled(r, n, now_ns, timeout_ns, oldest, stalled, v);
        v->hung = 1;
        v->single_out = 2 * v->nstalled <= showing;
        /* More stalled (a collective): they are not the culprits, and
         * none is named (not in the event log, not to other nodes); the
         * stacks tell them. */
        if (!v->single_out)
            v->nstalled = 0;
        return 1;
    }
    /* No rank judged by the API stalled: the job-wide sign of life. */
    if (now_ns - life >= timeout_ns) {
        v->hung = 1;
        v->idle_ns = now_ns - life;
        return 1;
    }
    v->next_ns = min64(next, amldist__hang_due(life, timeout_ns));
    return 0;
}
