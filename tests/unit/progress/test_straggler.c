/* The straggler statistics (lib/progress/straggler.h) on synthetic marks:
 * a slow rank among steady ones, the thresholds of "consistently last",
 * only common steps counting, unsorted and repeated marks, and marks from
 * two nodes whose clocks differ, once corrected by the caller. */
#include <stdint.h>

#include "progress/straggler.h"
#include "test.h"

#define MS 1000000LL
#define MAXR 8
#define MAXS 64

static amldist__progress_mark_t marks[MAXR][MAXS];
static amldist__straggler_rank_t ranks[MAXR];
static amldist__straggler_lag_t lags[MAXR];

/* A small deterministic jitter in [-2, 2] ms. */
static int64_t jitter(int r, int s)
{
    return ((r * 7 + s * 13) % 5 - 2) * MS;
}

/* nr ranks, ns steps of step_ms; rank `slow` `extra_ms` late at each step
 * (a fixed lag, as in a job whose collectives wait for it). */
static void fill(int nr, int ns, int64_t step_ms, int slow, int64_t extra_ms)
{
    for (int r = 0; r < nr; r++) {
        for (int s = 0; s < ns; s++) {
            marks[r][s].step = (uint64_t)s + 1;
            marks[r][s].t_ns = 1000 * MS + (s + 1) * step_ms * MS +
                               jitter(r, s) + (r == slow ? extra_ms * MS : 0);
        }
        ranks[r].marks = marks[r];
        ranks[r].n = (size_t)ns;
    }
}

static void test_slow_rank_named(void)
{
    fill(4, 20, 100, 2, 30);
    amldist__straggler_t v;
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 4, lags, &v), 0);
    CHECK_INT_EQ(v.steps, 20);
    CHECK_INT_EQ(v.slowest, 2);
    CHECK_INT_EQ(lags[2].last, 20);
    /* About 30 ms behind (the median of four is between two steady
     * ranks); the others about 0. */
    CHECK(lags[2].lag_ns > 27 * MS && lags[2].lag_ns < 33 * MS);
    for (int r = 0; r < 4; r++)
        if (r != 2)
            CHECK(lags[r].lag_ns > -3 * MS && lags[r].lag_ns < 3 * MS);
    CHECK(v.step_ns > 95 * MS && v.step_ns < 105 * MS);
}

static void test_steady_ranks_name_nobody(void)
{
    fill(4, 20, 100, -1, 0);
    amldist__straggler_t v;
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 4, lags, &v), 0);
    CHECK_INT_EQ(v.slowest, -1);
    CHECK_INT_EQ(v.steps, 20);
}

static void test_too_few_common_steps(void)
{
    fill(4, 7, 100, 1, 30);
    amldist__straggler_t v;
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 4, lags, &v), 0);
    CHECK_INT_EQ(v.steps, 7);
    CHECK_INT_EQ(v.slowest, -1);
    /* Its lag is still known (--status shows it). */
    CHECK(lags[1].lag_ns > 27 * MS);
    fill(4, 8, 100, 1, 30);
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 4, lags, &v), 0);
    CHECK_INT_EQ(v.slowest, 1);
}

static void test_last_in_under_three_quarters(void)
{
    /* Rank 3 late in 14 of 20 steps (70 %), early in the rest. */
    fill(4, 20, 100, 3, 30);
    for (int s = 0; s < 6; s++)
        marks[3][s * 3].t_ns -= 40 * MS;
    amldist__straggler_t v;
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 4, lags, &v), 0);
    CHECK_INT_EQ(lags[3].last, 14);
    CHECK_INT_EQ(v.slowest, -1);
    /* 15 of 20: named. */
    fill(4, 20, 100, 3, 30);
    for (int s = 0; s < 5; s++)
        marks[3][s * 3].t_ns -= 40 * MS;
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 4, lags, &v), 0);
    CHECK_INT_EQ(lags[3].last, 15);
    CHECK_INT_EQ(v.slowest, 3);
}

static void test_immaterial_lag(void)
{
    /* Always last, but by 0.5 ms (under 1 ms): nobody.  No jitter here, or
     * it would decide who is last. */
    amldist__straggler_t v;
    fill(3, 20, 100, 1, 0);
    for (int r = 0; r < 3; r++)
        for (int s = 0; s < 20; s++)
            marks[r][s].t_ns = (s + 1) * 100 * MS + (r == 1 ? MS / 2 : 0);
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 3, lags, &v), 0);
    CHECK_INT_EQ(lags[1].last, 20);
    CHECK_INT_EQ(v.slowest, -1);
    /* 50 ms behind with steps of 1 s (5 %, under a tenth): nobody. */
    fill(3, 20, 1000, 1, 50);
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 3, lags, &v), 0);
    CHECK_INT_EQ(lags[1].last, 20);
    CHECK_INT_EQ(v.slowest, -1);
    /* 150 ms with steps of 1 s: named. */
    fill(3, 20, 1000, 1, 150);
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 3, lags, &v), 0);
    CHECK_INT_EQ(v.slowest, 1);
}

