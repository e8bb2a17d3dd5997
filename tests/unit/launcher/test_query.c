/* The parts of amlrun --status that need no running job: the records'
 * escaping (qtext.h), the socket directory's rules and the sockets' names
 * (sockdir.h), and a status answer printed (statusprint.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "query/client.h"
#include "query/qtext.h"
#include "query/sockdir.h"
#include "test.h"

/* Write one record with the given value, parse it back. */
static char *roundtrip(const char *val, char *line, size_t size,
                       struct qrec *r)
{
    FILE *f = fmemopen(line, size, "w");
    fputs("rank", f);
    qt_str(f, "v", val);
    qt_int(f, "n", -3);
    qt_num(f, "x", 1.25, 2);
    qt_num(f, "u", -1, 2);
    fclose(f);
    CHECK(strchr(line, '\n') == NULL);
    CHECK_INT_EQ(qrec_parse(line, r), 0);
    return line;
}

static void test_escaping(void)
{
    static const char *vals[] = {
        "plain", "two words", "a=b", "100%", "tab\there", "new\nline",
        "-", "", "\x7f\x01", "é ü", "--", "%41",
    };
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        char line[512];
        struct qrec r;
        roundtrip(vals[i], line, sizeof line, &r);
        CHECK_STR_EQ(r.type, "rank");
        CHECK_STR_EQ(qrec_get(&r, "v"), vals[i]);
        CHECK_INT_EQ(qrec_num(&r, "n", 0), -3);
        CHECK(qrec_num(&r, "x", 0) == 1.25);
        CHECK(qrec_get(&r, "u") == NULL);
        CHECK(qrec_num(&r, "u", 7) == 7);
        CHECK(qrec_get(&r, "absent") == NULL);
    }
    char line[64];
    struct qrec r;
    roundtrip(NULL, line, sizeof line, &r);
    CHECK(qrec_get(&r, "v") == NULL); /* unknown stays unknown */
}

static void test_parse_refuses(void)
{
    struct qrec r;
    char a[] = "", b[] = "rank novalue", c[] = "rank =x", d[] = "job k=v";
    CHECK_INT_EQ(qrec_parse(a, &r), -1);
    CHECK_INT_EQ(qrec_parse(b, &r), -1);
    CHECK_INT_EQ(qrec_parse(c, &r), -1);
    CHECK_INT_EQ(qrec_parse(d, &r), 0);
    CHECK_STR_EQ(qrec_get(&r, "k"), "v");
    char e[] = "x v=notanumber";
    CHECK_INT_EQ(qrec_parse(e, &r), 0);
    CHECK(qrec_num(&r, "v", 5) == 5);
    /* More fields than a record holds: the first ones kept. */
    char many[2048];
    size_t n = (size_t)snprintf(many, sizeof many, "r");
    for (int i = 0; i < QT_MAX_FIELDS + 10; i++)
        n += (size_t)snprintf(many + n, sizeof many - n, " k%d=%d", i, i);
    CHECK_INT_EQ(qrec_parse(many, &r), 0);
    CHECK_INT_EQ(r.n, QT_MAX_FIELDS);
    CHECK_STR_EQ(qrec_get(&r, "k0"), "0");
}

static void test_sock_names(void)
{
    char p[QDIR_PATH_MAX + 1];
    CHECK_INT_EQ(qsock_path("/tmp/amlrun-0", "job 1/x", 42, p, sizeof p), 0);
    CHECK_STR_EQ(p, "/tmp/amlrun-0/job%201%2Fx.42.sock");
    CHECK_INT_EQ(qsock_pid("job%201%2Fx.42.sock"), 42);
    CHECK_INT_EQ(qsock_path("/d", "", 7, p, sizeof p), 0);
    CHECK_STR_EQ(p, "/d/-.7.sock");
    CHECK_INT_EQ(qsock_pid("-.7.sock"), 7);
    /* A run id with dots and digits: the pid is the last number. */
    CHECK_INT_EQ(qsock_path("/d", "1.2.3", 99, p, sizeof p), 0);
    CHECK_INT_EQ(qsock_pid(strrchr(p, '/') + 1), 99);
    /* A long run id is cut to fit sun_path, the pid kept. */
    char id[400];
    memset(id, 'a', sizeof id - 1);
    id[sizeof id - 1] = '\0';
    CHECK_INT_EQ(qsock_path("/tmp/amlrun-1000", id, 4194303, p, sizeof p), 0);
    CHECK_INT_EQ(strlen(p), QDIR_PATH_MAX);
    CHECK_INT_EQ(qsock_pid(strrchr(p, '/') + 1), 4194303);
    /* Not ours. */
    CHECK_INT_EQ(qsock_pid("x.sock"), 0);
    CHECK_INT_EQ(qsock_pid(".42.sock"), 0);
    CHECK_INT_EQ(qsock_pid("x.42.socket"), 0);
    CHECK_INT_EQ(qsock_pid("x.0.sock"), 0);
    CHECK_INT_EQ(qsock_pid("x.1234567890.sock"), 0);
    CHECK_INT_EQ(qsock_pid("x42.sock"), 0);
    /* A directory too long for any socket. */
    char dir[200];
    memset(dir, 'd', sizeof dir - 1);
    dir[0] = '/';
    dir[sizeof dir - 1] = '\0';
    CHECK_INT_EQ(qsock_path(dir, "x", 1, p, sizeof p), -1);
    CHECK_INT_EQ(qdir_path(0, dir, p, sizeof p), 0); /* not a directory:
                                                         /tmp's */
    CHECK_STR_EQ(p, "/tmp/amlrun-0");
}

