/* Slurm hostlists and SLURM_TASKS_PER_NODE (lib/hostlist.c). */
#include <stdio.h>

#include "util/internal.h"
#include "util/parse.h"
#include "test.h"

/* Expands `list` with nth() and checks it is exactly the `want` hosts, joined
 * by spaces; also checks foreach() gives the same in the same order. */
struct joined {
    char buf[4096];
    size_t len;
    long next;
    int bad_index;
};

static int join_host(const char *host, long index, void *arg)
{
    struct joined *j = arg;
    if (index != j->next++)
        j->bad_index = 1;
    j->len += (size_t)snprintf(j->buf + j->len, sizeof j->buf - j->len, "%s%s",
                               j->len ? " " : "", host);
    return 0;
}

static void check_expands(const char *list, const char *want)
{
    long want_n = 1;
    for (const char *p = want; *p; p++)
        want_n += *p == ' ';
    long n = amldist__hostlist_count(list);
    if (n != want_n)
        TEST__FAIL("count(\"%s\") = %ld, want %ld", list, n, want_n);
    char all[4096] = "";
    size_t len = 0;
    for (long i = 0; i < n && i < want_n; i++) {
        char host[AMLDIST__HOST_MAX] = "junk";
        int rc = amldist__hostlist_nth(list, i, host, sizeof host);
        if (rc != 0)
            TEST__FAIL("nth(\"%s\", %ld) = %d", list, i, rc);
        len += (size_t)snprintf(all + len, sizeof all - len, "%s%s",
                                i ? " " : "", host);
    }
    if (strcmp(all, want) != 0)
        TEST__FAIL("nth(\"%s\", 0..): \"%s\", want \"%s\"", list, all, want);
    struct joined j = {.len = 0};
    int rc = amldist__hostlist_foreach(list, join_host, &j);
    if (rc != 0 || strcmp(j.buf, want) != 0 || j.bad_index)
        TEST__FAIL("foreach(\"%s\") = %d: \"%s\", want \"%s\"", list, rc, j.buf, want);
    char host[AMLDIST__HOST_MAX];
    if (amldist__hostlist_nth(list, n, host, sizeof host) != AMLDIST_ERANGE ||
        amldist__hostlist_nth(list, -1, host, sizeof host) != AMLDIST_ERANGE)
        TEST__FAIL("nth(\"%s\") outside [0, %ld) was not ERANGE", list, n);
}

static void test_hostlist_issue_examples(void)
{
    check_expands("gpu[009-011]", "gpu009 gpu010 gpu011");
    check_expands("gpu[009-011,013],login1,rack[1-2]-n[01-02]",
                  "gpu009 gpu010 gpu011 gpu013 login1 "
                  "rack1-n01 rack1-n02 rack2-n01 rack2-n02");
}

static void test_hostlist_plain(void)
{
    check_expands("node1", "node1");
    check_expands("a,b,c", "a b c");
    check_expands("login1,login1", "login1 login1"); /* kept as written */
    check_expands("z,a", "z a");
    check_expands("node-1.cluster.local,node-2.cluster.local",
                  "node-1.cluster.local node-2.cluster.local");
}

static void test_hostlist_padding(void)
{
    check_expands("n[8-10]", "n8 n9 n10");      /* width of "8" */
    check_expands("n[08-10]", "n08 n09 n10");
    check_expands("n[098-101]", "n098 n099 n100 n101");
    check_expands("n[0-2]", "n0 n1 n2");
    check_expands("n[000]", "n000");
    check_expands("n[7]", "n7");
    check_expands("n[1-010]", "n1 n2 n3 n4 n5 n6 n7 n8 n9 n10");
    check_expands("n[9,010,11]", "n9 n010 n11"); /* each item its own width */
    check_expands("n[00099-00101]", "n00099 n00100 n00101");
}

static void test_hostlist_groups(void)
{
    check_expands("rack[1-2]-n[01-02]", "rack1-n01 rack1-n02 rack2-n01 rack2-n02");
    check_expands("r[1-2]n[1-3]", "r1n1 r1n2 r1n3 r2n1 r2n2 r2n3");
    check_expands("a[1,3]b[5]c[7-8]", "a1b5c7 a1b5c8 a3b5c7 a3b5c8");
    check_expands("[1-2]a", "1a 2a");
    check_expands("n[1-2]-[3-4]", "n1-3 n1-4 n2-3 n2-4");
    check_expands("x[1-2].dom[3]", "x1.dom3 x2.dom3");
    check_expands("a[1-2],b,c[3,5-6]", "a1 a2 b c3 c5 c6");
    check_expands("a[3-3]", "a3");
    check_expands("n[1,1]", "n1 n1");
}

