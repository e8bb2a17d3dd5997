/* Another process's text with its control characters escaped
 * (lib/util/escape.c): what may begin a line or drive a terminal becomes
 * \xNN; printable bytes and UTF-8 stay; the output is bounded and never
 * ends in half an escape. */
#include "util/escape.h"
#include "test.h"

static void test_escapes(void)
{
    char out[128];
    static const char in[] = "a\nb\rc\033[31md\x7f" "e\tf\x01\xc3\xa9";
    CHECK_INT_EQ(amldist__escape(out, sizeof out, in, sizeof in - 1,
                                 AMLDIST__ESC_ONE_LINE),
                 strlen(out));
    CHECK_STR_EQ(out, "a\\x0ab\\x0dc\\x1b[31md\\x7fe\\x09f\\x01\xc3\xa9");
    amldist__escape(out, sizeof out, in, sizeof in - 1,
                    AMLDIST__ESC_KEEP_NEWLINES);
    CHECK_STR_EQ(out, "a\nb\\x0dc\\x1b[31md\\x7fe\\x09f\\x01\xc3\xa9");
    /* A NUL inside the bytes is text too. */
    amldist__escape(out, sizeof out, "x\0y", 3, AMLDIST__ESC_ONE_LINE);
    CHECK_STR_EQ(out, "x\\x00y");
}

static void test_bounds(void)
{
    char out[6];
    /* "ab" and one escape would need 6 bytes and the NUL: the escape goes
     * whole or not at all. */
    CHECK_INT_EQ(amldist__escape(out, sizeof out, "ab\033", 3,
                                 AMLDIST__ESC_ONE_LINE), 2);
    CHECK_STR_EQ(out, "ab");
    CHECK_INT_EQ(amldist__escape(out, sizeof out, "a\033", 2,
                                 AMLDIST__ESC_ONE_LINE), 5);
    CHECK_STR_EQ(out, "a\\x1b");
    CHECK_INT_EQ(amldist__escape(out, 1, "abc", 3, AMLDIST__ESC_ONE_LINE), 0);
    CHECK_STR_EQ(out, "");
    CHECK_INT_EQ(amldist__escape(out, 0, "abc", 3, AMLDIST__ESC_ONE_LINE), 0);
}

int main(void)
{
    RUN(test_escapes);
    RUN(test_bounds);
    return test_summary();
}
