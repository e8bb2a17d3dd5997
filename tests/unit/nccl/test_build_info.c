/* amldist_build_info(): snprintf's contract (a short buffer gets a cut,
 * terminated text and the whole length), and one "name: value" line for
 * each part, whatever this machine has. */
#include <stdlib.h>
#include <string.h>

#include "test.h"

#include "amldist.h"

static void test_lines(void)
{
    int n = amldist_build_info(NULL, 0);
    CHECK(n > 0);
    char *buf = malloc((size_t)n + 1);
    CHECK(buf != NULL);
    if (buf == NULL)
        return;
    CHECK_INT_EQ(amldist_build_info(buf, (size_t)n + 1), n);
    CHECK_INT_EQ((int)strlen(buf), n);
    static const char *const names[] = {"libamldist: ", "hwloc: ",
                                        "NCCL: ", "CUDA runtime: ",
                                        "PMIx: "};
    const char *line = buf;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        CHECK(strncmp(line, names[i], strlen(names[i])) == 0);
        const char *nl = strchr(line, '\n');
        CHECK(nl != NULL);
        if (nl == NULL)
            break;
        line = nl + 1;
    }
    CHECK_STR_EQ(line, "");
    CHECK_STR_HAS(buf, amldist_version_string());
    free(buf);
}

static void test_short_buffer(void)
{
    char small[10];
    memset(small, 'x', sizeof small);
    int n = amldist_build_info(small, sizeof small);
    CHECK(n > (int)sizeof small);
    CHECK_STR_EQ(small, "libamldis");
    CHECK(amldist_build_info(NULL, 5) < 0);
    CHECK_STR_HAS(amldist_last_error(), "NULL buffer");
}

int main(void)
{
    RUN(test_lines);
    RUN(test_short_buffer);
    return test_summary();
}
