/*
 * Cores per rank.  A "pool" is one NUMA node's usable cores (those with at
 * least one allowed CPU), in hwloc's logical order; ranks get whole cores
 * from pools in contiguous, equal blocks.
 */
#include <stdlib.h>
#include <string.h>

#include "plan/cpus_l3.h"

struct pool {
    hwloc_obj_t numa;
    hwloc_bitmap_t *cores; /* allowed PUs of each usable core */
    int ncores;
    int nranks;
    int home; /* socket policy: the pool this rank-less pool joins */
};

struct pools {
    struct pool *v;
    int n;
};

static void pools_free(struct pools *ps)
{
    for (int i = 0; i < ps->n; i++) {
        for (int c = 0; c < ps->v[i].ncores; c++)
            hwloc_bitmap_free(ps->v[i].cores[c]);
        free(ps->v[i].cores);
    }
    free(ps->v);
}

static int pools_build(struct pools *ps, hwloc_topology_t h,
                       hwloc_const_bitmap_t allowed)
{
    hwloc_obj_type_t unit = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_CORE) > 0
                                ? HWLOC_OBJ_CORE
                                : HWLOC_OBJ_PU;
    int nnuma = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
    int nunits = hwloc_get_nbobjs_by_type(h, unit);
    ps->n = 0;
    ps->v = calloc((size_t)(nnuma > 0 ? nnuma : 1), sizeof *ps->v);
    if (ps->v == NULL)
        return AMLDIST_ENOMEM;
    for (int i = 0; i < nnuma; i++) {
        hwloc_obj_t numa = hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE,
                                                 (unsigned)i);
        struct pool *p = &ps->v[ps->n];
        p->numa = numa;
        p->home = -1;
        p->cores = calloc((size_t)(nunits > 0 ? nunits : 1),
                          sizeof *p->cores);
        if (p->cores == NULL)
            return AMLDIST_ENOMEM;
        ps->n++;
        for (int u = 0; u < nunits; u++) {
            hwloc_obj_t core = hwloc_get_obj_by_type(h, unit, (unsigned)u);
            if (!hwloc_bitmap_isincluded(core->cpuset, numa->cpuset) ||
                !hwloc_bitmap_intersects(core->cpuset, allowed))
                continue;
            hwloc_bitmap_t pus = hwloc_bitmap_alloc();
            if (pus == NULL)
                return AMLDIST_ENOMEM;
            hwloc_bitmap_and(pus, core->cpuset, allowed);
            p->cores[p->ncores++] = pus;
        }
        if (p->ncores == 0) { /* memory-only or outside the cpuset */
            free(p->cores);
            ps->n--;
        }
    }
    return 0;
}

static int pool_of_node(const struct pools *ps, hwloc_obj_t numa)
{
    for (int i = 0; numa != NULL && i < ps->n; i++)
        if (ps->v[i].numa == numa)
            return i;
    return -1;
}

/* Cores [first, first+count) of pool `p` into the rank's set. */
static void take(struct amldist__rank *r, const struct pool *p, int first,
                 int count)
{
    for (int c = first; c < first + count && c < p->ncores; c++)
        hwloc_bitmap_or(r->cpus, r->cpus, p->cores[c]);
}

/*
 * Split a pool among the k ranks that share it: equal blocks of whole cores;
 * with fewer cores than ranks every rank gets all of them (and a warning),
 * since giving some ranks nothing would be worse than sharing.
 */
static void split(amldist_plan_t *plan, const struct pool *p, const int *ranks,
                  int k)
{
    if (k == 0)
        return;
    if (p->ncores < k) {
        amldist__warn(plan->warnings, sizeof plan->warnings,
                      "NUMA node %u has %d usable core%s for %d ranks: they "
                      "share them (use fewer ranks per node, or --cpu-bind "
                      "numa to say so)",
                      p->numa->os_index, p->ncores, p->ncores == 1 ? "" : "s",
                      k);
        for (int j = 0; j < k; j++)
            take(&plan->ranks[ranks[j]], p, 0, p->ncores);
        return;
    }
    int block = p->ncores / k;
    for (int j = 0; j < k; j++)
        take(&plan->ranks[ranks[j]], p, j * block, block);
}

