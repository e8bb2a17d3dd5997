/*
 * The l3 policy (torchrun 2.x's --numa-binding core-complex).  AMD EPYC has
 * an L3 for each core complex of 4 or 8 cores, POWER9 one for each pair of
 * cores: a rank whose threads span two of them moves its data between the
 * caches.  As torchrun does, each rank of a NUMA node gets the whole of one
 * cache domain (the cores under one last-level cache), the domains with
 * the most usable cores first.  With fewer domains than ranks, torchrun
 * binds two ranks to the same whole domain; here the ranks go round the
 * domains all the same, but those that land on one domain split its cores
 * in equal blocks as exclusive does, so that no core is shared while there
 * are enough, and a warning says so.
 */
#include <stdlib.h>

#include "plan/cpus_l3.h"

struct domain {
    hwloc_obj_t cache; /* the last-level cache; NULL: none above the core */
    int *core;         /* indices into the node's cores, in logical order */
    int n;
};

/* The outermost data (or unified) cache above a core: torchrun's "max level
 * cache", read from hwloc rather than sysfs. */
static hwloc_obj_t last_cache(hwloc_topology_t h, hwloc_const_bitmap_t pus)
{
    hwloc_obj_t last = NULL;
    for (hwloc_obj_t o = hwloc_get_obj_covering_cpuset(h, pus); o != NULL;
         o = o->parent)
        if (hwloc_obj_type_is_dcache(o->type))
            last = o;
    return last;
}

static int by_size_then_order(const void *a, const void *b)
{
    const struct domain *x = a, *y = b;
    if (x->n != y->n)
        return x->n > y->n ? -1 : 1;
    return (x->core[0] > y->core[0]) - (x->core[0] < y->core[0]);
}

static int domains_build(hwloc_topology_t h, hwloc_bitmap_t *cores,
                         int ncores, struct domain *d, int *nd)
{
    *nd = 0;
    for (int c = 0; c < ncores; c++) {
        hwloc_obj_t cache = last_cache(h, cores[c]);
        int i = 0;
        while (i < *nd && d[i].cache != cache)
            i++;
        if (i == *nd) {
            d[i].cache = cache;
            d[i].n = 0;
            d[i].core = malloc((size_t)ncores * sizeof *d[i].core);
            if (d[i].core == NULL)
                return AMLDIST_ENOMEM;
            (*nd)++;
        }
        d[i].core[d[i].n++] = c;
    }
    return 0;
}

/* Rank r takes the `idx`-th of `m` equal blocks of domain `d`; all of it
 * when the domain has fewer cores than ranks. */
static void take_block(struct amldist__rank *r, const struct domain *d,
                       hwloc_bitmap_t *cores, int idx, int m)
{
    int block = d->n >= m ? d->n / m : d->n;
    int first = d->n >= m ? idx * block : 0;
    for (int c = first; c < first + block; c++)
        hwloc_bitmap_or(r->cpus, r->cpus, cores[d->core[c]]);
}

int amldist__l3_split(amldist_plan_t *plan, hwloc_topology_t h,
                      hwloc_bitmap_t *cores, int ncores, unsigned node,
                      const int *ranks, int k)
{
    if (k == 0 || ncores == 0)
        return 0;
    struct domain *d = calloc((size_t)ncores, sizeof *d);
    int nd = 0, rc = d != NULL ? domains_build(h, cores, ncores, d, &nd)
                               : AMLDIST_ENOMEM;
    if (rc == 0 && nd == 1 && d[0].cache == NULL) {
        amldist__warn(plan->warnings, sizeof plan->warnings,
                      "the topology shows no cache above the cores of NUMA "
                      "node %u: --cpu-bind l3 (core-complex) splits it as "
                      "exclusive does",
                      node);
        rc = 1;
    }
    if (rc == 0) {
        qsort(d, (size_t)nd, sizeof *d, by_size_then_order);
        if (nd < k)
            amldist__warn(plan->warnings, sizeof plan->warnings,
                          "NUMA node %u has %d L3 domain%s (cores under one "
                          "last-level cache) for %d ranks: ranks take them "
                          "in turn, and those on the same domain split its "
                          "cores",
                          node, nd, nd == 1 ? "" : "s", k);
        for (int j = 0; j < k; j++) {
            const struct domain *dj = &d[j % nd];
            int m = k / nd + (j % nd < k % nd); /* ranks on domain j % nd */
            if (dj->n < m && j < nd)
                amldist__warn(plan->warnings, sizeof plan->warnings,
                              "an L3 domain of NUMA node %u has %d usable "
                              "core%s for %d ranks: they share them",
                              node, dj->n, dj->n == 1 ? "" : "s", m);
            take_block(&plan->ranks[ranks[j]], dj, cores, j / nd, m);
        }
    }
    for (int i = 0; d != NULL && i < nd; i++)
        free(d[i].core);
    free(d);
    return rc;
}
