/* The merged stacks (launcher/stacks/merge.c, report.c): groups, the
 * outliers named (the stalled ranks, or the ranks off the majority's
 * stack, or off the collective), the lines on stderr (content, width,
 * control characters), the JSON (read back by Python, its keys exactly),
 * and rank lists as ranges (launcher/output/ranklist.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#include "output/ranklist.h"
#include "stkfixture.h"

static struct stk_report merge(const struct stk_set *s, const int *stalled, size_t n)
{
    struct stk_report r;
    CHECK_INT_EQ(stk_merge(s, stalled, n, STOP_HANG, 30, &r), 0);
    return r;
}

/* stk_print's text, and its lines each checked: at most 100 columns,
 * no control character but the newline at its end. */
static char *print(const struct stk_set *s, const struct stk_report *r, size_t *nlines)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    stk_print(f, s, r);
    fclose(f);
    size_t cols = 0;
    *nlines = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n') {
            (*nlines)++;
            cols = 0;
            continue;
        }
        if (c < 0x20 || c == 0x7f)
            TEST__FAIL("a control character 0x%02x at %zu", c, i);
        if ((c & 0xc0) != 0x80) /* a character's first byte */
            cols++;
        if (cols == 101)
            TEST__FAIL("a line over 100 columns: %.*s", 120, text + i - 100);
    }
    CHECK(len > 0 && text[len - 1] == '\n');
    return text;
}

/* Line i (0 the head) of the text, in a static buffer. */
static const char *line(const char *text, size_t i)
{
    static char b[1024];
    for (; i > 0 && text; i--)
        text = strchr(text, '\n') ? strchr(text, '\n') + 1 : NULL;
    size_t n = text ? strcspn(text, "\n") : 0;
    snprintf(b, sizeof b, "%.*s", (int)n, text ? text : "");
    return b;
}

static void check_ranks(const int *got, size_t n, const char *want)
{
    char b[256];
    ranklist_format(got, n, b, sizeof b);
    CHECK_STR_EQ(b, want);
}

/* n ranks in all_reduce at train.py:42 but one, stuck in slow_step at
 * train.py:17. */
static void straggler(struct stk_set *s, int n, int stuck)
{
    for (int i = 0; i < n; i++)
        if (i == stuck)
            fx_py_stuck(s, i, 17);
        else
            fx_py_allreduce(s, i, 42);
}

/* The real case: 1 rank of 16 stuck in its own function, the others in
 * all_reduce, across two nodes. */
static void test_python_straggler(void)
{
    struct stk_set s = {0};
    straggler(&s, 16, 7);
    struct stk_report r = merge(&s, NULL, 0);
    CHECK_INT_EQ(r.ngroups, 2);
    CHECK_INT_EQ(r.noutliers, 1);
    CHECK_INT_EQ(r.outliers[0], 7);
    check_ranks(r.groups[0].ranks, r.groups[0].n, "7");
    check_ranks(r.groups[1].ranks, r.groups[1].n, "0-6,8-15");
    CHECK_INT_EQ(s.ranks[r.groups[1].example].rank, 0);
    size_t n;
    char *t = print(&s, &r, &n);
    printf("%s", t);
    CHECK_INT_EQ(n, 3);
    CHECK_STR_EQ(line(t, 0), "amlrun: hang: no progress for 30 s; stacks of 16 ranks, 2 groups; "
                             "likely cause: rank 7");
    CHECK_STR_EQ(line(t, 1), "amlrun:   rank 7 (host node0, pid 1007): train.py:17 slow_step < "
                             "train.py:40 train");
    CHECK_STR_EQ(line(t, 2), "amlrun:   ranks 0-6,8-15 (15): distributed_c10d.py:2501 all_reduce "
                             "< ... < train.py:42 train");
    free(t);
    stk_report_free(&r);
    stk_set_free(&s);
}

