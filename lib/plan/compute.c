/* The plan: GPU, cpus, NUMA node, NIC and memory policy of each rank. */
#include <linux/mempolicy.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_internal.h"

#define MAX_LOCAL_RANKS 4096

static int count_cores(hwloc_topology_t h, hwloc_const_bitmap_t set)
{
    hwloc_obj_type_t unit = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_CORE) > 0
                                ? HWLOC_OBJ_CORE
                                : HWLOC_OBJ_PU;
    int n = 0;
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_obj_by_type(h, unit, o));)
        n += hwloc_bitmap_intersects(o->cpuset, set);
    return n;
}

/* This process's affinity: what a launcher started by mpirun or Slurm
 * inherited. */
static int own_affinity(hwloc_bitmap_t set)
{
    size_t ncpus = 8192;
    cpu_set_t *mask = CPU_ALLOC(ncpus);
    size_t size = CPU_ALLOC_SIZE(ncpus);
    if (mask == NULL)
        return -1;
    CPU_ZERO_S(size, mask);
    if (sched_getaffinity(0, size, mask) < 0) {
        CPU_FREE(mask);
        return -1;
    }
    hwloc_bitmap_zero(set);
    for (size_t c = 0; c < ncpus; c++)
        if (CPU_ISSET_S(c, size, mask))
            hwloc_bitmap_set(set, (unsigned)c);
    CPU_FREE(mask);
    return 0;
}

/*
 * The cpus ranks may use: the topology's allowed cpus (the cgroup) cut down
 * to what the launcher inherited.  The mpirun trap: mpirun binds each
 * process to one core by default, so a per-node launcher under it would
 * squeeze all its ranks onto that core.
 */
static int allowed_cpus(amldist_plan_t *p, const amldist_topo_t *t,
                        hwloc_bitmap_t allowed)
{
    hwloc_bitmap_t all = hwloc_bitmap_alloc();
    if (all == NULL)
        return amldist__fail(AMLDIST_ENOMEM, "planning: out of memory");
    hwloc_bitmap_and(all, hwloc_topology_get_topology_cpuset(t->h),
                     hwloc_topology_get_allowed_cpuset(t->h));
    hwloc_bitmap_copy(allowed, all);
    const char *inherited = p->opts.inherited_cpus;
    if (inherited != NULL) {
        if (hwloc_bitmap_list_sscanf(allowed, inherited) < 0) {
            hwloc_bitmap_free(all);
            return amldist__fail(AMLDIST_EINVAL,
                                 "inherited cpus \"%s\": not a cpu list",
                                 inherited);
        }
    } else if (!t->from_xml && !(p->opts.flags & AMLDIST_PLAN_NODE_WIDE) &&
               own_affinity(allowed) < 0) {
        hwloc_bitmap_copy(allowed, all);
    }
    hwloc_bitmap_and(allowed, allowed, all);
    if (hwloc_bitmap_iszero(allowed)) {
        hwloc_bitmap_free(all);
        return amldist__fail(AMLDIST_EINVAL,
                             "inherited cpus %s: none of them is in %s",
                             inherited != NULL ? inherited : "(affinity)",
                             t->source);
    }
    int have = count_cores(t->h, allowed), could = count_cores(t->h, all);
    if (p->opts.cpu_bind != AMLDIST_CPU_BIND_LIST &&
        !hwloc_bitmap_isequal(allowed, all) && have < p->n) {
        char mine[256], wide[256];
        hwloc_bitmap_list_snprintf(mine, sizeof mine, allowed);
        hwloc_bitmap_list_snprintf(wide, sizeof wide, all);
        if (p->opts.flags & AMLDIST_PLAN_WIDEN) {
            amldist__warn(p->warnings, sizeof p->warnings,
                          "amlrun was bound to cpus %s (%d core%s) for %d "
                          "ranks: widened to all allowed cpus %s",
                          mine, have, have == 1 ? "" : "s", p->n, wide);
            hwloc_bitmap_copy(allowed, all);
            p->widened = 1;
        } else {
            amldist__warn(p->warnings, sizeof p->warnings,
                          "amlrun is bound to cpus %s (%d core%s) but starts "
                          "%d ranks, which must share them; %d cores (%s) "
                          "are allowed.  If mpirun started amlrun, run it "
                          "with `mpirun --bind-to none`; or add \",widen\" "
                          "to --cpu-bind",
                          mine, have, have == 1 ? "" : "s", p->n, could,
                          wide);
        }
    }
    hwloc_bitmap_free(all);
    return 0;
}

