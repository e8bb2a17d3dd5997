/* Hostfiles and --hosts lists for head-node mode (launcher/hostfile.c). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cli/hostfile.h"
#include "test.h"

static char path[64];

/* Write `text` to a fresh temporary file; its name is in `path`. */
static void write_file(const char *text, size_t len)
{
    snprintf(path, sizeof path, "/tmp/amldist-hostfile.XXXXXX");
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, text, len) == (ssize_t)len);
    close(fd);
}

/* Read `text` as a hostfile; 0 or -1, message in err. */
static int read_text(const char *text, struct hostlist *l, char *err,
                     size_t errsz)
{
    write_file(text, strlen(text));
    int rc = hostfile_read(path, l, err, errsz);
    unlink(path);
    return rc;
}

static void test_openmpi_format(void)
{
    struct hostlist l;
    char err[512] = "";
    const char *text = "# cluster\n"
                       "\n"
                       "node-0 slots=8   # head\n"
                       "   node-1.example.com\tslots=8 max_slots=16\n"
                       "10.0.0.3 slots=8\r\n"
                       "  # indented comment\n"
                       "node_4 max-slots=8 slots=8";
    CHECK_INT_EQ(read_text(text, &l, err, sizeof err), 0);
    CHECK_STR_EQ(err, "");
    CHECK_INT_EQ(l.n, 4);
    CHECK_STR_EQ(l.h[0].name, "node-0");
    CHECK_INT_EQ(l.h[0].line, 3);
    CHECK_STR_EQ(l.h[1].name, "node-1.example.com");
    CHECK_INT_EQ(l.h[1].line, 4);
    CHECK_STR_EQ(l.h[2].name, "10.0.0.3");
    CHECK_STR_EQ(l.h[3].name, "node_4");
    CHECK_INT_EQ(l.h[3].line, 7);
    for (int i = 0; i < l.n; i++)
        CHECK_INT_EQ(l.h[i].slots, 8);
    CHECK_INT_EQ(hostlist_common_slots(&l, "f", err, sizeof err), 8);
    hostlist_free(&l);
}

static void test_no_slots(void)
{
    struct hostlist l;
    char err[512];
    CHECK_INT_EQ(read_text("a\nb\n", &l, err, sizeof err), 0);
    CHECK_INT_EQ(l.n, 2);
    CHECK_INT_EQ(l.h[0].slots, -1);
    CHECK_INT_EQ(hostlist_common_slots(&l, "f", err, sizeof err), 0);
    hostlist_free(&l);
}

