/*
 * MPICH's Hydra and Intel MPI: PMI_RANK and PMI_SIZE (the PMI-1/PMI-2 wire
 * protocol's own variables, also set by srun --mpi=pmi2), and the local
 * pair MPI_LOCALRANKID / MPI_LOCALNRANKS that Hydra adds.  No node index.
 *
 * Hydra's PMI-1 server knows it (PMI_process_mapping), but asking it is not
 * safe before the program's MPI_Init: a rank that sent "cmd=init" and exits
 * without "cmd=finalize" (any program that is not MPI: PyTorch) makes Hydra
 * kill the whole job, and after "cmd=finalize" the proxy closes PMI_FD, so
 * a later MPI_Init fails (MPICH 4.0: "PMI_Get_appnum returned -1").  What
 * is safe to read is the command line of the rank's Hydra proxy, the
 * process that started it: `hydra_pmi_proxy ... --proxy-id N`, where N is
 * the proxy's place in Hydra's proxy list, one proxy per node in use, which
 * is also the node index of PMI_process_mapping.  The proxy is looked for
 * among this process's nearest ancestors (a wrapper such as `env` or a
 * shell may stand between), and only when the variables read are this
 * process's own.  Node count and the host of rank 0 stay unknown (under
 * Slurm they are known: below).
 *
 * Under Slurm (mpiexec.hydra in an allocation) Hydra starts its proxies
 * with one srun step, `srun -N k -n k hydra_pmi_proxy --launcher slurm
 * ... --proxy-id -1`, and each proxy takes its id from its task's
 * SLURM_NODEID (MPICH's slurm_query_proxy_id.c).  The proxy passes its
 * environment on, so the rank holds that step's variables itself:
 * SLURM_NODEID is the node index, SLURM_STEP_NUM_NODES (one proxy a node,
 * SLURM_STEP_NUM_TASKS alike) the node count.  They are the proxy's step's
 * only when SLURM_TASK_PID is the proxy found among the ancestors (srun's
 * task is the proxy itself); a Slurm step around mpiexec.hydra (srun
 * mpiexec.hydra -launcher ssh) would put its own there.  Proxy 0, on the
 * step's first node, runs rank 0: the master (hydra_slurm_master()).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/sources.h"

#define HYDRA_CMDLINE_MAX 8192

int amldist__hydra_proxy_args(const char *argv, size_t len,
                              amldist__hydra_proxy_t *p)
{
    if (len == 0 || argv[len - 1] != '\0')
        return 0;
    const char *end = argv + len, *arg0 = strrchr(argv, '/');
    arg0 = arg0 != NULL ? arg0 + 1 : argv;
    if (strcmp(arg0, "hydra_pmi_proxy") != 0)
        return 0;
    int have_id = 0;
    p->launcher[0] = '\0';
    for (const char *a = argv; a < end; a += strlen(a) + 1) {
        const char *next = a + strlen(a) + 1;
        long v;
        if (next >= end)
            break;
        if (strcmp(a, "--proxy-id") == 0) {
            /* -1: the launcher numbers the proxy (Slurm, LSF, ...). */
            if (strcmp(next, "-1") == 0)
                v = -1;
            else if (amldist__parse_long(next, 0, INT_MAX, &v) != 0)
                return 0;
            p->id = v;
            have_id = 1;
        } else if (strcmp(a, "--launcher") == 0) {
            snprintf(p->launcher, sizeof p->launcher, "%s", next);
        }
    }
    return have_id;
}

static int proxy_match(const char *argv, size_t len, void *p)
{
    return amldist__hydra_proxy_args(argv, len, p);
}

/* This process's Hydra proxy: 1 with *p and its pid, or 0. */
static int find_proxy(amldist__hydra_proxy_t *p, long *proxy_pid)
{
    char buf[HYDRA_CMDLINE_MAX];
    size_t len;
    *proxy_pid = amldist__ancestor(proxy_match, p, buf, sizeof buf, &len);
    return *proxy_pid > 0;
}

/* A variable of env as a number in [min, max], or -1 (absent, malformed). */
static long env_num(const amldist__env_t *env, const char *name, long min,
                    long max)
{
    const char *s = amldist__env_get(env, name);
    long v;
    return s != NULL && amldist__parse_long(s, min, max, &v) == 0 ? v : -1;
}

/* A variable's text for a message: "=value", or " unset". */
static const char *shown(const amldist__env_t *env, const char *name,
                         char *buf, size_t size)
{
    const char *s = amldist__env_get(env, name);
    snprintf(buf, size, s != NULL ? "=%.64s" : " unset", s != NULL ? s : "");
    return buf;
}

/*
 * The host of rank 0 under Hydra's srun step of one proxy a node: Hydra
 * gives its ranks to the proxies in the order of their ids, the lowest to
 * proxy 0, and each proxy's id is its SLURM_NODEID, its node's place in
 * the step's node list (sorted by name; Hydra's step is not heterogeneous):
 * rank 0 runs on the first host of SLURM_STEP_NODELIST, on every rank
 * alike (`-hosts n1:3,n0:1` too: n0 is proxy 0 and runs ranks 0-2).
 */
static void hydra_slurm_master(const amldist__env_t *env, struct amldist *r)
{
    const char *list = amldist__env_get(env, "SLURM_STEP_NODELIST");
    if (list == NULL || amldist__env_get(env, "SLURM_HET_SIZE") != NULL ||
        amldist__hostlist_nth(list, 0, r->addr, sizeof r->addr) != 0 ||
        amldist__valid_host(r->addr) != 0) {
        r->addr[0] = '\0';
        return;
    }
    amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                 "first host of SLURM_STEP_NODELIST=%.64s, the Hydra "
                 "proxies' srun step: SLURM_NODEID=0 there is proxy 0, which "
                 "runs rank 0",
                 list);
}

