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
 *
 * This file asks lib/sources for a reading of each kind (the first
 * canonical, MPI and outer reader of its table that finds its variables)
 * and runs the steps in their order (build()); how two readings combine is
 * merge.c's, the options' part options.c's, the master master.c's and the
 * final checks validate.c's.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"
#include "util/parse.h"

extern char **environ;

static int prefer_of(const amldist__env_t *env)
{
    if (env->flags & AMLDIST_PREFER_CANONICAL)
        return AMLDIST__PREFER_CANON;
    if (env->flags & AMLDIST_PREFER_LAUNCHER)
        return AMLDIST__PREFER_LAUNCHER;
    const char *p = amldist__env_get(env, "AMLDIST_PREFER");
    if (p == NULL || *p == '\0')
        return AMLDIST__PREFER_NONE;
    if (strcmp(p, "canonical") == 0)
        return AMLDIST__PREFER_CANON;
    if (strcmp(p, "launcher") == 0)
        return AMLDIST__PREFER_LAUNCHER;
    return amldist__fail(AMLDIST_EPARSE,
                         "AMLDIST_PREFER=\"%s\": expected \"canonical\" or "
                         "\"launcher\"",
                         p);
}

static void set_default(struct amldist *h)
{
    static const int v[] = {0, 1, 0, 1, 0, 1};
    amldist__reading_init(h, "default");
    for (int f = 0; f < AMLDIST_FIELD_MASTER_ADDR; f++)
        amldist__set(h, (amldist_field_t)f, v[f], "default (single process)");
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
    const char *one = amldist__why_inner(h->why[AMLDIST_FIELD_NUM_NODES]);
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

static void explain_unknowns(struct amldist *h)
{
    char source[sizeof h->source];
    memcpy(source, h->source, sizeof source);
    for (int f = 0; f < AMLDIST_FIELD_COUNT; f++)
        if (!amldist__known(h, (amldist_field_t)f) && h->why[f][0] == '\0')
            snprintf(h->why[f], sizeof h->why[f],
                     "unknown: the %s variables do not say", source);
}

/* A field the PMIx server may know is unknown; the master counts where
 * neither the variables nor the options name one. */
static int needs_pmix(const amldist__env_t *env, const amldist_options_t *o,
                      const struct amldist *h, const struct amldist *master)
{
    if (h->pmix_first)
        return 1;
    for (int f = 0; f < AMLDIST_FIELD_MASTER_ADDR; f++)
        if (!amldist__known(h, (amldist_field_t)f))
            return 1;
    return !amldist__known(master, AMLDIST_FIELD_MASTER_ADDR) &&
           o->master_addr == NULL &&
           (amldist__env_get(env, "MASTER_ADDR") == NULL ||
            (h->node_only & AMLDIST__MASTER_ADDR_BIT)) &&
           amldist__env_get(env, "AZ_BATCH_MASTER_NODE") == NULL &&
           amldist__env_get(env, "AZ_BATCHAI_MPI_MASTER_NODE") == NULL;
}

/* The canonical and marker variables set in `env`, space-separated. */
static void set_names(const amldist__env_t *env, char *out, size_t size)
{
    static const char *const names[] = {
        "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK",
        "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE",
        "TORCHELASTIC_RUN_ID", "AMLDIST_LAUNCHER"};
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof *names && n < size; i++)
        if (amldist__env_get(env, names[i]) != NULL)
            n += (size_t)snprintf(out + n, size - n, "%s%s", n ? " " : "",
                                  names[i]);
}

/*
 * A marked set (torchrun's, amlrun's) inside an MPI world is an inner
 * launcher's only if it fits that world: the same job (amlrun in place, or
 * per node with one worker, whose rendezvous may number the nodes in
 * another order), or a launcher per MPI process, whose world is a multiple
 * of the MPI world.  Otherwise it came with the shell that ran
 * mpirun, which gives its environment to the ranks of its own node only.
 * 1: the marked set describes us; 0: the MPI reading does
 * (AMLDIST_PREFER=launcher); < 0: refused, naming the variables.
 */
static int marked_fits(const amldist__env_t *env, const struct amldist *canon,
                       const struct amldist *mpi, int prefer)
{
    int cw = canon->val[AMLDIST_FIELD_WORLD_SIZE];
    int ow = mpi->val[AMLDIST_FIELD_WORLD_SIZE];
    int cr = canon->val[AMLDIST_FIELD_RANK];
    if (ow <= 0 || cw <= 0 || prefer == AMLDIST__PREFER_CANON || cw % ow == 0)
        return 1;
    if (prefer == AMLDIST__PREFER_LAUNCHER)
        return 0;
    char names[160];
    set_names(env, names, sizeof names);
    return amldist__fail(
        AMLDIST_ECONFLICT,
        "%s's RANK=%d WORLD_SIZE=%d cannot be an inner launcher's inside %s: "
        "its world is not a multiple of the MPI world; leftovers of another "
        "job in the shell that started the launcher? unset %s there, or set "
        "AMLDIST_PREFER=launcher",
        canon->source, cr, cw, mpi->why[AMLDIST_FIELD_WORLD_SIZE], names);
}

/*
 * Canonical variables that cannot be read (half a pair: a leftover
 * WORLD_SIZE=4 in mpirun's shell, `mpirun -x RANK=7`; a malformed value)
 * beside a launcher that describes this process: AMLDIST_PREFER=launcher
 * sets them aside (0), as it sets aside a whole set that conflicts;
 * otherwise the refusal (`err`, whose message is the reader's) names that
 * way out and how to clear them.
 */