static int nic_dist(const amldist_topo_t *t, const struct amldist__rank *r,
                    const struct amldist__nic *c)
{
    if (r->gpu >= 0)
        return amldist__pci_dist(t->h, t->gpus[r->gpu].pci, c->pci);
    hwloc_obj_t node = amldist__io_numa(t->h, c->pci);
    return node != NULL && r->numa >= 0 && (int)node->os_index == r->numa
               ? AMLDIST_DIST_NODE
               : AMLDIST_DIST_SYS;
}

/* Nearest NIC with the best port state; equally near ones are used in
 * turn, so 8 GPUs over 4 NICs at the same distance get two each. */
static int choose_nics(amldist_plan_t *p, const amldist_topo_t *t)
{
    int tier = AMLDIST__PORT_DOWN;
    for (int i = 0; i < t->nnics; i++)
        if (t->nics[i].state > tier)
            tier = t->nics[i].state;
    int *used = calloc((size_t)(t->nnics > 0 ? t->nnics : 1), sizeof *used);
    if (used == NULL)
        return amldist__fail(AMLDIST_ENOMEM, "planning: out of memory");
    for (int r = 0; r < p->n; r++) {
        struct amldist__rank *rk = &p->ranks[r];
        int best = -1, bestd = 0;
        for (int i = 0; i < t->nnics; i++) {
            if (t->nics[i].state != tier)
                continue;
            int d = nic_dist(t, rk, &t->nics[i]);
            if (best < 0 || d < bestd || (d == bestd && used[i] < used[best])) {
                best = i;
                bestd = d;
            }
        }
        rk->nic = best;
        rk->nic_dist = bestd;
        if (best >= 0) {
            used[best]++;
            amldist__strlcpy(rk->nicname, t->nics[best].name,
                             sizeof rk->nicname);
            rk->nicport = t->nics[best].port;
        }
    }
    free(used);
    return 0;
}

static void set_node(struct amldist__rank *r, unsigned node)
{
    if (node < AMLDIST__NODEMASK_LONGS * 8 * sizeof(unsigned long))
        r->nodemask[node / (8 * sizeof(unsigned long))] |=
            1ul << (node % (8 * sizeof(unsigned long)));
}

static void memory_policy(amldist_plan_t *p, const amldist_topo_t *t,
                          struct amldist__rank *r)
{
    r->mem_mode = -1;
    memset(r->nodemask, 0, sizeof r->nodemask);
    amldist_mem_bind_t m = p->opts.mem_bind;
    if (m == AMLDIST_MEM_BIND_NONE)
        return;
    if (r->numa >= 0 && !r->numa_guessed) {
        set_node(r, (unsigned)r->numa);
        r->mem_mode = m == AMLDIST_MEM_BIND_LOCAL ? MPOL_PREFERRED : MPOL_BIND;
        return;
    }
    /* Cores over several nodes: MPOL_PREFERRED takes one node, so only the
     * strict policy can name them all; local then leaves first touch. */
    if (m != AMLDIST_MEM_BIND_STRICT || !r->bind_cpus)
        return;
    for (hwloc_obj_t n = NULL;
         (n = hwloc_get_next_obj_by_type(t->h, HWLOC_OBJ_NUMANODE, n));)
        if (hwloc_bitmap_intersects(n->cpuset, r->cpus)) {
            set_node(r, n->os_index);
            r->mem_mode = MPOL_BIND;
        }
}

/* Everything the child needs, in the form the system calls take. */
static int finish_rank(amldist_plan_t *p, const amldist_topo_t *t,
                       struct amldist__rank *r, hwloc_const_bitmap_t allowed)
{
    if (p->opts.cpu_bind == AMLDIST_CPU_BIND_NONE && p->widened)
        hwloc_bitmap_copy(r->cpus, allowed);
    r->bind_cpus = !hwloc_bitmap_iszero(r->cpus);
    if (r->bind_cpus) {
        r->ncores = count_cores(t->h, r->cpus);
        if (hwloc_bitmap_list_asprintf(&r->cpulist, r->cpus) < 0)
            return AMLDIST_ENOMEM;
        int last = hwloc_bitmap_last(r->cpus);
        size_t ncpus = (size_t)(last < 1023 ? 1024 : last + 1);
        r->mask = CPU_ALLOC(ncpus);
        if (r->mask == NULL)
            return AMLDIST_ENOMEM;
        r->masksize = CPU_ALLOC_SIZE(ncpus);
        CPU_ZERO_S(r->masksize, r->mask);
        unsigned c;
        hwloc_bitmap_foreach_begin(c, r->cpus) CPU_SET_S(c, r->masksize,
                                                          r->mask);
        hwloc_bitmap_foreach_end();
    }
    if (r->gpu >= 0) {
        amldist__strlcpy(r->busid, t->gpus[r->gpu].busid, sizeof r->busid);
        amldist__strlcpy(r->gputoken, t->gpus[r->gpu].token,
                         sizeof r->gputoken);
    }
    memory_policy(p, t, r);
    return 0;
}