/* A rank spinning in a loop is caught at another line each time: the
 * innermost line does not split a group; a caller's line does (two ranks
 * in two different all_reduce calls are at two places). */
static void test_lines(void)
{
    struct stk_set s = {0};
    fx_py_stuck(&s, 0, 17);
    fx_py_stuck(&s, 1, 18);
    fx_py_stuck(&s, 2, 19);
    fx_py_allreduce(&s, 3, 42);
    fx_py_allreduce(&s, 4, 42);
    fx_py_allreduce(&s, 5, 47);
    struct stk_report r = merge(&s, NULL, 0);
    CHECK_INT_EQ(r.ngroups, 3);
    check_ranks(r.outliers, r.noutliers, "3-5");
    check_ranks(r.groups[0].ranks, r.groups[0].n, "3-4");
    check_ranks(r.groups[1].ranks, r.groups[1].n, "5");
    check_ranks(r.groups[2].ranks, r.groups[2].n, "0-2");
    stk_report_free(&r);
    stk_set_free(&s);
}

/* A Python worker's other threads, listed in another order, or caught at
 * another line of the same function: the same stack. */
static void test_thread_order(void)
{
    struct stk_set s = {0};
    fx_py_allreduce(&s, 0, 42);
    fx_py_allreduce(&s, 1, 42);
    struct stk_rank *r1 = &s.ranks[1];
    fx_thread(&s, 3001, "loader");
    fx_py(&s, "_worker_loop", FX_TORCH "utils/data/_utils/worker.py", 300);
    struct stk_thread t = r1->threads[1];
    r1->threads[1] = r1->threads[2];
    r1->threads[2] = t;
    fx_py_allreduce(&s, 2, 42);
    fx_thread(&s, 3002, "loader");
    fx_py(&s, "_worker_loop", FX_TORCH "utils/data/_utils/worker.py", 300);
    s.ranks[2].threads[1].python[0].line = 321; /* innermost */
    struct stk_report r = merge(&s, NULL, 0);
    CHECK_INT_EQ(r.ngroups, 2);
    check_ranks(r.groups[0].ranks, r.groups[0].n, "0"); /* the culprit first */
    check_ranks(r.groups[1].ranks, r.groups[1].n, "1-2");
    check_ranks(r.outliers, r.noutliers, "0");
    stk_report_free(&r);
    stk_set_free(&s);
}

/* A native worker in a C loop, three waiting in a collective; their
 * helper threads, caught at different places, do not split them. */
static void test_native(void)
{
    struct stk_set s = {0};
    fx_native_wait(&s, 0);
    fx_native_wait(&s, 1);
    fx_native_spin(&s, 2, 12);
    fx_native_wait(&s, 3);
    struct stk_report r = merge(&s, NULL, 0);
    CHECK_INT_EQ(r.ngroups, 2);
    check_ranks(r.outliers, r.noutliers, "2");
    size_t n;
    char *t = print(&s, &r, &n);
    printf("%s", t);
    CHECK_STR_EQ(line(t, 1), "amlrun:   rank 2 (host node0, pid 1002): worker.c:12 spin < "
                             "worker.c:30 main");
    CHECK_STR_EQ(line(t, 2), "amlrun:   ranks 0-1,3 (3): poll.c:29 __GI___poll < client.c:80 "
                             "amldist__bs_wait");
    free(t);
    stk_report_free(&r);
    stk_set_free(&s);
}

