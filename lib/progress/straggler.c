/* The straggler statistics (see straggler.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "progress/straggler.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_mark(const void *a, const void *b)
{
    const amldist__progress_mark_t *x = a, *y = b;
    if (x->step != y->step)
        return (x->step > y->step) - (x->step < y->step);
    return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
}

/* The median of v[n] (n > 0), sorting v. */
static int64_t median(int64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_i64);
    if (n % 2)
        return v[n / 2];
    return v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

/* A rank's marks sorted by step, one per step (its latest time); the
 * count, or -1. */
static long dedupe(const amldist__straggler_rank_t *r,
                   amldist__progress_mark_t **out)
{
    *out = NULL;
    if (r->n == 0)
        return 0;
    amldist__progress_mark_t *m = malloc(r->n * sizeof *m);
    if (!m)
        return -1;
    memcpy(m, r->marks, r->n * sizeof *m);
    qsort(m, r->n, sizeof *m, cmp_mark);
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (k > 0 && m[k - 1].step == m[i].step)
            m[k - 1] = m[i]; /* sorted by time within a step: the latest */
        else
            m[k++] = m[i];
    }
    *out = m;
    return (long)k;
}

/* The time of `step` in sorted m[n], or -1 when absent (found: *t). */
static int find_step(const amldist__progress_mark_t *m, long n, uint64_t step,
                     int64_t *t)
{
    long lo = 0, hi = n;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        if (m[mid].step < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n && m[lo].step == step) {
        *t = m[lo].t_ns;
        return 0;
    }
    return -1;
}

/* Every rank's marks deduplicated into sorted[r] (count[r] of them); 0, or
 * -1 at the first that fails (those before stay for the caller to free). */
static int dedupe_ranks(const amldist__straggler_rank_t *ranks, size_t nranks,
                        amldist__progress_mark_t **sorted, long *count)
{
    for (size_t r = 0; r < nranks; r++)
        if ((count[r] = dedupe(&ranks[r], &sorted[r])) < 0)
            return -1;
    return 0;
}

/* How many common steps to look at: a job of very many ranks looks at
 * fewer steps (at most 4M times), but never fewer than the minimum. */
static size_t common_step_cap(size_t nranks)
{
    size_t cap = AMLDIST__STRAGGLER_MAX_STEPS;
    if (cap > (4u << 20) / nranks)
        cap = (4u << 20) / nranks;
    if (cap < AMLDIST__STRAGGLER_MIN_STEPS)
        cap = AMLDIST__STRAGGLER_MIN_STEPS;
    return cap;
}

/* The common steps: rank 0's that every other has, newest first, at most
 * cap of them, into steps[k] and their times into t[k][nranks]; k. */
static size_t collect_common_steps(amldist__progress_mark_t *const *sorted,
                                   const long *count, size_t nranks,
                                   size_t cap, uint64_t *steps, int64_t *t)
{
    size_t k = 0;
    for (long i = count[0] - 1; i >= 0 && k < cap; i--) {
        uint64_t s = sorted[0][i].step;
        size_t r;
        for (r = 1; r < nranks; r++)
            if (find_step(sorted[r], count[r], s, &t[k * nranks + r]) < 0)
                break;
        if (r < nranks)
            continue;
        t[k * nranks] = sorted[0][i].t_ns;
        steps[k++] = s;
    }
    return k;
}

/* steps[k] and the rows of t[k][nranks] reversed: they were found newest
 * first, and the step time needs them oldest first. */
static void reverse_steps(uint64_t *steps, int64_t *t, size_t k,
                          size_t nranks)
{
    for (size_t a = 0, b = k ? k - 1 : 0; a < b; a++, b--) {
        uint64_t s = steps[a];
        steps[a] = steps[b];
        steps[b] = s;
        for (size_t r = 0; r < nranks; r++) {
            int64_t x = t[a * nranks + r];
            t[a * nranks + r] = t[b * nranks + r];
            t[b * nranks + r] = x;
        }
    }
}

/* The rank with the one latest time of row[nranks], or -1 on a tie for
 * the latest (nobody's) or with a single rank. */
static long latest_rank(const int64_t *row, size_t nranks)
{
    size_t latest = 0;
    int tie = 0;
    for (size_t r = 1; r < nranks; r++) {
        if (row[r] > row[latest]) {
            latest = r;
            tie = 0;
        } else if (row[r] == row[latest]) {
            tie = 1;
        }
    }
    return nranks > 1 && !tie ? (long)latest : -1;
}

/* Each step's median time into mid[k], counting in lags[].last who was
 * last there; col[nranks] is scratch. */
