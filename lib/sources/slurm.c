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
 * A batch script is not a task of a step: it sees SLURM_PROCID=0 and the
 * whole allocation's SLURM_NTASKS, but it is one process.  Slurm sets
 * SLURM_STEP_ID only in steps, so without it (and with SLURM_JOB_ID) the
 * Slurm variables describe the allocation, not this process.
 *
 * The master of a step: the host where task 0 runs, learned from what
 * every task is given, without asking anyone.
 *
 * srun's block, cyclic and plane distributions put task 0 on the first node
 * of the step, SLURM_STEP_NODELIST sorted by name: the master is its first
 * host.  Two layouts put task 0 elsewhere, and every task of them gets the
 * same sorted node list, so that rule would name a host without rank 0:
 *   - srun -m arbitrary (SLURM_DISTRIBUTION=arbitrary): task i runs on the
 *     i-th host of SLURM_HOSTFILE, or of srun -w's list;
 *   - a heterogeneous step (srun A : B, SLURM_HET_SIZE): task 0 is the
 *     first component's, on that component's node, wherever its name sorts.
 * There each node knows only its own tasks (SLURM_GTIDS), so the master is
 *   1. the one host of a one-node step;
 *   2. in a two-node step, this host when it runs task 0 and the other one
 *      when it does not (every task decides the same way, and each finds
 *      the same host);
 *   3. under -m arbitrary, the first host of SLURM_HOSTFILE when this node
 *      can read it (a shared path is not guaranteed), checked against
 *      SLURM_GTIDS: a file that says task 0 is here when Slurm did not put
 *      it here (or the reverse) has changed since srun read it;
 *   4. otherwise not known, and the explanation says why and what to do:
 *      MASTER_ADDR, or srun --mpi=pmix, whose server knows the host of
 *      rank 0 (layout/layout.c asks it when no master is known).
 * Never a guess: every task of a step gets the same master or none.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/sources.h"

/* SLURM_GTIDS, the step's task ids on this node, once checked. */
struct gtids {
    const char *text; /* NULL: absent or not this task's */
    long count;
    int has_rank0;
};

/* The first variable of `names` that is set (names[0] when none is). */
#define SLURM_FIRST_SET(env, ...)                                              \
    first_set(env, (const char *const[]){__VA_ARGS__},                         \
              sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *))

static const char *first_set(const amldist__env_t *env,
                             const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (amldist__env_get(env, names[i]) != NULL)
            return names[i];
    return names[0];
}

static int het_step(const amldist__env_t *env)
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
static int read_gtids(const char *s, long world, long self, struct gtids *g)
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

static long host_index(const char *list, const char *name)
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
    if (!het_step(env)) {
        *index = r->val[AMLDIST_FIELD_NODE_RANK];
        snprintf(why, whysz, "node %ld", *index);
        return *index >= 0;
    }
    const char *name = SLURM_FIRST_SET(env, "SLURM_STEP_NODELIST",
                                       "SLURM_JOB_NODELIST", "SLURM_NODELIST");
    const char *host = amldist__env_get(env, "SLURMD_NODENAME");
    *index = host_index(amldist__env_get(env, name), host);
    snprintf(why, whysz, "SLURMD_NODENAME=%.64s, entry %ld of %s", host,
             *index, name);
    return *index >= 0;
}

static int local_world(const amldist__env_t *env, struct amldist *r,
                       const struct gtids *g)
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

/* ---- the master (rules 1 to 4 above) ----------------------------------- */

#define HOSTFILE_LINE 4096

/* The first host named in a Slurm hostfile: hosts one per line or comma
 * separated, host lists allowed ("n[1-2]"), '#' starts a comment.  0, or -1
 * with `why` saying what was wrong. */
static int hostfile_first(const char *path, char *host, size_t hostsz,
                          char *why, size_t whysz)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        snprintf(why, whysz, "this node cannot read it: %s", strerror(errno));
        return -1;
    }
    char line[HOSTFILE_LINE];
    int rc = -1;
    snprintf(why, whysz, "it names no host");
    while (fgets(line, sizeof line, f) != NULL) {
        size_t n = strcspn(line, "#\n");
        if (line[n] == '\0' && n == sizeof line - 1) {
            snprintf(why, whysz, "its first line is too long");
            break;
        }
        line[n] = '\0';
        while (n > 0 && strchr(" \t\r", line[n - 1]) != NULL)
            line[--n] = '\0';
        char *p = line + strspn(line, " \t");
        if (*p == '\0')
            continue;
        if (amldist__hostlist_nth(p, 0, host, hostsz) == 0)
            rc = 0;
        else
            snprintf(why, whysz, "\"%.64s\" is not a Slurm host list", p);
        break;
    }
    fclose(f);
    return rc;
}