/* Per-rank progress names the outliers, whatever the stacks say. */
static void test_stalled(void)
{
    struct stk_set s = {0};
    straggler(&s, 16, 7);
    static const int stalled[] = {9, 3, 9};
    struct stk_report r = merge(&s, stalled, 3);
    check_ranks(r.outliers, r.noutliers, "3,9");
    CHECK_INT_EQ(r.ngroups, 2);
    check_ranks(r.groups[0].ranks, r.groups[0].n, "0-6,8-15"); /* the culprits' first */
    size_t n;
    char *t = print(&s, &r, &n);
    printf("%s", t);
    CHECK_STR_HAS(line(t, 0), "likely cause: ranks 3,9");
    CHECK_STR_EQ(line(t, 1), "amlrun:   ranks 0-6,8-15 (15) (rank 3 host node0, pid 1003; 1 "
                             "more): distributed_c10d.py:2501 all...");
    CHECK_STR_EQ(line(t, 2), "amlrun:   rank 7: train.py:17 slow_step < train.py:40 train < "
                             "train.py:60 main");
    free(t);
    stk_report_free(&r);
    /* A stall of a rank that no node answered for is still named. */
    static const int gone[] = {99};
    r = merge(&s, gone, 1);
    check_ranks(r.outliers, r.noutliers, "99");
    stk_report_free(&r);
    stk_set_free(&s);
}

static void test_all_identical(void)
{
    struct stk_set s = {0};
    for (int i = 0; i < 8; i++)
        fx_py_allreduce(&s, i, 42);
    struct stk_report r = merge(&s, NULL, 0);
    CHECK_INT_EQ(r.ngroups, 1);
    CHECK_INT_EQ(r.noutliers, 0);
    CHECK(r.outliers == NULL);
    size_t n;
    char *t = print(&s, &r, &n);
    CHECK_INT_EQ(n, 2);
    CHECK_STR_HAS(line(t, 0), "stacks of 8 ranks, 1 group; all at the same place");
    CHECK_STR_HAS(line(t, 1), "amlrun:   ranks 0-7 (8): distributed_c10d.py:2501 all_reduce");
    free(t);
    stk_report_free(&r);
    stk_set_free(&s);
}

/* No majority: the ranks not in a collective are the outliers, when the
 * collective tells them apart; else none. */
static void test_ties(void)
{
    struct stk_set s = {0};
    fx_py_allreduce(&s, 0, 42);
    fx_py_stuck(&s, 1, 17);
    struct stk_report r = merge(&s, NULL, 0);
    check_ranks(r.outliers, r.noutliers, "1");
    check_ranks(r.groups[0].ranks, r.groups[0].n, "1");
    stk_report_free(&r);
    stk_set_free(&s);

    /* Two against two, both in a collective (two call sites). */
    fx_py_allreduce(&s, 0, 42);
    fx_py_allreduce(&s, 1, 42);
    fx_py_allreduce(&s, 2, 47);
    fx_py_allreduce(&s, 3, 47);
    r = merge(&s, NULL, 0);
    CHECK_INT_EQ(r.ngroups, 2);
    CHECK_INT_EQ(r.noutliers, 0);
    check_ranks(r.groups[0].ranks, r.groups[0].n, "0-1");
    size_t n;
    char *t = print(&s, &r, &n);
    CHECK_STR_HAS(line(t, 0), "4 ranks, 2 groups; no rank stands out");
    free(t);
    stk_report_free(&r);
    stk_set_free(&s);

    /* Every rank somewhere else, none in a collective. */
    for (int i = 0; i < 4; i++)
        fx_native_spin(&s, i, 12);
    for (int i = 0; i < 4; i++)
        s.ranks[i].threads[0].native[1].line = 30 + i;
    r = merge(&s, NULL, 0);
    CHECK_INT_EQ(r.ngroups, 4);
    CHECK_INT_EQ(r.noutliers, 0);
    stk_report_free(&r);
    stk_set_free(&s);
}

