/*
 * Two launchers' readings of one process: canonical variables without a
 * marker beside an MPI or Slurm launcher, and an MPI launcher that is srun's
 * own step.  Readings of one job must agree and complete each other; a
 * smaller job whose world size divides ours is an outer launcher.
 */
#include <stdio.h>
#include <string.h>

#include "layout/layout.h"

/* Fields `to` lacks, taken from a reading of the same job. */
static void complement(struct amldist *to, const struct amldist *from)
{
    for (int f = 0; f < AMLDIST_FIELD_COUNT; f++) {
        if (f == AMLDIST_FIELD_MASTER_ADDR || f == AMLDIST_FIELD_MASTER_PORT ||
            amldist__known(to, (amldist_field_t)f) ||
            !amldist__known(from, (amldist_field_t)f))
            continue;
        to->val[f] = from->val[f];
        memcpy(to->why[f], from->why[f], sizeof to->why[f]);
    }
    to->want_pmix |= from->want_pmix;
}

/* An explanation quoted inside a derived one, without a second "derived: ". */
const char *amldist__why_inner(const char *why)
{
    return strncmp(why, "derived: ", 9) == 0 ? why + 9 : why;
}

/*
 * Canonical variables without a marker, and an MPI or Slurm launcher.  The
 * same world size: one job, which must agree.  A world size that is a
 * multiple of the launcher's: a per-node (or per-slot) launcher started by
 * it set the canonical variables, so they describe us.
 */
int amldist__relate(struct amldist *canon, const struct amldist *outer,
                    int prefer, struct amldist *chosen)
{
    int cw = canon->val[AMLDIST_FIELD_WORLD_SIZE];
    int ow = outer->val[AMLDIST_FIELD_WORLD_SIZE];
    if (cw == ow) {
        for (int f = 0; f < AMLDIST_FIELD_MASTER_ADDR; f++) {
            if (!amldist__known(canon, (amldist_field_t)f) ||
                !amldist__known(outer, (amldist_field_t)f) ||
                canon->val[f] == outer->val[f])
                continue;
            if (prefer == AMLDIST__PREFER_NONE)
                return amldist__fail(AMLDIST_ECONFLICT,
                                     "%s conflicts with %s (both describe a "
                                     "job of WORLD_SIZE=%d); set "
                                     "AMLDIST_PREFER=canonical or launcher "
                                     "to choose",
                                     canon->why[f], outer->why[f], cw);
            *chosen = prefer == AMLDIST__PREFER_CANON ? *canon : *outer;
            return 0;
        }
        *chosen = *canon;
        complement(chosen, outer);
        return 0;
    }
    if (ow > 0 && cw % ow != 0) {
        if (prefer != AMLDIST__PREFER_NONE) {
            *chosen = prefer == AMLDIST__PREFER_CANON ? *canon : *outer;
            return 0;
        }
        return amldist__fail(AMLDIST_ECONFLICT,
                             "WORLD_SIZE=%d conflicts with %s: not the same "
                             "job, and not a multiple of it as a launcher "
                             "started by it would set; leftovers in the "
                             "launcher's shell? unset RANK and WORLD_SIZE "
                             "there, or set AMLDIST_PREFER=launcher",
                             cw, outer->why[AMLDIST_FIELD_WORLD_SIZE]);
    }
    *chosen = *canon;
    /* One outer process per node (Azure ML's per-node launchers, the
     * guide's launch.py): the outer rank is the node index, and the per-node
     * launchers all ran the same command, so each node has world / nodes
     * ranks. */
    if (outer->val[AMLDIST_FIELD_LOCAL_WORLD_SIZE] == 1 &&
        outer->val[AMLDIST_FIELD_NUM_NODES] == ow) {
        const char *ranks = outer->why[AMLDIST_FIELD_RANK];
        const char *alone =
            amldist__why_inner(outer->why[AMLDIST_FIELD_LOCAL_WORLD_SIZE]);
        const char *nodes =
            amldist__why_inner(outer->why[AMLDIST_FIELD_NUM_NODES]);
        if (!amldist__known(chosen, AMLDIST_FIELD_NODE_RANK))
            amldist__set(chosen, AMLDIST_FIELD_NODE_RANK,
                         outer->val[AMLDIST_FIELD_RANK],
                         "derived: %s, one launcher per node (%s, %s)", ranks,
                         alone, nodes);
        if (!amldist__known(chosen, AMLDIST_FIELD_NUM_NODES))
            amldist__set(chosen, AMLDIST_FIELD_NUM_NODES, ow,
                         "derived: %s, one launcher per node", nodes);
        if (!amldist__known(chosen, AMLDIST_FIELD_LOCAL_WORLD_SIZE) &&
            cw > 0 && ow > 0)
            amldist__set(chosen, AMLDIST_FIELD_LOCAL_WORLD_SIZE, cw / ow,
                         "derived: %s / %d nodes, one launcher per node "
                         "(%s)",
                         canon->why[AMLDIST_FIELD_WORLD_SIZE], ow, nodes);
    }
    amldist__per_node_launcher(chosen, canon, outer);
    return 0;
}

