/* amlrun's event log writer (launcher/output/eventlog.c) and torchrun's
 * line prefix template (launcher/output/lineprefix.c): JSON escaping, an
 * event too long, a pipe that fills (whole lines only, the rest queued,
 * then dropped past the limit), a file size limit reached mid-line (the
 * torn line cut off), and Python's string.Template rules. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

#include "output/eventlog.h"
#include "output/lineprefix.h"

static char tmpdir[] = "/tmp/amldist-evlog-XXXXXX";

static char *slurp(const char *path, size_t *len)
{
    static char buf[1 << 20];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
    *len = n > 0 ? (size_t)n : 0;
    return buf;
}

static void test_escaping(void)
{
    char path[64];
    snprintf(path, sizeof path, "%s/esc", tmpdir);
    struct eventlog *e = eventlog_open(path);
    CHECK(e != NULL);
    if (!e)
        return;
    struct event v;
    ev_begin(&v, "x");
    ev_str(&v, "s", "a\"b\\c\n\t\x01\x7f\xc3\xa9");
    ev_str(&v, "n", NULL);
    ev_id(&v, "rank", -1);
    ev_id(&v, "local", 3);
    ev_int(&v, "big", -1234567890123LL);
    ev_num(&v, "ts", 12.5, 3);
    eventlog_write(e, &v);
    eventlog_close(e);
    size_t len;
    CHECK_STR_EQ(slurp(path, &len),
                 "{\"event\": \"x\", \"s\": \"a\\\"b\\\\c\\u000a\\u0009\\u0001"
                 "\\u007f\\u00c3\\u00a9\", \"n\": null, \"rank\": null, "
                 "\"local\": 3, \"big\": -1234567890123, \"ts\": 12.500}\n");
}

static void test_too_long(void)
{
    char path[64];
    snprintf(path, sizeof path, "%s/long", tmpdir);
    struct eventlog *e = eventlog_open(path);
    CHECK(e != NULL);
    if (!e)
        return;
    static char big[EVENT_MAX];
    memset(big, 'a', sizeof big - 1);
    struct event v;
    ev_begin(&v, "x");
    ev_str(&v, "big", big);
    eventlog_write(e, &v);
    ev_begin(&v, "after");
    eventlog_write(e, &v);
    eventlog_close(e);
    size_t len;
    CHECK_STR_EQ(slurp(path, &len), "{\"event\": \"after\"}\n");
}

static int whole_lines(const char *s, size_t len, const char *name)
{
    int n = 0;
    for (const char *p = s; p < s + len; n++) {
        const char *nl = memchr(p, '\n', (size_t)(s + len - p));
        if (!nl || strncmp(p, "{\"event\": \"", 11) || nl[-1] != '}') {
            TEST__FAIL("%s: line %d is not whole: %.40s", name, n + 1, p);
            return -1;
        }
        p = nl + 1;
    }
    return n;
}

static void test_pipe_fills(void)
{
    int p[2];
    CHECK_INT_EQ(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    fcntl(p[0], F_SETPIPE_SZ, 4096);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", p[1]);
    struct eventlog *e = eventlog_open(path);
    CHECK(e != NULL);
    if (!e)
        return;
    struct event v;
    char pad[200];
    memset(pad, 'p', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    for (int i = 0; i < 60; i++) { /* ~14 KiB into a 4 KiB pipe */
        ev_begin(&v, "fill");
        ev_int(&v, "i", i);
        ev_str(&v, "pad", pad);
        eventlog_write(e, &v);
    }
    CHECK(eventlog_pending(e));
    static char buf[1 << 16];
    size_t got = 0;
    ssize_t n;
    while ((n = read(p[0], buf + got, sizeof buf - got)) > 0)
        got += (size_t)n;
    int first = whole_lines(buf, got, "before the flush");
    CHECK(first > 0 && first < 60);
    /* The reader caught up: the queue goes out, in order, whole. */
    while (eventlog_pending(e)) {
        eventlog_flush(e);
        while ((n = read(p[0], buf + got, sizeof buf - got)) > 0)
            got += (size_t)n;
    }
    CHECK_INT_EQ(whole_lines(buf, got, "after the flush"), 60);
    char last[32];
    snprintf(last, sizeof last, "\"i\": 59,");
    CHECK_STR_HAS(buf, last);
    /* Past EVENTLOG_QUEUE_MAX nothing more is held: never read again. */
    for (int i = 0; i < (int)(EVENTLOG_QUEUE_MAX / 200) + 100; i++) {
        ev_begin(&v, "flood");
        ev_str(&v, "pad", pad);
        eventlog_write(e, &v);
    }
    CHECK(eventlog_pending(e));
    eventlog_close(e);
    close(p[0]);
    close(p[1]);
}

static void test_size_limit(void)
{
    char path[64];
    snprintf(path, sizeof path, "%s/limit", tmpdir);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit r = {1000, 1000};
    CHECK_INT_EQ(setrlimit(RLIMIT_FSIZE, &r), 0);
    struct eventlog *e = eventlog_open(path);
    CHECK(e != NULL);
    if (!e)
        return;
    struct event v;
    for (int i = 0; i < 40; i++) { /* 40 x 45 bytes: torn at 1000 */
        ev_begin(&v, "limit");
        ev_int(&v, "i", i);
        ev_str(&v, "x", "0123456789");
        eventlog_write(e, &v);
    }
    eventlog_close(e);
    size_t len;
    const char *s = slurp(path, &len);
    int n = whole_lines(s, len, "limited file");
    CHECK(n > 10 && n < 40);
    CHECK(len <= 1000);
}

static void test_open_errors(void)
{
    char path[80];
    snprintf(path, sizeof path, "%s/fifo", tmpdir);
    CHECK_INT_EQ(mkfifo(path, 0600), 0);
    CHECK(eventlog_open(path) == NULL); /* no reader */
    CHECK(eventlog_open(tmpdir) == NULL);
    snprintf(path, sizeof path, "%s/none/x", tmpdir);
    CHECK(eventlog_open(path) == NULL);
}

static void prefix_is(const char *tmpl, const char *want)
{
    char *got = torch_line_prefix(tmpl, "trainer", 12, 3);
    CHECK_STR_EQ(got, want);
    free(got);
}

/* The wants are Python 3's string.Template(t).safe_substitute(
 * role_name="trainer", rank=12, local_rank=3). */
static void test_line_prefix(void)
{
    prefix_is("[${role_name}${local_rank}]:", "[trainer3]:");
    prefix_is("$rank|$local_rank|$role_name ", "12|3|trainer ");
    prefix_is("$$rank ${rank}x $rankx ${ROLE_NAME} $RANK $",
              "$rank 12x $rankx ${ROLE_NAME} $RANK $");
    prefix_is("${rank ${} $1 $- ${9}", "${rank ${} $1 $- ${9}");
    prefix_is("{${local_rank}}${rank}", "{3}12");
    prefix_is("$rank_1 ${rank}_1 $$$rank", "$rank_1 12_1 $12");
    prefix_is("", "");
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    RUN(test_escaping);
    RUN(test_too_long);
    RUN(test_pipe_fills);
    RUN(test_size_limit);
    RUN(test_open_errors);
    RUN(test_line_prefix);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        return 2;
    return test_summary();
}