/* Ranks without a stack: one group per kind of error, never outliers. */
static void test_errors(void)
{
    struct stk_set s = {0};
    fx_native_wait(&s, 0);
    fx_native_wait(&s, 1);
    fx_rank(&s, 2);
    fx_error(&s, "ptrace: pid 1234: Operation not permitted");
    fx_rank(&s, 3);
    fx_error(&s, "ptrace: pid 5678: Operation not permitted");
    fx_rank(&s, 4);
    fx_error(&s, "exited while its stack was read");
    fx_native_wait(&s, 5);
    fx_error(&s, "no Python stack: the worker did not answer"); /* and native frames */
    struct stk_report r = merge(&s, NULL, 0);
    CHECK_INT_EQ(r.ngroups, 3);
    CHECK_INT_EQ(r.noutliers, 0);
    check_ranks(r.groups[0].ranks, r.groups[0].n, "0-1,5");
    check_ranks(r.groups[1].ranks, r.groups[1].n, "2-3");
    check_ranks(r.groups[2].ranks, r.groups[2].n, "4");
    size_t n;
    char *t = print(&s, &r, &n);
    printf("%s", t);
    /* Rank 5 has frames and a reason for what it lacks: a line of its own
     * under its group's. */
    CHECK_STR_EQ(line(t, 2), "amlrun:     rank 5: no Python stack: the worker did not answer");
    CHECK_STR_EQ(line(t, 3), "amlrun:   ranks 2-3 (2): no stack: ptrace: pid 1234: Operation not "
                             "permitted");
    CHECK_STR_EQ(line(t, 4), "amlrun:   rank 4: no stack: exited while its stack was read");
    free(t);
    stk_report_free(&r);
    /* All of them without a stack. */
    stk_set_free(&s);
    fx_rank(&s, 0);
    fx_error(&s, "ptrace: Operation not permitted");
    fx_rank(&s, 1);
    r = merge(&s, NULL, 0);
    CHECK_INT_EQ(r.ngroups, 2);
    CHECK_INT_EQ(r.noutliers, 0);
    t = print(&s, &r, &n);
    CHECK_STR_HAS(t, "rank 1: no frames\n");
    free(t);
    stk_report_free(&r);
    stk_set_free(&s);
}

/* The reasons under a group: one line a kind, digits aside, the ranks of
 * each; past 3 kinds, a count. */
