/* Unit tests of amlrun's small parts: option parsing, rank lists, wait
 * statuses and line assembly, linked with amlrun's own objects
 * (libamlrun-parts.a).  GPU counting is the library's
 * (tests/unit/test_topo_usable.c). */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#include "output/exitstatus.h"
#include "output/msg.h"
#include "cli/options.h"
#include "cli/optparse.h"
#include "cli/opttable.h"
#include "cli/optsuggest.h"
#include "output/output.h"

static void test_rankset(void)
{
    struct rankset s = {0, NULL};
    CHECK_INT_EQ(rankset_has(&s, 5), 1); /* empty: everyone */
    CHECK_INT_EQ(rankset_parse("0,2,4-7", &s), 0);
    CHECK_INT_EQ(rankset_has(&s, 0), 1);
    CHECK_INT_EQ(rankset_has(&s, 1), 0);
    CHECK_INT_EQ(rankset_has(&s, 6), 1);
    CHECK_INT_EQ(rankset_has(&s, 8), 0);
    CHECK_INT_EQ(rankset_parse("1,", &s), -1);
    CHECK_INT_EQ(rankset_parse("3-1", &s), -1);
    CHECK_INT_EQ(rankset_parse("a", &s), -1);
    CHECK_INT_EQ(rankset_parse("", &s), -1);
    free(s.r);
}