/* Every malformed line is refused with FILE:LINE and what was wrong. */
static void test_malformed_lines(void)
{
    static const struct {
        const char *text;
        int line;
        const char *says;
    } cases[] = {
        {"a slots=2\nb slots=x\n", 2, "slots='x': want a whole number"},
        {"a slots=0\n", 1, "slots='0'"},
        {"a slots=-1\n", 1, "slots='-1'"},
        {"a slots=2x\n", 1, "slots='2x'"},
        {"a slots=\n", 1, "slots=''"},
        {"a slots=99999999999999999999\n", 1, "want a whole number"},
        {"a slots=65537\n", 1, "from 1 to 65536"},
        {"a slot=2\n", 1, "unknown key 'slot'"},
        {"a 2\n", 1, "'2': want key=value"},
        {"a b\n", 1, "'b': want key=value"},
        {"\n\n# x\na slots=4 max_slots=2\n", 4, "max_slots=2 is less than slots=4"},
        {"a\nb\na slots=1\n", 3, "host 'a' is listed twice (first at line 1)"},
        {"a slots=2 slots=3\n", 1, "key 'slots' is given twice (slots=2 before)"},
        {"a\nb slots=2 slots=2\n", 2, "key 'slots' is given twice"},
        {"a max_slots=4 max-slots=8\n", 1,
         "key 'max-slots' is given twice (max_slots=4 before)"},
        {"user@a slots=1\n", 1, "host name 'user@a' has a '@'"},
        {"-a\n", 1, "has a '-'"},
        {"a:2\n", 1, "has a ':'"},
        {"a,b\n", 1, "has a ','"},
        {"h\xc3\xa9 slots=1\n", 1, "byte 0xc3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct hostlist l;
        char err[512] = "", want[600];
        CHECK_INT_EQ(read_text(cases[i].text, &l, err, sizeof err), -1);
        snprintf(want, sizeof want, "%s:%d: ", path, cases[i].line);
        CHECK(strncmp(err, want, strlen(want)) == 0);
        CHECK_STR_HAS(err, cases[i].says);
        CHECK_INT_EQ(l.n, 0);
        CHECK(l.h == NULL);
    }
}

static void test_empty_and_missing(void)
{
    struct hostlist l;
    char err[512];
    CHECK_INT_EQ(read_text("# nothing\n\n   \n", &l, err, sizeof err), -1);
    CHECK_STR_HAS(err, "no hosts in the file");
    CHECK_INT_EQ(read_text("", &l, err, sizeof err), -1);
    CHECK_STR_HAS(err, "no hosts");
    CHECK_INT_EQ(hostfile_read("/nonexistent/hosts", &l, err, sizeof err), -1);
    CHECK_STR_EQ(err, "cannot read hostfile /nonexistent/hosts: No such file "
                      "or directory");
    write_file("a\0b\n", 4);
    CHECK_INT_EQ(hostfile_read(path, &l, err, sizeof err), -1);
    unlink(path);
    CHECK_STR_HAS(err, ":1: NUL byte");
}

/* A long line and many hosts: getline, not a fixed buffer. */
static void test_long_file(void)
{
    size_t cap = 200000;
    char *text = malloc(cap);
    CHECK(text != NULL);
    size_t n = 0;
    n += (size_t)snprintf(text + n, cap - n, "#");
    memset(text + n, 'x', 100000);
    n += 100000;
    text[n++] = '\n';
    for (int i = 0; i < 500; i++)
        n += (size_t)snprintf(text + n, cap - n, "host%03d slots=4\n", i);
    text[n] = '\0';
    struct hostlist l;
    char err[512];
    CHECK_INT_EQ(read_text(text, &l, err, sizeof err), 0);
    CHECK_INT_EQ(l.n, 500);
    CHECK_STR_EQ(l.h[499].name, "host499");
    CHECK_INT_EQ(l.h[499].line, 501);
    hostlist_free(&l);
    free(text);
}

/* What is not a hostfile fails at once, without reading it all: a device
 * of NULs, an endless line, an endless stream of lines. */
static void test_bounds(void)
{
    struct hostlist l;
    char err[512] = "";
    CHECK_INT_EQ(hostfile_read("/dev/zero", &l, err, sizeof err), -1);
    CHECK_STR_EQ(err, "/dev/zero:1: NUL byte: not a text file");
    CHECK_INT_EQ(l.n, 0);

    size_t n = HOSTFILE_MAX_LINE + 1;
    char *text = malloc(n + 1);
    CHECK(text != NULL);
    memset(text, 'a', n);
    text[n] = '\0';
    CHECK_INT_EQ(read_text(text, &l, err, sizeof err), -1);
    CHECK_STR_HAS(err, ":1: line longer than 1048576 bytes: not a hostfile");
    text[n - 1] = '\n';
    CHECK_INT_EQ(read_text(text, &l, err, sizeof err), -1);
    CHECK_STR_HAS(err, ":1: host name is 1048576 characters long");
    free(text);

    /* A pipe that never ends: blank lines and comments, forever. */
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        static const char chunk[] = "\n# a comment that goes on\n\n";
        while (write(p[1], chunk, sizeof chunk - 1) > 0) {
        }
        _exit(0);
    }
    close(p[1]);
    char dev[32];
    snprintf(dev, sizeof dev, "/dev/fd/%d", p[0]);
    CHECK_INT_EQ(hostfile_read(dev, &l, err, sizeof err), -1);
    char want[96];
    snprintf(want, sizeof want, "%s: larger than 4 MiB: not a hostfile", dev);
    CHECK_STR_EQ(err, want);
    close(p[0]);
    waitpid(pid, NULL, 0);
}

static double cpu_seconds_to_read(int hosts)
{
    char *text = malloc((size_t)hosts * 32 + 1), *p = text;
    CHECK(text != NULL);
    for (int i = 0; i < hosts; i++)
        p += sprintf(p, "node%d.example.com slots=8\n", i);
    write_file(text, (size_t)(p - text));
    free(text);
    struct hostlist l;
    char err[512];
    clock_t t0 = clock();
    CHECK_INT_EQ(hostfile_read(path, &l, err, sizeof err), 0);
    double t = (double)(clock() - t0) / CLOCKS_PER_SEC;
    unlink(path);
    CHECK_INT_EQ(l.n, hosts);
    hostlist_free(&l);
    return t;
}