static void test_only_common_steps_count(void)
{
    /* Rank 0 has 30 steps, rank 1 only the even ones of 1..20, rank 2
     * steps 5..25 in reverse order with each step twice (the later time
     * counts). */
    fill(3, 30, 100, 2, 40);
    int n1 = 0;
    for (int s = 0; s < 20; s++)
        if ((s + 1) % 2 == 0)
            marks[1][n1++] = marks[1][s];
    ranks[1].n = (size_t)n1;
    amldist__progress_mark_t two[MAXS];
    int n2 = 0;
    for (int s = 24; s >= 4; s--) {
        two[n2] = marks[2][s];
        two[n2++].t_ns -= 500 * MS; /* an earlier record of the step */
        two[n2++] = marks[2][s];
    }
    ranks[2].marks = two;
    ranks[2].n = (size_t)n2;
    amldist__straggler_t v;
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 3, lags, &v), 0);
    /* Common: even steps 6..20. */
    CHECK_INT_EQ(v.steps, 8);
    CHECK_INT_EQ(v.slowest, 2);
    CHECK(lags[2].lag_ns > 35 * MS && lags[2].lag_ns < 45 * MS);
    /* Steps 2 apart: the step time is still per step. */
    CHECK(v.step_ns > 95 * MS && v.step_ns < 105 * MS);
}

static void test_two_nodes_offset_corrected(void)
{
    /* Ranks 0-1 on node 0; ranks 2-3 on node 1, whose clock reads 5 s
     * ahead.  Rank 3 is 25 ms late at each step. */
    const int64_t offset = 5000 * MS;
    fill(4, 16, 100, 3, 25);
    for (int r = 2; r < 4; r++)
        for (int s = 0; s < 16; s++)
            marks[r][s].t_ns += offset;
    amldist__straggler_t v;
    /* As read: node 1's ranks both look seconds late; rank 3 is still
     * the last, but its lag is nonsense. */
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 4, lags, &v), 0);
    CHECK(lags[2].lag_ns > 2000 * MS && lags[3].lag_ns > 2000 * MS);
    /* The caller moves node 1's marks by its estimated offset (the
     * control plane's, to within a millisecond here). */
    const int64_t estimate = offset - MS;
    static amldist__progress_mark_t moved[2][MAXS];
    for (int r = 2; r < 4; r++) {
        for (int s = 0; s < 16; s++) {
            moved[r - 2][s] = marks[r][s];
            moved[r - 2][s].t_ns -= estimate;
        }
        ranks[r].marks = moved[r - 2];
    }
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 4, lags, &v), 0);
    CHECK_INT_EQ(v.slowest, 3);
    CHECK(lags[3].lag_ns > 20 * MS && lags[3].lag_ns < 30 * MS);
    CHECK(lags[2].lag_ns > -4 * MS && lags[2].lag_ns < 4 * MS);
}

static void test_edges(void)
{
    amldist__straggler_t v;
    CHECK_INT_EQ(amldist__straggler_compute(NULL, 0, NULL, &v), 0);
    CHECK_INT_EQ(v.steps, 0);
    CHECK_INT_EQ(v.slowest, -1);
    CHECK(amldist__straggler_compute(NULL, 2, lags, &v) < 0);
    CHECK(amldist__straggler_compute(ranks, 2, lags, NULL) < 0);
    /* One rank: never a straggler. */
    fill(1, 20, 100, 0, 30);
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 1, lags, &v), 0);
    CHECK_INT_EQ(v.slowest, -1);
    CHECK_INT_EQ(lags[0].lag_ns, 0);
    /* A rank with no marks: no common step. */
    fill(3, 20, 100, 1, 30);
    ranks[2].n = 0;
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 3, lags, &v), 0);
    CHECK_INT_EQ(v.steps, 0);
    CHECK_INT_EQ(v.slowest, -1);
    /* All at the same instants: nobody is last. */
    fill(3, 20, 100, -1, 0);
    for (int r = 0; r < 3; r++)
        for (int s = 0; s < 20; s++)
            marks[r][s].t_ns = s * 100 * MS;
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 3, lags, &v), 0);
    for (int r = 0; r < 3; r++)
        CHECK_INT_EQ(lags[r].last, 0);
    /* Two ranks: the median is their midpoint, so the later one's lag is
     * half the gap; named when that is material. */
    fill(2, 10, 100, 0, 30);
    CHECK_INT_EQ(amldist__straggler_compute(ranks, 2, lags, &v), 0);
    CHECK_INT_EQ(v.slowest, 0);
    CHECK(lags[0].lag_ns > 12 * MS && lags[0].lag_ns < 18 * MS);
}

int main(void)
{
    RUN(test_slow_rank_named);
    RUN(test_steady_ranks_name_nobody);
    RUN(test_too_few_common_steps);
    RUN(test_last_in_under_three_quarters);
    RUN(test_immaterial_lag);
    RUN(test_only_common_steps_count);
    RUN(test_two_nodes_offset_corrected);
    RUN(test_edges);
    return test_summary();
}