static void step_medians(const int64_t *t, size_t k, size_t nranks,
                         int64_t *col, int64_t *mid,
                         amldist__straggler_lag_t *lags)
{
    for (size_t i = 0; i < k; i++) {
        const int64_t *row = &t[i * nranks];
        memcpy(col, row, nranks * sizeof *col);
        mid[i] = median(col, nranks);
        long latest = latest_rank(row, nranks);
        if (latest >= 0)
            lags[latest].last++;
    }
}

/* Each rank's lag: the median over the k steps of its time minus the
 * step's median time; col[k] is scratch. */
static void rank_lags(const int64_t *t, const int64_t *mid, size_t k,
                      size_t nranks, int64_t *col,
                      amldist__straggler_lag_t *lags)
{
    for (size_t r = 0; r < nranks; r++) {
        for (size_t i = 0; i < k; i++)
            col[i] = t[i * nranks + r] - mid[i];
        lags[r].lag_ns = median(col, k);
    }
}

/* The median time per step between consecutive common steps (those whose
 * median times go forward), or 0 when none; col[k] is scratch. */
static int64_t median_step_ns(const uint64_t *steps, const int64_t *mid,
                              size_t k, int64_t *col)
{
    size_t gaps = 0;
    for (size_t i = 1; i < k; i++)
        if (steps[i] > steps[i - 1] && mid[i] >= mid[i - 1])
            col[gaps++] = (mid[i] - mid[i - 1]) /
                          (int64_t)(steps[i] - steps[i - 1]);
    return gaps ? median(col, gaps) : 0;
}

/* out->slowest: the consistently last rank (straggler.h), if any; when
 * several qualify, the highest index. */
static void name_slowest(const amldist__straggler_lag_t *lags, size_t nranks,
                         size_t k, amldist__straggler_t *out)
{
    if (nranks < 2 || k < AMLDIST__STRAGGLER_MIN_STEPS)
        return;
    for (size_t r = 0; r < nranks; r++) {
        int64_t lag = lags[r].lag_ns;
        if (4 * (uint64_t)lags[r].last >= 3 * (uint64_t)k &&
            lag >= AMLDIST__STRAGGLER_MIN_LAG_NS &&
            lag >= out->step_ns / 10)
            out->slowest = (int)r;
    }
}

/* The statistics over k > 0 common steps (oldest first); col holds at
 * least max(nranks, k).  0, or -1 with errno (ENOMEM). */
static int score_common_steps(const uint64_t *steps, const int64_t *t,
                              size_t k, size_t nranks, int64_t *col,
                              amldist__straggler_lag_t *lags,
                              amldist__straggler_t *out)
{
    int64_t *mid = malloc(k * sizeof *mid);
    if (!mid)
        return -1;
    step_medians(t, k, nranks, col, mid, lags);
    rank_lags(t, mid, k, nranks, col, lags);
    out->step_ns = median_step_ns(steps, mid, k, col);
    free(mid);
    name_slowest(lags, nranks, k, out);
    return 0;
}

int amldist__straggler_compute(const amldist__straggler_rank_t *ranks,
                               size_t nranks, amldist__straggler_lag_t *lags,
                               amldist__straggler_t *out)
{
    if ((!ranks || !lags) && nranks) {
        errno = EINVAL;
        return -1;
    }
    if (!out) {
        errno = EINVAL;
        return -1;
    }
    memset(out, 0, sizeof *out);
    out->slowest = -1;
    if (nranks)
        memset(lags, 0, nranks * sizeof *lags);
    if (nranks == 0)
        return 0;
    int rc = -1;
    amldist__progress_mark_t **sorted = calloc(nranks, sizeof *sorted);
    long *count = calloc(nranks, sizeof *count);
    uint64_t *steps = NULL;
    int64_t *t = NULL, *col = NULL;
    if (!sorted || !count || dedupe_ranks(ranks, nranks, sorted, count) < 0)
        goto done;
    size_t cap = common_step_cap(nranks);
    steps = malloc(cap * sizeof *steps);
    t = malloc(cap * nranks * sizeof *t);
    col = malloc((nranks > cap ? nranks : cap) * sizeof *col);
    if (!steps || !t || !col)
        goto done;
    size_t k = collect_common_steps(sorted, count, nranks, cap, steps, t);
    reverse_steps(steps, t, k, nranks);
    out->steps = (unsigned)k;
    rc = k ? score_common_steps(steps, t, k, nranks, col, lags, out) : 0;
done:
    for (size_t r = 0; sorted && r < nranks; r++)
        free(sorted[r]);
    free(sorted);
    free(count);
    free(steps);
    free(t);
    free(col);
    return rc;
}
