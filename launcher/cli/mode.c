/* The mode decision and the number of workers (see mode.h). */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/masterport.h"
#include "cli/mode.h"
#include "output/msg.h"

static int count_nproc(const struct amlrun_opts *o, struct plan *p)
{
    if (o->nproc_kind == NPROC_NUM) {
        p->nproc = o->nproc;
        return -1;
    }
    if (o->nproc_kind == NPROC_UNSET) {
        p->nproc = 1;
        return -1;
    }
    /* gpu|auto: the GPUs this process can use, counted by the library as
     * binding counts them (the driver's list, NVIDIA_VISIBLE_DEVICES,
     * CUDA_VISIBLE_DEVICES); the topology is kept for bind_setup(), so it
     * is read once. */
    if (amldist_topo_load(&p->topo, o->bind.topology, 0) < 0) {
        msg("%s%s", o->bind.topology ? "" : "warning: counting GPUs: ",
            amldist_last_error());
        if (o->bind.topology)
            return AMLRUN_EXIT_USAGE;
        p->topo = NULL;
    }
    int gpus = p->topo ? amldist_topo_num_gpus(p->topo) : 0;
    if (gpus > 0) {
        p->nproc = gpus;
        return -1;
    }
    if (o->nproc_kind == NPROC_GPU) {
        msg("--nproc-per-node gpu: no usable GPU: %s",
            p->topo ? amldist_topo_gpu_note(p->topo)
                    : "the topology could not be read");
        return AMLRUN_EXIT_USAGE;
    }
    /* auto without GPUs: one worker per core we may run on. */
    cpu_set_t set;
    p->nproc = sched_getaffinity(0, sizeof set, &set) == 0
                   ? CPU_COUNT(&set)
                   : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (p->nproc < 1)
        p->nproc = 1;
    if (p->nproc > AMLRUN_MAX_NPROC) {
        msg("--nproc-per-node auto: %d cores, more than the %d workers "
            "amlrun starts on a node: give a number", p->nproc,
            AMLRUN_MAX_NPROC);
        return AMLRUN_EXIT_USAGE;
    }
    return -1;
}

/*
 * torchrun gives every worker RANK, WORLD_SIZE, LOCAL_RANK and
 * LOCAL_WORLD_SIZE (and --local_rank to a legacy script), and scripts
 * index them without a default.  A layout that cannot give them is refused
 * here, before anything starts, instead of starting workers without them:
 * "unknown" is never passed on as a number.  The node rank may stay
 * unknown (NODE_RANK and GROUP_RANK are then left out, and shown as "?").
 */
static int need_known(const struct plan *p)
{
    const amldist_t *l = p->layout;
    char words[LIBWORDS_MAX];
    const struct { int v; amldist_field_t f; const char *name; } need[] = {
        {amldist_rank(l), AMLDIST_FIELD_RANK, "RANK"},
        {amldist_world_size(l), AMLDIST_FIELD_WORLD_SIZE, "WORLD_SIZE"},
        {amldist_local_rank(l), AMLDIST_FIELD_LOCAL_RANK, "LOCAL_RANK"},
        {amldist_local_world_size(l), AMLDIST_FIELD_LOCAL_WORLD_SIZE,
         "LOCAL_WORLD_SIZE"},
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (need[i].v >= 0)
            continue;
        /* In place, the command gets the launcher's variables as they are:
         * a LOCAL_WORLD_SIZE the launcher does not give (Azure ML's PyTorch
         * distribution, launch.py's workers) is left out, as it would be
         * without amlrun; binding then plans one rank per GPU (inplace.c). */
        if (p->mode == MODE_PROCESS &&
            need[i].f == AMLDIST_FIELD_LOCAL_WORLD_SIZE)
            continue;
        msg("%s: the %s%s cannot be known: the layout from %s does not say "
            "%s%s (%s); start amlrun under a launcher that does, or set RANK, "
            "WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE for it%s",
            p->mode == MODE_NODE ? "per-node mode" : "per-process mode",
            p->mode == MODE_NODE ? "workers' " : "command's ", need[i].name,
            amldist_source(l),
            p->mode == MODE_NODE ? "this amlrun's " : "its ", need[i].name,
            plan_explain(p, need[i].f, words),
            p->mode == MODE_NODE ? " (LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 when "
                                   "one amlrun runs on each node)" : "");
        return AMLRUN_EXIT_USAGE;
    }
    return -1;
}

/* The job's ranks must fit an int: RANK and WORLD_SIZE are ints to every
 * reader (the library, PyTorch). */
