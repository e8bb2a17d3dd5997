/*
 * The control plane's clock and NTP's estimate of another node's offset
 * from it (see rdzv_internal.h).  Each agent asks the host's time once a
 * heartbeat (TIMEQ, TIMEA): with t1 and t4 its own send and receive times
 * and t2 and t3 the host's, the host's clock reads its own plus
 *
 *     offset = ((t2 - t1) + (t3 - t4)) / 2,  within  delay / 2,
 *     delay  = (t4 - t1) - (t3 - t2)
 *
 * (RFC 5905 section 8): whatever the two ways' shares of the round trip,
 * the true offset lies in [t3 - t4, t2 - t1], an interval of `delay`
 * centred on the estimate.  As NTP's clock filter does, the sample of
 * least delay among the last few is the one kept: its bound is the
 * tightest, and a queue that held one frame for long only widens its own.
 */
#include <stdlib.h>

#include "rdzv/rdzv_internal.h"
#include "util/clock.h"

/* One process, one clock: read at each join (amldist__rz_clock_reload()),
 * the same for every handle and the host. */
static int64_t shift = INT64_MIN;

void amldist__rz_clock_reload(void)
{
    const char *v = getenv("AMLDIST_TEST_CLOCK_SHIFT_MS");
    char *end;
    long long ms = v && *v ? strtoll(v, &end, 10) : 0;
    __atomic_store_n(&shift,
                     v && *v && !*end && ms > -86400000LL * 365 &&
                             ms < 86400000LL * 365
                         ? ms * 1000000LL
                         : 0,
                     __ATOMIC_RELAXED);
}

int64_t amldist__rz_clock_shift_ns(void)
{
    if (__atomic_load_n(&shift, __ATOMIC_RELAXED) == INT64_MIN)
        amldist__rz_clock_reload();
    return __atomic_load_n(&shift, __ATOMIC_RELAXED);
}

int64_t amldist__rz_clock_ns(void)
{
    return amldist__now_ns() + amldist__rz_clock_shift_ns();
}

int amldist__rz_clock_add(amldist__rz_clock_t *c, int64_t t1, int64_t t2,
                          int64_t t3, int64_t t4)
{
    /* The differences, not the times, must fit: each clock's own pair is
     * a short interval, the two clocks' offset anything. */
    if (t4 < t1 || t3 < t2 || (t4 - t1) < (t3 - t2))
        return -1;
    __int128 off = ((__int128)t2 - t1 + ((__int128)t3 - t4)) / 2;
    if (off > INT64_MAX || off < INT64_MIN)
        return -1;
    c->offset[c->next] = (int64_t)off;
    c->delay[c->next] = (t4 - t1) - (t3 - t2);
    c->next = (c->next + 1) % AMLDIST__RZ_CLOCK_SAMPLES;
    if (c->n < AMLDIST__RZ_CLOCK_SAMPLES)
        c->n++;
    return 0;
}

int amldist__rz_clock_best(const amldist__rz_clock_t *c, int64_t *offset,
                           int64_t *error)
{
    int best = -1;
    for (int i = 0; i < c->n; i++)
        if (best < 0 || c->delay[i] < c->delay[best])
            best = i;
    if (best < 0)
        return -1;
    *offset = c->offset[best];
    /* Half the round trip, rounded up: the bound holds at the nanosecond. */
    *error = c->delay[best] / 2 + c->delay[best] % 2;
    return 0;
}