static void test_dir_rules(void)
{
    char base[] = "/tmp/test_query.XXXXXX", d[256], why[512], p[128];
    CHECK(mkdtemp(base) != NULL);
    /* XDG_RUNTIME_DIR of this user: its amlrun/ */
    CHECK_INT_EQ(qdir_path(geteuid(), base, p, sizeof p), 0);
    snprintf(d, sizeof d, "%s/amlrun", base);
    CHECK_STR_EQ(p, d);
    /* Relative, or another user's: not used. */
    CHECK_INT_EQ(qdir_path(geteuid(), "relative", p, sizeof p), 0);
    CHECK_STR_HAS(p, "/tmp/amlrun-");
    CHECK_INT_EQ(qdir_path(geteuid() + 1, base, p, sizeof p), 0);
    CHECK_STR_HAS(p, "/tmp/amlrun-");
    /* Made 0700; found again. */
    CHECK_INT_EQ(qdir_check(d, 0, geteuid(), why, sizeof why), -1);
    CHECK_INT_EQ(errno, ENOENT);
    CHECK_INT_EQ(qdir_check(d, 1, geteuid(), why, sizeof why), 0);
    struct stat st;
    CHECK_INT_EQ(stat(d, &st), 0);
    CHECK_INT_EQ(st.st_mode & 07777, 0700);
    CHECK_INT_EQ(qdir_check(d, 1, geteuid(), why, sizeof why), 0);
    /* Open to others: refused, with its mode. */
    chmod(d, 0755);
    CHECK_INT_EQ(qdir_check(d, 1, geteuid(), why, sizeof why), -1);
    CHECK_STR_HAS(why, "has mode 0755");
    chmod(d, 0700);
    /* Another user's (root can give it away). */
    if (geteuid() == 0) {
        CHECK_INT_EQ(chown(d, 65534, 65534), 0);
        CHECK_INT_EQ(qdir_check(d, 1, geteuid(), why, sizeof why), -1);
        CHECK_STR_HAS(why, "belongs to uid 65534, not to uid 0");
        CHECK_INT_EQ(qdir_check(d, 0, 65534, why, sizeof why), 0);
        CHECK_INT_EQ(chown(d, 0, 0), 0);
    }
    /* A symbolic link to a good directory: refused. */
    char link[300];
    snprintf(link, sizeof link, "%s/link", base);
    CHECK_INT_EQ(symlink(d, link), 0);
    CHECK_INT_EQ(qdir_check(link, 1, geteuid(), why, sizeof why), -1);
    CHECK_STR_HAS(why, "is a symbolic link");
    /* A file where the directory should be. */
    char file[300];
    snprintf(file, sizeof file, "%s/file", base);
    close(open(file, O_CREAT | O_WRONLY, 0600));
    CHECK_INT_EQ(qdir_check(file, 1, geteuid(), why, sizeof why), -1);
    unlink(file);
    unlink(link);
    rmdir(d);
    rmdir(base);
}

/* A status answer of two nodes (node 1's part first), printed: nodes and
 * ranks in order, unknowns as "-", control characters escaped. */
static void test_status_print(void)
{
    char answer[] =
        "job run_id=r%0A1 pid=10 started=1.000 nodes=2 world=3 cmd=a%20b\n"
        "part 1 130\n"
        "node node=1 host=h1 addr=- state=running pid=11 uptime=5.0 "
        "restarts=1 max_restarts=2 nproc=1 cpu_interval=0.25\n"
        "rank rank=2 local=0 node=1 pid=21 state=running cpu=99.5 rss=2097152\n"
        "part 0 90\n"
        "node node=0 host=h%1B0 addr=10.0.0.1 state=waiting pid=10 uptime=6.0 "
        "restarts=1\n"
        "rank rank=1 local=1 node=0 pid=- state=not-started step=7 "
        "step_age=0.5 lag=-0.25\n"
        "rank rank=0 local=0 node=0 pid=20 state=ended status=exited%20with "
        "lag=0.125 last=1\n";
    char out[8192] = "";
    fflush(stdout);
    FILE *f = tmpfile();
    int saved = dup(1);
    dup2(fileno(f), 1);
    int rc = status_print(answer, strlen(answer), 0);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    rewind(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    fclose(f);
    CHECK_INT_EQ(rc, 0);
    CHECK_STR_HAS(out, "job r\\x0a1: amlrun pid 10, 3 ranks on 2 nodes, up "
                       "6.0 s, restarts 1");
    CHECK_STR_HAS(out, "command: a b\n");
    CHECK(strstr(out, "nodes answered") == NULL); /* both did */
    CHECK_STR_HAS(out, "h\\x1b0");
    CHECK(strstr(out, "\x1b") == NULL);
    const char *n0 = strstr(out, "\n0     h"), *n1 = strstr(out, "\n1     h1");
    CHECK(n0 && n1 && n0 < n1);
    const char *r0 = strstr(out, "\n0     0     0    20"),
               *r1 = strstr(out, "\n1     1     0    -"),
               *r2 = strstr(out, "\n2     0     1    21");
    CHECK(r0 && r1 && r2 && r0 < r1 && r1 < r2);
    CHECK_STR_HAS(out, "+0.125s*");
    CHECK_STR_HAS(out, "-0.250s");
    CHECK_STR_HAS(out, "99.5");
    CHECK_STR_HAS(out, "2.0M");
    /* Malformed: no job record, or a broken line. */
    char bad1[] = "node node=0\n";
    CHECK_INT_EQ(status_print(bad1, strlen(bad1), 0), -1);
    char bad2[] = "job pid=1\nrank =x\n";
    CHECK_INT_EQ(status_print(bad2, strlen(bad2), 0), -1);
}

int main(void)
{
    RUN(test_escaping);
    RUN(test_parse_refuses);
    RUN(test_sock_names);
    RUN(test_dir_rules);
    RUN(test_status_print);
    return test_summary();
}
