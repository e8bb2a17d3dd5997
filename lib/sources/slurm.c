/*
 * Slurm: the tasks of an srun step.  SLURM_PROCID, SLURM_NTASKS (the step's
 * SLURM_STEP_NUM_TASKS first), SLURM_LOCALID, SLURM_NODEID, SLURM_NNODES
 * (SLURM_STEP_NUM_NODES first), the local world size and the master.
 *
 * The local world size is the count of SLURM_GTIDS, the step's task ids
 * that slurmstepd runs on this node; without it, the entry of
 * SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE ("2(x3),1") at this node.
 * That list follows the step's node list, sorted by name, and so does
 * SLURM_NODEID, except in a heterogeneous step (srun A : B, SLURM_HET_SIZE):
 * there node ids follow the components, so this node's entry is found by
 * its name (SLURMD_NODENAME), never by SLURM_NODEID.
 *
 * The master is the host of rank 0 (slurm_rank0.c says how it is found).
 *
 * A batch script is not a task of a step: it sees SLURM_PROCID=0 and the
 * whole allocation's SLURM_NTASKS, but it is one process.  Slurm sets
 * SLURM_STEP_ID only in steps, so without it (and with SLURM_JOB_ID) the
 * Slurm variables describe the allocation, not this process.
 */
#include <stdlib.h>
#include <string.h>

#include "sources/slurm.h"

const char *amldist__slurm_first_set(const amldist__env_t *env,
                                     const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (amldist__env_get(env, names[i]) != NULL)
            return names[i];
    return names[0];
}

int amldist__slurm_het(const amldist__env_t *env)
{
    const char *n = amldist__env_get(env, "SLURM_HET_SIZE");
    if (n == NULL)
        n = amldist__env_get(env, "SLURM_PACK_SIZE"); /* before 20.02 */
    return n != NULL && strcmp(n, "1") != 0;
}

/*
 * SLURM_GTIDS ("1,2"): what it says about this node, or -1 when it is not
 * a list of task ids below the world size that holds this task's own.
 */
static int read_gtids(const char *s, long world, long self,
                      amldist__slurm_gtids_t *g)
{
    memset(g, 0, sizeof *g);
    g->text = s;
    int mine = 0;
    for (const char *p = s;; p++) {
        char *end;
        if (*p < '0' || *p > '9')
            return -1;
        long id = strtol(p, &end, 10);
        if (end - p > 9 || id >= world)
            return -1;
        g->count++;
        g->has_rank0 |= id == 0;
        mine |= id == self;
        p = end;
        if (*p == '\0')
            break;
        if (*p != ',')
            return -1;
    }
    return mine ? 0 : -1;
}

struct find_host {
    const char *name;
    long index;
};

static int is_host(const char *host, long index, void *arg)
{
    struct find_host *f = arg;
    if (strcmp(host, f->name) != 0)
        return 0;
    f->index = index;
    return 1;
}

long amldist__slurm_host_index(const char *list, const char *name)
{
    struct find_host f = {name, -1};
    if (list == NULL || name == NULL ||
        amldist__hostlist_foreach(list, is_host, &f) < 0)
        return -1;
    return f.index;
}

/* This node's place in the tasks-per-node list: SLURM_NODEID, or in a
 * heterogeneous step this host's place in the step's node list. */
static int node_index(const amldist__env_t *env, const struct amldist *r,
                      long *index, char *why, size_t whysz)
{
    if (!amldist__slurm_het(env)) {
        *index = r->val[AMLDIST_FIELD_NODE_RANK];
        snprintf(why, whysz, "node %ld", *index);
        return *index >= 0;
    }
    const char *name = SLURM_FIRST_SET(env, "SLURM_STEP_NODELIST",
                                       "SLURM_JOB_NODELIST", "SLURM_NODELIST");
    const char *host = amldist__env_get(env, "SLURMD_NODENAME");
    *index = amldist__slurm_host_index(amldist__env_get(env, name), host);
    snprintf(why, whysz, "SLURMD_NODENAME=%.64s, entry %ld of %s", host,
             *index, name);
    return *index >= 0;
}

