/*
 * Slurm: the tasks of an srun step.  SLURM_PROCID, SLURM_NTASKS (the step's
 * SLURM_STEP_NUM_TASKS first), SLURM_LOCALID, SLURM_NODEID, SLURM_NNODES
 * (SLURM_STEP_NUM_NODES first), the local world size from
 * SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE ("2(x3),1") at this node,
 * and the master as the first host of SLURM_STEP_NODELIST or
 * SLURM_JOB_NODELIST.
 *
 * A batch script is not a task of a step: it sees SLURM_PROCID=0 and the
 * whole allocation's SLURM_NTASKS, but it is one process.  Slurm sets
 * SLURM_STEP_ID only in steps, so without it (and with SLURM_JOB_ID) the
 * Slurm variables describe the allocation, not this process.
 */
#include "layout/layout.h"

/* The first variable of `names` that is set. */
static const char *first_set(const amldist__env_t *env,
                             const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (amldist__env_get(env, names[i]) != NULL)
            return names[i];
    return names[0];
}
#define FIRST_SET(env, ...)                                                    \
    first_set(env, (const char *const[]){__VA_ARGS__},                         \
              sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *))

static int local_world(const amldist__env_t *env, struct amldist *r)
{
    const char *name = FIRST_SET(env, "SLURM_STEP_TASKS_PER_NODE",
                                 "SLURM_TASKS_PER_NODE");
    const char *list = amldist__env_get(env, name);
    int node = r->val[AMLDIST_FIELD_NODE_RANK];
    long tasks;
    if (list == NULL || node < 0)
        return 0;
    int rc = amldist__tasks_per_node(list, node, &tasks);
    if (rc == AMLDIST_ERANGE)
        return amldist__fail(AMLDIST_ERANGE,
                             "%s=%s has no entry for node %d (%s)", name, list,
                             node, r->why[AMLDIST_FIELD_NODE_RANK]);
    if (rc < 0)
        return amldist__fail(AMLDIST_EPARSE,
                             "%s=\"%s\": not a Slurm tasks-per-node list "
                             "such as 2(x3),1",
                             name, list);
    amldist__set(r, AMLDIST_FIELD_LOCAL_WORLD_SIZE, tasks, "%s=%s at node %d",
                 name, list, node);
    return 0;
}

static int master(const amldist__env_t *env, struct amldist *r)
{
    const char *name = FIRST_SET(env, "SLURM_STEP_NODELIST",
                                 "SLURM_JOB_NODELIST", "SLURM_NODELIST");
    const char *list = amldist__env_get(env, name);
    if (list == NULL)
        return 0;
    if (amldist__hostlist_nth(list, 0, r->addr, sizeof r->addr) != 0) {
        r->addr[0] = '\0';
        return amldist__fail(AMLDIST_EPARSE,
                             "%s=\"%s\": not a Slurm host list such as "
                             "gpu[009-011,013]",
                             name, list);
    }
    amldist__why(r, AMLDIST_FIELD_MASTER_ADDR, "first host of %s=%s", name,
                 list);
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
    const char *world = FIRST_SET(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS",
                                  "SLURM_NPROCS");
    if (amldist__env_get(env, world) == NULL)
        world = "SLURM_NTASKS"; /* the one to name when none is set */
    int rc = amldist__env_quad(env, r, "SLURM_PROCID", world, NULL, NULL);
    if (rc <= 0)
        return rc;
    if ((rc = amldist__env_field(env, r, AMLDIST_FIELD_LOCAL_RANK,
                                 "SLURM_LOCALID")) < 0 ||
        (rc = amldist__env_field(env, r, AMLDIST_FIELD_NODE_RANK,
                                 "SLURM_NODEID")) < 0 ||
        (rc = amldist__env_field(env, r, AMLDIST_FIELD_NUM_NODES,
                                 FIRST_SET(env, "SLURM_STEP_NUM_NODES",
                                           "SLURM_NNODES",
                                           "SLURM_JOB_NUM_NODES"))) < 0 ||
        (rc = local_world(env, r)) < 0 || (rc = master(env, r)) < 0)
        return rc;
    return 1;
}