static int parse(struct amlrun_opts *o, const char *line)
{
    static char buf[1024];
    static char *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *t = strtok(buf, " "); t && argc < 63; t = strtok(NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    int devnull = open("/dev/null", O_WRONLY), saved = dup(2);
    dup2(devnull, 2); /* usage messages are not the point here */
    int rc = options_parse(argc, argv, o);
    dup2(saved, 2);
    close(saved);
    close(devnull);
    return rc;
}

static void test_options(void)
{
    struct amlrun_opts o;
    CHECK_INT_EQ(parse(&o, "amlrun --nproc_per_node=4 --master_addr h "
                           "--node-rank 1 -m mod --nproc-per-node 9"), -1);
    CHECK_INT_EQ(o.nproc, 4);
    CHECK_STR_EQ(o.master_addr, "h");
    CHECK_INT_EQ(o.node_rank, 1);
    CHECK_INT_EQ(o.module, 1);
    CHECK_INT_EQ(o.ncmd, 3); /* the command's own options are its own */
    CHECK_STR_EQ(o.cmd[0], "mod");
    options_free(&o);
    CHECK_INT_EQ(parse(&o, "amlrun --rdzv-endpoint [::1]:29400 --nnodes 2:2 "
                           "-- --odd-name"), -1);
    CHECK_STR_EQ(o.master_addr, "::1");
    CHECK_INT_EQ(o.master_port, 29400);
    CHECK_INT_EQ(o.nnodes, 2);
    CHECK_STR_EQ(o.cmd[0], "--odd-name");
    options_free(&o);
    CHECK_INT_EQ(parse(&o, "amlrun --prefix --report-bindings=json -vq x"), -1);
    CHECK_STR_EQ(o.prefix_fmt, "[rank%r]:");
    CHECK_INT_EQ(o.prefix_streams, 3);
    CHECK_INT_EQ(o.bind.json, 1);
    CHECK_INT_EQ(o.verbose + o.quiet, 2);
    CHECK(o.term_timeout == 30.0);
    options_free(&o);
    CHECK_INT_EQ(parse(&o, "amlrun --nnodes 1:3 x"), AMLRUN_EXIT_USAGE);
    options_free(&o);
    CHECK_INT_EQ(parse(&o, "amlrun --standalone=1 x"), AMLRUN_EXIT_USAGE);
    options_free(&o);
    CHECK_INT_EQ(parse(&o, "amlrun --mode process --nproc-per-node 2 x"),
                 AMLRUN_EXIT_USAGE);
    options_free(&o);
    CHECK_INT_EQ(parse(&o, "launch.py --use_env x"), -1);
    CHECK_INT_EQ(o.legacy + o.use_env, 2);
    options_free(&o);
}

/* Head-node mode's question to the one option table. */
static void test_takes_value(void)
{
    CHECK_INT_EQ(opttable_takes_value("nproc-per-node"), 1);
    CHECK_INT_EQ(opttable_takes_value("nproc_per_node"), 1);
    CHECK_INT_EQ(opttable_takes_value("local_ranks-filter=0"), 1);
    CHECK_INT_EQ(opttable_takes_value("rdzv_id"), 1); /* an alias */
    CHECK_INT_EQ(opttable_takes_value("standalone"), 0);
    CHECK_INT_EQ(opttable_takes_value("prefix"), 0); /* only --prefix=FMT */
    CHECK_INT_EQ(opttable_takes_value("nproc"), 1);  /* argparse's prefix */
    CHECK_INT_EQ(opttable_takes_value("ma"), 0);     /* several options */
    CHECK_INT_EQ(opttable_takes_value("nproc-per-node-x"), 0);
    CHECK_INT_EQ(opttable_takes_value("no-such"), 0);
    CHECK_INT_EQ(opttable_takes_value(""), 0);
}

/* Prefixes as argparse takes them; "did you mean" for the rest. */
static void test_prefixes_and_suggestions(void)
{
    const struct option_def *c[8], *d;
    d = opttable_find("max_restart=1");
    CHECK(d != NULL && strcmp(d->name, "max-restarts") == 0);
    d = opttable_find("topo"); /* its own name, though topology begins so */
    CHECK(d != NULL && strcmp(d->name, "topo") == 0);
    d = opttable_find("rdzv-i"); /* --rdzv-id only: one option */
    CHECK(d != NULL && d->id == O_RUN_ID);
    CHECK(opttable_find("ma") == NULL);
    /* --master-addr, --master-port, --max-restarts, --make-secret */
    CHECK_INT_EQ((int)opttable_candidates("ma", c, 8), 4);
    CHECK_INT_EQ((int)opttable_candidates("run-i", c, 8), 1);
    CHECK_INT_EQ((int)opttable_candidates("zzz", c, 8), 0);
    CHECK(opttable_find("") == NULL);
    CHECK(opttable_find("=x") == NULL);
    const char *whose, *s;
    s = optsuggest("--tag-output", &whose);
    CHECK(s != NULL && strcmp(s, "prefix") == 0 && whose != NULL &&
          strcmp(whose, "mpirun's") == 0);
    s = optsuggest("--label=1", &whose);
    CHECK(s != NULL && strcmp(s, "prefix") == 0);
    s = optsuggest("--nproc_per_nodes", &whose);
    CHECK(s != NULL && strcmp(s, "nproc-per-node") == 0 && whose == NULL);
    CHECK(optsuggest("--frobnicate", &whose) == NULL);
    CHECK(optsuggest("--x", &whose) == NULL);
    char long_word[200];
    memset(long_word, 'a', sizeof long_word - 1);
    long_word[sizeof long_word - 1] = '\0';
    long_word[0] = long_word[1] = '-';
    CHECK(optsuggest(long_word, &whose) == NULL);
    /* Every option has one spelling the completion can offer: values only
     * for options that take one. */
    for (d = opttable; d->name; d++)
        if (opttable_values(d) != NULL)
            CHECK((d->arg & ARG_MASK) != ARG_NONE);
}

static void test_status(void)
{
    char buf[96];
    status_describe(3 << 8, buf, sizeof buf);
    CHECK_STR_EQ(buf, "exited with status 3");
    CHECK_INT_EQ(status_exit_code(3 << 8), 3);
    status_describe(SIGKILL, buf, sizeof buf);
    CHECK_STR_EQ(buf, "killed by signal 9 (SIGKILL)");
    CHECK_INT_EQ(status_exit_code(SIGKILL), 137);
    CHECK_INT_EQ(status_failed(0), 0);
    CHECK_INT_EQ(status_failed(SIGTERM), 1);
}

/* Feed `chunks` through a worker pipe and an out_stream whose console is
 * a file on fd 1; return what the console got. */
static char *assemble(const char *prefix, const char *const *chunks)
{
    static char got[4096];
    FILE *tmp = tmpfile();
    int saved = dup(1);
    dup2(fileno(tmp), 1);
    int p[2];
    if (pipe(p) < 0)
        return NULL;
    struct out_stream s;
    memset(&s, 0, sizeof s);
    s.fd = p[0];
    s.console = 1;
    s.log = -1;
    if (prefix) {
        s.prefix = strdup(prefix);
        s.prefix_len = strlen(prefix);
    }
    char buf[16]; /* small reads: lines straddle them */
    for (int i = 0; chunks[i]; i++) {
        if (write(p[1], chunks[i], strlen(chunks[i])) < 0)
            return NULL;
        /* drain what is in the pipe */
        struct pollfd pf = {p[0], POLLIN, 0};
        while (poll(&pf, 1, 0) > 0 && (pf.revents & POLLIN))
            out_stream_read(&s, buf, sizeof buf);
    }
    close(p[1]);
    while (s.fd >= 0)
        out_stream_read(&s, buf, sizeof buf);
    out_stream_close(&s);
    dup2(saved, 1);
    close(saved);
    fseek(tmp, 0, SEEK_SET);
    size_t n = fread(got, 1, sizeof got - 1, tmp);
    got[n] = '\0';
    fclose(tmp);
    return got;
}

static void test_line_assembly(void)
{
    const char *a[] = {"hel", "lo\nwor", "ld, a long line of more than sixteen bytes\n",
                       "x\ny\n", "no newline", NULL};
    CHECK_STR_EQ(assemble("[r1]:", a),
                 "[r1]:hello\n[r1]:world, a long line of more than sixteen bytes\n"
                 "[r1]:x\n[r1]:y\n[r1]:no newline\n");
    CHECK_STR_EQ(assemble(NULL, a),
                 "hello\nworld, a long line of more than sixteen bytes\nx\ny\n"
                 "no newline\n");
    const char *empty[] = {"\n\n", "", NULL};
    CHECK_STR_EQ(assemble("p ", empty), "p \np \n");
}

/* A live stream (a terminal's, output.h) over its own pipe, prefixed. */
struct live {
    struct out_stream s;
    int wr;
};

static void live_open(struct live *l, const char *prefix)
{
    int p[2];
    CHECK(pipe(p) == 0);
    memset(&l->s, 0, sizeof l->s);
    l->s.fd = p[0];
    l->wr = p[1];
    l->s.console = 1;
    l->s.log = -1;
    l->s.live = 1;
    l->s.prefix = strdup(prefix);
    l->s.prefix_len = strlen(prefix);
}

/* The worker writes `text`, amlrun reads it once. */
static void live_feed(struct live *l, const char *text)
{
    char buf[256];
    CHECK(write(l->wr, text, strlen(text)) == (ssize_t)strlen(text));
    out_stream_read(&l->s, buf, sizeof buf);
}

static void test_live_lines(void)
{
    FILE *tmp = tmpfile();
    int saved = dup(1);
    dup2(fileno(tmp), 1);
    struct live a, b;
    live_open(&a, "[A]");
    live_open(&b, "[B]");
    live_feed(&a, "a1");
    CHECK(out_stream_due(&a.s) != 0); /* held, shown when due */
    out_stream_show(&a.s);             /* "[A]a1", its line open */
    live_feed(&a, "a2");
    out_stream_show(&a.s);             /* "a2": no second prefix */
    live_feed(&b, "b\n");              /* ends A's line first */
    live_feed(&a, "a3\n");             /* the rest, prefixed again */
    live_feed(&a, "x");
    out_stream_show(&a.s);
    live_feed(&a, "\n");               /* its own line: ended, no more */
    live_feed(&a, "y");
    out_stream_show(&a.s);
    live_feed(&b, "z\n");
    live_feed(&a, "\n");               /* ended by B already: nothing */
    live_feed(&a, "\r10");
    out_stream_show(&a.s);             /* the prefix after the \r */
    live_feed(&a, "\r20\r");
    out_stream_show(&a.s);             /* the last \r waits */
    live_feed(&a, "30\r\n");          /* \r\n: no prefix before \n */
    live_feed(&a, "end");              /* not shown yet: the end adds \n */
    CHECK(out_stream_due(&a.s) != 0);
    close(a.wr);
    close(b.wr);
    out_stream_close(&a.s);
    out_stream_close(&b.s);
    dup2(saved, 1);
    close(saved);
    char got[512];
    fseek(tmp, 0, SEEK_SET);
    size_t n = fread(got, 1, sizeof got - 1, tmp);
    got[n] = '\0';
    fclose(tmp);
    CHECK_STR_EQ(got, "[A]a1a2\n[B]b\n[A]a3\n[A]x\n[A]y\n[B]z\n"
                      "\r[A]10\r[A]20\r[A]30\r\n[A]end\n");
}

static void test_prefix_format(void)
{
    char *p = out_prefix("[%r|%l|%n|%h|%s|%%|%q]", 5, 1, 2, "host", "stderr");
    CHECK_STR_EQ(p, "[5|1|2|host|stderr|%|%q]");
    free(p);
}

int main(void)
{
    RUN(test_rankset);
    RUN(test_options);
    RUN(test_takes_value);
    RUN(test_prefixes_and_suggestions);
    RUN(test_status);
    RUN(test_line_assembly);
    RUN(test_live_lines);
    RUN(test_prefix_format);
    return test_summary();
}
