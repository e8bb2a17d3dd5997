/*
 * Versioned option structures: every version from 1 to the current one is
 * read, 0 (never initialised) and newer ones are EINVAL with a message, and
 * a structure of an older version gets the defaults for the fields it does
 * not have (lib/optversion.c, libamldist(3) "Options structures").
 */
#include <stddef.h>

#include "amldist.h"
#include "util/internal.h"
#include "plan_golden.h"
#include "test.h"

/* The versions every structure is tried with: 1 and the current one are
 * accepted, the others refused. */
#define VERSIONS(cur) {0u, 1u, (cur), (cur) + 1u, 1000u}
static int accepted(unsigned v, unsigned cur)
{
    return v >= 1 && v <= cur;
}

static void test_layout_options(void)
{
    const unsigned versions[] = VERSIONS(AMLDIST_OPTIONS_VERSION);
    for (size_t i = 0; i < sizeof versions / sizeof *versions; i++) {
        amldist_options_t o = AMLDIST_OPTIONS_INIT;
        char *env[] = {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", NULL};
        o.version = versions[i];
        o.envp = env;
        o.master_port = 1234;
        amldist_t *h = (amldist_t *)1;
        int rc = amldist_init_opts(&h, &o);
        if (accepted(versions[i], AMLDIST_OPTIONS_VERSION)) {
            CHECK_INT_EQ(rc, 0);
            /* The fields are read, not the defaults. */
            CHECK_INT_EQ(amldist_rank(h), 1);
            CHECK_INT_EQ(amldist_master_port(h), 1234);
            amldist_free(h);
        } else {
            char want[96];
            snprintf(want, sizeof want, "amldist_options_t version %u: ",
                     versions[i]);
            CHECK_INT_EQ(rc, AMLDIST_EINVAL);
            CHECK(h == NULL);
            CHECK_STR_HAS(amldist_last_error(), want);
            CHECK_STR_HAS(amldist_last_error(), "AMLDIST_OPTIONS_INIT");
        }
    }
}

static void test_plan_options(void)
{
    const unsigned versions[] = VERSIONS(AMLDIST_PLAN_OPTIONS_VERSION);
    amldist_topo_t *t = load(fixture("mpibind/cts1-pascal.xml"));
    for (size_t i = 0; i < sizeof versions / sizeof *versions; i++) {
        amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
        o.version = versions[i];
        amldist_plan_t *p = (amldist_plan_t *)1;
        int set = amldist_plan_options_set(&o, "cpu-bind", "none");
        o.cpu_bind = AMLDIST_CPU_BIND_NONE;
        int rc = amldist_plan_compute(t, &o, 1, &p);
        if (accepted(versions[i], AMLDIST_PLAN_OPTIONS_VERSION)) {
            CHECK_INT_EQ(set, 0);
            CHECK_INT_EQ(rc, 0);
            /* cpu_bind none is read: the default would bind the rank. */
            CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "");
            amldist_plan_free(p);
        } else {
            char want[96];
            snprintf(want, sizeof want, "amldist_plan_options_t version %u: ",
                     versions[i]);
            CHECK_INT_EQ(set, AMLDIST_EINVAL);
            CHECK_INT_EQ(rc, AMLDIST_EINVAL);
            CHECK(p == NULL);
            CHECK_STR_HAS(amldist_last_error(), want);
            CHECK_STR_HAS(amldist_last_error(), "AMLDIST_PLAN_OPTIONS_INIT");
        }
    }
    amldist_topo_free(t);
}

static void test_bootstrap_options(void)
{
    const unsigned versions[] = VERSIONS(AMLDIST_BOOTSTRAP_OPTIONS_VERSION);
    char *env[] = {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
                   "MASTER_PORT=29500", NULL};
    amldist_t *h = NULL;
    CHECK_INT_EQ(amldist_init_from(&h, env, AMLDIST_NO_PMIX), 0);
    for (size_t i = 0; i < sizeof versions / sizeof *versions; i++) {
        amldist_bootstrap_options_t o = AMLDIST_BOOTSTRAP_OPTIONS_INIT;
        o.version = versions[i];
        /* A port out of range: read, it fails before any connection. */
        o.port = 70000;
        char b[8];
        int rc = amldist_bootstrap_bcast(h, b, sizeof b, &o);
        if (accepted(versions[i], AMLDIST_BOOTSTRAP_OPTIONS_VERSION)) {
            CHECK_INT_EQ(rc, AMLDIST_ERANGE);
            CHECK_STR_HAS(amldist_last_error(), "bootstrap port 70000");
        } else {
            char want[96];
            snprintf(want, sizeof want,
                     "amldist_bootstrap_options_t version %u: ", versions[i]);
            CHECK_INT_EQ(rc, AMLDIST_EINVAL);
            CHECK_STR_HAS(amldist_last_error(), want);
        }
    }
    amldist_free(h);
}

/* The rule itself, on a structure with two versions: version 2 added `b`. */
typedef struct {
    unsigned version;
    int a;
    int b; /* since version 2; default 7 */
} two_t;

static void test_older_version_gets_defaults(void)
{
    static const size_t sizes[] = {0, offsetof(two_t, b), sizeof(two_t)};
    static const amldist__opts_kind_t kind = {"two_t", "TWO_INIT", 2, sizes};
    /* A version-1 caller's structure ends before b: what lies beyond it is
     * not the caller's and must not be read. */
    struct {
        unsigned version;
        int a;
    } v1 = {1, 5};
    two_t got = {2, 0, 7};
    CHECK_INT_EQ(amldist__opts_copy(&kind, "f", &got, &v1), 0);
    CHECK_INT_EQ(got.version, 2);
    CHECK_INT_EQ(got.a, 5);
    CHECK_INT_EQ(got.b, 7);
    two_t v2 = {2, 5, 9};
    got = (two_t){2, 0, 7};
    CHECK_INT_EQ(amldist__opts_copy(&kind, "f", &got, &v2), 0);
    CHECK_INT_EQ(got.b, 9);
    v2.version = 3;
    got = (two_t){2, 0, 7};
    CHECK_INT_EQ(amldist__opts_copy(&kind, "f", &got, &v2), AMLDIST_EINVAL);
    CHECK_STR_EQ(amldist_last_error(), "f: two_t version 3: this library "
                                       "reads versions 1 to 2 (initialise it "
                                       "with TWO_INIT)");
    CHECK_INT_EQ(got.a, 0); /* nothing copied */
    v2.version = 0;
    CHECK_INT_EQ(amldist__opts_copy(&kind, "f", &got, &v2), AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "two_t version 0");
}

int main(void)
{
    RUN(test_layout_options);
    RUN(test_plan_options);
    RUN(test_bootstrap_options);
    RUN(test_older_version_gets_defaults);
    return test_summary();
}