static void test_notes(void)
{
    struct stk_set s = {0};
    char e[128];
    for (int i = 0; i < 10; i++) {
        fx_native_wait(&s, i);
        if (i >= 1 && i <= 3) {
            snprintf(e, sizeof e, "thread %d (python3) did not stop in time", 4000 + i);
            fx_error(&s, e);
        } else if (i == 5 || i == 6) {
            fx_error(&s, "no Python frames: the program handles signal 58 (amlrun's) itself");
        } else if (i >= 7) {
            snprintf(e, sizeof e, "reason %c", 'a' + i);
            fx_error(&s, e);
        }
    }
    struct stk_report r = merge(&s, NULL, 0);
    CHECK_INT_EQ(r.ngroups, 1);
    size_t n;
    char *t = print(&s, &r, &n);
    printf("%s", t);
    CHECK_INT_EQ(n, 6);
    CHECK_STR_EQ(line(t, 2), "amlrun:     ranks 1-3: thread 4001 (python3) did not stop in time");
    CHECK_STR_EQ(line(t, 3), "amlrun:     ranks 5-6: no Python frames: the program handles "
                             "signal 58 (amlrun's) itself");
    CHECK_STR_EQ(line(t, 4), "amlrun:     rank 7: reason h");
    CHECK_STR_EQ(line(t, 5), "amlrun:     and 2 more ranks with other reasons");
    free(t);
    stk_report_free(&r);
    stk_set_free(&s);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 64 and 1024 ranks, one stuck; then 1024 all at different places: 16
 * lines of groups and one for the rest. */
static void test_many(void)
{
    static const int sizes[] = {64, 1024};
    for (size_t k = 0; k < 2; k++) {
        struct stk_set s = {0};
        straggler(&s, sizes[k], 37);
        double t0 = now();
        struct stk_report r = merge(&s, NULL, 0);
        double t1 = now();
        printf("# merge of %d ranks: %.3f ms\n", sizes[k], (t1 - t0) * 1e3);
        check_ranks(r.outliers, r.noutliers, "37");
        check_ranks(r.groups[1].ranks, r.groups[1].n, k ? "0-36,38-1023" : "0-36,38-63");
        size_t n;
        char *t = print(&s, &r, &n);
        CHECK_INT_EQ(n, 3);
        CHECK_STR_HAS(line(t, 1), "rank 37 (host node4, pid 1037): train.py:17 slow_step");
        free(t);
        stk_report_free(&r);
        stk_set_free(&s);
    }
    struct stk_set s = {0};
    for (int i = 0; i < 1024; i++) {
        fx_py_stuck(&s, i, 17);
        s.ranks[i].threads[0].python[1].line = i; /* the caller's line */
    }
    struct stk_report r = merge(&s, NULL, 0);
    CHECK_INT_EQ(r.ngroups, 1024);
    CHECK_INT_EQ(r.noutliers, 0);
    size_t n;
    char *t = print(&s, &r, &n);
    CHECK_INT_EQ(n, 1 + 16 + 1);
    CHECK_STR_EQ(line(t, 17), "amlrun:   and 1008 more groups of 1008 ranks in all");
    free(t);
    stk_report_free(&r);
    /* Every other rank apart: the list cut to fit the line. */
    for (int i = 0; i < 1024; i++)
        s.ranks[i].threads[0].python[1].line = 40 + i % 2;
    r = merge(&s, NULL, 0);
    t = print(&s, &r, &n);
    CHECK_STR_EQ(line(t, 1), "amlrun:   ranks 0,2,4,6,8,10,12,14,16,18,20,22,... (512): train.py:17 "
                             "slow_step < train.py:40 train");
    free(t);
    stk_report_free(&r);
    stk_set_free(&s);
}

/* Names from other nodes with a terminal's escapes, newlines, bytes that
 * are not UTF-8: shown as '?', each line still one line. */
static void test_control_characters(void)
{
    struct stk_set s = {0};
    fx_py_allreduce(&s, 0, 42);
    fx_py_allreduce(&s, 1, 42);
    fx_rank(&s, 2);
    free(s.ranks[2].host);
    s.ranks[2].host = strdup("evil\x1b[2Jhost");
    fx_thread(&s, 1, "x");
    fx_py(&s, "f\x1b]0;pwned\x07\xc2\x9b" "caf\xc3\xa9", "/tmp/a\nb\xff.py", 3);
    fx_py(&s, "main", "/tmp/a\nb\xff.py", 9);
    struct stk_report r = merge(&s, NULL, 0);
    size_t n;
    char *t = print(&s, &r, &n);
    printf("%s", t);
    CHECK_INT_EQ(n, 3);
    CHECK_STR_EQ(line(t, 1), "amlrun:   rank 2 (host evil?[2Jhost, pid 1002): a?b?.py:3 "
                             "f?]0;pwned???caf\xc3\xa9 < a?b?.py:9 main");
    free(t);
    stk_report_free(&r);
    stk_set_free(&s);
}

/* A very long name is cut to fit; the line stays whole. */
static void test_long_names(void)
{
    struct stk_set s = {0};
    char fn[600];
    memset(fn, 'T', sizeof fn - 1);
    fn[sizeof fn - 1] = '\0';
    fx_rank(&s, 0);
    fx_thread(&s, 1, "x");
    fx_nat(&s, fn, "/src/very/long/path/to/a/file/with/a/long/name/template_instantiation.cpp", 1,
           "/work/app");
    fx_nat(&s, fn, "b.cpp", 2, "/work/app");
    struct stk_report r = merge(&s, NULL, 0);
    size_t n;
    char *t = print(&s, &r, &n);
    printf("%s", t);
    CHECK_STR_HAS(line(t, 1), "template_instantiation.cpp:1 TTTT");
    CHECK_STR_HAS(line(t, 1), "TTT...");
    free(t);
    stk_report_free(&r);
    stk_set_free(&s);
}

static char tmpdir[] = "/tmp/amlrun-stk-XXXXXX";

/* Python's json reads it; the keys are exactly the issue's. */
static const char checker[] =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1]))\n"
    "assert set(d) == {'reason', 'timeout_s', 'ranks', 'groups', 'outliers'}, d.keys()\n"
    "assert d['reason'] == 'hang' and d['timeout_s'] == 30\n"
    "frame = {'function', 'file', 'line'}\n"
    "for r in d['ranks']:\n"
    "    keys = {'rank', 'local_rank', 'node', 'host', 'pid', 'last_progress_s', 'threads'}\n"
    "    assert set(r) in (keys, keys | {'error'}), r.keys()\n"
    "    for t in r['threads']:\n"
    "        assert set(t) == {'tid', 'pid', 'name', 'python', 'native'}, t.keys()\n"
    "        for f in t['python'] + t['native']:\n"
    "            assert set(f) == frame, f\n"
    "for g in d['groups']:\n"
    "    assert set(g) == {'ranks', 'frames'}\n"
    "    assert all(set(f) == frame for f in g['frames'])\n"
    "by = {r['rank']: r for r in d['ranks']}\n"
    "assert d['outliers'] == [7]\n"
    "assert [g['ranks'] for g in d['groups']] == [[7], [0, 1, 2, 3, 4, 5, 6, 8], [9]]\n"
    "assert d['groups'][0]['frames'][0] == {'function': 'slow_step', 'file': "
    "'/work/job/train.py', 'line': 17}\n"
    "assert d['groups'][1]['frames'][0]['function'] == 'all_reduce'\n"
    "assert d['groups'][2]['frames'] == []\n"
    "r = by[7]\n"
    "assert (r['local_rank'], r['node'], r['host'], r['pid']) == (7, 0, 'node0', 1007)\n"
    "assert r['last_progress_s'] == 12.5 and 'error' not in r\n"
    "assert len(r['threads']) == 2 and r['threads'][0]['python'][1]['function'] == 'train'\n"
    "assert (r['threads'][0]['tid'], r['threads'][0]['name']) == (1007, 'python3')\n"
    "assert r['threads'][1]['name'] == 'pt_pin_memory' and r['threads'][0]['pid'] is None\n"
    "n = r['threads'][0]['native'][0]\n"
    "assert n == {'function': '__futex_abstimed_wait_common', 'file': None, 'line': None}, n\n"
    "assert by[9]['error'] == 'gone\\x1b[0m' and by[9]['threads'] == []\n"
    "assert by[9]['last_progress_s'] is None and by[9]['host'] is None\n"
    "assert by[0]['host'] == 'n\\xc3\\xa9\\n'\n";

