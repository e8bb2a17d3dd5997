/* Strict integer, host and host:port parsers (lib/parse.c). */
#include <limits.h>
#include <stdio.h>

#include "util/internal.h"
#include "util/parse.h"
#include "test.h"

/* Table cases name their input when they fail. */
#define CASE_INT_EQ(in, a, b)                                                  \
    do {                                                                       \
        long long case__a = (long long)(a), case__b = (long long)(b);          \
        if (case__a != case__b)                                                \
            TEST__FAIL("input \"%s\": %s == %s: %lld != %lld", in, #a, #b,     \
                       case__a, case__b);                                      \
    } while (0)

static void test_parse_long_valid(void)
{
    static const struct {
        const char *in;
        long want;
    } cases[] = {
        {"0", 0},       {"1", 1},         {"42", 42},
        {"007", 7},     {"000", 0},       {"65535", 65535},
        {"2147483648", 2147483648L},      {"9223372036854775807", LONG_MAX},
        {"00000000000000000000000000001", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long v = -12345;
        CASE_INT_EQ(cases[i].in, amldist__parse_long(cases[i].in, 0, LONG_MAX, &v), 0);
        CASE_INT_EQ(cases[i].in, v, cases[i].want);
    }
}

static void test_parse_seconds(void)
{
    static const struct {
        const char *in;
        int rc;
        long long ms;
    } cases[] = {
        {"30", 0, 30000},         {"2.5", 0, 2500},
        {"0.25", 0, 250},         {"0.0005", AMLDIST_ERANGE, 0},
        {"0.0019", 0, 1},         {"604800", 0, 604800000LL},
        {"604801", AMLDIST_ERANGE, 0}, {"0", AMLDIST_ERANGE, 0},
        {"", AMLDIST_EPARSE, 0},  {"-1", AMLDIST_EPARSE, 0},
        {"1e3", AMLDIST_EPARSE, 0}, {"1.", AMLDIST_EPARSE, 0},
        {".5", AMLDIST_EPARSE, 0}, {"1 ", AMLDIST_EPARSE, 0},
        {"99999999999999999999", AMLDIST_ERANGE, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long long ms = -7;
        CASE_INT_EQ(cases[i].in, amldist__parse_seconds_ms(cases[i].in, &ms),
                    cases[i].rc);
        CASE_INT_EQ(cases[i].in, ms, cases[i].rc == 0 ? cases[i].ms : -7);
    }
    CHECK_INT_EQ(amldist__parse_seconds_ms(NULL, NULL), AMLDIST_EINVAL);
}

static void test_parse_long_bad_text(void)
{
    static const char *const cases[] = {
        "",    "-1",  "+1",   " 1",   "1 ",   "12abc", "0x10", "1.0",
        "1e3", "\t1", "1\n",  "--1",  "abc",  "1,000", "1_0",  "٣",
        "99999999999999999999x", "-99999999999999999999",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long v = -12345;
        CASE_INT_EQ(cases[i], amldist__parse_long(cases[i], LONG_MIN, LONG_MAX, &v),
                    AMLDIST_EPARSE);
        CASE_INT_EQ(cases[i], v, -12345); /* untouched on failure */
    }
}

static void test_parse_long_range(void)
{
    long v = -1;
    CHECK_INT_EQ(amldist__parse_long("99999999999999999999", 0, LONG_MAX, &v),
                 AMLDIST_ERANGE);
    CHECK_INT_EQ(amldist__parse_long("9223372036854775808", 0, LONG_MAX, &v),
                 AMLDIST_ERANGE);
    CHECK_INT_EQ(v, -1);
    CHECK_INT_EQ(amldist__parse_long("0", 1, 65535, &v), AMLDIST_ERANGE);
    CHECK_INT_EQ(amldist__parse_long("65536", 1, 65535, &v), AMLDIST_ERANGE);
    CHECK_INT_EQ(amldist__parse_long("5", 6, 6, &v), AMLDIST_ERANGE);
    CHECK_INT_EQ(amldist__parse_long("7", 6, 6, &v), AMLDIST_ERANGE);
    CHECK_INT_EQ(v, -1);
    CHECK_INT_EQ(amldist__parse_long("6", 6, 6, &v), 0);
    CHECK_INT_EQ(v, 6);
    CHECK_INT_EQ(amldist__parse_long("65535", 1, 65535, &v), 0);
    CHECK_INT_EQ(v, 65535);
    CHECK_INT_EQ(amldist__parse_long("1", 1, 65535, &v), 0);
    CHECK_INT_EQ(v, 1);
    /* min below zero is legal, but the text still has no sign. */
    CHECK_INT_EQ(amldist__parse_long("3", -5, 5, &v), 0);
    CHECK_INT_EQ(v, 3);
    CHECK_INT_EQ(amldist__parse_long("-3", -5, 5, &v), AMLDIST_EPARSE);
    /* out may be NULL: validation only. */
    CHECK_INT_EQ(amldist__parse_long("12", 0, 20, NULL), 0);
    CHECK_INT_EQ(amldist__parse_long("21", 0, 20, NULL), AMLDIST_ERANGE);
}

static void test_parse_long_einval_and_no_message(void)
{
    long v;
    CHECK_INT_EQ(amldist__parse_long(NULL, 0, 1, &v), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist__parse_long("1", 2, 1, &v), AMLDIST_EINVAL);
    /* The caller names the variable: the parsers leave the message alone. */
    amldist__fail(AMLDIST_EPARSE, "sentinel");
    CHECK_INT_EQ(amldist__parse_long("x", 0, 1, &v), AMLDIST_EPARSE);
    CHECK_INT_EQ(amldist__valid_host("-bad"), AMLDIST_EPARSE);
    int port;
    char host[AMLDIST__HOST_MAX];
    CHECK_INT_EQ(amldist__parse_hostport("h:0", host, sizeof host, &port),
                 AMLDIST_ERANGE);
    CHECK_STR_EQ(amldist_last_error(), "sentinel");
}

static void test_valid_host_names(void)
{
    static const char *const good[] = {
        "localhost", "a", "node1", "gpu009", "GPU-Node-01", "x.y.z",
        "my-host.example.com", "1password", "3com.com", "a1", "123abc",
        "10.0.0.1a", "host-1.10a", "deadbeef", "ab-12",
        /* 63-character label */
        "abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abc",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CASE_INT_EQ(good[i], amldist__valid_host(good[i]), 0);

    static const char *const bad[] = {
        "", ".", "a.", ".a", "a..b", "-a", "a-", "a.-b", "a-.b", "a_b",
        "a b", " a", "a ", "a/b", "a@b", "host.", "é", "a\tb", "[a]",
        /* 64-character label */
        "abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcd",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CASE_INT_EQ(bad[i], amldist__valid_host(bad[i]), AMLDIST_EPARSE);
    CHECK_INT_EQ(amldist__valid_host(NULL), AMLDIST_EINVAL);
}

static void test_valid_host_length(void)
{
    /* Labels of 63, 63, 63 and 61 with 3 dots: 253 characters, the most. */
    char name[300];
    memset(name, 'a', sizeof name);
    name[63] = name[127] = name[191] = '.';
    name[253] = '\0';
    CHECK_INT_EQ(strlen(name), 253);
    CHECK_INT_EQ(amldist__valid_host(name), 0);
    name[253] = 'a';
    name[254] = '\0';
    CHECK_INT_EQ(amldist__valid_host(name), AMLDIST_EPARSE);
}

static void test_valid_host_ipv4(void)
{
    static const char *const good[] = {
        "0.0.0.0", "127.0.0.1", "10.0.0.1", "255.255.255.255", "192.168.1.10",
        "1.2.3.4",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CASE_INT_EQ(good[i], amldist__valid_host(good[i]), 0);
    /* Numeric-looking text that getaddrinfo() would misread or refuse. */
    static const char *const bad[] = {
        "010.0.0.1", "10.0.0.01", "00.0.0.0", "256.0.0.1", "1.2.3.256",
        "1.2.3",     "1.2",       "1",        "123",      "1.2.3.4.5",
        "0x7f000001", "0x7f.0.0.1", "127.1",  "0177.0.0.1", "4294967295",
        "host.1",    "a.b.123",   "1.2.3.4.", "1111.1.1.1", "0xa",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CASE_INT_EQ(bad[i], amldist__valid_host(bad[i]), AMLDIST_EPARSE);
}

static void test_valid_host_ipv6(void)
{
    static const char *const good[] = {
        "::1", "::", "fe80::1", "2001:db8::8:800:200c:417a",
        "2001:0db8:0000:0000:0000:0000:0000:0001", "::ffff:192.168.1.1",
        "fe80::1%eth0", "fe80::1%2", "fe80::1%br-1.100", "fe80::1%abcdefghijklmno",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CASE_INT_EQ(good[i], amldist__valid_host(good[i]), 0);
    static const char *const bad[] = {
        ":", ":::", "1::2::3", "fe80::g", "[::1]", "fe80::1%", "fe80::1%a b",
        "fe80::1%abcdefghijklmnop", "fe80::1%eth0%1", "%eth0", "12345::1",
        "1:2:3:4:5:6:7:8:9", "::1 ", "host:80:90",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CASE_INT_EQ(bad[i], amldist__valid_host(bad[i]), AMLDIST_EPARSE);
}

static void test_hostport_valid(void)
{
    static const struct {
        const char *in, *host;
        int port;
    } cases[] = {
        {"host", "host", -1},
        {"host:6105", "host", 6105},
        {"10.0.0.4:6105", "10.0.0.4", 6105},
        {"10.0.0.4", "10.0.0.4", -1},
        {"[::1]:29500", "::1", 29500},
        {"[::1]", "::1", -1},
        {"[fe80::1%eth0]:1", "fe80::1%eth0", 1},
        {"fe80::1", "fe80::1", -1},
        {"fe80::1:8080", "fe80::1:8080", -1}, /* bare IPv6: never a port */
        {"node-1.cluster:65535", "node-1.cluster", 65535},
        {"h:080", "h", 80},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char host[AMLDIST__HOST_MAX] = "junk";
        int port = 12345;
        CASE_INT_EQ(cases[i].in,
                    amldist__parse_hostport(cases[i].in, host, sizeof host, &port), 0);
        CHECK_STR_EQ(host, cases[i].host);
        CASE_INT_EQ(cases[i].in, port, cases[i].port);
    }
}

static void test_hostport_invalid(void)
{
    static const struct {
        const char *in;
        int rc;
    } cases[] = {
        {"", AMLDIST_EPARSE},          {"host:", AMLDIST_EPARSE},
        {":80", AMLDIST_EPARSE},       {"host:0", AMLDIST_ERANGE},
        {"host:65536", AMLDIST_ERANGE}, {"host:99999999999999999999", AMLDIST_ERANGE},
        {"host:-1", AMLDIST_EPARSE},   {"host:+80", AMLDIST_EPARSE},
        {"host: 80", AMLDIST_EPARSE},  {"host:80 ", AMLDIST_EPARSE},
        {"host:12abc", AMLDIST_EPARSE}, {"host:0x50", AMLDIST_EPARSE},
        {"[::1]:", AMLDIST_EPARSE},    {"[::1]:0", AMLDIST_ERANGE},
        {"[::1]:65536", AMLDIST_ERANGE}, {"[::1]80", AMLDIST_EPARSE},
        {"[::1", AMLDIST_EPARSE},      {"::1]", AMLDIST_EPARSE},
        {"[host]:80", AMLDIST_EPARSE}, {"[10.0.0.1]:80", AMLDIST_EPARSE},
        {"[]", AMLDIST_EPARSE},        {"[]:80", AMLDIST_EPARSE},
        {"[[::1]]:80", AMLDIST_EPARSE}, {"[::1]]:80", AMLDIST_EPARSE},
        {"[::1]:80]", AMLDIST_EPARSE}, {"010.0.0.1:80", AMLDIST_EPARSE},
        {"bad_host:80", AMLDIST_EPARSE}, {"h:80:90", AMLDIST_EPARSE},
        {"1.2.3.4:80:90", AMLDIST_EPARSE}, {" host:80", AMLDIST_EPARSE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char host[AMLDIST__HOST_MAX] = "junk";
        int port = 12345;
        CASE_INT_EQ(cases[i].in,
                    amldist__parse_hostport(cases[i].in, host, sizeof host, &port),
                    cases[i].rc);
        CHECK_STR_EQ(host, "");
        CASE_INT_EQ(cases[i].in, port, -1);
    }
}

static void test_hostport_buffer(void)
{
    char host[8];
    int port;
    CHECK_INT_EQ(amldist__parse_hostport("abcdefg:5", host, sizeof host, &port), 0);
    CHECK_STR_EQ(host, "abcdefg");
    CHECK_INT_EQ(port, 5);
    CHECK_INT_EQ(amldist__parse_hostport("abcdefgh:5", host, sizeof host, &port),
                 AMLDIST_ERANGE);
    CHECK_STR_EQ(host, "");
    CHECK_INT_EQ(port, -1);
    /* NULL host or port: validation only. */
    CHECK_INT_EQ(amldist__parse_hostport("a:1", NULL, 0, NULL), 0);
    CHECK_INT_EQ(amldist__parse_hostport("a:0", NULL, 0, NULL), AMLDIST_ERANGE);
    CHECK_INT_EQ(amldist__parse_hostport(NULL, host, sizeof host, &port),
                 AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist__parse_hostport("a", host, 0, &port), AMLDIST_EINVAL);
    /* Every host that passes fits in AMLDIST__HOST_MAX. */
    char big[AMLDIST__HOST_MAX];
    CHECK_INT_EQ(amldist__parse_hostport(
                     "[0000:0000:0000:0000:0000:ffff:255.255.255.255%abcdefghijklmno]:9",
                     big, sizeof big, &port), 0);
    CHECK_STR_EQ(big, "0000:0000:0000:0000:0000:ffff:255.255.255.255%abcdefghijklmno");
    CHECK_INT_EQ(port, 9);
}

int main(void)
{
    RUN(test_parse_long_valid);
    RUN(test_parse_seconds);
    RUN(test_parse_long_bad_text);
    RUN(test_parse_long_range);
    RUN(test_parse_long_einval_and_no_message);
    RUN(test_valid_host_names);
    RUN(test_valid_host_length);
    RUN(test_valid_host_ipv4);
    RUN(test_valid_host_ipv6);
    RUN(test_hostport_valid);
    RUN(test_hostport_invalid);
    RUN(test_hostport_buffer);
    return test_summary();
}