/* The pool a rank lives in: its GPU's node, else the least loaded pool
 * among those its GPU is local to, else among all. */
static int home_pool(amldist_plan_t *plan, const amldist_topo_t *t,
                     struct pools *ps, int r)
{
    const struct amldist__gpu *g = &t->gpus[plan->ranks[r].gpu];
    int i = pool_of_node(ps, g->numa);
    if (i >= 0)
        return i;
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t->h, g->pci);
    int best = -1;
    for (int pass = 0; pass < 2 && best < 0; pass++)
        for (int j = 0; j < ps->n; j++) {
            if (pass == 0 && anc != NULL && anc->nodeset != NULL &&
                !hwloc_bitmap_isset(anc->nodeset, ps->v[j].numa->os_index))
                continue;
            if (best < 0 || ps->v[j].nranks < ps->v[best].nranks)
                best = j;
        }
    if (g->numa != NULL)
        amldist__warn(plan->warnings, sizeof plan->warnings,
                      "GPU %s is on NUMA node %u, which has none of the "
                      "CPUs amlrun may use: rank %d gets cores of NUMA "
                      "node %u",
                      g->busid, g->numa->os_index, r,
                      ps->v[best].numa->os_index);
    else
        amldist__warn(plan->warnings, sizeof plan->warnings,
                      "GPU %s has no known NUMA node: rank %d is placed on "
                      "NUMA node %u, the least loaded",
                      g->busid, r, ps->v[best].numa->os_index);
    return best;
}

/* Socket policy: each rank-less pool joins a pool with ranks, in the same
 * package when there is one, else the one that has been given least. */
static void attach_rankless(struct pools *ps, hwloc_topology_t h)
{
    int *given = calloc((size_t)ps->n, sizeof *given);
    if (given == NULL)
        return;
    for (int i = 0; i < ps->n; i++) {
        if (ps->v[i].nranks > 0)
            continue;
        hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(
            h, HWLOC_OBJ_PACKAGE, ps->v[i].numa);
        int best = -1;
        for (int j = 0; j < ps->n; j++) {
            if (ps->v[j].nranks == 0)
                continue;
            int same = pkg != NULL &&
                       pkg == hwloc_get_ancestor_obj_by_type(
                                  h, HWLOC_OBJ_PACKAGE, ps->v[j].numa);
            int best_same = best >= 0 && pkg != NULL &&
                            pkg == hwloc_get_ancestor_obj_by_type(
                                       h, HWLOC_OBJ_PACKAGE, ps->v[best].numa);
            if (best < 0 || (same && !best_same) ||
                (same == best_same && given[j] < given[best]))
                best = j;
        }
        ps->v[i].home = best;
        if (best >= 0)
            given[best]++;
    }
    free(given);
}

/* Package policy: pools a and b are in one package (a pool without a
 * package object is alone in its own). */
static int same_package(hwloc_topology_t h, const struct pool *a,
                        const struct pool *b)
{
    hwloc_obj_t pa = hwloc_get_ancestor_obj_by_type(h, HWLOC_OBJ_PACKAGE,
                                                    a->numa);
    return a == b || (pa != NULL && pa == hwloc_get_ancestor_obj_by_type(
                                              h, HWLOC_OBJ_PACKAGE, b->numa));
}

static void take_package(struct amldist__rank *r, hwloc_topology_t h,
                         const struct pools *ps, const struct pool *home)
{
    for (int m = 0; m < ps->n; m++)
        if (same_package(h, home, &ps->v[m]))
            take(r, &ps->v[m], 0, ps->v[m].ncores);
}

/* L3 policy within one pool, or exclusive blocks where the topology shows
 * no cache. */
static int l3_or_split(amldist_plan_t *plan, hwloc_topology_t h,
                       const struct pool *p, const int *ranks, int k)
{
    int rc = amldist__l3_split(plan, h, p->cores, p->ncores,
                               p->numa->os_index, ranks, k);
    if (rc == 1)
        split(plan, p, ranks, k);
    return rc < 0 ? rc : 0;
}