static void test_hostlist_numeric(void)
{
    /* Names that may read as IPv4 are checked host by host. */
    check_expands("10.0.0.[1-3]", "10.0.0.1 10.0.0.2 10.0.0.3");
    check_expands("10.0.[0-1].[254-255]", "10.0.0.254 10.0.0.255 10.0.1.254 10.0.1.255");
    check_expands("10.0.0.1,10.0.0.2", "10.0.0.1 10.0.0.2");
    /* Hex-looking names that inet_aton() does not read are plain names. */
    check_expands("0a[1-2]", "0a1 0a2");
    check_expands("[1-2]x1", "1x1 2x1");
    check_expands("1.0x[1-2]g", "1.0x1g 1.0x2g");
    check_expands("0x[1-2].a", "0x1.a 0x2.a");
    check_expands("1.2.3.4.0x[5-6]", "1.2.3.4.0x5 1.2.3.4.0x6"); /* 5 parts */
    check_expands("[1-2].[3].[5].[7]a", "1.3.5.7a 2.3.5.7a");
    static const char *const bad[] = {
        "10.0.0.[254-256]", "10.0.0.[01-02]", "node.[1-2]", "[1-3]", "123",
        "1.2.3", "0x[1-2]", "n,010.0.0.1", "[0-1]x1", "1.0x[1-2]",
        "0x[1-2].0x[3]", "127.[0-1]", "1.2.3.4.[5-6]", "[1-2].[3-4].[5-6].0x[7]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char host[AMLDIST__HOST_MAX] = "junk";
        if (amldist__hostlist_count(bad[i]) != AMLDIST_EPARSE)
            TEST__FAIL("count(\"%s\") = %ld, want EPARSE", bad[i],
                       amldist__hostlist_count(bad[i]));
        if (amldist__hostlist_nth(bad[i], 0, host, sizeof host) != AMLDIST_EPARSE ||
            host[0] != '\0')
            TEST__FAIL("nth(\"%s\", 0) did not fail with EPARSE", bad[i]);
    }
}

static void test_hostlist_invalid(void)
{
    static const struct {
        const char *in;
        long rc;
    } cases[] = {
        {"", AMLDIST_EPARSE},           {",", AMLDIST_EPARSE},
        {"a,", AMLDIST_EPARSE},         {",a", AMLDIST_EPARSE},
        {"a,,b", AMLDIST_EPARSE},       {"a[1-2", AMLDIST_EPARSE},
        {"a1-2]", AMLDIST_EPARSE},      {"a]", AMLDIST_EPARSE},
        {"a[[1]]", AMLDIST_EPARSE},     {"a[1[2]]", AMLDIST_EPARSE},
        {"a[]", AMLDIST_EPARSE},        {"a[,]", AMLDIST_EPARSE},
        {"a[1,]", AMLDIST_EPARSE},      {"a[,1]", AMLDIST_EPARSE},
        {"a[1,,2]", AMLDIST_EPARSE},    {"a[3-1]", AMLDIST_EPARSE},
        {"a[-1]", AMLDIST_EPARSE},      {"a[1-]", AMLDIST_EPARSE},
        {"a[1-2-3]", AMLDIST_EPARSE},   {"a[x]", AMLDIST_EPARSE},
        {"a[1 - 2]", AMLDIST_EPARSE},   {"a[ 1]", AMLDIST_EPARSE},
        {"a b", AMLDIST_EPARSE},        {"a, b", AMLDIST_EPARSE},
        {"a_b", AMLDIST_EPARSE},        {"-a[1-2]", AMLDIST_EPARSE},
        {"a[1-2]-", AMLDIST_EPARSE},    {"a.[1-2].", AMLDIST_EPARSE},
        {"a..b", AMLDIST_EPARSE},       {".a", AMLDIST_EPARSE},
        {"a[+1]", AMLDIST_EPARSE},      {"a[0x1]", AMLDIST_EPARSE},
        {"a-.b[1]", AMLDIST_EPARSE},    {"[1]-", AMLDIST_EPARSE},
        /* A 64-character label, with the group at its widest. */
        {"abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789ab[1-10]",
         AMLDIST_EPARSE},
        /* Too many hosts, and numbers too long to be sane. */
        {"a[0-1000000]", AMLDIST_ERANGE},
        {"a[1-1000],b[1-1000]c[1-1000]", AMLDIST_ERANGE},
        {"a[1-1000]b[1-1000]c[1-1000]d[1-1000]", AMLDIST_ERANGE},
        {"a[0-999999999999999999]", AMLDIST_ERANGE},
        {"a[1-9999999999999999999]", AMLDIST_ERANGE},
        {"a[99999999999999999999999999]", AMLDIST_ERANGE},
        /* Names that may read as IPv4 are checked label by label, with at
         * most 65536 values per label. */
        {"10.0.0.[1-65537]", AMLDIST_ERANGE},
        {"0x[1-300][1-300]", AMLDIST_ERANGE},
    };
    /* The same label at 63 is fine. */
    CHECK_INT_EQ(amldist__hostlist_count(
                     "abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789ab[1-9]"),
                 9);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long n = amldist__hostlist_count(cases[i].in);
        if (n != cases[i].rc)
            TEST__FAIL("count(\"%s\") = %ld, want %ld", cases[i].in, n, cases[i].rc);
        char host[AMLDIST__HOST_MAX] = "junk";
        int rc = amldist__hostlist_nth(cases[i].in, 0, host, sizeof host);
        if (rc != cases[i].rc || host[0] != '\0')
            TEST__FAIL("nth(\"%s\", 0) = %d \"%s\", want %ld \"\"", cases[i].in,
                       rc, host, cases[i].rc);
    }
    CHECK_INT_EQ(amldist__hostlist_count(NULL), AMLDIST_EINVAL);
}

