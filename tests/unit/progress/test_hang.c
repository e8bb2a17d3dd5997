/* The hang decision (lib/progress/hang.c): a pure function over a view of
 * every rank. */
#include "progress/hang.h"
#include "test.h"

#define S 1000000000LL /* a second in ns */

static amldist__hang_rank_t live(int rank, int64_t start, int64_t line)
{
    amldist__hang_rank_t r = {rank, 1, 0, start, 0, line, 0};
    return r;
}

/* Lines: the job is hung when no rank has shown progress for SEC. */
static void test_lines_job(void)
{
    amldist__hang_rank_t r[3] = {live(0, 100 * S, 0), live(1, 100 * S, 0),
                                 live(2, 100 * S, 0)};
    int st[3];
    amldist__hang_verdict_t v;
    /* Nothing since the start: due at start + SEC. */
    CHECK_INT_EQ(amldist__hang_check(r, 3, 105 * S, 10 * S, st, &v), 0);
    CHECK_INT_EQ(v.next_ns, 110 * S);
    CHECK_INT_EQ(v.per_rank, 0);
    /* One rank's line keeps the whole job alive. */
    r[1].line_ns = 108 * S;
    CHECK_INT_EQ(amldist__hang_check(r, 3, 115 * S, 10 * S, st, &v), 0);
    CHECK_INT_EQ(v.next_ns, 118 * S);
    CHECK_INT_EQ(amldist__hang_check(r, 3, 118 * S, 10 * S, st, &v), 1);
    CHECK_INT_EQ(v.idle_ns, 10 * S);
    CHECK_INT_EQ(v.nstalled, 0); /* the stacks name the outliers */
    CHECK_INT_EQ(v.per_rank, 0);
}

/* A rank's end is a sign of life; no live rank: nothing to watch. */
static void test_ends(void)
{
    amldist__hang_rank_t r[2] = {live(0, 0, 0), live(1, 0, 0)};
    r[0].alive = 0;
    r[0].end_ns = 50 * S;
    int st[2];
    amldist__hang_verdict_t v;
    CHECK_INT_EQ(amldist__hang_check(r, 2, 55 * S, 10 * S, st, &v), 0);
    CHECK_INT_EQ(v.next_ns, 60 * S);
    r[1].alive = 0;
    r[1].end_ns = 56 * S;
    CHECK_INT_EQ(amldist__hang_check(r, 2, 500 * S, 10 * S, st, &v), 0);
    CHECK_INT_EQ(v.next_ns, AMLDIST__HANG_NEVER);
    /* An empty view or no timeout: never hung. */
    CHECK_INT_EQ(amldist__hang_check(r, 0, 500 * S, 10 * S, st, &v), 0);
    CHECK_INT_EQ(v.next_ns, AMLDIST__HANG_NEVER);
    r[1].alive = 1;
    CHECK_INT_EQ(amldist__hang_check(r, 2, 500 * S, 0, st, &v), 0);
}

/* The API: per rank; a live rank whose last call is older than SEC is
 * stalled even if it prints; one that never called is judged by its
 * start. */
static void test_per_rank(void)
{
    amldist__hang_rank_t r[4] = {live(0, 0, 0), live(1, 0, 0),
                                 live(2, 0, 0), live(3, 0, 0)};
    for (int i = 0; i < 4; i++) {
        r[i].uses_api = 1;
        r[i].progress_ns = 95 * S;
    }
    r[2].progress_ns = 80 * S;
    r[2].line_ns = 99 * S; /* it prints, but makes no progress */
    int st[4];
    amldist__hang_verdict_t v;
    CHECK_INT_EQ(amldist__hang_check(r, 4, 89 * S, 10 * S, st, &v), 0);
    CHECK_INT_EQ(v.per_rank, 1);
    CHECK_INT_EQ(v.next_ns, 90 * S);
    CHECK_INT_EQ(amldist__hang_check(r, 4, 100 * S, 10 * S, st, &v), 1);
    CHECK_INT_EQ(v.nstalled, 1);
    CHECK_INT_EQ(st[0], 2);
    CHECK_INT_EQ(v.single_out, 1);
    CHECK_INT_EQ(v.idle_ns, 20 * S);
    /* Two stalled, in the view's order; a dead one is never stalled. */
    r[0].progress_ns = 85 * S;
    r[3].alive = 0;
    r[3].progress_ns = 1 * S;
    CHECK_INT_EQ(amldist__hang_check(r, 4, 100 * S, 10 * S, st, &v), 1);
    CHECK_INT_EQ(v.nstalled, 2);
    CHECK_INT_EQ(st[0], 0);
    CHECK_INT_EQ(st[1], 2);
    /* A rank that has made no call yet while others have: its start. */
    amldist__hang_rank_t q[2] = {live(0, 90 * S, 0), live(1, 90 * S, 99 * S)};
    q[0].uses_api = 1;
    q[0].progress_ns = 99 * S;
    CHECK_INT_EQ(amldist__hang_check(q, 2, 99 * S, 10 * S, st, &v), 0);
    CHECK_INT_EQ(v.next_ns, 100 * S);
    CHECK_INT_EQ(amldist__hang_check(q, 2, 100 * S, 10 * S, st, &v), 1);
    CHECK_INT_EQ(v.nstalled, 1);
    CHECK_INT_EQ(st[0], 1);
}

/* Every live rank stalled (a collective waits for the one that hung): a
 * hang, but the progress singles none out. */
static void test_all_stalled(void)
{
    amldist__hang_rank_t r[3] = {live(0, 0, 0), live(1, 0, 0), live(2, 0, 0)};
    for (int i = 0; i < 3; i++) {
        r[i].uses_api = 1;
        r[i].progress_ns = (50 + i) * S / 1000 + 50 * S;
    }
    int st[3];
    amldist__hang_verdict_t v;
    CHECK_INT_EQ(amldist__hang_check(r, 3, 61 * S, 10 * S, st, &v), 1);
    CHECK_INT_EQ(v.nstalled, 3);
    CHECK_INT_EQ(v.single_out, 0);
    CHECK_INT_EQ(v.per_rank, 1);
}

/* Far times do not overflow next_ns. */
static void test_overflow(void)
{
    amldist__hang_rank_t r[1] = {live(0, INT64_MAX - 5, 0)};
    int st[1];
    amldist__hang_verdict_t v;
    CHECK_INT_EQ(amldist__hang_check(r, 1, INT64_MAX - 5, 10 * S, st, &v), 0);
    CHECK_INT_EQ(v.next_ns, AMLDIST__HANG_NEVER);
}

int main(void)
{
    RUN(test_lines_job);
    RUN(test_ends);
    RUN(test_per_rank);
    RUN(test_all_stalled);
    RUN(test_overflow);
    return test_summary();
}
