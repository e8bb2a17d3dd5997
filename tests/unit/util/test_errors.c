/*
 * Error codes are ABI: a program built against one header compares the
 * codes a later library returns.  This golden list is written by hand, not
 * generated from AMLDIST_ERRNO_MAP, so that renumbering a code, reusing a
 * value or dropping a code fails here.  A new code is added to both.
 */
#include "amldist.h"
#include "test.h"

static const struct {
    const char *name;
    int value;
} golden[] = {
    {"AMLDIST_EINVAL", -999},    {"AMLDIST_ENOMEM", -998},
    {"AMLDIST_EPARSE", -997},    {"AMLDIST_ERANGE", -996},
    {"AMLDIST_EMISSING", -995},  {"AMLDIST_ECONFLICT", -994},
    {"AMLDIST_EUNKNOWN", -993},  {"AMLDIST_ESYS", -992},
    {"AMLDIST_ETOPO", -991},     {"AMLDIST_ENOGPU", -990},
    {"AMLDIST_EBIND", -989},     {"AMLDIST_ETIMEDOUT", -988},
    {"AMLDIST_EPROTO", -987},    {"AMLDIST_EDENIED", -986},
    {"AMLDIST_ENOTSUP", -985},   {"AMLDIST_ECUDA", -984},
    {"AMLDIST_ENCCL", -983},     {"AMLDIST_EPEER", -982},
};
#define NGOLDEN (sizeof golden / sizeof *golden)

/* The header's table, as the compiler sees it. */
static const struct {
    const char *name;
    int code;
    int value;
    const char *msg;
} header[] = {
#define XX(name, value, msg) {"AMLDIST_" #name, AMLDIST_##name, value, msg},
    AMLDIST_ERRNO_MAP(XX)
#undef XX
};
#define NHEADER (sizeof header / sizeof *header)

/* Every golden code has its value, its name and its own message. */
static void test_golden_values(void)
{
    for (size_t i = 0; i < NGOLDEN; i++) {
        int v = golden[i].value;
        CHECK_STR_EQ(amldist_err_name(v), golden[i].name);
        CHECK(strcmp(amldist_strerror(v), "unknown error") != 0);
    }
    /* Spelled out for the ones programs test most. */
    CHECK_INT_EQ(AMLDIST_EINVAL, -999);
    CHECK_INT_EQ(AMLDIST_ETIMEDOUT, -988);
    CHECK_INT_EQ(AMLDIST_EPEER, -982);
}

/* The header's table and the golden list are the same set. */
static void test_header_matches_golden(void)
{
    CHECK_INT_EQ(NHEADER, NGOLDEN);
    for (size_t i = 0; i < NHEADER; i++) {
        size_t g = 0;
        while (g < NGOLDEN && strcmp(golden[g].name, header[i].name) != 0)
            g++;
        if (g == NGOLDEN) {
            TEST__FAIL("%s is not in the golden list", header[i].name);
            continue;
        }
        CHECK_INT_EQ(header[i].code, golden[g].value);
        CHECK_INT_EQ(header[i].value, golden[g].value);
        CHECK_STR_EQ(amldist_strerror(header[i].code), header[i].msg);
    }
}

static void test_not_codes(void)
{
    CHECK_STR_EQ(amldist_err_name(AMLDIST_OK), "AMLDIST_OK");
    CHECK_STR_EQ(amldist_strerror(0), "success");
    const int others[] = {-1000, -1, 1, 999};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
        CHECK_STR_EQ(amldist_err_name(others[i]), "AMLDIST_UNKNOWN_ERROR");
        CHECK_STR_EQ(amldist_strerror(others[i]), "unknown error");
    }
}

int main(void)
{
    RUN(test_golden_values);
    RUN(test_header_matches_golden);
    RUN(test_not_codes);
    return test_summary();
}