static int local_world(const amldist__env_t *env, struct amldist *r,
                       const amldist__slurm_gtids_t *g)
{
    if (g->text != NULL) {
        amldist__set(r, AMLDIST_FIELD_LOCAL_WORLD_SIZE, g->count,
                     "SLURM_GTIDS=%.96s (the step's tasks on this node)",
                     g->text);
        return 0;
    }
    const char *name = SLURM_FIRST_SET(env, "SLURM_STEP_TASKS_PER_NODE",
                                       "SLURM_TASKS_PER_NODE");
    const char *list = amldist__env_get(env, name);
    long node, tasks;
    char at[128];
    if (list == NULL)
        return 0;
    if (!node_index(env, r, &node, at, sizeof at)) {
        amldist__why(r, AMLDIST_FIELD_LOCAL_WORLD_SIZE,
                     "unknown: a heterogeneous step without SLURM_GTIDS, and "
                     "this node is not found in the step's node list (%s)",
                     at);
        return 0;
    }
    int rc = amldist__tasks_per_node(list, node, &tasks);
    if (rc == AMLDIST_ERANGE)
        return amldist__fail(AMLDIST_ERANGE,
                             "%s=%s has no entry for %s (%s)", name, list, at,
                             r->why[AMLDIST_FIELD_NODE_RANK]);
    if (rc < 0)
        return amldist__fail(AMLDIST_EPARSE,
                             "%s=\"%s\": not a Slurm tasks-per-node list "
                             "such as 2(x3),1",
                             name, list);
    amldist__set(r, AMLDIST_FIELD_LOCAL_WORLD_SIZE, tasks, "%s=%s at %s",
                 name, list, at);
    return 0;
}

int amldist__src_slurm(const amldist__env_t *env, struct amldist *r)
{
    amldist__reading_init(r, "slurm");
    if (amldist__env_get(env, "SLURM_PROCID") == NULL)
        return 0;
    if (amldist__env_get(env, "SLURM_JOB_ID") != NULL &&
        amldist__env_get(env, "SLURM_STEP_ID") == NULL &&
        amldist__env_get(env, "SLURM_STEPID") == NULL)
        return 0; /* the batch script */
    const char *world = SLURM_FIRST_SET(env, "SLURM_STEP_NUM_TASKS",
                                        "SLURM_NTASKS", "SLURM_NPROCS");
    if (amldist__env_get(env, world) == NULL)
        world = "SLURM_NTASKS"; /* the one to name when none is set */
    int rc = amldist__env_quad(env, r, "SLURM_PROCID", world, NULL, NULL);
    if (rc <= 0)
        return rc;
    /* A SLURM_GTIDS that does not hold this task is not this step's (a
     * process that set SLURM_PROCID itself): left aside. */
    amldist__slurm_gtids_t g;
    const char *gtids = amldist__env_get(env, "SLURM_GTIDS");
    if (gtids == NULL ||
        read_gtids(gtids, r->val[AMLDIST_FIELD_WORLD_SIZE],
                   r->val[AMLDIST_FIELD_RANK], &g) < 0)
        memset(&g, 0, sizeof g);
    if ((rc = amldist__env_field(env, r, AMLDIST_FIELD_LOCAL_RANK,
                                 "SLURM_LOCALID")) < 0 ||
        (rc = amldist__env_field(env, r, AMLDIST_FIELD_NODE_RANK,
                                 "SLURM_NODEID")) < 0 ||
        (rc = amldist__env_field(env, r, AMLDIST_FIELD_NUM_NODES,
                                 SLURM_FIRST_SET(env, "SLURM_STEP_NUM_NODES",
                                                 "SLURM_NNODES",
                                                 "SLURM_JOB_NUM_NODES"))) < 0 ||
        (rc = local_world(env, r, &g)) < 0 ||
        (rc = amldist__slurm_master(env, r, &g)) < 0)
        return rc;
    return 1;
}