static int check_size(const struct amlrun_opts *o, const struct plan *p)
{
    int world = amldist_world_size(p->layout);
    long long ranks = (long long)world * p->nproc;
    if (ranks <= INT_MAX)
        return -1;
    char what[64];
    if (o->nproc_kind == NPROC_NUM)
        snprintf(what, sizeof what, "--nproc-per-node %d", p->nproc);
    else
        snprintf(what, sizeof what, "--nproc-per-node %s (%d)",
                 o->nproc_kind == NPROC_GPU ? "gpu" : "auto", p->nproc);
    char words[LIBWORDS_MAX];
    msg("%s with world size %d (%s): %lld ranks, more than %d", what, world,
        plan_explain(p, AMLDIST_FIELD_WORLD_SIZE, words), ranks, INT_MAX);
    return AMLRUN_EXIT_USAGE;
}

/*
 * One node (one amlrun, the static rendezvous): rank 0 binds PyTorch's
 * store at MASTER_PORT on this machine, so a port some other program
 * holds is known now, not after PyTorch's "address already in use"
 * traceback.  The default 29500 that is taken gives way to a free port,
 * said in one line; a port the user named is never swapped silently: the
 * job is refused, naming the ways out.  --dry-run shows the plan without
 * the check; c10d finds its port from the rendezvous (control.h), and in
 * place the command binds what its launcher gave.
 */
static int check_master_port(const struct amlrun_opts *o,
                             amldist_options_t *ao, struct plan *p)
{
    char words[LIBWORDS_MAX];
    if (amldist_world_size(p->layout) != 1) {
        /* Several amlruns (a launcher's, or --nnodes): each would pick a
         * port of its own and none would meet. */
        if (o->endpoint_any_port && !o->standalone) {
            msg("--rdzv-endpoint %s:0: port 0 (a free port, picked here) is "
                "for one node, and this job has %d amlruns (%s): give the "
                "port they meet at", o->owned_addr,
                amldist_world_size(p->layout),
                plan_explain(p, AMLDIST_FIELD_WORLD_SIZE, words));
            return AMLRUN_EXIT_USAGE;
        }
        return -1;
    }
    if (options_c10d(o) || o->dry_run)
        return -1;
    int port = amldist_master_port(p->layout);
    if (port <= 0 || master_port_free(port) != 0)
        return -1; /* free, or not to be told: rank 0 will say */
    const char *why = amldist_explain(p->layout, AMLDIST_FIELD_MASTER_PORT);
    if (strncmp(why, "default", 7) != 0) {
        why = plan_words(p, why, words);
        msg("MASTER_PORT %d (%s) is in use on this machine: rank 0 could not "
            "open its store there; no worker started (give a free port with "
            "--master-port, or leave it out: amlrun then picks one)", port,
            why);
        return AMLRUN_EXIT_USAGE;
    }
    int picked = master_port_pick();
    if (picked < 0)
        return -1;
    ao->master_port = picked;
    libwords_set(&p->words, o, ao, PORT_PICKED_TAKEN);
    amldist_free(p->layout);
    p->layout = NULL;
    if (amldist_init_opts(&p->layout, ao) < 0) {
        msg("cannot work out this job's layout: %s",
            plan_words(p, amldist_last_error(), words));
        return AMLRUN_EXIT_SYSTEM;
    }
    if (!o->quiet)
        msg("port %d, the default MASTER_PORT, is in use on this machine: "
            "the workers get MASTER_PORT=%d, a free one (--master-port or "
            "--standalone choose)", port, picked);
    return -1;
}

/* Sources that mean "a launcher started this process as one rank". */
static int is_launcher_source(const char *src)
{
    return strcmp(src, "default") != 0 && strcmp(src, "options") != 0;
}

/*
 * amlrun run straight from salloc's shell (or a batch script) of a job of
 * several nodes is one process on this node: no launcher started it, so
 * it runs here alone, which the user rarely means.  One line says so and
 * how to run it on every node.  Slurm sets SLURM_STEP_ID in steps only
 * (sources/slurm.c).
 */
static void allocation_hint(const struct amlrun_opts *o, const struct plan *p)
{
    const char *job = getenv("SLURM_JOB_ID");
    const char *var = "SLURM_JOB_NUM_NODES", *nodes = getenv(var);
    if (!nodes)
        nodes = getenv(var = "SLURM_NNODES");
    if (o->quiet || o->nnodes > 0 || !job || !nodes || atoi(nodes) < 2 ||
        getenv("SLURM_STEP_ID") || getenv("SLURM_STEPID") ||
        is_launcher_source(amldist_source(p->layout)))
        return;
    msg("note: Slurm job %s has %s nodes (%s) but this amlrun runs in no "
        "step of it, so on this node only; to run on every node: srun "
        "--ntasks-per-node 1 amlrun ... (or amlrun --launcher slurm ...)",
        job, nodes, var);
}