static void test_json(void)
{
    struct stk_set s = {0};
    straggler(&s, 9, 7);
    free(s.ranks[0].host);
    s.ranks[0].host = strdup("n\xc3\xa9\n"); /* every byte passes, escaped */
    fx_rank(&s, 9);
    fx_error(&s, "gone\x1b[0m");
    s.ranks[9].last_progress_s = -1;
    free(s.ranks[9].host);
    s.ranks[9].host = NULL;
    struct stk_report r = merge(&s, NULL, 0);
    char path[64], script[64], cmd[256];
    snprintf(path, sizeof path, "%s/report.json", tmpdir);
    snprintf(script, sizeof script, "%s/check.py", tmpdir);
    FILE *f = fopen(script, "w");
    fputs(checker, f);
    fclose(f);
    /* An old report is replaced whole. */
    f = fopen(path, "w");
    fputs("old", f);
    fclose(f);
    CHECK_INT_EQ(stk_write_json(path, &s, &r), 0);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s", script, path);
    CHECK_INT_EQ(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -m json.tool %s >/dev/null", path);
    CHECK_INT_EQ(system(cmd), 0);
    /* Nothing left beside it but the checker. */
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) = 2", tmpdir);
    CHECK_INT_EQ(system(cmd), 0);
    /* A folder that is not there: the error, and nothing written. */
    snprintf(path, sizeof path, "%s/none/report.json", tmpdir);
    errno = 0;
    CHECK_INT_EQ(stk_write_json(path, &s, &r), -1);
    CHECK_INT_EQ(errno, ENOENT);
    stk_report_free(&r);
    stk_set_free(&s);
}

