/*
 * libFuzzer target for the stacks that other nodes send (launcher/stacks/
 * wire.c, and what is done with them: merge.c, frames.c, report.c, the
 * JSON writer and rank lists; all included, they need nothing but libc).
 * Besides the sanitizers' checks: a text is taken only in canonical form
 * (it encodes back to the same bytes), a refused one leaves the set as it
 * was, and any set taken merges and prints.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../launcher/output/json.c"
#include "../../launcher/output/ranklist.c"
#include "../../launcher/output/stopreason.c"
#include "../../launcher/stacks/frames.c"
#include "../../launcher/stacks/merge.c"
#include "../../launcher/stacks/report.c"
#include "../../launcher/stacks/wire.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                          \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_stacks: %s:%d: %s\n", __FILE__, __LINE__,    \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy, so that ASan sees any read past the end. */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    struct stk_set s = {0};
    if (stk_decode(buf, size, &s) == 0) {
        size_t len;
        char *t = stk_encode(&s, &len);
        REQUIRE(t && len == size && memcmp(t, buf, size) == 0);
        free(t);
        /* The stalled ranks: the first two ranks' numbers, or none. */
        int stalled[2] = {s.n ? s.ranks[0].rank : 0, s.n > 1 ? s.ranks[1].rank : 0};
        static FILE *null;
        if (!null)
            null = fopen("/dev/null", "w");
        for (size_t k = 0; k < 2 && null; k++) {
            struct stk_report r;
            REQUIRE(stk_merge(&s, k ? stalled : NULL, k ? 2 : 0, STOP_HANG, 1, &r) == 0);
            size_t in_groups = 0;
            for (size_t g = 0; g < r.ngroups; g++) {
                REQUIRE(r.groups[g].n > 0 && r.groups[g].example < s.n);
                in_groups += r.groups[g].n;
            }
            REQUIRE(in_groups == s.n);
            stk_print(null, &s, &r);
            struct json j;
            json_report(null, &s, &r, &j);
            json_end(&j);
            stk_report_free(&r);
        }
    } else {
        REQUIRE(s.n == 0 && s.ranks == NULL);
        REQUIRE(errno == EINVAL || errno == ENOMEM);
    }
    stk_set_free(&s);
    free(buf);
    return 0;
}