/*
 * --nnodes without --node-rank (or the other way round) where no launcher
 * variable gives the other: the library names its own options
 * (num_nodes, node_rank), which this user never typed; amlrun names the
 * one given as it was typed (--nnodes, --nnodes=, PET_NNODES=).  Whether
 * that is what the library missed is asked of it, not read from its
 * words: the same options with the other half filled in must then work
 * out.  1 after a line in amlrun's words, 0 when the failure is another.
 */
static int half_pair(const struct amlrun_opts *o, const amldist_options_t *ao)
{
    amldist_options_t probe = *ao;
    amldist_t *l = NULL;
    int nodes = ao->num_nodes > 1, rank = ao->node_rank >= 0;
    if (nodes == rank)
        return 0;
    if (nodes)
        probe.node_rank = 0;
    else
        probe.num_nodes = ao->node_rank + 1;
    if (amldist_init_opts(&l, &probe) < 0)
        return 0;
    amldist_free(l);
    if (nodes)
        msg("%s%d without --node-rank, and no launcher variable gives "
            "this node's rank: give each node's amlrun its --node-rank (0 "
            "to %d) and the same --master-addr, or let c10d number the "
            "nodes (--rdzv-backend c10d --rdzv-endpoint HOST:PORT); no "
            "worker started", o->nnodes_by[0] ? o->nnodes_by : "--nnodes ",
            ao->num_nodes, ao->num_nodes - 1);
    else
        msg("%s%d without --nnodes, and no launcher variable gives the "
            "node count: give every node's amlrun the same --nnodes (more "
            "than %d); no worker started",
            o->node_rank_by[0] ? o->node_rank_by : "--node-rank ",
            ao->node_rank, ao->node_rank);
    return 1;
}

/*
 * --standalone is a job of this amlrun alone: 127.0.0.1 and a port it
 * picks for itself.  Under a launcher that started other amlruns beside it
 * (mpirun -np 2 amlrun --standalone), each would pick its own port and
 * wait for the others at it, or give its ranks a master the others never
 * hear of: refused, naming what says there are more.  1 when refused.
 */
static int standalone_shared(const struct amlrun_opts *o, const struct plan *p)
{
    if (!o->standalone || !is_launcher_source(amldist_source(p->layout)))
        return 0;
    /* amlrun's own layout is the launcher's: one rank an amlrun (in
     * per-node mode too, AMLDIST_ONE_PER_NODE). */
    int amlruns = amldist_world_size(p->layout);
    if (amlruns <= 1)
        return 0;
    char words[LIBWORDS_MAX];
    msg("--standalone makes a job of this amlrun alone (127.0.0.1 and a "
        "port of its own), but its launcher started %d amlruns (%s); leave out "
        "--standalone, and they meet as one job at one master; no worker "
        "started", amlruns,
        plan_explain(p, AMLDIST_FIELD_WORLD_SIZE, words));
    return 1;
}

/* Where the master port amlrun passes comes from, before it is checked. */
static enum libwords_port port_origin(const struct amlrun_opts *o)
{
    if (o->standalone && o->master_port <= 0)
        return PORT_PICKED_STANDALONE;
    if (o->endpoint_any_port && !options_c10d(o) && !o->standalone)
        return PORT_PICKED_ENDPOINT;
    return PORT_GIVEN;
}

