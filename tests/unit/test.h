/*
 * A small unit-test harness in the spirit of libuv's test runner: every test
 * runs in its own forked process under a timeout, so a crash or a hang fails
 * that one case and the others still run.  Results are TAP-like lines
 * ("ok - name" / "not ok - name") that tests/run.sh counts.
 *
 *     static void test_parse(void) { CHECK_INT_EQ(parse("3"), 3); }
 *     int main(void) { RUN(test_parse); return test_summary(); }
 */
#ifndef AMLDIST_TEST_H
#define AMLDIST_TEST_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TEST_TIMEOUT_S
#define TEST_TIMEOUT_S 60
#endif

static int test__failed_cases;
static int test__failures_here; /* in the child: failed checks of this case */

#define TEST__FAIL(...)                                                        \
    do {                                                                       \
        fprintf(stderr, "# %s:%d: ", __FILE__, __LINE__);                      \
        fprintf(stderr, __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                   \
        test__failures_here++;                                                 \
    } while (0)

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            TEST__FAIL("CHECK(%s) failed", #cond);                             \
    } while (0)

#define CHECK_INT_EQ(a, b)                                                     \
    do {                                                                       \
        long long test__a = (long long)(a), test__b = (long long)(b);          \
        if (test__a != test__b)                                                \
            TEST__FAIL("%s == %s: %lld != %lld", #a, #b, test__a, test__b);    \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                     \
    do {                                                                       \
        const char *test__a = (a), *test__b = (b);                             \
        if (test__a == NULL || test__b == NULL || strcmp(test__a, test__b))    \
            TEST__FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b,                   \
                       test__a ? test__a : "(null)",                           \
                       test__b ? test__b : "(null)");                          \
    } while (0)

/* `hay` contains `needle` (for error messages that must name a variable). */
#define CHECK_STR_HAS(hay, needle)                                             \
    do {                                                                       \
        const char *test__h = (hay), *test__n = (needle);                      \
        if (test__h == NULL || strstr(test__h, test__n) == NULL)               \
            TEST__FAIL("%s contains \"%s\": got \"%s\"", #hay, test__n,        \
                       test__h ? test__h : "(null)");                          \
    } while (0)

static unsigned test__cases; /* cases met so far, run or not */

static void test__run(const char *name, void (*fn)(void))
{
    /* TEST_SHARD=i/n: only every n-th case from the i-th, so that
     * tests/run.sh can spread a slow program's valgrind pass over n jobs. */
    const char *shard = getenv("TEST_SHARD");
    unsigned here = test__cases++, i, n;
    if (shard && sscanf(shard, "%u/%u", &i, &n) == 2 && n > 0 && here % n != i)
        return;
    fflush(stdout);
    fflush(stderr);
    /* TEST_CPU=1: each case's CPU time (its process and every descendant
     * it waited for), to find what a slow pass spends its time on. */
    struct rusage before, after;
    const int cpu = getenv("TEST_CPU") != NULL;
    if (cpu)
        getrusage(RUSAGE_CHILDREN, &before);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        alarm(TEST_TIMEOUT_S);
        fn();
        fflush(stdout);
        _exit(test__failures_here ? 1 : 0);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    if (cpu && getrusage(RUSAGE_CHILDREN, &after) == 0) {
        long long us = (after.ru_utime.tv_sec - before.ru_utime.tv_sec +
                        after.ru_stime.tv_sec - before.ru_stime.tv_sec) *
                           1000000LL +
                       after.ru_utime.tv_usec - before.ru_utime.tv_usec +
                       after.ru_stime.tv_usec - before.ru_stime.tv_usec;
        printf("# cpu %lld ms: %s\n", us / 1000, name);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        printf("ok - %s\n", name);
    } else {
        test__failed_cases++;
        if (WIFSIGNALED(status))
            printf("not ok - %s (killed by signal %d%s)\n", name,
                   WTERMSIG(status),
                   WTERMSIG(status) == SIGALRM ? ", timeout" : "");
        else
            printf("not ok - %s\n", name);
    }
    fflush(stdout);
}

#define RUN(fn) test__run(#fn, fn)

static inline int test_summary(void)
{
    return test__failed_cases ? 1 : 0;
}

/* Whether this process runs under valgrind (its preload is in place). */
static inline int test_under_valgrind(void)
{
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "vgpreload") != NULL;
}

/* Under valgrind, run one case in this process before the others: every
 * case is a fork of this process, and a fork keeps valgrind's translations
 * of the code its parent ran, so the cases after it do not translate the
 * library's code anew (at 0.3 to 1 s a case, most of a valgrind pass).
 * Natively and under ASan it does nothing.  Pick a case that leaves nothing
 * behind that the others could see. */
static inline void test_warm(void (*fn)(void))
{
    if (!test_under_valgrind())
        return;
    fn();
    fflush(stdout);
    fflush(stderr);
    test__failures_here = 0; /* its case, run again, says */
}

#endif /* AMLDIST_TEST_H */