void amldist__hydra_slurm_node(const amldist__env_t *env, long proxy_pid,
                               struct amldist *r)
{
    static const char by[] = "the Hydra proxy (hydra_pmi_proxy --launcher "
                             "slurm --proxy-id -1) takes its node index from "
                             "its srun step's SLURM_NODEID";
    char t[80], n[80], c[80];
    if (env_num(env, "SLURM_TASK_PID", 1, LONG_MAX) != proxy_pid) {
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: %s, but SLURM_TASK_PID%s here is not that "
                     "proxy (pid %ld): these SLURM_* are another step's",
                     by, shown(env, "SLURM_TASK_PID", t, sizeof t),
                     proxy_pid);
        return;
    }
    long world = r->val[AMLDIST_FIELD_WORLD_SIZE];
    long node = env_num(env, "SLURM_NODEID", 0, INT_MAX);
    long nodes = env_num(env, "SLURM_STEP_NUM_NODES", 1, INT_MAX);
    long tasks = env_num(env, "SLURM_STEP_NUM_TASKS", 1, INT_MAX);
    if (node < 0 || node >= world || (nodes > 0 && node >= nodes)) {
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: %s, and SLURM_NODEID%s is no node index below "
                     "%s and SLURM_STEP_NUM_NODES%s",
                     by, shown(env, "SLURM_NODEID", n, sizeof n),
                     r->why[AMLDIST_FIELD_WORLD_SIZE],
                     shown(env, "SLURM_STEP_NUM_NODES", c, sizeof c));
        return;
    }
    amldist__set(r, AMLDIST_FIELD_NODE_RANK, node,
                 "SLURM_NODEID=%ld of the Hydra proxy's srun step (the "
                 "proxy, pid %ld = SLURM_TASK_PID, hydra_pmi_proxy "
                 "--launcher slurm --proxy-id -1, takes its node index "
                 "from it)",
                 node, proxy_pid);
    /* Hydra runs one proxy a node: a step of more tasks than nodes is not
     * its proxies' alone. */
    if (nodes > 0 && tasks == nodes && nodes <= world) {
        amldist__set(r, AMLDIST_FIELD_NUM_NODES, nodes,
                     "SLURM_STEP_NUM_NODES=%ld of the Hydra proxies' srun "
                     "step (one proxy a node: SLURM_STEP_NUM_TASKS=%ld)",
                     nodes, tasks);
        hydra_slurm_master(env, r);
    } else
        amldist__why(r, AMLDIST_FIELD_NUM_NODES,
                     "unknown: the Hydra proxies' srun step has "
                     "SLURM_STEP_NUM_NODES%s and SLURM_STEP_NUM_TASKS%s, "
                     "not one proxy a node of %s",
                     shown(env, "SLURM_STEP_NUM_NODES", c, sizeof c),
                     shown(env, "SLURM_STEP_NUM_TASKS", t, sizeof t),
                     r->why[AMLDIST_FIELD_WORLD_SIZE]);
}

int amldist__src_mpich(const amldist__env_t *env, struct amldist *r)
{
    amldist__reading_init(r, "mpich");
    int rc = amldist__env_quad(env, r, "PMI_RANK", "PMI_SIZE",
                               "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
    if (rc != 1)
        return rc;
    amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                 "unknown: MPICH / Intel MPI export no node index, and no "
                 "Hydra proxy (hydra_pmi_proxy --proxy-id) started this "
                 "process");
    /* One node: layout.c derives the rest.  Hydra sets the local pair
     * (srun --mpi=pmi2 does not: then there is no proxy to look for). */
    if (!amldist__known(r, AMLDIST_FIELD_LOCAL_WORLD_SIZE) ||
        r->val[AMLDIST_FIELD_LOCAL_WORLD_SIZE] ==
            r->val[AMLDIST_FIELD_WORLD_SIZE] ||
        !amldist__env_own(env, "PMI_RANK") ||
        !amldist__env_own(env, "MPI_LOCALNRANKS"))
        return rc;
    amldist__hydra_proxy_t proxy;
    long pid;
    if (!find_proxy(&proxy, &pid))
        return rc;
    if (proxy.id < 0) {
        if (strcmp(proxy.launcher, "slurm") == 0)
            amldist__hydra_slurm_node(env, pid, r);
        else
            amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                         "unknown: the Hydra proxy (pid %ld, "
                         "hydra_pmi_proxy --launcher %s --proxy-id -1) "
                         "takes its node index from its launcher, which is "
                         "read under Slurm only",
                         pid, proxy.launcher[0] != '\0' ? proxy.launcher
                                                       : "(none)");
        return rc;
    }
    if (proxy.id >= r->val[AMLDIST_FIELD_WORLD_SIZE]) {
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: the Hydra proxy (pid %ld) says --proxy-id "
                     "%ld, not below %s",
                     pid, proxy.id, r->why[AMLDIST_FIELD_WORLD_SIZE]);
        return rc;
    }
    amldist__set(r, AMLDIST_FIELD_NODE_RANK, proxy.id,
                 "hydra_pmi_proxy --proxy-id %ld (pid %ld, the Hydra proxy "
                 "that started this process)",
                 proxy.id, pid);
    amldist__why(r, AMLDIST_FIELD_NUM_NODES,
                 "unknown: Hydra's proxy names its own node index only");
    return rc;
}