/* Rule 2: the two-node step, from this node's SLURM_GTIDS. */
static int of_two(const amldist__env_t *env, const char *name,
                  const char *list, const struct gtids *g,
                  struct amldist *r)
{
    const char *self = amldist__env_get(env, "SLURMD_NODENAME");
    long me = host_index(list, self);
    if (g->text == NULL || me < 0)
        return 0;
    long at = g->has_rank0 ? me : 1 - me;
    if (amldist__hostlist_nth(list, at, r->addr, sizeof r->addr) != 0)
        return 0;
    if (g->has_rank0)
        amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                     "this host: SLURM_GTIDS=%.48s on SLURMD_NODENAME=%.48s "
                     "holds task 0",
                     g->text, self);
    else
        amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                     "the other host of %s=%.48s: task 0 is not in "
                     "SLURM_GTIDS=%.48s on SLURMD_NODENAME=%.48s",
                     name, list, g->text, self);
    return 1;
}

/* Rule 3: srun -m arbitrary's SLURM_HOSTFILE. */
static int of_hostfile(const amldist__env_t *env,
                       const struct gtids *g, struct amldist *r)
{
    const char *path = amldist__env_get(env, "SLURM_HOSTFILE");
    const char *self = amldist__env_get(env, "SLURMD_NODENAME");
    char host[AMLDIST__HOST_MAX], why[128];
    if (path == NULL)
        return 0;
    if (hostfile_first(path, host, sizeof host, why, sizeof why) != 0) {
        amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                     "unknown: srun -m arbitrary puts rank 0 on the first "
                     "host of SLURM_HOSTFILE=%.64s, but %s; set MASTER_ADDR "
                     "or use srun --mpi=pmix",
                     path, why);
        return -1;
    }
    if (g->text != NULL && self != NULL &&
        g->has_rank0 != (strcmp(host, self) == 0)) {
        amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                     "unknown: SLURM_HOSTFILE=%.64s names %.48s first, but "
                     "SLURM_GTIDS=%.32s on %.48s says task 0 is %s: the file "
                     "changed after srun read it",
                     path, host, g->text, self,
                     g->has_rank0 ? "here" : "elsewhere");
        return -1;
    }
    memcpy(r->addr, host, sizeof r->addr);
    amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                 "first host of SLURM_HOSTFILE=%.96s (srun -m arbitrary)",
                 path);
    return 1;
}

static int master_of(const amldist__env_t *env, struct amldist *r,
                     const struct gtids *g)
{
    const char *name = SLURM_FIRST_SET(env, "SLURM_STEP_NODELIST",
                                       "SLURM_JOB_NODELIST", "SLURM_NODELIST");
    const char *list = amldist__env_get(env, name);
    if (list == NULL)
        return 0;
    long hosts = amldist__hostlist_count(list);
    if (hosts <= 0)
        return amldist__fail(AMLDIST_EPARSE,
                             "%s=\"%s\": not a Slurm host list such as "
                             "gpu[009-011,013]",
                             name, list);
    const char *dist = amldist__env_get(env, "SLURM_DISTRIBUTION");
    int arbitrary = dist != NULL && strncmp(dist, "arbitrary", 9) == 0;
    int het = het_step(env);
    const char *layout = het ? "a heterogeneous step" : "srun -m arbitrary";

    if ((!het && !arbitrary) || hosts == 1) {
        amldist__hostlist_nth(list, 0, r->addr, sizeof r->addr);
        if (hosts == 1 && (het || arbitrary))
            amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                         "the one host of %s=%s (%s)", name, list, layout);
        else
            amldist__why(r, AMLDIST_FIELD_MASTER_ADDR, "first host of %s=%s",
                         name, list);
        return 0;
    }
    if (hosts == 2 && of_two(env, name, list, g, r))
        return 0;
    if (!het && arbitrary && of_hostfile(env, g, r) != 0)
        return 0; /* the master, or why there is none */
    r->addr[0] = '\0';
    amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                 "unknown: %s can put rank 0 on any of the %ld hosts of "
                 "%s=%.48s, and %s; set MASTER_ADDR or use srun --mpi=pmix",
                 layout, hosts, name, list,
                 g->text == NULL ? "there is no SLURM_GTIDS"
                 : arbitrary && !het ? "no SLURM_HOSTFILE names them"
                                     : "no variable says which");
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
    struct gtids g;
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
        (rc = master_of(env, r, &g)) < 0)
        return rc;
    return 1;
}