static int canon_unreadable(const amldist__env_t *env, int err,
                            const char *first, const struct amldist *outer,
                            int prefer)
{
    if (prefer == AMLDIST__PREFER_LAUNCHER)
        return 0;
    char names[160];
    set_names(env, names, sizeof names);
    return amldist__fail(err,
                         "%s, beside %s: leftovers of another job in the "
                         "shell that started the launcher, or passed to "
                         "the ranks (mpirun -x, srun --export)? unset %s "
                         "there, or set AMLDIST_PREFER=launcher",
                         first, outer->why[AMLDIST_FIELD_WORLD_SIZE], names);
}

/*
 * MASTER_ADDR / MASTER_PORT that the launcher gives this node's ranks only
 * (Open MPI: mpirun's shell, not forwarded with -x): the other nodes take
 * the launcher's master, so the job would split.  An option that names the
 * value makes the variable moot; AMLDIST_PREFER=launcher sets it aside (its
 * bit stays, for master.c); otherwise refused, naming the fixes, as the
 * canonical leftovers are.
 */
static int node_only_master(struct amldist *h, int prefer)
{
    static const struct {
        unsigned bit;
        amldist_field_t f;
        const char *name;
    } vars[] = {
        {AMLDIST__MASTER_ADDR_BIT, AMLDIST_FIELD_MASTER_ADDR, "MASTER_ADDR"},
        {AMLDIST__MASTER_PORT_BIT, AMLDIST_FIELD_MASTER_PORT, "MASTER_PORT"},
    };
    char names[32] = "", xs[48] = "";
    int n = 0;
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        if (!(h->node_only & vars[i].bit))
            continue;
        if (amldist__known(h, vars[i].f)) {
            h->node_only &= ~vars[i].bit;
            continue;
        }
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                 n ? " " : "", vars[i].name);
        snprintf(xs + strlen(xs), sizeof xs - strlen(xs), "%s-x %s",
                 n ? " " : "", vars[i].name);
        n++;
    }
    if (n == 0 || prefer == AMLDIST__PREFER_LAUNCHER)
        return 0;
    return amldist__fail(
        AMLDIST_ECONFLICT,
        "%s %s set on mpirun's node only: mpirun gives its own environment "
        "to the ranks of its node and to the other nodes only what it "
        "forwards, and its command line does not forward %s, so the nodes "
        "would disagree on the master; a leftover of another job in the "
        "shell that started mpirun? unset %s there, forward %s (mpirun %s), "
        "or set AMLDIST_PREFER=launcher",
        names, n > 1 ? "are" : "is", n > 1 ? "them" : "it", names,
        n > 1 ? "them" : "it", xs);
}

static int build(const amldist__env_t *env, const amldist_options_t *o,
                 struct amldist *h)
{
    struct amldist canon, mpi, slurm, launcher_master;
    int prefer = prefer_of(env);
    if (prefer < 0)
        return prefer;
    int has_canon =
        amldist__read_first(AMLDIST__READ_CANONICAL, env, NULL, &canon);
    /* The launchers are read even so: beside one, unreadable canonical
     * variables are leftovers that a preference may set aside. */
    char canon_error[AMLDIST__WHY_MAX * 2] = "";
    if (has_canon < 0)
        amldist__strlcpy(canon_error, amldist_last_error(),
                         sizeof canon_error);
    int has_mpi = amldist__read_first(AMLDIST__READ_MPI, env, NULL, &mpi);
    if (has_mpi < 0)
        return has_mpi;
    int has_slurm =
        amldist__read_first(AMLDIST__READ_OUTER, env, NULL, &slurm);
    if (has_slurm < 0)
        return has_slurm;
    if (has_canon < 0) {
        const struct amldist *launcher =
            has_mpi ? &mpi : has_slurm ? &slurm : NULL;
        if (launcher == NULL)
            return amldist__fail(has_canon, "%s", canon_error);
        if ((has_canon = canon_unreadable(env, has_canon, canon_error,
                                          launcher, prefer)) < 0)
            return has_canon;
    }
    int rc = 0;
    if (has_mpi && has_slurm &&
        (rc = amldist__same_step_under_srun(env, &mpi, &slurm)) < 0)
        return rc;

    /* Slurm is always outside an MPI launcher in its allocation: inside
     * sbatch every mpirun rank sees the batch step's SLURM_PROCID=0. */
    const struct amldist *outer = has_mpi ? &mpi : has_slurm ? &slurm : NULL;
    if (has_canon && canon.marker && has_mpi &&
        (rc = marked_fits(env, &canon, &mpi, prefer)) <= 0) {
        if (rc < 0)
            return rc;
        has_canon = 0;
    }
    rc = 0;
    if (has_canon && !canon.marker && outer != NULL)
        rc = amldist__relate(&canon, outer, prefer, h);
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

    if ((rc = amldist__apply_options(h, o, from_env)) < 0)
        return rc;
    if (h->node_only && (rc = node_only_master(h, prefer)) < 0)
        return rc;
    /* Only now, and only for the reading in use: a PMIx query is a
     * connection to the launcher, with consequences (sources/pmix_client.c). */
    if (h->want_pmix && needs_pmix(env, o, h, &launcher_master))
        amldist__pmix_complete(env, h, &launcher_master);
    if (env->flags & AMLDIST_ONE_PER_NODE)
        alone_on_node(h);
    derive(h);
    if ((rc = amldist__resolve_master(env, h, &launcher_master)) < 0)
        return rc;
    explain_unknowns(h);
    return amldist__validate(h);
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