/* Which ranks share a cpu with another, in two passes over the ranks: the
 * cpus two or more ranks have, then who has one of those. */
static int mark_shared(amldist_plan_t *p)
{
    hwloc_bitmap_t seen = hwloc_bitmap_alloc(), twice = hwloc_bitmap_alloc();
    hwloc_bitmap_t both = hwloc_bitmap_alloc();
    int rc = seen && twice && both ? 0 : AMLDIST_ENOMEM;
    for (int r = 0; rc == 0 && r < p->n; r++) {
        hwloc_bitmap_and(both, seen, p->ranks[r].cpus);
        hwloc_bitmap_or(twice, twice, both);
        hwloc_bitmap_or(seen, seen, p->ranks[r].cpus);
    }
    for (int r = 0; rc == 0 && r < p->n; r++)
        p->ranks[r].cpus_shared =
            p->ranks[r].bind_cpus &&
            hwloc_bitmap_intersects(p->ranks[r].cpus, twice);
    hwloc_bitmap_free(seen);
    hwloc_bitmap_free(twice);
    hwloc_bitmap_free(both);
    return rc;
}

/* Internal flag: the plan is of every rank of a machine whose launchers
 * split its GPUs (machine_slice()), which its warnings say. */
#define MACHINE_WIDE (1u << 31)

/*
 * This launcher's ranks of a machine whose launchers split its GPUs: the
 * plan of all the machine's ranks, as one launcher would make it (each
 * NUMA node's cores cut among every rank whose GPU is there, NICs used in
 * turn over all of them), of which this launcher keeps its slice.  Each
 * launcher computes the same whole, so their slices never overlap.
 */
static int machine_slice(const amldist_topo_t *t,
                         const amldist_plan_options_t *o, int nlocal,
                         int machine, amldist_plan_t **out)
{
    amldist_plan_options_t wo = *o;
    amldist_plan_t *whole, *p;
    wo.gpu_first = wo.machine_ranks = 0;
    wo.flags |= MACHINE_WIDE;
    int rc = amldist_plan_compute(t, &wo, machine, &whole);
    if (rc < 0)
        return rc;
    p = malloc(sizeof *p);
    struct amldist__rank *ranks = calloc((size_t)nlocal, sizeof *ranks);
    if (p == NULL || ranks == NULL) {
        free(p);
        free(ranks);
        amldist_plan_free(whole);
        return amldist__fail(AMLDIST_ENOMEM, "planning: out of memory");
    }
    *p = *whole;
    p->ranks = ranks;
    p->opts = *o;
    p->n = nlocal;
    for (int r = 0; r < nlocal; r++) {
        struct amldist__rank *from = &whole->ranks[o->gpu_first + r];
        p->ranks[r] = *from;
        from->cpus = NULL; /* now p's */
        from->cpulist = NULL;
        from->mask = NULL;
    }
    amldist_plan_free(whole);
    *out = p;
    return 0;
}

