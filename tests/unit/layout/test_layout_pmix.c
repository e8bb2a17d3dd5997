/* The PMIx query against the stand-in libpmix (tests/standin/fake_pmix.c):
 * its answers, its failures, and a PMIx_Init that never returns, as
 * libpmix 4.2's does now and then (openpmix #2967).  The real server is
 * asked by tests/sh/layout/mpirun_hello.sh. */
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "layout_test.h"

#define AS_RANK_2(...)                                                         \
    ENV("PMIX_NAMESPACE=fake-job", "PMIX_RANK=2",                              \
        "AMLDIST_PMIX_LIBRARY=" FAKE_PMIX_LIB, __VA_ARGS__)

struct fake_pmix_state {
    int inits;
    int finalizes;
    int term_blocked;
};

/* This process is rank 2 of the fake job, and the stand-in behaves as
 * `mode` says. */
static void be_rank_2(const char *mode)
{
    setenv("PMIX_NAMESPACE", "fake-job", 1);
    setenv("PMIX_RANK", "2", 1);
    setenv("FAKE_PMIX", mode, 1);
}

/* A function of the stand-in, once the library has loaded it. */
static void *fake_fn(const char *name)
{
    void *h = dlopen(FAKE_PMIX_LIB, RTLD_NOW | RTLD_NOLOAD);
    void *fn;
    if (h == NULL) {
        TEST__FAIL("%s is not loaded", FAKE_PMIX_LIB);
        return NULL;
    }
    fn = dlsym(h, name);
    dlclose(h); /* the library's own reference keeps it loaded */
    if (fn == NULL)
        TEST__FAIL("%s has no %s", FAKE_PMIX_LIB, name);
    return fn;
}

/* The stand-in's record of the calls it had. */
static struct fake_pmix_state *fake(void)
{
    struct fake_pmix_state *(*get)(void);
    *(void **)&get = fake_fn("fake_pmix_state");
    return get != NULL ? get() : NULL;
}

/* Let a PMIx_Init that hangs return. */
static void release_fake(void)
{
    void (*release)(void);
    *(void **)&release = fake_fn("fake_pmix_release");
    if (release != NULL)
        release();
}

static void check_answer(amldist_t *h)
{
    CHECK_LAYOUT(h, 2, 4, 2, 4, 0, 1);
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_WORLD_SIZE),
                 "PMIx PMIX_JOB_SIZE=4");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                  "PMIX_NODE_LIST");
    CHECK_STR_EQ(amldist_master_addr(h), "fakenode");
}

static void test_answer(void)
{
    be_rank_2("answer");
    amldist_t *h = layout_of(AS_RANK_2("HOME=/"), 0);
    check_answer(h);
    amldist_free(h);
    struct fake_pmix_state *s = fake();
    CHECK_INT_EQ(s->inits, 1);
    CHECK_INT_EQ(s->finalizes, 1);
    /* libpmix and its threads never take the program's signals. */
    CHECK_INT_EQ(s->term_blocked, 1);
}

/* A slow server within the bound is waited for. */
static void test_slow_answer(void)
{
    be_rank_2("slow");
    setenv("FAKE_PMIX_DELAY_MS", "300", 1);
    amldist_t *h = layout_of(AS_RANK_2("AMLDIST_PMIX_TIMEOUT=60"), 0);
    check_answer(h);
    amldist_free(h);
}

static void test_init_fails(void)
{
    be_rank_2("fail");
    CHECK_FAILS(AS_RANK_2("HOME=/"), 0, AMLDIST_EMISSING,
                "PMIx_Init failed (status -31)");
}

/* PMIx_Init never returns: the layout fails within the bound and says
 * why, the next query does not enter libpmix again, and the process still
 * exits (the harness fails a case that does not). */
static void test_init_hangs(void)
{
    be_rank_2("hang");
    CHECK_FAILS(AS_RANK_2("AMLDIST_PMIX_TIMEOUT=0.2"), 0, AMLDIST_EMISSING,
                "PMIx_Init did not return within 0.200 s");
    CHECK_STR_HAS(amldist_last_error(), "AMLDIST_PMIX_TIMEOUT");
    CHECK_FAILS(AS_RANK_2("AMLDIST_PMIX_TIMEOUT=0.2"), 0, AMLDIST_EMISSING,
                "an earlier PMIx query in this process has not returned");
    /* The helper begins PMIx_Init once it is scheduled: under valgrind
     * beside other programs, only after both queries gave up (it counted 0
     * here in a run of two suites at once).  Then it stays in it. */
    struct fake_pmix_state *s = fake();
    for (int i = 0;
         i < 10000 && __atomic_load_n(&s->inits, __ATOMIC_SEQ_CST) < 1; i++)
        usleep(1000);
    CHECK_INT_EQ(s->inits, 1);
}

/* The call that never returns is named. */
static void test_get_hangs(void)
{
    be_rank_2("hang-nlist");
    CHECK_FAILS(AS_RANK_2("AMLDIST_PMIX_TIMEOUT=0.2"), 0, AMLDIST_EMISSING,
                "PMIx_Get(pmix.nlist) did not return within 0.200 s");
}

/* Once the stuck call returns, PMIx may be asked again. */
static void test_init_returns_late(void)
{
    be_rank_2("hang");
    CHECK_FAILS(AS_RANK_2("AMLDIST_PMIX_TIMEOUT=0.1"), 0, AMLDIST_EMISSING,
                "did not return within 0.100 s");
    struct fake_pmix_state *s = fake();
    release_fake();
    for (int i = 0; i < 5000 && s->finalizes < 1; i++)
        usleep(1000);
    CHECK_INT_EQ(s->finalizes, 1);
    /* The helper may still be on its way out: ask until it has gone. */
    amldist_t *h = NULL;
    int rc = AMLDIST_EMISSING;
    for (int i = 0; i < 5000 && rc != 0; i++) {
        rc = amldist_init_from(&h, AS_RANK_2("AMLDIST_PMIX_TIMEOUT=30"), 0);
        if (rc != 0)
            usleep(1000);
    }
    CHECK_INT_EQ(rc, 0);
    check_answer(h);
    amldist_free(h);
    CHECK_INT_EQ(s->inits, 2);
}

static void test_timeout_malformed(void)
{
    static const char *const bad[] = {
        "AMLDIST_PMIX_TIMEOUT=abc", "AMLDIST_PMIX_TIMEOUT=0",
        "AMLDIST_PMIX_TIMEOUT=-1", "AMLDIST_PMIX_TIMEOUT=1e3",
        "AMLDIST_PMIX_TIMEOUT=", "AMLDIST_PMIX_TIMEOUT=999999999"};
    be_rank_2("answer");
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *env[] = {"PMIX_NAMESPACE=fake-job", "PMIX_RANK=2",
                       "AMLDIST_PMIX_LIBRARY=" FAKE_PMIX_LIB, (char *)bad[i],
                       NULL};
        CHECK_FAILS(env, 0, AMLDIST_EMISSING, bad[i]);
        CHECK_STR_HAS(amldist_last_error(), "expected seconds");
    }
    /* Nothing asked the server. */
    CHECK(dlopen(FAKE_PMIX_LIB, RTLD_NOW | RTLD_NOLOAD) == NULL);
}

int main(void)
{
    RUN(test_answer);
    RUN(test_slow_answer);
    RUN(test_init_fails);
    RUN(test_init_hangs);
    RUN(test_get_hangs);
    RUN(test_init_returns_late);
    RUN(test_timeout_malformed);
    return test_summary();
}
