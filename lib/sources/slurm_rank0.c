/*
 * The master of a Slurm step: the host where task 0 runs, learned from what
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
 *      rank 0 (layout.c asks it when no master is known).
 * Never a guess: every task of a step gets the same master or none.
 */
#include <errno.h>
#include <string.h>

#include "sources/slurm.h"

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
                  const char *list, const amldist__slurm_gtids_t *g,
                  struct amldist *r)
{
    const char *self = amldist__env_get(env, "SLURMD_NODENAME");
    long me = amldist__slurm_host_index(list, self);
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
                       const amldist__slurm_gtids_t *g, struct amldist *r)
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

int amldist__slurm_master(const amldist__env_t *env, struct amldist *r,
                          const amldist__slurm_gtids_t *g)
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
    int het = amldist__slurm_het(env);
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
