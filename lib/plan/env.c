/* The variables each rank gets, added to a heap environment array. */
#include <stdio.h>

#include "topo/topo_internal.h"

static int nic_vars(const amldist_plan_t *p, const struct amldist__rank *r,
                    char ***envp)
{
    char dev[AMLDIST__DEVNAME_MAX + 16];
    int rc = amldist_envp_set(envp, "AMLDIST_NIC", r->nicname);
    amldist_nic_bind_t how = p->opts.nic_bind;
    if (rc < 0 || how == AMLDIST_NIC_BIND_EXPORT)
        return rc;
    /* RDMA devices are named with their port; netdevs by name alone. */
    if (r->nicport > 0)
        snprintf(dev, sizeof dev, "%s:%d", r->nicname, r->nicport);
    else
        snprintf(dev, sizeof dev, "%s", r->nicname);
    if (how == AMLDIST_NIC_BIND_UCX)
        return amldist_envp_set(envp, "UCX_NET_DEVICES", dev);
    char exact[sizeof dev + 1];
    /* A leading '=' makes NCCL match the name exactly, not as a prefix
     * (mlx5_1 would otherwise also select mlx5_10). */
    snprintf(exact, sizeof exact, "=%s", dev);
    return amldist_envp_set(
        envp, r->nicport > 0 ? "NCCL_IB_HCA" : "NCCL_SOCKET_IFNAME", exact);
}

/*
 * The one OMP_NUM_THREADS rule.  torchrun sets 1 for each of several
 * workers, so that each one's OpenMP pool does not take every core of the
 * node; a rank bound to cores of its own can use them all, one thread per
 * core.  Ranks bound to cores they share (--cpu-bind numa or package, or
 * more ranks than cores) are the several workers on the same cores: 1.
 */
int amldist_plan_rank_omp_threads(const amldist_plan_t *p, int lrank,
                                  int nlocal)
{
    if (p != NULL && (lrank < 0 || lrank >= p->n))
        return AMLDIST_EINVAL;
    if (p != NULL && p->ranks[lrank].bind_cpus)
        return p->ranks[lrank].cpus_shared ? 1 : p->ranks[lrank].ncores;
    if (p != NULL && p->n > nlocal)
        nlocal = p->n;
    return nlocal > 1 ? 1 : 0;
}

int amldist_plan_rank_env(const amldist_plan_t *p, int lrank, char ***envp)
{
    amldist__clear_error();
    if (p == NULL || envp == NULL || lrank < 0 || lrank >= p->n)
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_plan_rank_env: bad argument (rank %d)",
                             lrank);
    const struct amldist__rank *r = &p->ranks[lrank];
    char num[32];
    int rc = 0;
    if (r->gpu >= 0) {
        rc = amldist_envp_set(envp, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        if (rc == 0)
            rc = amldist_envp_set(envp, "AMLDIST_GPU", r->busid);
        int single = p->opts.gpu_bind == AMLDIST_GPU_BIND_SINGLE;
        snprintf(num, sizeof num, "%d", single ? 0 : r->gpu);
        if (rc == 0)
            rc = amldist_envp_set(envp, "AMLDIST_GPU_INDEX", num);
        if (rc == 0 && single)
            rc = amldist_envp_set(envp, "CUDA_VISIBLE_DEVICES", r->gputoken);
        /* More ranks than GPUs on the machine: tell the rank, so that
         * amldist_nccl_comm_init() refuses before NCCL does.  GPU g has
         * the machine's ranks g, g + GPUs, ...: shared when two exist. */
        if (rc == 0 && r->gpu + p->ngpus < amldist__plan_machine_ranks(p))
            rc = amldist_envp_set(envp, "AMLDIST_GPU_SHARED", "1");
    }
    if (rc == 0 && r->bind_cpus)
        rc = amldist_envp_set(envp, "AMLDIST_CPUS", r->cpulist);
    int threads = amldist_plan_rank_omp_threads(p, lrank, p->n);
    snprintf(num, sizeof num, "%d", threads);
    if (rc == 0 && threads > 0 &&
        amldist_envp_get(*envp, "OMP_NUM_THREADS") == NULL)
        rc = amldist_envp_set(envp, "OMP_NUM_THREADS", num);
    if (rc == 0 && r->numa >= 0) {
        snprintf(num, sizeof num, "%d", r->numa);
        rc = amldist_envp_set(envp, "AMLDIST_NUMA", num);
    }
    if (rc == 0 && r->nic >= 0 && p->opts.nic_bind != AMLDIST_NIC_BIND_NONE)
        rc = nic_vars(p, r, envp);
    if (rc < 0)
        return amldist__fail(rc, "rank %d environment: out of memory", lrank);
    return 0;
}
