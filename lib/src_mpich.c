/*
 * MPICH's Hydra and Intel MPI: PMI_RANK and PMI_SIZE (the PMI-1/PMI-2 wire
 * protocol's own variables, also set by srun --mpi=pmi2), and the local
 * pair MPI_LOCALRANKID / MPI_LOCALNRANKS that Hydra adds.  No node index.
 */
#include "layout.h"

int amldist__src_mpich(const amldist__env_t *env, struct amldist *r)
{
    amldist__reading_init(r, "mpich");
    int rc = amldist__env_quad(env, r, "PMI_RANK", "PMI_SIZE",
                               "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
    if (rc == 1)
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: MPICH / Intel MPI export no node index");
    return rc;
}