/* A folder the report cannot be renamed into (the name is a folder). */
static void test_json_rename_fails(void)
{
    struct stk_set s = {0};
    fx_py_allreduce(&s, 0, 42);
    struct stk_report r = merge(&s, NULL, 0);
    char dir[64], path[80], cmd[128];
    snprintf(dir, sizeof dir, "%s/rename", tmpdir);
    snprintf(path, sizeof path, "%s/adir", dir);
    CHECK_INT_EQ(mkdir(dir, 0700), 0);
    CHECK_INT_EQ(mkdir(path, 0700), 0);
    CHECK_INT_EQ(stk_write_json(path, &s, &r), -1);
    CHECK_INT_EQ(errno, EISDIR);
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) = 1", dir);
    CHECK_INT_EQ(system(cmd), 0); /* no temporary file left */
    stk_report_free(&r);
    stk_set_free(&s);
}

static void test_empty(void)
{
    struct stk_set s = {0};
    struct stk_report r;
    CHECK_INT_EQ(stk_merge(&s, NULL, 0, STOP_REQUEST, 0, &r), 0);
    CHECK_INT_EQ(r.ngroups, 0);
    size_t n;
    char *t = print(&s, &r, &n);
    CHECK_STR_EQ(t, "amlrun: stacks of 0 ranks, 0 groups; all at the same place\n");
    free(t);
    char path[64];
    snprintf(path, sizeof path, "%s/empty.json", tmpdir);
    CHECK_INT_EQ(stk_write_json(path, &s, &r), 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -m json.tool %s >/dev/null", path);
    CHECK_INT_EQ(system(cmd), 0);
    unlink(path);
    stk_report_free(&r);
}

static void test_ranklist(void)
{
    char b[64];
    static const int v[] = {0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15};
    CHECK_INT_EQ(ranklist_format(v, 15, b, sizeof b), 0);
    CHECK_STR_EQ(b, "0-6,8-15");
    static const int w[] = {1, 3, 3, 4, 7, 100, 101};
    CHECK_INT_EQ(ranklist_format(w, 7, b, sizeof b), 0);
    CHECK_STR_EQ(b, "1,3-4,7,100-101");
    CHECK_INT_EQ(ranklist_format(w, 0, b, sizeof b), 0);
    CHECK_STR_EQ(b, "");
    CHECK_INT_EQ(ranklist_format(w, 7, b, 12), 1);
    CHECK_STR_EQ(b, "1,3-4,7,...");
    CHECK_INT_EQ(ranklist_format(w, 7, b, 11), 1);
    CHECK_STR_EQ(b, "1,3-4,...");
    CHECK_INT_EQ(ranklist_format(w + 5, 2, b, 4), 1);
    CHECK_STR_EQ(b, "...");
    static const int big[] = {2147483646, 2147483647};
    CHECK_INT_EQ(ranklist_format(big, 2, b, sizeof b), 0);
    CHECK_STR_EQ(b, "2147483646-2147483647");
}

int main(void)
{
    if (!mkdtemp(tmpdir))
        return 1;
    RUN(test_python_straggler);
    RUN(test_lines);
    RUN(test_thread_order);
    RUN(test_native);
    RUN(test_stalled);
    RUN(test_all_identical);
    RUN(test_ties);
    RUN(test_errors);
    RUN(test_notes);
    RUN(test_many);
    RUN(test_control_characters);
    RUN(test_long_names);
    RUN(test_json);
    RUN(test_json_rename_fails);
    RUN(test_empty);
    RUN(test_ranklist);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        return 1;
    return test_summary();
}