static void test_hostlist_limits(void)
{
    /* Exactly the cap is allowed, and nth reaches the last one directly. */
    CHECK_INT_EQ(amldist__hostlist_count("n[1-1000000]"), 1000000);
    CHECK_INT_EQ(amldist__hostlist_count("n[1-1000]m[1-1000]"), 1000000);
    CHECK_INT_EQ(amldist__hostlist_count("n[1-999999],x"), 1000000);
    CHECK_INT_EQ(amldist__hostlist_count("n[1-999999],x,y"), AMLDIST_ERANGE);
    char host[AMLDIST__HOST_MAX];
    CHECK_INT_EQ(amldist__hostlist_nth("n[1-1000]m[1-1000]", 999999, host, sizeof host), 0);
    CHECK_STR_EQ(host, "n1000m1000");
    CHECK_INT_EQ(amldist__hostlist_nth("n[1-1000]m[1-1000]", 1234, host, sizeof host), 0);
    CHECK_STR_EQ(host, "n2m235");
    CHECK_INT_EQ(amldist__hostlist_nth("n[0-999999999999999998]", 0, host, sizeof host),
                 AMLDIST_ERANGE);
    /* 18-digit numbers are fine when few. */
    CHECK_INT_EQ(amldist__hostlist_nth("n[999999999999999998-999999999999999999]", 1,
                                       host, sizeof host), 0);
    CHECK_STR_EQ(host, "n999999999999999999");
}

static void test_hostlist_buffer(void)
{
    char host[7]; /* exactly "gpu011" */
    CHECK_INT_EQ(amldist__hostlist_nth("gpu[009-011]", 2, host, sizeof host), 0);
    CHECK_STR_EQ(host, "gpu011");
    char small[6];
    CHECK_INT_EQ(amldist__hostlist_nth("gpu[0009]", 0, small, sizeof small),
                 AMLDIST_ERANGE);
    CHECK_STR_EQ(small, "");
    CHECK_INT_EQ(amldist__hostlist_nth("a", 0, NULL, 4), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist__hostlist_nth("a", 0, host, 0), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist__hostlist_nth(NULL, 0, host, sizeof host), AMLDIST_EINVAL);
}

static int stop_at_two(const char *host, long index, void *arg)
{
    (void)host;
    *(long *)arg = index;
    return index == 2 ? 42 : 0;
}

static int never_called(const char *host, long index, void *arg)
{
    (void)host;
    (void)index;
    (*(int *)arg)++;
    return 0;
}

static void test_hostlist_foreach_stops(void)
{
    long last = -1;
    CHECK_INT_EQ(amldist__hostlist_foreach("n[1-5]", stop_at_two, &last), 42);
    CHECK_INT_EQ(last, 2);
    /* The whole list is checked before the first call. */
    int calls = 0;
    CHECK_INT_EQ(amldist__hostlist_foreach("a,b,c[", never_called, &calls),
                 AMLDIST_EPARSE);
    CHECK_INT_EQ(calls, 0);
    CHECK_INT_EQ(amldist__hostlist_foreach(NULL, never_called, &calls), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist__hostlist_foreach("a", NULL, NULL), AMLDIST_EINVAL);
}