int plan_make(const struct amlrun_opts *o, struct plan *p)
{
    memset(p, 0, sizeof *p);
    amldist_options_t ao = AMLDIST_OPTIONS_INIT;
    /* Never connect to the PMIx server: under Open MPI 4.1 a process that
     * did so (even one we exec afterwards) fails in MPI_Init. */
    ao.flags |= AMLDIST_NO_PMIX;
    /* Per-node mode: this amlrun is its node's launcher.  Where the
     * environment does not say how many amlruns share the node (Azure ML's
     * PyTorch distribution with one process per node: RANK, WORLD_SIZE,
     * LOCAL_RANK=0, NODE_RANK), it is the only one. */
    if (o->mode == MODE_NODE || o->nproc_kind != NPROC_UNSET)
        ao.flags |= AMLDIST_ONE_PER_NODE;
    /* Under c10d, --nnodes counts the nodes that meet at the endpoint,
     * and the rendezvous gives the node rank (control.h). */
    ao.num_nodes = options_c10d(o) ? 0 : o->nnodes;
    ao.node_rank = o->node_rank;
    ao.master_addr = o->master_addr;
    ao.master_port = o->master_port;
    if (o->standalone) {
        ao.num_nodes = 1;
        ao.node_rank = 0;
        if (!ao.master_addr)
            ao.master_addr = "127.0.0.1";
        /* A port nobody listens on now, from the kernel: rank 0 binds it
         * a moment later, as torchrun's does. */
        if (ao.master_port <= 0 && (ao.master_port = master_port_pick()) < 0) {
            msg("--standalone: cannot find a free port");
            return AMLRUN_EXIT_SYSTEM;
        }
    }
    /* --rdzv-endpoint HOST:0 of the static rendezvous: the master port
     * is a free one, for one node only (checked below). */
    if (o->endpoint_any_port && !options_c10d(o) && !o->standalone &&
        (ao.master_port = master_port_pick()) < 0) {
        msg("--rdzv-endpoint %s:0: cannot find a free port", o->owned_addr);
        return AMLRUN_EXIT_SYSTEM;
    }
    libwords_set(&p->words, o, &ao, port_origin(o));
    int rc = amldist_init_opts(&p->layout, &ao);
    if (rc == AMLDIST_EMISSING && half_pair(o, &ao))
        return AMLRUN_EXIT_USAGE;
    char words[LIBWORDS_MAX];
    if (rc < 0) {
        int ours = o->nnodes > 0 || o->node_rank >= 0 || o->standalone;
        msg("cannot work out this job's layout: %s%s",
            plan_words(p, amldist_last_error(), words),
            rc == AMLDIST_ECONFLICT && ours
                ? " (--nnodes, --node-rank and --standalone may fill in what "
                  "the launcher does not say, or repeat it, not change it)"
                : "");
        return AMLRUN_EXIT_USAGE;
    }
    const char *src = amldist_source(p->layout);
    if (o->mode == MODE_PROCESS) {
        p->mode = MODE_PROCESS;
        snprintf(p->why, sizeof p->why, "per-process (--mode process; "
                 "layout from %s)", src);
    } else if (o->mode == MODE_NODE || o->nproc_kind != NPROC_UNSET) {
        p->mode = MODE_NODE;
        snprintf(p->why, sizeof p->why, "per-node (%s; layout of this node "
                 "from %s)", o->mode == MODE_NODE ? "--mode node"
                 : "--nproc-per-node given", src);
    } else if (is_launcher_source(src)) {
        p->mode = MODE_PROCESS;
        snprintf(p->why, sizeof p->why, "per-process (started by a launcher: "
                 "layout from %s, no --nproc-per-node)", src);
    } else {
        p->mode = MODE_NODE;
        snprintf(p->why, sizeof p->why, "per-node (no launcher found: one "
                 "worker unless --nproc-per-node)");
    }
    if ((rc = need_known(p)) < 0 && p->mode == MODE_NODE &&
        (rc = check_master_port(o, &ao, p)) < 0 &&
        (rc = count_nproc(o, p)) < 0)
        rc = check_size(o, p);
    if (rc < 0 && standalone_shared(o, p))
        rc = AMLRUN_EXIT_USAGE;
    if (rc >= 0) {
        plan_free(p);
        return rc;
    }
    allocation_hint(o, p);
    /* Never a guessed node index (MPICH's Hydra without its proxy in
     * sight): the ranks do not depend on it, so the job runs, but the
     * workers get no NODE_RANK or GROUP_RANK, and are told. */
    if (amldist_node_rank(p->layout) < 0 && !o->quiet)
        msg("warning: the node rank is not known, the %s no NODE_RANK or "
            "GROUP_RANK (%s)", p->mode == MODE_NODE ? "workers get"
                                                    : "command gets",
            plan_explain(p, AMLDIST_FIELD_NODE_RANK, words));
    /* Workers would fail later, inside init_process_group, with less to go
     * on: say now why there is no master and how to give one. */
    if (amldist_master_addr(p->layout) == NULL)
        msg("warning: MASTER_ADDR is not known, workers will not get it (%s); "
            "give --master-addr or MASTER_ADDR",
            plan_explain(p, AMLDIST_FIELD_MASTER_ADDR, words));
    return -1;
}

const char *plan_words(const struct plan *p, const char *text, char *buf)
{
    return libwords(&p->words, text, buf, LIBWORDS_MAX);
}

const char *plan_explain(const struct plan *p, amldist_field_t f, char *buf)
{
    return plan_words(p, amldist_explain(p->layout, f), buf);
}

void plan_free(struct plan *p)
{
    amldist_free(p->layout);
    p->layout = NULL;
    amldist_topo_free(p->topo);
    p->topo = NULL;
}
