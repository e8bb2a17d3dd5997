/*
 * Which launcher describes this process, and the checks on what it says.
 *
 * Precedence, innermost launcher first (amldist-env(7) has the full story):
 *   1. canonical variables with a launcher marker (torchrun, amlrun);
 *   2. canonical variables without one (Kubernetes, Azure ML PyTorch);
 *   3. the MPI family: Open MPI, MVAPICH2, MPICH / Intel MPI, PMIx;
 *   4. Slurm (srun);
 *   5. nothing: one process.
 * A lower source that describes the same job (same world size) must agree;
 * one with a smaller world size that divides ours is an outer launcher.
 * Explicit options override the environment; Azure ML and MASTER_ADDR only
 * ever name the master.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"
#include "util/parse.h"

extern char **environ;

static const char *const field_names[AMLDIST_FIELD_COUNT] = {
    "rank",      "world size", "local rank",    "local world size",
    "node rank", "node count", "master address", "master port",
};

enum { PREFER_NONE, PREFER_CANON, PREFER_LAUNCHER };

static int prefer_of(const amldist__env_t *env)
{
    if (env->flags & AMLDIST_PREFER_CANONICAL)
        return PREFER_CANON;
    if (env->flags & AMLDIST_PREFER_LAUNCHER)
        return PREFER_LAUNCHER;
    const char *p = amldist__env_get(env, "AMLDIST_PREFER");
    if (p == NULL || *p == '\0')
        return PREFER_NONE;
    if (strcmp(p, "canonical") == 0)
        return PREFER_CANON;
    if (strcmp(p, "launcher") == 0)
        return PREFER_LAUNCHER;
    return amldist__fail(AMLDIST_EPARSE,
                         "AMLDIST_PREFER=\"%s\": expected \"canonical\" or "
                         "\"launcher\"",
                         p);
}

/* The first MPI-family reader that finds its variables. */
static int read_mpi(const amldist__env_t *env, struct amldist *r)
{
    static int (*const readers[])(const amldist__env_t *, struct amldist *) = {
        amldist__src_ompi, amldist__src_mvapich2, amldist__src_mpich,
        amldist__src_pmix,
    };
    for (size_t i = 0; i < sizeof readers / sizeof *readers; i++) {
        int rc = readers[i](env, r);
        if (rc != 0)
            return rc;
    }
    return 0;
}

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
static const char *inner(const char *why)
{
    return strncmp(why, "derived: ", 9) == 0 ? why + 9 : why;
}

/*
 * Canonical variables without a marker, and an MPI or Slurm launcher.  The
 * same world size: one job, which must agree.  A world size that is a
 * multiple of the launcher's: a per-node (or per-slot) launcher started by
 * it set the canonical variables, so they describe us.
 */
