/* The hang decision (lib/progress/hang.c): a pure function over a view of
 * every rank. */
#include "progress/hang.h"
#include "test.h"

#define S 1000000000LL /* a second in ns */

static amldist__hang_rank_t live(int rank, int64_t start, int64_t line)
{
    amldist__hang_rank_t r = {rank, 1, 0, start, 0, line, 0, 0};
    return r;
}

/* A live rank judged by the API, its last call at `progress`. */
static amldist__hang_rank_t api(int rank, int64_t start, int64_t progress)
{
    amldist__hang_rank_t r = live(rank, start, 0);
    r.uses_api = 1;
    r.progress_ns = progress;
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
    /* Two of the three live stalled (a dead one is never stalled): no
     * minority, none named, the stacks tell. */
    r[0].progress_ns = 85 * S;
    r[3].alive = 0;
    r[3].progress_ns = 1 * S;
    CHECK_INT_EQ(amldist__hang_check(r, 4, 100 * S, 10 * S, st, &v), 1);
    CHECK_INT_EQ(v.nstalled, 0);
    CHECK_INT_EQ(v.single_out, 0);
    CHECK_INT_EQ(v.idle_ns, 20 * S);
    /* A rank that has never called while others have is not judged by the
     * API: it prints, it is alive (issue 37's first reproducer). */
    amldist__hang_rank_t q[2] = {live(0, 90 * S, 0), live(1, 90 * S, 99 * S)};
    q[0].uses_api = 1;
    q[0].progress_ns = 99 * S;
    CHECK_INT_EQ(amldist__hang_check(q, 2, 100 * S, 10 * S, st, &v), 0);
    CHECK_INT_EQ(v.next_ns, 109 * S);
    /* ... and silent, never singled out while the API rank progresses. */
    q[1].line_ns = 0;
    q[0].progress_ns = 130 * S;
    CHECK_INT_EQ(amldist__hang_check(q, 2, 131 * S, 10 * S, st, &v), 0);
    CHECK_INT_EQ(v.next_ns, 140 * S);
    /* The API rank stalls beside the silent one: a hang, the silent rank
     * not among the stalled, and one of one showing progress is no
     * minority: the stacks tell, and none is named. */
    CHECK_INT_EQ(amldist__hang_check(q, 2, 140 * S, 10 * S, st, &v), 1);
    CHECK_INT_EQ(v.nstalled, 0);
    CHECK_INT_EQ(v.single_out, 0);
    CHECK_INT_EQ(v.idle_ns, 10 * S);
    /* Beside a printing one, it is the culprit. */
    q[1].line_ns = 139 * S;
    CHECK_INT_EQ(amldist__hang_check(q, 2, 140 * S, 10 * S, st, &v), 1);
    CHECK_INT_EQ(v.single_out, 1);
}

/* The API rank ended; the one left never called and is silent: the job's
 * sign of life decides, with no rank stalled. */
static void test_api_ended(void)
{
    amldist__hang_rank_t r[2] = {api(0, 0, 40 * S), live(1, 0, 0)};
    r[0].alive = 0;
    r[0].end_ns = 50 * S;
    int st[2];
    amldist__hang_verdict_t v;
    CHECK_INT_EQ(amldist__hang_check(r, 2, 55 * S, 10 * S, st, &v), 0);
    CHECK_INT_EQ(v.next_ns, 60 * S);
    CHECK_INT_EQ(amldist__hang_check(r, 2, 60 * S, 10 * S, st, &v), 1);
    CHECK_INT_EQ(v.per_rank, 1);
    CHECK_INT_EQ(v.nstalled, 0);
    CHECK_INT_EQ(v.single_out, 0);
    CHECK_INT_EQ(v.idle_ns, 10 * S);
}

/* Output without a newline (a "\r" bar) is output: the view's line_ns is
 * the last byte, and it keeps a job of ranks that never call alive. */
static void test_bar(void)
{
    amldist__hang_rank_t r[3] = {live(0, 0, 0), live(1, 0, 0), live(2, 0, 0)};
    int st[3];
    amldist__hang_verdict_t v;
    for (int64_t t = 1; t < 30; t++) {
        r[0].line_ns = t * S - S / 2; /* a redraw every second */
        CHECK_INT_EQ(amldist__hang_check(r, 3, t * S, 3 * S, st, &v), 0);
    }
    CHECK_INT_EQ(amldist__hang_check(r, 3, 32 * S, 3 * S, st, &v), 1);
    CHECK_INT_EQ(v.per_rank, 0);
}

/* A long step announced: inside its window the rank is not stalled, and
 * the next look is at its end; past it, stalled. */
