/*
 * A PMIx launcher that sets no other variables (PRRTE's prun, srun
 * --mpi=pmix): PMIX_RANK from the environment, everything else from the PMIx
 * server.  Without the server only the rank is known, and layout.c reports
 * the missing world size, unless Slurm describes the same step.
 */
#include <limits.h>

#include "layout.h"

int amldist__src_pmix(const amldist__env_t *env, struct amldist *r)
{
    amldist__reading_init(r, "pmix");
    int rc = amldist__env_field(env, r, AMLDIST_FIELD_RANK, "PMIX_RANK");
    if (rc <= 0)
        return rc;
    amldist__pmix_info_t info;
    char why[160];
    if (amldist__pmix_query(env, &info, why, sizeof why) != 0) {
        for (int f = AMLDIST_FIELD_WORLD_SIZE; f < AMLDIST_FIELD_MASTER_ADDR;
             f++)
            amldist__why(r, (amldist_field_t)f, "unknown: %s", why);
        return 1;
    }
    static const struct {
        amldist_field_t f;
        const char *key;
    } keys[] = {
        {AMLDIST_FIELD_WORLD_SIZE, "PMIX_JOB_SIZE"},
        {AMLDIST_FIELD_LOCAL_RANK, "PMIX_LOCAL_RANK"},
        {AMLDIST_FIELD_LOCAL_WORLD_SIZE, "PMIX_LOCAL_SIZE"},
        {AMLDIST_FIELD_NODE_RANK, "PMIX_NODEID"},
        {AMLDIST_FIELD_NUM_NODES, "PMIX_NUM_NODES"},
    };
    long vals[] = {info.job_size, info.local_rank, info.local_size,
                   info.node_id, info.num_nodes};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        if (vals[i] >= 0 && vals[i] <= INT_MAX)
            amldist__set(r, keys[i].f, vals[i], "PMIx %s=%ld", keys[i].key,
                         vals[i]);
        else
            amldist__why(r, keys[i].f, "unknown: the PMIx server has no %s",
                         keys[i].key);
    }
    if (info.rank0_host[0] != '\0' &&
        amldist__valid_host(info.rank0_host) == 0) {
        amldist__strlcpy(r->addr, info.rank0_host, sizeof r->addr);
        amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                     "PMIx PMIX_HOSTNAME of rank 0=%s", info.rank0_host);
    }
    return 1;
}