/* Repeats are found by hashing: four times the hosts take about four times
 * as long, not sixteen (the check compared every pair: 100k hosts, 17 s). */
static void test_many_hosts(void)
{
    /* Linear, not quadratic: four times the hosts, well under eight times
     * the CPU.  A quarter of the sizes under valgrind (4 s there). */
    const int n = test_under_valgrind() ? 5000 : 20000;
    double t1 = cpu_seconds_to_read(n);
    double t4 = cpu_seconds_to_read(4 * n);
    if (!(t4 < 8 * t1 + 0.2))
        TEST__FAIL("%d hosts: %.3f s, %d hosts: %.3f s", n, t1, 4 * n, t4);
}

static void test_hosts_option(void)
{
    struct hostlist l;
    char err[512];
    CHECK_INT_EQ(hosts_parse("n0,n1", &l, err, sizeof err), 0);
    CHECK_INT_EQ(l.n, 2);
    CHECK_STR_EQ(l.h[1].name, "n1");
    CHECK_INT_EQ(l.h[1].slots, -1);
    CHECK_INT_EQ(hostlist_common_slots(&l, "--hosts", err, sizeof err), 0);
    hostlist_free(&l);

    CHECK_INT_EQ(hosts_parse("a:2,b:2,10.1.2.3:2", &l, err, sizeof err), 0);
    CHECK_INT_EQ(l.n, 3);
    CHECK_STR_EQ(l.h[2].name, "10.1.2.3");
    CHECK_INT_EQ(hostlist_common_slots(&l, "--hosts", err, sizeof err), 2);
    hostlist_free(&l);

    CHECK_INT_EQ(hosts_parse("a:2,b:4", &l, err, sizeof err), 0);
    CHECK_INT_EQ(hostlist_common_slots(&l, "--hosts", err, sizeof err), -1);
    CHECK_STR_HAS(err, "--hosts item 2: host 'b' has slots=4 but --hosts item "
                       "1 (host 'a') has slots=2");
    CHECK_STR_HAS(err, "give --nproc-per-node");
    hostlist_free(&l);
}

static void test_hosts_option_bad(void)
{
    static const struct {
        const char *spec, *says;
    } cases[] = {
        {"", "item 1 has no host name"},
        {"a,", "item 2 has no host name"},
        {",a", "item 1 has no host name"},
        {"a,,b", "item 2 has no host name"},
        {":2", "item 1 has no host name"},
        {"a:", "item 1: 'a:': the slots after ':' want a whole number"},
        {"a:0", "'a:0'"},
        {"a:x,b", "'a:x'"},
        {"a:2:3", "'a:2:3'"},
        {"a:123456789012345678901234567890", "want a whole number"},
        {"a,b,a", "item 3: host 'a' is listed twice (first at item 1)"},
        {"a b", "host name 'a b' has byte 0x20"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct hostlist l;
        char err[512] = "";
        CHECK_INT_EQ(hosts_parse(cases[i].spec, &l, err, sizeof err), -1);
        CHECK_STR_HAS(err, "--hosts");
        CHECK_STR_HAS(err, cases[i].says);
        CHECK_INT_EQ(l.n, 0);
    }
}

static void test_mixed_slots_in_file(void)
{
    struct hostlist l;
    char err[512];
    CHECK_INT_EQ(read_text("a slots=8\n\nb\n", &l, err, sizeof err), 0);
    CHECK_INT_EQ(hostlist_common_slots(&l, "hf", err, sizeof err), -1);
    CHECK_STR_HAS(err, "hf:3: host 'b' has no slots but hf:1 (host 'a') has "
                       "slots=8");
    hostlist_free(&l);
}

int main(void)
{
    /* The file-size bound, lowered so that reaching it is quick (valgrind);
     * the cases run in children, which inherit it. */
    hostfile_max_bytes = 4L << 20;
    RUN(test_openmpi_format);
    RUN(test_no_slots);
    RUN(test_malformed_lines);
    RUN(test_empty_and_missing);
    RUN(test_long_file);
    RUN(test_bounds);
    RUN(test_many_hosts);
    RUN(test_hosts_option);
    RUN(test_hosts_option_bad);
    RUN(test_mixed_slots_in_file);
    return test_summary();
}
