/* Helpers shared by the test_layout_*.c programs. */
#ifndef AMLDIST_LAYOUT_TEST_H
#define AMLDIST_LAYOUT_TEST_H

#include <amldist.h>

#include "test.h"

/* An environment array literal: ENV("RANK=1", "WORLD_SIZE=2"). */
#define ENV(...) ((char *const[]){__VA_ARGS__, NULL})

/* Reads `env` with `flags`; the handle, or NULL after a failed CHECK. */
static inline amldist_t *layout_of(char *const env[], unsigned flags)
{
    amldist_t *h = NULL;
    int rc = amldist_init_from(&h, env, flags);
    if (rc != 0) {
        TEST__FAIL("amldist_init_from: %s: %s", amldist_err_name(rc),
                   amldist_last_error());
        return NULL;
    }
    return h;
}

/* The six integers in field order, -1 for unknown. */
#define CHECK_LAYOUT(h, r, w, lr, lw, nr, nn)                                  \
    do {                                                                       \
        const amldist_t *test__l = (h);                                        \
        int test__want[] = {r, w, lr, lw, nr, nn};                             \
        int test__got[] = {amldist_rank(test__l),                              \
                           amldist_world_size(test__l),                        \
                           amldist_local_rank(test__l),                        \
                           amldist_local_world_size(test__l),                  \
                           amldist_node_rank(test__l),                         \
                           amldist_num_nodes(test__l)};                        \
        for (int test__i = 0; test__i < 6; test__i++) {                        \
            int test__w = test__want[test__i] < 0 ? AMLDIST_EUNKNOWN          \
                                                  : test__want[test__i];       \
            if (test__got[test__i] != test__w)                                 \
                TEST__FAIL("field %d: got %d, want %d (%s)", test__i,          \
                           test__got[test__i], test__w,                        \
                           amldist_explain(test__l,                            \
                                           (amldist_field_t)test__i));         \
        }                                                                      \
    } while (0)

/* amldist_init_from fails with `code` and a message naming `needle`. */
#define CHECK_FAILS(env, flags, code, needle)                                  \
    do {                                                                       \
        amldist_t *test__lh = (amldist_t *)1;                                   \
        CHECK_INT_EQ(amldist_init_from(&test__lh, env, flags), code);           \
        CHECK(test__lh == NULL);                                                \
        CHECK_STR_HAS(amldist_last_error(), needle);                           \
    } while (0)

#endif /* AMLDIST_LAYOUT_TEST_H */