static int relate(struct amldist *canon, const struct amldist *outer,
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
            if (prefer == PREFER_NONE)
                return amldist__fail(AMLDIST_ECONFLICT,
                                     "%s conflicts with %s (both describe a "
                                     "job of WORLD_SIZE=%d); set "
                                     "AMLDIST_PREFER=canonical or launcher "
                                     "to choose",
                                     canon->why[f], outer->why[f], cw);
            *chosen = prefer == PREFER_CANON ? *canon : *outer;
            return 0;
        }
        *chosen = *canon;
        complement(chosen, outer);
        return 0;
    }
    if (ow > 0 && cw % ow != 0) {
        if (prefer != PREFER_NONE) {
            *chosen = prefer == PREFER_CANON ? *canon : *outer;
            return 0;
        }
        return amldist__fail(AMLDIST_ECONFLICT,
                             "WORLD_SIZE=%d conflicts with %s: not the same "
                             "job, and not a multiple of it as a launcher "
                             "started by it would set",
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
        const char *alone = inner(outer->why[AMLDIST_FIELD_LOCAL_WORLD_SIZE]);
        const char *nodes = inner(outer->why[AMLDIST_FIELD_NUM_NODES]);
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

static void set_default(struct amldist *h)
{
    static const int v[] = {0, 1, 0, 1, 0, 1};
    amldist__reading_init(h, "default");
    for (int f = 0; f < AMLDIST_FIELD_MASTER_ADDR; f++)
        amldist__set(h, (amldist_field_t)f, v[f], "default (single process)");
}

static int apply_options(struct amldist *h, const amldist_options_t *o,
                         int from_env)
{
    int nodes = o->num_nodes > 0 ? o->num_nodes : -1;
    int node = o->node_rank >= 0 ? o->node_rank : -1;
    if (!from_env && (nodes > 0 || node >= 0)) {
        /* A per-node launcher with no launcher around it: it is node
         * node_rank of num_nodes, one process per node. */
        if (nodes == 1 && node < 0)
            node = 0;
        if (nodes < 0)
            return amldist__fail(AMLDIST_EMISSING,
                                 "option node_rank=%d is given but num_nodes "
                                 "is not, and no launcher variable names it",
                                 node);
        if (node < 0)
            return amldist__fail(AMLDIST_EMISSING,
                                 "option num_nodes=%d is given but node_rank "
                                 "is not, and no launcher variable names it",
                                 nodes);
        amldist__reading_init(h, "options");
        amldist__set(h, AMLDIST_FIELD_RANK, node,
                     "option node_rank=%d (one process per node)", node);
        amldist__set(h, AMLDIST_FIELD_WORLD_SIZE, nodes,
                     "option num_nodes=%d (one process per node)", nodes);
        amldist__set(h, AMLDIST_FIELD_LOCAL_RANK, 0,
                     "default (one process per node)");
        amldist__set(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE, 1,
                     "default (one process per node)");
    }
    /* Under a launcher an option fills in what it does not say, or repeats
     * it.  It may not replace it: the ranks stay the launcher's, so the
     * workers would get the ranks of one node with NODE_RANK of another. */
    if (nodes > 0 && amldist__known(h, AMLDIST_FIELD_NUM_NODES) &&
        h->val[AMLDIST_FIELD_NUM_NODES] != nodes)
        return amldist__fail(AMLDIST_ECONFLICT,
                             "option num_nodes=%d conflicts with %s", nodes,
                             h->why[AMLDIST_FIELD_NUM_NODES]);
    if (node >= 0 && amldist__known(h, AMLDIST_FIELD_NODE_RANK) &&
        h->val[AMLDIST_FIELD_NODE_RANK] != node)
        return amldist__fail(AMLDIST_ECONFLICT,
                             "option node_rank=%d conflicts with %s", node,
                             h->why[AMLDIST_FIELD_NODE_RANK]);
    if (nodes > 0)
        amldist__set(h, AMLDIST_FIELD_NUM_NODES, nodes, "option num_nodes=%d",
                     nodes);
    if (node >= 0)
        amldist__set(h, AMLDIST_FIELD_NODE_RANK, node, "option node_rank=%d",
                     node);
    if (o->master_port > 0) {
        if (o->master_port > 65535)
            return amldist__fail(AMLDIST_ERANGE,
                                 "option master_port=%d: out of range "
                                 "(1..65535)",
                                 o->master_port);
        amldist__set(h, AMLDIST_FIELD_MASTER_PORT, o->master_port,
                     "option master_port=%d", o->master_port);
    }
    if (o->master_addr != NULL) {
        if (amldist__valid_host(o->master_addr) != 0 ||
            amldist__strlcpy(h->addr, o->master_addr, sizeof h->addr) != 0)
            return amldist__fail(AMLDIST_EPARSE,
                                 "option master_addr=\"%s\": not a host name "
                                 "or IP address",
                                 o->master_addr);
        amldist__why(h, AMLDIST_FIELD_MASTER_ADDR, "option master_addr=%s",
                     o->master_addr);
    }
    return 0;
}

/* What one known value implies about the others. */
static void derive(struct amldist *h)
{
    int *v = h->val;
    if (v[AMLDIST_FIELD_WORLD_SIZE] == 1) {
        static const amldist_field_t fs[] = {
            AMLDIST_FIELD_LOCAL_RANK, AMLDIST_FIELD_LOCAL_WORLD_SIZE,
            AMLDIST_FIELD_NODE_RANK, AMLDIST_FIELD_NUM_NODES};
        for (size_t i = 0; i < sizeof fs / sizeof *fs; i++)
            if (!amldist__known(h, fs[i]))
                amldist__set(h, fs[i], fs[i] == AMLDIST_FIELD_LOCAL_RANK ||
                                               fs[i] == AMLDIST_FIELD_NODE_RANK
                                           ? 0
                                           : 1,
                             "derived: %s (one process)",
                             h->why[AMLDIST_FIELD_WORLD_SIZE]);
    }
    if (v[AMLDIST_FIELD_LOCAL_WORLD_SIZE] > 0 &&
        v[AMLDIST_FIELD_LOCAL_WORLD_SIZE] == v[AMLDIST_FIELD_WORLD_SIZE] &&
        !amldist__known(h, AMLDIST_FIELD_NUM_NODES))
        amldist__set(h, AMLDIST_FIELD_NUM_NODES, 1,
                     "derived: %s equals %s (one node)",
                     h->why[AMLDIST_FIELD_LOCAL_WORLD_SIZE],
                     h->why[AMLDIST_FIELD_WORLD_SIZE]);
    if (v[AMLDIST_FIELD_NUM_NODES] > 1 &&
        v[AMLDIST_FIELD_NUM_NODES] == v[AMLDIST_FIELD_WORLD_SIZE])
        amldist__one_per_node(h);
    if (v[AMLDIST_FIELD_NUM_NODES] != 1)
        return;
    const char *one = inner(h->why[AMLDIST_FIELD_NUM_NODES]);
    if (!amldist__known(h, AMLDIST_FIELD_NODE_RANK))
        amldist__set(h, AMLDIST_FIELD_NODE_RANK, 0, "derived: %s (one node)",
                     one);
    /* On one node every rank is local. */
    if (!amldist__known(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE) &&
        amldist__known(h, AMLDIST_FIELD_WORLD_SIZE))
        amldist__set(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE,
                     v[AMLDIST_FIELD_WORLD_SIZE],
                     "derived: %s, one node (%s)",
                     h->why[AMLDIST_FIELD_WORLD_SIZE], one);
    if (!amldist__known(h, AMLDIST_FIELD_LOCAL_RANK) &&
        amldist__known(h, AMLDIST_FIELD_RANK))
        amldist__set(h, AMLDIST_FIELD_LOCAL_RANK, v[AMLDIST_FIELD_RANK],
                     "derived: %s, one node (%s)",
                     h->why[AMLDIST_FIELD_RANK], one);
}

/*
 * AMLDIST_ONE_PER_NODE: the caller says it is a per-node launcher, alone on
 * its node.  Fills in only what the environment leaves open, and only where
 * nothing it says rules the premise out.
 */
static void alone_on_node(struct amldist *h)
{
    static const amldist_field_t lr = AMLDIST_FIELD_LOCAL_RANK,
                                 lws = AMLDIST_FIELD_LOCAL_WORLD_SIZE,
                                 node = AMLDIST_FIELD_NODE_RANK,
                                 nodes = AMLDIST_FIELD_NUM_NODES;
    const int *v = h->val;
    int rank = v[AMLDIST_FIELD_RANK], world = v[AMLDIST_FIELD_WORLD_SIZE];
    /* The environment must place this process first on its node, and say
     * it is alone there or that its node index is its rank: RANK and
     * WORLD_SIZE alone (PMI_RANK under mpiexec on one host) could as well be
     * two launchers sharing a node, whose workers would then collide. */
    if (rank < 0 || world < 0 || !amldist__known(h, lr) || v[lr] != 0)
        return;
    if (amldist__known(h, lws) ? v[lws] != 1
                               : !(amldist__known(h, node) && v[node] == rank))
        return;
    if ((amldist__known(h, node) && v[node] != rank) ||
        (amldist__known(h, nodes) && v[nodes] != world))
        return;
    static const char why[] = "derived: one launcher per node (the caller "
                              "says so: AMLDIST_ONE_PER_NODE)";
    if (!amldist__known(h, lws))
        amldist__set(h, lws, 1, "%s", why);
    if (!amldist__known(h, node))
        amldist__set(h, node, rank, "%s, so the node index is %s", why,
                     h->why[AMLDIST_FIELD_RANK]);
    if (!amldist__known(h, nodes))
        amldist__set(h, nodes, world, "%s, so the node count is %s", why,
                     h->why[AMLDIST_FIELD_WORLD_SIZE]);
}

static int read_master_env(const amldist__env_t *env, struct amldist *h)
{
    if (!amldist__known(h, AMLDIST_FIELD_MASTER_PORT)) {
        long port;
        int rc = amldist__env_long(env, "MASTER_PORT", 1, 65535, &port);
        if (rc < 0)
            return rc;
        if (rc == 1)
            amldist__set(h, AMLDIST_FIELD_MASTER_PORT, port, "MASTER_PORT=%ld",
                         port);
    }
    const char *addr = amldist__env_get(env, "MASTER_ADDR");
    if (amldist__known(h, AMLDIST_FIELD_MASTER_ADDR) || addr == NULL)
        return 0;
    int port = -1;
    if (amldist__parse_hostport(addr, h->addr, sizeof h->addr, &port) != 0 ||
        port != -1) {
        h->addr[0] = '\0';
        return amldist__fail(AMLDIST_EPARSE,
                             "MASTER_ADDR=\"%s\": not a host name or IP "
                             "address",
                             addr);
    }
    amldist__why(h, AMLDIST_FIELD_MASTER_ADDR, "MASTER_ADDR=%s", addr);
    return 0;
}

static int resolve_master(const amldist__env_t *env, struct amldist *h,
                          const struct amldist *launcher)
{
    int rc = read_master_env(env, h);
    if (rc < 0)
        return rc;
    if (!amldist__known(h, AMLDIST_FIELD_MASTER_ADDR)) {
        struct amldist az;
        if ((rc = amldist__src_azureml(env, h, &az)) < 0)
            return rc;
        if (rc == 1) {
            memcpy(h->addr, az.addr, sizeof h->addr);
            memcpy(h->why[AMLDIST_FIELD_MASTER_ADDR],
                   az.why[AMLDIST_FIELD_MASTER_ADDR], AMLDIST__WHY_MAX);
            if (!amldist__known(h, AMLDIST_FIELD_MASTER_PORT))
                amldist__set(h, AMLDIST_FIELD_MASTER_PORT,
                             az.val[AMLDIST_FIELD_MASTER_PORT], "%s",
                             az.why[AMLDIST_FIELD_MASTER_PORT]);
        }
    }
    if (!amldist__known(h, AMLDIST_FIELD_MASTER_ADDR) &&
        amldist__known(launcher, AMLDIST_FIELD_MASTER_ADDR)) {
        memcpy(h->addr, launcher->addr, sizeof h->addr);
        memcpy(h->why[AMLDIST_FIELD_MASTER_ADDR],
               launcher->why[AMLDIST_FIELD_MASTER_ADDR], AMLDIST__WHY_MAX);
    }
    if (!amldist__known(h, AMLDIST_FIELD_MASTER_ADDR)) {
        if (strcmp(h->source, "default") == 0) {
            strcpy(h->addr, "127.0.0.1");
            amldist__why(h, AMLDIST_FIELD_MASTER_ADDR,
                         "default (single process)");
        } else if (h->val[AMLDIST_FIELD_NUM_NODES] == 1) {
            strcpy(h->addr, "127.0.0.1");
            amldist__why(h, AMLDIST_FIELD_MASTER_ADDR,
                         "default (single node: %s, no MASTER_ADDR)",
                         h->why[AMLDIST_FIELD_NUM_NODES]);
        } else if (launcher->why[AMLDIST_FIELD_MASTER_ADDR][0] != '\0') {
            /* The launcher's reason: why it cannot name the master. */
            memcpy(h->why[AMLDIST_FIELD_MASTER_ADDR],
                   launcher->why[AMLDIST_FIELD_MASTER_ADDR], AMLDIST__WHY_MAX);
        } else if (h->why[AMLDIST_FIELD_MASTER_ADDR][0] == '\0') {
            amldist__why(h, AMLDIST_FIELD_MASTER_ADDR,
                         "unknown: no MASTER_ADDR, AZ_BATCH_MASTER_NODE or "
                         "Slurm node list, and more than one node may be "
                         "involved");
        }
    }
    if (!amldist__known(h, AMLDIST_FIELD_MASTER_PORT))
        amldist__set(h, AMLDIST_FIELD_MASTER_PORT, AMLDIST__DEFAULT_PORT,
                     "default %d (torchrun's; MASTER_PORT not set)",
                     AMLDIST__DEFAULT_PORT);
    return 0;
}

/* a < b must hold for the two fields when both are known. */
static int below(const struct amldist *h, amldist_field_t a, amldist_field_t b,
                 int or_equal)
{
    int va = h->val[a], vb = h->val[b];
    if (va < 0 || vb < 0 || va < vb || (or_equal && va == vb))
        return 0;
    return amldist__fail(AMLDIST_ERANGE, "%s %d (%s) must be %s %s %d (%s)",
                         field_names[a], va, h->why[a],
                         or_equal ? "at most" : "below the", field_names[b],
                         vb, h->why[b]);
}

static int validate(const struct amldist *h)
{
    int rc;
    if (!amldist__known(h, AMLDIST_FIELD_WORLD_SIZE))
        return amldist__fail(AMLDIST_EMISSING,
                             "%s is set but the world size is unknown (%s)",
                             h->why[AMLDIST_FIELD_RANK],
                             h->why[AMLDIST_FIELD_WORLD_SIZE]);
    if ((rc = below(h, AMLDIST_FIELD_RANK, AMLDIST_FIELD_WORLD_SIZE, 0)) ||
        (rc = below(h, AMLDIST_FIELD_LOCAL_RANK,
                    AMLDIST_FIELD_LOCAL_WORLD_SIZE, 0)) ||
        (rc = below(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE,
                    AMLDIST_FIELD_WORLD_SIZE, 1)) ||
        (rc = below(h, AMLDIST_FIELD_NODE_RANK, AMLDIST_FIELD_NUM_NODES, 0)) ||
        (rc = below(h, AMLDIST_FIELD_NUM_NODES, AMLDIST_FIELD_WORLD_SIZE, 1)))
        return rc;
    int lw = h->val[AMLDIST_FIELD_LOCAL_WORLD_SIZE];
    int nodes = h->val[AMLDIST_FIELD_NUM_NODES];
    /* Every other node runs a rank at least. */
    if (nodes > 1 && lw > 0 &&
        (long long)lw + nodes - 1 > h->val[AMLDIST_FIELD_WORLD_SIZE])
        return amldist__fail(AMLDIST_ERANGE,
                             "local world size %d (%s) and %d nodes (%s) "
                             "need more than world size %d (%s)",
                             lw, h->why[AMLDIST_FIELD_LOCAL_WORLD_SIZE], nodes,
                             h->why[AMLDIST_FIELD_NUM_NODES],
                             h->val[AMLDIST_FIELD_WORLD_SIZE],
                             h->why[AMLDIST_FIELD_WORLD_SIZE]);
    if (h->val[AMLDIST_FIELD_NUM_NODES] == 1 && lw > 0 &&
        lw != h->val[AMLDIST_FIELD_WORLD_SIZE])
        return amldist__fail(AMLDIST_ERANGE,
                             "node count 1 (%s) but local world size %d (%s) "
                             "differs from world size %d (%s)",
                             h->why[AMLDIST_FIELD_NUM_NODES], lw,
                             h->why[AMLDIST_FIELD_LOCAL_WORLD_SIZE],
                             h->val[AMLDIST_FIELD_WORLD_SIZE],
                             h->why[AMLDIST_FIELD_WORLD_SIZE]);
    return 0;
}

static void explain_unknowns(struct amldist *h)
{
    char source[sizeof h->source];
    memcpy(source, h->source, sizeof source);
    for (int f = 0; f < AMLDIST_FIELD_COUNT; f++)
        if (!amldist__known(h, (amldist_field_t)f) && h->why[f][0] == '\0')
            snprintf(h->why[f], sizeof h->why[f],
                     "unknown: the %s variables do not say", source);
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
static int same_step_under_srun(const amldist__env_t *env, struct amldist *mpi,
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

/* A field the PMIx server may know is unknown; the master counts where
 * neither the variables nor the options name one. */
static int needs_pmix(const amldist__env_t *env, const amldist_options_t *o,
                      const struct amldist *h, const struct amldist *master)
{
    for (int f = 0; f < AMLDIST_FIELD_MASTER_ADDR; f++)
        if (!amldist__known(h, (amldist_field_t)f))
            return 1;
    return !amldist__known(master, AMLDIST_FIELD_MASTER_ADDR) &&
           o->master_addr == NULL &&
           amldist__env_get(env, "MASTER_ADDR") == NULL &&
           amldist__env_get(env, "AZ_BATCH_MASTER_NODE") == NULL &&
           amldist__env_get(env, "AZ_BATCHAI_MPI_MASTER_NODE") == NULL;
}

static int build(const amldist__env_t *env, const amldist_options_t *o,
                 struct amldist *h)
{
    struct amldist canon, mpi, slurm, launcher_master;
    int prefer = prefer_of(env);
    if (prefer < 0)
        return prefer;
    int has_canon = amldist__src_canonical(env, &canon);
    if (has_canon < 0)
        return has_canon;
    int has_mpi = read_mpi(env, &mpi);
    if (has_mpi < 0)
        return has_mpi;
    int has_slurm = amldist__src_slurm(env, &slurm);
    if (has_slurm < 0)
        return has_slurm;
    int rc = 0;
    if (has_mpi && has_slurm &&
        (rc = same_step_under_srun(env, &mpi, &slurm)) < 0)
        return rc;

    /* Slurm is always outside an MPI launcher in its allocation: inside
     * sbatch every mpirun rank sees the batch step's SLURM_PROCID=0. */
    const struct amldist *outer = has_mpi ? &mpi : has_slurm ? &slurm : NULL;
    if (has_canon && !canon.marker && outer != NULL)
        rc = relate(&canon, outer, prefer, h);
    else if (has_canon)
        *h = canon;
    else if (outer != NULL)
        *h = *outer;
    if (rc < 0)
        return rc;
    int from_env = has_canon || outer != NULL;
    if (!from_env && o->num_nodes <= 0 && o->node_rank < 0)
        set_default(h);

    /* A launcher's idea of the master (Slurm's first node, PMIx's host of
     * rank 0) ranks below MASTER_ADDR and Azure ML: set it aside. */
    amldist__reading_init(&launcher_master, h->source);
    memcpy(launcher_master.addr, h->addr, sizeof h->addr);
    memcpy(launcher_master.why[AMLDIST_FIELD_MASTER_ADDR],
           h->why[AMLDIST_FIELD_MASTER_ADDR], AMLDIST__WHY_MAX);
    h->addr[0] = '\0';
    h->why[AMLDIST_FIELD_MASTER_ADDR][0] = '\0';

    if ((rc = apply_options(h, o, from_env)) < 0)
        return rc;
    /* Only now, and only for the reading in use: a PMIx query is a
     * connection to the launcher, with consequences (sources/pmix_client.c). */
    if (h->want_pmix && needs_pmix(env, o, h, &launcher_master))
        amldist__pmix_complete(env, h, &launcher_master);
    if (env->flags & AMLDIST_ONE_PER_NODE)
        alone_on_node(h);
    derive(h);
    if ((rc = resolve_master(env, h, &launcher_master)) < 0)
        return rc;
    explain_unknowns(h);
    return validate(h);
}

/* Bytes of amldist_options_t in each version (util/optversion.c).  A version
 * that adds field F makes the last entry offsetof(amldist_options_t, F) and
 * appends sizeof(amldist_options_t). */
static const size_t options_sizes[AMLDIST_OPTIONS_VERSION + 1] = {
    [1] = sizeof(amldist_options_t),
};
static const amldist__opts_kind_t options_kind = {
    "amldist_options_t", "AMLDIST_OPTIONS_INIT", AMLDIST_OPTIONS_VERSION,
    options_sizes};

int amldist_init_opts(amldist_t **out, const amldist_options_t *opts)
{
    amldist__clear_error();
    if (out == NULL || opts == NULL)
        return amldist__fail(AMLDIST_EINVAL, "amldist_init_opts: %s is NULL",
                             out == NULL ? "out" : "opts");
    *out = NULL;
    amldist_options_t current = AMLDIST_OPTIONS_INIT;
    int rc = amldist__opts_copy(&options_kind, "amldist_init_opts", &current,
                                opts);
    if (rc < 0)
        return rc;
    opts = &current;
    if ((opts->flags & AMLDIST_PREFER_CANONICAL) &&
        (opts->flags & AMLDIST_PREFER_LAUNCHER))
        return amldist__fail(AMLDIST_EINVAL,
                             "AMLDIST_PREFER_CANONICAL and "
                             "AMLDIST_PREFER_LAUNCHER are exclusive");
    amldist__env_t env = {opts->envp != NULL ? opts->envp : environ,
                          opts->flags};
    struct amldist *h = calloc(1, sizeof *h);
    if (h == NULL)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    rc = build(&env, opts, h);
    if (rc < 0) {
        free(h);
        return rc;
    }
    *out = h;
    return 0;
}

int amldist_init_from(amldist_t **out, char *const envp[], unsigned flags)
{
    amldist_options_t o = AMLDIST_OPTIONS_INIT;
    o.flags = flags;
    /* An empty array, not environ, when the caller passes none. */
    static char *const empty[] = {NULL};
    o.envp = envp != NULL ? envp : empty;
    return amldist_init_opts(out, &o);
}

int amldist_init(amldist_t **out, unsigned flags)
{
    amldist_options_t o = AMLDIST_OPTIONS_INIT;
    o.flags = flags;
    return amldist_init_opts(out, &o);
}

void amldist_free(amldist_t *h)
{
    free(h);
}
