/*
 * Helpers for the golden binding plans (test_plan_*.c).  The expected values
 * in those files were worked out by hand from `hwloc-ls --input FILE` of
 * each fixture (which cores, PUs, GPUs and NICs each NUMA node has), never
 * printed by the code under test.
 *
 * A fixture's placement table gives, for local ranks 0..7 of an 8-rank
 * plan, the GPU, NUMA node and NIC; a plan of n ranks must give its ranks
 * the first n rows (a rank's GPU is r % num_gpus and its NIC depends only
 * on the ranks before it).  The cpus differ with n and the policy, so each
 * (n, policy) has its own row of cpu lists.
 */
#ifndef AMLDIST_PLAN_GOLDEN_H
#define AMLDIST_PLAN_GOLDEN_H

#include <stdlib.h>

#include "amldist.h"
#include "test.h"

struct place {
    int gpu;
    const char *busid;
    int numa;
    const char *nic; /* NULL: no NIC */
    const char *dist;
};

struct golden {
    int n;
    const char *policy;
    const char *cpus[16];
};

static inline const char *fixture(const char *rel)
{
    static char path[1024];
    const char *dir = getenv("AMLDIST_TOPOLOGIES");
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/topologies/real",
             rel);
    return path;
}

static inline amldist_topo_t *load(const char *path)
{
    amldist_topo_t *t = NULL;
    int rc = amldist_topo_load(&t, path, AMLDIST_TOPO_ALL_GPUS);
    if (rc != 0)
        TEST__FAIL("amldist_topo_load(%s) = %d: %s",
                   path != NULL ? path : "this machine", rc,
                   amldist_last_error());
    return t;
}

static inline amldist_plan_t *plan(amldist_topo_t *t, const char *policy,
                                   int n)
{
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    amldist_plan_t *p = NULL;
    if (amldist_plan_options_set(&o, "cpu-bind", policy) != 0 ||
        amldist_plan_compute(t, &o, n, &p) != 0)
        TEST__FAIL("plan %s for %d ranks: %s", policy, n,
                   amldist_last_error());
    return p;
}

static inline void check_place(amldist_plan_t *p, int r, const struct place *w)
{
    if (w->gpu < 0) {
        CHECK_INT_EQ(amldist_plan_rank_gpu(p, r), AMLDIST_EUNKNOWN);
    } else {
        CHECK_INT_EQ(amldist_plan_rank_gpu(p, r), w->gpu);
        CHECK_STR_EQ(amldist_plan_rank_gpu_busid(p, r), w->busid);
    }
    CHECK_INT_EQ(amldist_plan_rank_numa(p, r),
                 w->numa >= 0 ? w->numa : AMLDIST_EUNKNOWN);
    if (w->nic == NULL) {
        CHECK(amldist_plan_rank_nic(p, r) == NULL);
    } else {
        CHECK_STR_EQ(amldist_plan_rank_nic(p, r), w->nic);
        CHECK_STR_EQ(amldist_dist_name(amldist_plan_rank_nic_dist(p, r)),
                     w->dist);
    }
}

/* Every row of `g` (and the "none" policy for each n met), against the
 * placement table. */
static inline void check_golden(const char *path, const struct place *pl,
                                const struct golden *g, size_t ng)
{
    amldist_topo_t *t = load(path);
    if (t == NULL)
        return;
    for (size_t i = 0; i < ng; i++) {
        for (int pass = 0; pass < 2; pass++) {
            const char *policy = pass == 0 ? g[i].policy : "none";
            amldist_plan_t *p = plan(t, policy, g[i].n);
            if (p == NULL)
                continue;
            for (int r = 0; r < g[i].n; r++) {
                const char *want = pass == 0 ? g[i].cpus[r] : "";
                const char *got = amldist_plan_rank_cpus(p, r);
                if (got == NULL || want == NULL || strcmp(got, want) != 0)
                    TEST__FAIL("%s, %d ranks, %s: rank %d cpus \"%s\", want "
                               "\"%s\"",
                               path, g[i].n, policy, r, got ? got : "(null)",
                               want ? want : "(null)");
                check_place(p, r, &pl[r]);
            }
            amldist_plan_free(p);
        }
    }
    amldist_topo_free(t);
}

#endif /* AMLDIST_PLAN_GOLDEN_H */