static void test_window(void)
{
    amldist__hang_rank_t r[2] = {api(0, 0, 100 * S), api(1, 0, 100 * S)};
    r[0].until_ns = 160 * S;
    int st[2];
    amldist__hang_verdict_t v;
    r[1].progress_ns = 150 * S;
    CHECK_INT_EQ(amldist__hang_check(r, 2, 155 * S, 10 * S, st, &v), 0);
    CHECK_INT_EQ(v.next_ns, 160 * S);
    r[1].progress_ns = 159 * S;
    CHECK_INT_EQ(amldist__hang_check(r, 2, 160 * S, 10 * S, st, &v), 1);
    CHECK_INT_EQ(v.nstalled, 1);
    CHECK_INT_EQ(st[0], 0);
    CHECK_INT_EQ(v.single_out, 1);
    CHECK_INT_EQ(v.idle_ns, 60 * S); /* since its last call */
    /* Announced before any call (the first step's compilation). */
    amldist__hang_rank_t f[1] = {live(0, 0, 0)};
    f[0].uses_api = 1;
    f[0].until_ns = 100 * S;
    CHECK_INT_EQ(amldist__hang_check(f, 1, 50 * S, 10 * S, st, &v), 0);
    CHECK_INT_EQ(v.next_ns, 100 * S);
    CHECK_INT_EQ(amldist__hang_check(f, 1, 100 * S, 10 * S, st, &v), 1);
}

/* The culprit: four ranks in lock-step, rank 3 reporting 50 ms before the
 * others, then rank 2 sticks and the others wait in the collective.  At
 * rank 3's timeout the others are 50 ms short of theirs: within the
 * margin, all four are stalled, and the stacks decide (issue 37). */
static void test_margin(void)
{
    amldist__hang_rank_t r[4];
    for (int i = 0; i < 4; i++)
        r[i] = api(i, 0, 100 * S);
    r[3].progress_ns = 100 * S - 50000000;
    int st[4];
    amldist__hang_verdict_t v;
    CHECK_INT_EQ(amldist__hang_check(r, 4, 110 * S - 50000000, 10 * S, st,
                                     &v), 1);
    /* None named, rank 3 least of all (not in the event log, not to the
     * other nodes, not as the stacks' outliers): the stacks decide. */
    CHECK_INT_EQ(v.nstalled, 0);
    CHECK_INT_EQ(v.single_out, 0);
    CHECK_INT_EQ(v.idle_ns, 10 * S);
    /* Later, all four timeout old: still none named. */
    CHECK_INT_EQ(amldist__hang_check(r, 4, 115 * S, 10 * S, st, &v), 1);
    CHECK_INT_EQ(v.nstalled, 0);
    CHECK_INT_EQ(v.single_out, 0);
    /* Rank 2 stuck alone while the others go on: singled out. */
    for (int i = 0; i < 4; i++)
        r[i].progress_ns = 109 * S;
    r[2].progress_ns = 99 * S;
    CHECK_INT_EQ(amldist__hang_check(r, 4, 109 * S, 10 * S, st, &v), 1);
    CHECK_INT_EQ(v.nstalled, 1);
    CHECK_INT_EQ(st[0], 2);
    CHECK_INT_EQ(v.single_out, 1);
    /* Two stopped a step apart, beyond the margin of a second under a
     * long timeout: the older alone, until the other's own timeout. */
    r[2].progress_ns = 100 * S;
    r[1].progress_ns = 102 * S;
    CHECK_INT_EQ(amldist__hang_check(r, 4, 160 * S, 60 * S, st, &v), 1);
    CHECK_INT_EQ(v.nstalled, 1);
    CHECK_INT_EQ(st[0], 2);
    /* Under a short one the margin is an eighth of it: 2 s apart under a
     * timeout of 8 s (margin 1 s) are two culprits only once both are
     * timeout old. */
    CHECK_INT_EQ(amldist__hang_check(r, 4, 108 * S, 8 * S, st, &v), 1);
    CHECK_INT_EQ(v.nstalled, 1);
    r[1].progress_ns = 101 * S;
    CHECK_INT_EQ(amldist__hang_check(r, 4, 108 * S, 8 * S, st, &v), 1);
    CHECK_INT_EQ(v.nstalled, 2);
    CHECK_INT_EQ(v.single_out, 1);
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
    CHECK_INT_EQ(v.nstalled, 0);
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
    RUN(test_api_ended);
    RUN(test_bar);
    RUN(test_window);
    RUN(test_margin);
    RUN(test_all_stalled);
    RUN(test_overflow);
    return test_summary();
}
