/*
 * The map of 64-bit keys (lib/util/u64map.c), against a plain array kept
 * beside it through a long random run of puts, gets and removals on a
 * small table (so that the probe chains wrap around and collide), and its
 * bound (no more than `max` keys).
 */
#include <stdlib.h>

#include "test.h"
#include "util/u64map.h"

#define MAX 100
#define KEYS 400 /* drawn among: the map fills, and runs over */

static void test_against_array(void)
{
    amldist__u64map_t m;
    int ref[KEYS];
    size_t n = 0;
    CHECK_INT_EQ(amldist__u64map_init(&m, MAX), 0);
    for (int k = 0; k < KEYS; k++)
        ref[k] = -1;
    unsigned seed = 12345;
    for (int step = 0; step < 200000; step++) {
        int k = (int)(rand_r(&seed) % KEYS), op = (int)(rand_r(&seed) % 3);
        /* Keys alike in their low bits, as pointers to equal-size blocks. */
        uint64_t key = 0x7f0000000000ull + (uint64_t)k * 4096;
        if (op == 0) {
            int v = (int)(rand_r(&seed) % 1000);
            int rc = amldist__u64map_put(&m, key, v);
            if (ref[k] < 0 && n == MAX) {
                CHECK_INT_EQ(rc, -1);
            } else {
                CHECK_INT_EQ(rc, 0);
                n += ref[k] < 0;
                ref[k] = v;
            }
        } else if (op == 1) {
            amldist__u64map_del(&m, key);
            n -= ref[k] >= 0;
            ref[k] = -1;
        }
        CHECK_INT_EQ(amldist__u64map_get(&m, key), ref[k]);
        CHECK_INT_EQ((long long)m.n, (long long)n);
        if (step % 10000 == 0)
            for (int j = 0; j < KEYS; j++)
                CHECK_INT_EQ(amldist__u64map_get(
                                 &m, 0x7f0000000000ull + (uint64_t)j * 4096),
                             ref[j]);
    }
    amldist__u64map_clear(&m);
    for (int j = 0; j < KEYS; j++)
        CHECK_INT_EQ(amldist__u64map_get(&m, 0x7f0000000000ull +
                                                 (uint64_t)j * 4096), -1);
    amldist__u64map_free(&m);
    /* A freed (or never made) map answers nothing and holds nothing. */
    CHECK_INT_EQ(amldist__u64map_get(&m, 1), -1);
    CHECK_INT_EQ(amldist__u64map_put(&m, 1, 1), -1);
}

int main(void)
{
    RUN(test_against_array);
    return test_summary();
}
