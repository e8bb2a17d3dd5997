/* amlrun's torchelastic error-file reader (launcher/output/errorfile.c):
 * the \u escapes decode as Python's json decodes them, a surrogate that
 * has no pair (which UTF-8 cannot hold) as U+FFFD, and the escape after
 * a lone high surrogate is read on its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#include "output/errorfile.h"

#define FFFD "\xef\xbf\xbd"

/* The message of {"message": "<escaped>"}, decoded; NULL when the file is
 * refused (why[] then says why). */
static char *message_of(const char *escaped, char *why, size_t whysz)
{
    static char got[256];
    char file[256];
    int n = snprintf(file, sizeof file, "{\"message\": \"%s\"}", escaped);
    struct errorfile ef;
    why[0] = '\0';
    if (errorfile_parse(file, (size_t)n, &ef, why, whysz) < 0)
        return NULL;
    snprintf(got, sizeof got, "%s", ef.message ? ef.message : "(none)");
    /* A decoded string never grows. */
    CHECK(strlen(got) <= strlen(escaped));
    errorfile_free(&ef);
    return got;
}

static const char *decode(const char *escaped)
{
    char why[160];
    const char *got = message_of(escaped, why, sizeof why);
    if (!got)
        TEST__FAIL("\"%s\": refused: %s", escaped, why);
    return got ? got : "(refused)";
}

/* json.loads('"a\\ud800\\u0041b"') == 'a\ud800Ab': the lone surrogate, and
 * the escape after it is a character of its own. */
static void test_lone_high_then_escape(void)
{
    CHECK_STR_EQ(decode("a\\ud800\\u0041b"), "a" FFFD "Ab");
    CHECK_STR_EQ(decode("\\udbff\\u00e9"), FFFD "\xc3\xa9");
    /* An escaped backslash after it: "\u0041" is then plain text. */
    CHECK_STR_EQ(decode("\\ud800\\\\u0041"), FFFD "\\u0041");
}

/* A high surrogate before another one: the second pairs with what
 * follows it (json.loads gives '\ud800\U0001f600'). */
static void test_high_then_pair(void)
{
    CHECK_STR_EQ(decode("\\ud800\\ud83d\\ude00"), FFFD "\xf0\x9f\x98\x80");
    CHECK_STR_EQ(decode("\\ud800\\ud800"), FFFD FFFD);
}

static void test_neighbours(void)
{
    CHECK_STR_EQ(decode("\\ud83d\\ude00!"), "\xf0\x9f\x98\x80!");
    CHECK_STR_EQ(decode("\\uD83D\\uDE00"), "\xf0\x9f\x98\x80");
    CHECK_STR_EQ(decode("a\\udc00b"), "a" FFFD "b");         /* lone low */
    CHECK_STR_EQ(decode("\\ude00\\ud83d"), FFFD FFFD);         /* reversed */
    CHECK_STR_EQ(decode("a\\ud800"), "a" FFFD);                /* at the end */
    CHECK_STR_EQ(decode("\\ud800\\n"), FFFD "\n");             /* other escape */
    CHECK_STR_EQ(decode("\\ud800x"), FFFD "x");
    CHECK_STR_EQ(decode("\\u0000"), FFFD);                     /* C strings */
    CHECK_STR_EQ(decode("\\u00e9\\u20ac"), "\xc3\xa9\xe2\x82\xac");
}

/* After a lone high surrogate, a bad or cut \u escape is still an error,
 * named where it is. */
static void test_bad_escape_after_high(void)
{
    char why[160];
    CHECK(message_of("\\ud800\\uzz00", why, sizeof why) == NULL);
    CHECK_STR_HAS(why, "a bad \\u escape");
    /* {"message": "\ud800\uzz00"}: the bad digits are at byte 21. */
    CHECK_STR_HAS(why, "at byte 21");
    CHECK(message_of("\\ud800\\u", why, sizeof why) == NULL);
    CHECK_STR_HAS(why, "escape");
    CHECK(message_of("\\ud800\\q", why, sizeof why) == NULL);
    CHECK_STR_HAS(why, "an unknown escape");
}

/* Strings that are checked and skipped, not kept, follow the same rule. */
static void test_skipped_strings(void)
{
    static const char file[] =
        "{\"other\": [\"\\ud800\\u0041\", \"\\ud800\\ud83d\\ude00\"], "
        "\"message\": {\"message\": \"ok\", \"extraInfo\": "
        "{\"py_callstack\": \"\\ud83d\\u0041\"}}}";
    struct errorfile ef;
    char why[160] = "";
    CHECK_INT_EQ(errorfile_parse(file, sizeof file - 1, &ef, why, sizeof why),
                 0);
    CHECK_STR_EQ(ef.message, "ok");
    CHECK_STR_EQ(ef.traceback, FFFD "A");
    errorfile_free(&ef);
}

int main(void)
{
    RUN(test_lone_high_then_escape);
    RUN(test_high_then_pair);
    RUN(test_neighbours);
    RUN(test_bad_escape_after_high);
    RUN(test_skipped_strings);
    return test_summary();
}
