/*
 * The control plane's clock offset estimate (lib/rdzv/clock.c), a pure
 * function, fed exchanges with an offset injected on purpose.
 */
#include <stdlib.h>
#include <string.h>

#include "rdzv/rdzv_internal.h"
#include "test.h"

#define MS(t) ((int64_t)(t) * 1000000LL)

/* An exchange with the peer's clock `theta` ahead of ours: d1 out, p at
 * the peer, d2 back. */
static void exchange(amldist__rz_clock_t *c, int64_t at, int64_t theta,
                     int64_t d1, int64_t p, int64_t d2)
{
    int64_t t1 = at, t2 = at + d1 + theta, t3 = t2 + p,
            t4 = at + d1 + p + d2;
    CHECK_INT_EQ(amldist__rz_clock_add(c, t1, t2, t3, t4), 0);
}

/* Whatever the two ways' shares of the round trip, the offset lies within
 * the bound; the least round trip's sample is the one kept. */
static void test_offset_within_bound(void)
{
    const int64_t thetas[] = {0, MS(-250), MS(250), MS(86400000LL) + 7,
                              -MS(3600000LL) - 3};
    srand(20);
    for (size_t k = 0; k < sizeof thetas / sizeof *thetas; k++) {
        amldist__rz_clock_t c;
        memset(&c, 0, sizeof c);
        int64_t off, err;
        CHECK_INT_EQ(amldist__rz_clock_best(&c, &off, &err), -1);
        int64_t least = INT64_MAX;
        for (int i = 0; i < 20; i++) {
            int64_t d1 = rand() % 2000000, d2 = rand() % 9000000,
                    p = rand() % 100000;
            exchange(&c, MS(1000 + i), thetas[k], d1, p, d2);
            if (i >= 20 - AMLDIST__RZ_CLOCK_SAMPLES && d1 + d2 < least)
                least = d1 + d2;
            CHECK_INT_EQ(amldist__rz_clock_best(&c, &off, &err), 0);
            CHECK(llabs(off - thetas[k]) <= err);
        }
        /* Half the least round trip of the last samples, rounded up. */
        CHECK(err == least / 2 + least % 2);
    }
}

/* A symmetric path finds the offset exactly; an asymmetric one is off by
 * half the difference, which the bound covers. */
static void test_offset_symmetric_and_not(void)
{
    amldist__rz_clock_t c;
    memset(&c, 0, sizeof c);
    int64_t off, err;
    exchange(&c, MS(5), MS(-250), 1000, 50, 1000);
    CHECK_INT_EQ(amldist__rz_clock_best(&c, &off, &err), 0);
    CHECK(off == MS(-250));
    CHECK(err == 1000);
    memset(&c, 0, sizeof c);
    exchange(&c, MS(5), MS(-250), 0, 0, 4000);
    CHECK_INT_EQ(amldist__rz_clock_best(&c, &off, &err), 0);
    CHECK(off == MS(-250) - 2000);
    CHECK(err == 2000);
}

/* Times no exchange can give are refused: an answer before the question
 * on our clock, a peer whose own time on it is negative or longer than
 * the round trip. */
static void test_offset_impossible_refused(void)
{
    amldist__rz_clock_t c;
    memset(&c, 0, sizeof c);
    CHECK_INT_EQ(amldist__rz_clock_add(&c, 100, 0, 0, 99), -1);
    CHECK_INT_EQ(amldist__rz_clock_add(&c, 100, 50, 40, 200), -1);
    CHECK_INT_EQ(amldist__rz_clock_add(&c, 100, 0, 200, 200), -1);
    CHECK_INT_EQ(amldist__rz_clock_add(&c, INT64_MIN, INT64_MAX, INT64_MAX,
                                       INT64_MIN), -1);
    int64_t off, err;
    CHECK_INT_EQ(amldist__rz_clock_best(&c, &off, &err), -1);
    /* Clocks at the two ends of the range still fit. */
    CHECK_INT_EQ(amldist__rz_clock_add(&c, INT64_MAX - 10, -5, -4,
                                       INT64_MAX - 8), 0);
    CHECK_INT_EQ(amldist__rz_clock_best(&c, &off, &err), 0);
}

int main(void)
{
    RUN(test_offset_within_bound);
    RUN(test_offset_symmetric_and_not);
    RUN(test_offset_impossible_refused);
    return test_summary();
}