static int gpu_job(amldist_plan_t *plan, const amldist_topo_t *t,
                   struct pools *ps, int *members)
{
    amldist_cpu_bind_t policy = plan->opts.cpu_bind;
    int *home = malloc((size_t)plan->n * sizeof *home);
    if (home == NULL)
        return AMLDIST_ENOMEM;
    /* Ranks whose GPU has a usable node first, so that the spread ones
     * see the real load. */
    for (int pass = 0; pass < 2; pass++)
        for (int r = 0; r < plan->n; r++) {
            const struct amldist__gpu *g = &t->gpus[plan->ranks[r].gpu];
            int known = pool_of_node(ps, g->numa) >= 0;
            if (known != (pass == 0))
                continue;
            home[r] = home_pool(plan, t, ps, r);
            ps->v[home[r]].nranks++;
            plan->ranks[r].numa = (int)(g->numa != NULL
                                            ? g->numa->os_index
                                            : ps->v[home[r]].numa->os_index);
            plan->ranks[r].numa_guessed = g->numa == NULL;
        }
    if (policy == AMLDIST_CPU_BIND_NONE) {
        free(home);
        return 0;
    }
    if (policy == AMLDIST_CPU_BIND_SOCKET)
        attach_rankless(ps, t->h);
    for (int i = 0; i < ps->n; i++) {
        int k = 0;
        for (int r = 0; r < plan->n; r++)
            if (home[r] == i)
                members[k++] = r;
        if (policy == AMLDIST_CPU_BIND_NUMA) {
            for (int j = 0; j < k; j++)
                take(&plan->ranks[members[j]], &ps->v[i], 0, ps->v[i].ncores);
            continue;
        }
        if (policy == AMLDIST_CPU_BIND_PACKAGE) {
            for (int j = 0; j < k; j++)
                take_package(&plan->ranks[members[j]], t->h, ps, &ps->v[i]);
            continue;
        }
        if (policy == AMLDIST_CPU_BIND_L3) {
            int rc = l3_or_split(plan, t->h, &ps->v[i], members, k);
            if (rc < 0) {
                free(home);
                return rc;
            }
            continue;
        }
        split(plan, &ps->v[i], members, k);
        if (policy != AMLDIST_CPU_BIND_SOCKET)
            continue;
        for (int m = 0; m < ps->n; m++)
            if (ps->v[m].home == i)
                split(plan, &ps->v[m], members, k);
    }
    free(home);
    return 0;
}

/* L3 policy without GPUs: each rank belongs to the NUMA node where its
 * exclusive block would start, and gets an L3 domain there. */
static int cpu_job_l3(amldist_plan_t *plan, hwloc_topology_t h,
                      struct pools *ps, int total, int *members)
{
    int n = plan->n, block = total >= n ? total / n : 0, rc = 0;
    for (int i = 0, seen = 0; rc == 0 && i < ps->n;
         seen += ps->v[i++].ncores) {
        int k = 0;
        for (int r = 0; r < n; r++)
            if (r * block >= seen && r * block < seen + ps->v[i].ncores) {
                members[k++] = r;
                plan->ranks[r].numa = (int)ps->v[i].numa->os_index;
            }
        rc = l3_or_split(plan, h, &ps->v[i], members, k);
    }
    return rc;
}

/* Without GPUs: the machine's cores in NUMA order, cut into equal blocks. */
static int cpu_job(amldist_plan_t *plan, hwloc_topology_t h, struct pools *ps,
                   int *members)
{
    int total = 0, n = plan->n;
    if (plan->opts.cpu_bind == AMLDIST_CPU_BIND_NONE) {
        for (int r = 0; r < n; r++)
            plan->ranks[r].numa = ps->n == 1 ? (int)ps->v[0].numa->os_index : -1;
        return 0;
    }
    for (int i = 0; i < ps->n; i++)
        total += ps->v[i].ncores;
    int block = total >= n ? total / n : total;
    if (total < n)
        amldist__warn(plan->warnings, sizeof plan->warnings,
                      "%d usable core%s for %d ranks: they share them", total,
                      total == 1 ? "" : "s", n);
    if (plan->opts.cpu_bind == AMLDIST_CPU_BIND_L3)
        return cpu_job_l3(plan, h, ps, total, members);
    for (int r = 0; r < n; r++) {
        int first = total >= n ? r * block : 0, seen = 0, touched = 0;
        struct amldist__rank *rk = &plan->ranks[r];
        rk->numa = -1;
        for (int i = 0; i < ps->n; i++) {
            int lo = first - seen, hi = first + block - seen;
            if (lo < 0)
                lo = 0;
            if (hi > ps->v[i].ncores)
                hi = ps->v[i].ncores;
            if (lo < hi) {
                if (plan->opts.cpu_bind == AMLDIST_CPU_BIND_NUMA)
                    take(rk, &ps->v[i], 0, ps->v[i].ncores);
                else if (plan->opts.cpu_bind == AMLDIST_CPU_BIND_PACKAGE)
                    take_package(rk, h, ps, &ps->v[i]);
                else
                    take(rk, &ps->v[i], lo, hi - lo);
                rk->numa = touched++ == 0 ? (int)ps->v[i].numa->os_index : -1;
            }
            seen += ps->v[i].ncores;
        }
    }
    return 0;
}