/* Tasks per node: nodes and each node's tasks against an expansion. */
static void check_tasks(const char *s, const long *want, long nwant)
{
    long n = amldist__tasks_nodes(s);
    if (n != nwant)
        TEST__FAIL("tasks_nodes(\"%s\") = %ld, want %ld", s, n, nwant);
    for (long i = 0; i < nwant; i++) {
        long t = -1;
        int rc = amldist__tasks_per_node(s, i, &t);
        if (rc != 0 || t != want[i])
            TEST__FAIL("tasks_per_node(\"%s\", %ld) = %d, %ld; want %ld", s, i,
                       rc, t, want[i]);
    }
    long t = -7;
    if (amldist__tasks_per_node(s, nwant, &t) != AMLDIST_ERANGE ||
        amldist__tasks_per_node(s, -1, &t) != AMLDIST_ERANGE || t != -7)
        TEST__FAIL("tasks_per_node(\"%s\") outside [0, %ld) was not ERANGE", s, nwant);
}

static void test_tasks_valid(void)
{
    check_tasks("2(x3),1", (const long[]){2, 2, 2, 1}, 4);
    check_tasks("4", (const long[]){4}, 1);
    check_tasks("1(x2)", (const long[]){1, 1}, 2);
    check_tasks("8,8", (const long[]){8, 8}, 2);
    check_tasks("1,2(x2),3", (const long[]){1, 2, 2, 3}, 4);
    check_tasks("3(x1)", (const long[]){3}, 1);
    check_tasks("08(x02)", (const long[]){8, 8}, 2);
    CHECK_INT_EQ(amldist__tasks_nodes("1(x1000000)"), 1000000);
    long t = 0;
    CHECK_INT_EQ(amldist__tasks_per_node("2(x500000),7(x500000)", 999999, &t), 0);
    CHECK_INT_EQ(t, 7);
    CHECK_INT_EQ(amldist__tasks_per_node("2147483647", 0, &t), 0);
    CHECK_INT_EQ(t, 2147483647);
}

static void test_tasks_invalid(void)
{
    static const struct {
        const char *in;
        long rc;
    } cases[] = {
        {"", AMLDIST_EPARSE},          {",", AMLDIST_EPARSE},
        {"2,", AMLDIST_EPARSE},        {",2", AMLDIST_EPARSE},
        {"2,,1", AMLDIST_EPARSE},      {"2(x3", AMLDIST_EPARSE},
        {"2(3)", AMLDIST_EPARSE},      {"2(x)", AMLDIST_EPARSE},
        {"2x3", AMLDIST_EPARSE},       {"2(X3)", AMLDIST_EPARSE},
        {"(x3)", AMLDIST_EPARSE},      {"2 (x3)", AMLDIST_EPARSE},
        {"2(x3) ", AMLDIST_EPARSE},    {"-2", AMLDIST_EPARSE},
        {"+2", AMLDIST_EPARSE},        {"2(x-3)", AMLDIST_EPARSE},
        {"2(x3)(x2)", AMLDIST_EPARSE}, {"2(x3)1", AMLDIST_EPARSE},
        {"12abc", AMLDIST_EPARSE},     {" 1", AMLDIST_EPARSE},
        {"0", AMLDIST_ERANGE},         {"2(x0)", AMLDIST_ERANGE},
        {"2147483648", AMLDIST_ERANGE}, {"1(x1000001)", AMLDIST_ERANGE},
        {"1(x999999),1(x2)", AMLDIST_ERANGE},
        {"99999999999999999999", AMLDIST_ERANGE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long n = amldist__tasks_nodes(cases[i].in);
        if (n != cases[i].rc)
            TEST__FAIL("tasks_nodes(\"%s\") = %ld, want %ld", cases[i].in, n,
                       cases[i].rc);
        long t = -7;
        int rc = amldist__tasks_per_node(cases[i].in, 0, &t);
        if (rc != cases[i].rc || t != -7)
            TEST__FAIL("tasks_per_node(\"%s\", 0) = %d, want %ld", cases[i].in, rc,
                       cases[i].rc);
    }
    long t;
    CHECK_INT_EQ(amldist__tasks_nodes(NULL), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist__tasks_per_node(NULL, 0, &t), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist__tasks_per_node("1", 0, NULL), AMLDIST_EINVAL);
}

int main(void)
{
    RUN(test_hostlist_issue_examples);
    RUN(test_hostlist_plain);
    RUN(test_hostlist_padding);
    RUN(test_hostlist_groups);
    RUN(test_hostlist_numeric);
    RUN(test_hostlist_invalid);
    RUN(test_hostlist_limits);
    RUN(test_hostlist_buffer);
    RUN(test_hostlist_foreach_stops);
    RUN(test_tasks_valid);
    RUN(test_tasks_invalid);
    return test_summary();
}
