/*
 * A PMIx launcher that sets no other variables (PRRTE's prun, srun
 * --mpi=pmix): PMIX_RANK from the environment, everything else from the PMIx
 * server (layout.c asks it only when this reading is the one used).  Without the server only the rank is known, and layout.c reports
 * the missing world size, unless Slurm describes the same step.
 */
#include "sources/sources.h"

int amldist__src_pmix(const amldist__env_t *env, struct amldist *r)
{
    amldist__reading_init(r, "pmix");
    int rc = amldist__env_field(env, r, AMLDIST_FIELD_RANK, "PMIX_RANK");
    if (rc <= 0)
        return rc;
    for (int f = AMLDIST_FIELD_WORLD_SIZE; f < AMLDIST_FIELD_MASTER_ADDR; f++)
        amldist__why(r, (amldist_field_t)f,
                     "unknown: PMIx exports only PMIX_RANK");
    r->want_pmix = 1;
    return 1;
}