int amldist_plan_compute(const amldist_topo_t *t,
                         const amldist_plan_options_t *o, int nlocal,
                         amldist_plan_t **out)
{
    amldist__clear_error();
    amldist_plan_options_t current = AMLDIST_PLAN_OPTIONS_INIT;
    if (out == NULL || t == NULL)
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_plan_compute: NULL argument");
    *out = NULL;
    if (o != NULL) {
        int rc = amldist__opts_copy(&amldist__plan_options_kind,
                                    "amldist_plan_compute", &current, o);
        if (rc < 0)
            return rc;
    }
    o = &current;
    if (nlocal < 1 || nlocal > MAX_LOCAL_RANKS)
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_plan_compute: %d local ranks (1..%d)",
                             nlocal, MAX_LOCAL_RANKS);
    if ((unsigned)o->cpu_bind > AMLDIST_CPU_BIND_L3 ||
        (unsigned)o->mem_bind > AMLDIST_MEM_BIND_STRICT ||
        (unsigned)o->nic_bind > AMLDIST_NIC_BIND_NCCL ||
        (unsigned)o->gpu_bind > AMLDIST_GPU_BIND_SINGLE)
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_plan_compute: cpu_bind %d, mem_bind %d, "
                             "nic_bind %d or gpu_bind %d out of range",
                             (int)o->cpu_bind, (int)o->mem_bind,
                             (int)o->nic_bind, (int)o->gpu_bind);
    if (o->gpu_first < 0 || o->machine_ranks < 0 ||
        o->gpu_first > (1 << 30) - nlocal || o->machine_ranks > (1 << 30))
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_plan_compute: gpu_first %d or "
                             "machine_ranks %d out of range", o->gpu_first,
                             o->machine_ranks);
    if (o->cpu_bind == AMLDIST_CPU_BIND_LIST && o->cpu_list == NULL)
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_plan_compute: cpu_bind LIST without "
                             "cpu_list");
    int machine = o->machine_ranks > o->gpu_first + nlocal
                      ? o->machine_ranks : o->gpu_first + nlocal;
    /* An explicit cpu list is this launcher's own, whatever the others. */
    if (t->ngpus > 0 && machine > nlocal && machine <= MAX_LOCAL_RANKS &&
        o->cpu_bind != AMLDIST_CPU_BIND_LIST)
        return machine_slice(t, o, nlocal, machine, out);
    amldist_plan_t *p = calloc(1, sizeof *p);
    hwloc_bitmap_t allowed = hwloc_bitmap_alloc();
    if (p == NULL || allowed == NULL ||
        (p->ranks = calloc((size_t)nlocal, sizeof *p->ranks)) == NULL) {
        free(p);
        hwloc_bitmap_free(allowed);
        return amldist__fail(AMLDIST_ENOMEM, "planning: out of memory");
    }
    p->opts = *o;
    p->n = nlocal;
    p->ngpus = t->ngpus;
    p->single_numa = t->nnuma <= 1;
    if (t->vis_warning[0] != '\0')
        amldist__warn(p->warnings, sizeof p->warnings, "%s", t->vis_warning);
    int rc = 0;
    for (int r = 0; r < nlocal; r++) {
        p->ranks[r].gpu = t->ngpus > 0 ? (o->gpu_first + r) % t->ngpus : -1;
        p->ranks[r].numa = -1;
        p->ranks[r].nic = -1;
        p->ranks[r].mem_mode = -1;
        if ((p->ranks[r].cpus = hwloc_bitmap_alloc()) == NULL)
            rc = amldist__fail(AMLDIST_ENOMEM, "planning: out of memory");
    }
    if (t->ngpus > 0 && amldist__plan_machine_ranks(p) > t->ngpus)
        amldist__warn(p->warnings, sizeof p->warnings,
                      "%d ranks on %d GPU%s%s: ranks share GPUs, which one "
                      "NCCL communicator refuses (\"Duplicate GPU "
                      "detected\"); fine for CPU (gloo) jobs",
                      amldist__plan_machine_ranks(p), t->ngpus,
                      t->ngpus == 1 ? "" : "s",
                      o->flags & MACHINE_WIDE
                          ? " of this machine (its launchers together)"
                          : "");
    if (rc == 0)
        rc = allowed_cpus(p, t, allowed);
    if (rc == 0)
        rc = amldist__plan_cpus_in(p, t, allowed);
    for (int r = 0; rc == 0 && r < nlocal; r++)
        if (finish_rank(p, t, &p->ranks[r], allowed) < 0)
            rc = amldist__fail(AMLDIST_ENOMEM, "planning: out of memory");
    if (rc == 0 && mark_shared(p) < 0)
        rc = amldist__fail(AMLDIST_ENOMEM, "planning: out of memory");
    if (rc == 0)
        rc = choose_nics(p, t);
    hwloc_bitmap_free(allowed);
    if (rc < 0) {
        amldist_plan_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void amldist_plan_free(amldist_plan_t *p)
{
    if (p == NULL)
        return;
    for (int r = 0; p->ranks != NULL && r < p->n; r++) {
        hwloc_bitmap_free(p->ranks[r].cpus);
        free(p->ranks[r].cpulist);
        if (p->ranks[r].mask != NULL)
            CPU_FREE(p->ranks[r].mask);
    }
    free(p->ranks);
    free(p);
}