/* One explicit cpu list per rank, each inside the allowed cpus. */
static int explicit_lists(amldist_plan_t *plan, hwloc_const_bitmap_t allowed)
{
    const char *s = plan->opts.cpu_list;
    for (int r = 0; r < plan->n; r++) {
        size_t len = strcspn(s, ":");
        char buf[1024];
        if (len == 0 || len >= sizeof buf)
            return amldist__fail(
                AMLDIST_EINVAL,
                "--cpu-bind %s: %s for local rank %d (one list per rank)",
                plan->opts.cpu_list, len == 0 ? "no cpu list" : "list too long",
                r);
        memcpy(buf, s, len);
        buf[len] = '\0';
        hwloc_bitmap_t set = plan->ranks[r].cpus;
        if (hwloc_bitmap_list_sscanf(set, buf) < 0 || hwloc_bitmap_iszero(set))
            return amldist__fail(AMLDIST_EINVAL,
                                 "--cpu-bind: \"%s\" (local rank %d) is not a "
                                 "cpu list",
                                 buf, r);
        if (!hwloc_bitmap_isincluded(set, allowed)) {
            char ok[512];
            hwloc_bitmap_list_snprintf(ok, sizeof ok, allowed);
            return amldist__fail(AMLDIST_EINVAL,
                                 "--cpu-bind: local rank %d's cpus %s are not "
                                 "all among the cpus amlrun may use (%s)",
                                 r, buf, ok);
        }
        s += len;
        if (*s == ':')
            s++;
    }
    return 0;
}

static int numa_of_cpus(hwloc_topology_t h, hwloc_const_bitmap_t cpus)
{
    int found = -1;
    for (hwloc_obj_t n = NULL;
         (n = hwloc_get_next_obj_by_type(h, HWLOC_OBJ_NUMANODE, n));)
        if (hwloc_bitmap_intersects(n->cpuset, cpus)) {
            if (found >= 0)
                return -1;
            found = (int)n->os_index;
        }
    return found;
}

int amldist__plan_cpus_in(amldist_plan_t *plan, const amldist_topo_t *t,
                          hwloc_const_bitmap_t allowed)
{
    if (plan->opts.cpu_bind == AMLDIST_CPU_BIND_LIST) {
        int rc = explicit_lists(plan, allowed);
        for (int r = 0; rc == 0 && r < plan->n; r++)
            plan->ranks[r].numa = numa_of_cpus(t->h, plan->ranks[r].cpus);
        return rc;
    }
    struct pools ps = {NULL, 0};
    int *members = malloc((size_t)plan->n * sizeof *members);
    int rc = members != NULL ? pools_build(&ps, t->h, allowed) : AMLDIST_ENOMEM;
    if (rc == 0 && ps.n == 0)
        rc = amldist__fail(AMLDIST_EBIND, "no usable core in the allowed cpus");
    if (rc == 0 && t->ngpus > 0)
        rc = gpu_job(plan, t, &ps, members);
    else if (rc == 0)
        rc = cpu_job(plan, t->h, &ps, members);
    pools_free(&ps);
    free(members);
    if (rc == AMLDIST_ENOMEM)
        return amldist__fail(rc, "planning: out of memory");
    return rc;
}