/*
 * srun's MPI plugins describe the step they run in: --mpi=pmix names its
 * PMIx namespace "slurm.pmix.<job>.<step>", --mpi=pmi2 sets PMI_JOBID to
 * "<job>.<step>" (beside PMI_RANK and PMI_SIZE, which alone would read as
 * MPICH's Hydra).  Then the MPI reading and SLURM_* are one step: they must
 * agree, and Slurm fills in what the MPI side does not say (PMI-2 has no
 * local rank or node index at all).  A PMI_JOBID of another job or step is
 * a launcher started inside the step (mpiexec under srun): left alone.
 */
int amldist__same_step_under_srun(const amldist__env_t *env,
                                  struct amldist *mpi,
                                  const struct amldist *slurm)
{
    char what[96];
    if (strcmp(mpi->source, "pmix") == 0) {
        const char *ns = amldist__env_get(env, "PMIX_NAMESPACE");
        if (ns == NULL || strncmp(ns, "slurm.pmix.", 11) != 0)
            return 0;
        snprintf(what, sizeof what, "PMIX_NAMESPACE=%s", ns);
    } else if (strcmp(mpi->source, "mpich") == 0) {
        const char *id = amldist__env_get(env, "PMI_JOBID");
        const char *job = amldist__env_get(env, "SLURM_JOB_ID");
        const char *step = amldist__env_get(env, "SLURM_STEP_ID");
        if (step == NULL)
            step = amldist__env_get(env, "SLURM_STEPID");
        size_t n = job != NULL ? strlen(job) : 0;
        if (id == NULL || job == NULL || step == NULL || n == 0 ||
            strncmp(id, job, n) != 0 || id[n] != '.' ||
            strcmp(id + n + 1, step) != 0)
            return 0;
        snprintf(what, sizeof what, "PMI_JOBID=%s", id);
    } else {
        return 0;
    }
    for (int f = 0; f < AMLDIST_FIELD_MASTER_ADDR; f++)
        if (amldist__known(mpi, (amldist_field_t)f) &&
            amldist__known(slurm, (amldist_field_t)f) &&
            mpi->val[f] != slurm->val[f])
            return amldist__fail(AMLDIST_ECONFLICT,
                                 "%s conflicts with %s (%s is this Slurm "
                                 "step)",
                                 mpi->why[f], slurm->why[f], what);
    complement(mpi, slurm);
    if (!amldist__known(mpi, AMLDIST_FIELD_MASTER_ADDR) &&
        amldist__known(slurm, AMLDIST_FIELD_MASTER_ADDR)) {
        memcpy(mpi->addr, slurm->addr, sizeof mpi->addr);
        memcpy(mpi->why[AMLDIST_FIELD_MASTER_ADDR],
               slurm->why[AMLDIST_FIELD_MASTER_ADDR], AMLDIST__WHY_MAX);
    }
    return 0;
}
