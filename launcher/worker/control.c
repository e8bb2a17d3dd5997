/* The node agents' control plane in amlrun (see control.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/control.h"
#include "output/msg.h"
#include "query/early.h"
#include "rdzv/backends.h"

static int ms(double seconds)
{
    double v = seconds * 1000;
    return v >= INT_MAX ? INT_MAX : (int)v;
}

/* The static rendezvous's control port: beside PyTorch's store
 * (MASTER_PORT) and the bootstrap (MASTER_PORT+1), which the workers use
 * while the control plane holds this one. */
static int static_port(int master_port)
{
    const char *v = getenv("AMLDIST_CONTROL_PORT");
    if (v && *v) {
        char *end;
        long p = strtol(v, &end, 10);
        if (!*end && p > 0 && p <= 65535)
            return (int)p;
        msg("warning: AMLDIST_CONTROL_PORT=%s is not a port: using "
            "MASTER_PORT+2", v);
    }
    return master_port <= 65533 ? master_port + 2 : master_port - 2;
}

/* HOST:PORT ([HOST]:PORT for an IPv6 address), after "SCHEME://" where
 * scheme is not NULL: the library picks the backend of the registry
 * (lib/rdzv/backends.h) the scheme names, the first row's without one. */
static void endpoint(char *buf, size_t size, const char *scheme,
                     const char *host, int port)
{
    int n = scheme ? snprintf(buf, size, "%s://", scheme) : 0;
    if (n < 0)
        n = 0;
    else if ((size_t)n >= size) /* cut short, as a long HOST is */
        n = (int)size - 1;
    snprintf(buf + n, size - (size_t)n,
             strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

/* Every agent starts the same count, where the workers are numbered
 * from each agent's own rank. */
static int same_counts(const struct control *c, int nproc)
{
    int n = amldist_rdzv_num_nodes(c->rz);
    for (int i = 0; i < n; i++) {
        int k = amldist_rdzv_node_nproc(c->rz, i);
        if (k != nproc) {
            msg("the job's amlruns start different numbers of workers (node "
                "%d: %d, this one: %d), and several share a node, so their "
                "ranks cannot be numbered per node; no worker started (give "
                "every amlrun the same --nproc-per-node)", i, k, nproc);
            return 0;
        }
    }
    return 1;
}

/*
 * How the static rendezvous's workers are numbered is the job's choice,
 * made alike on every amlrun from what the launcher tells all of them, never
 * from this amlrun's own node (issue 39: under `mpirun --host n0:3,n1:1`
 * n1's lone amlrun numbered its node 3 of 4, n0's theirs 0 of 2).  The node
 * count is the same on every rank: as many nodes as amlruns is one amlrun
 * per node (1: the rendezvous numbers them, and the worker counts may
 * differ); fewer is nodes shared, some unevenly (0: the launcher's node
 * index and count, amldist_derive_child(), the same worker count on every
 * amlrun).  Without a node count (Hydra's ssh launcher names a node index
 * only; under Slurm its proxies' srun step gives the count) an amlrun
 * that shares its node, or whose node index is not its rank (a lone amlrun
 * beside shared nodes), cannot be numbered alike: -1, with the reason in
 * `why`, and the caller ends the job through the rendezvous, so that every
 * amlrun gives it.
 */
int control_numbering(const amldist_t *l, char *why, size_t size)
{
    int agents = amldist_world_size(l), nodes = amldist_num_nodes(l);
    int node = amldist_node_rank(l), rank = amldist_rank(l);
    int local = amldist_local_world_size(l);
    if (nodes > 0)
        return nodes == agents;
    if (local == 1 && (node < 0 || node == rank))
        return 1;
    char what[160];
    if (local != 1)
        snprintf(what, sizeof what, "%d of them on this node (%s)", local,
                 amldist_explain(l, AMLDIST_FIELD_LOCAL_WORLD_SIZE));
    else
        snprintf(what, sizeof what, "this one alone on node %d (%s), not "
                 "node %d", node, amldist_explain(l, AMLDIST_FIELD_NODE_RANK),
                 rank);
    snprintf(why, size, "the job's %d amlruns are not one per node, %s, "
             "and the launcher does not say how many nodes there are (%s): "
             "their nodes cannot be numbered alike; no worker started (start "
             "one amlrun per node: mpiexec -ppn 1, mpirun --npernode 1, srun "
             "--ntasks-per-node 1; or give --nnodes)", agents, what,
             amldist_explain(l, AMLDIST_FIELD_NUM_NODES));
    return -1;
}

/* The rendezvous library's warnings, one "amlrun: warning:" line each. */
/* A job this node cannot start in: ended through the host, so that every
 * node exits together with one status (usage, 2, unless the job ended
 * otherwise first); the connection is closed. */
static int end_before_start(struct control *c, const char *why)
{
    amldist_rdzv_fail(c->rz, AMLDIST_RDZV_FINAL, -1, AMLRUN_EXIT_USAGE, why);
    int status = amldist_rdzv_next(c->rz, AMLRUN_EXIT_USAGE) == 0
                     ? amldist_rdzv_exit_status(c->rz)
                     : AMLRUN_EXIT_USAGE;
    control_close(c);
    return status;
}

static void print_warnings(const char *w)
{
    while (w && *w) {
        size_t len = strcspn(w, "\n");
        msg("warning: %.*s", (int)len, w);
        w += len;
        if (*w == '\n')
            w++;
    }
}

int control_round(const struct control *c, struct amlrun_binding *b)
{
    int first = 0, all = 0;
    if (!c->rz)
        return 0;
    /* Once per change, not again at every restart. */
    static char said[4096];
    const char *w = amldist_rdzv_warnings(c->rz);
    if (strncmp(w, said, sizeof said - 1) != 0) {
        print_warnings(w);
        snprintf(said, sizeof said, "%s", w);
    }
    if (amldist_rdzv_gpu_share(c->rz, &first, &all) < 0)
        return 0;
    if (c->verbose && all > amldist_rdzv_node_nproc(c->rz,
                                                    amldist_rdzv_node_rank(c->rz)))
        msg("GPUs: this machine runs %d ranks of the job in several amlruns; "
            "this one's are its ranks %d..%d, which take GPUs (%d + local "
            "rank) mod the GPUs", all, first,
            first + amldist_rdzv_node_nproc(c->rz,
                                            amldist_rdzv_node_rank(c->rz)) - 1,
            first);
    return bind_share(b, first, all);
}

/* The rendezvous's options of this job, into *rop (its strings c's or
 * o's): 1 when there is one, 0 when there is none (one agent, or
 * --no-node-check), or an exit status after a message. */
static int join_options(const struct amlrun_opts *o, const struct plan *p,
                        struct amlrun_binding *b, struct control *c,
                        amldist_rdzv_options_t *rop)
{
    memset(c, 0, sizeof *c);
    const amldist_t *l = p->layout;
    int c10d = options_c10d(o);
    int agents = amldist_world_size(l);
    if (!c10d && (agents <= 1 || o->no_node_check))
        return 0;
    amldist_rdzv_options_t ro = AMLDIST_RDZV_OPTIONS_INIT;
    ro.nproc = p->nproc;
    ro.max_restarts = o->max_restarts;
    ro.run_id = o->run_id;
    const struct rdzv_conf *rc = &o->rdzv_conf;
    double join = rdzv_conf_join_timeout(rc, c10d);
    if (join > 0)
        ro.join_timeout_ms = ms(join);
    if (rc->last_call_timeout > 0)
        ro.last_call_ms = ms(rc->last_call_timeout);
    if (rc->keep_alive_interval > 0)
        ro.keepalive_ms = ms(rc->keep_alive_interval);
    ro.keepalive_misses = rc->keep_alive_max_attempt;
    /* The agents of one machine split the GPUs they see alike; where
     * amlrun has no plan with GPUs there is nothing to split. */
    ro.gpu_ids = b ? bind_gpu_ids(b) : NULL;
    ro.local_addr = o->local_addr;
    ro.note_fd = o->quiet ? -1 : 2;
    ro.note_prefix = "amlrun: ";
    c->verbose = o->verbose;
    c->unnumbered[0] = '\0';
    if (c10d) {
        /* The registry's first backend (c10d) is the endpoint without a
         * scheme, as before the registry; another is picked by its name. */
        const char *scheme =
            strcmp(o->rdzv_backend, amldist__rz_backend_name(0)) == 0
                ? NULL
                : o->rdzv_backend;
        if (scheme && o->rdzv_endpoint_raw)
            /* Another backend's endpoint as given (etcd: its members),
             * its own keys after a '?' (lib/rdzv/backend.h). */
            snprintf(c->endpoint, sizeof c->endpoint, "%s://%s%s%s", scheme,
                     o->rdzv_endpoint_raw, o->rdzv_conf_raw ? "?" : "",
                     o->rdzv_conf_raw ? o->rdzv_conf_raw : "");
        else
            endpoint(c->endpoint, sizeof c->endpoint, scheme, o->owned_addr,
                     o->endpoint_port);
        ro.min_nodes = o->nnodes > 0 ? o->nnodes_min : 1;
        ro.max_nodes = o->nnodes > 0 ? o->nnodes : 1;
        /* Under an outer launcher its rank orders the nodes. */
        const char *src = amldist_source(l);
        if (agents > 1 && strcmp(src, "default") && strcmp(src, "options"))
            ro.order = amldist_rank(l);
        ro.master_addr = o->master_addr;
        ro.master_port = o->master_port;
        c->numbering = 1;
    } else {
        const char *host = amldist_master_addr(l);
        int port = amldist_master_port(l);
        char words[LIBWORDS_MAX];
        if (!host || port <= 0) {
            msg("the job's %d amlruns cannot meet: %s (%s); give "
                "--master-addr and --master-port, or --no-node-check; no "
                "worker started", agents,
                host ? "MASTER_PORT is not known" : "MASTER_ADDR is not known",
                plan_explain(p, host ? AMLDIST_FIELD_MASTER_PORT
                                     : AMLDIST_FIELD_MASTER_ADDR, words));
            return AMLRUN_EXIT_USAGE;
        }
        endpoint(c->endpoint, sizeof c->endpoint, NULL, host,
                 static_port(port));
        ro.min_nodes = ro.max_nodes = agents;
        ro.order = amldist_rank(l);
        ro.master_addr = host;
        ro.master_port = port;
        c->numbering = control_numbering(l, c->unnumbered,
                                         sizeof c->unnumbered);
    }
    ro.endpoint = c->endpoint;
    if (o->verbose)
        msg("rendezvous: joining %s (%s, %d:%d nodes, %d workers here)",
            c->endpoint, c10d ? o->rdzv_backend : "static", ro.min_nodes,
            ro.max_nodes, p->nproc);
    *rop = ro;
    return 1;
}

int control_join(const struct amlrun_opts *o, const struct plan *p,
                 struct amlrun_binding *b, struct control *c)
{
    amldist_rdzv_options_t ro;
    int have = join_options(o, p, b, c, &ro);
    if (have != 1)
        return have == 0 ? -1 : have;
    /* What --status says while the join waits (query/early.h). */
    char waiting[512];
    const char *kind = options_c10d(o) ? o->rdzv_backend : "static";
    if (ro.min_nodes == ro.max_nodes)
        snprintf(waiting, sizeof waiting, "the rendezvous at %s (%s): "
                 "%d nodes, %d worker%s here", ro.endpoint, kind, ro.max_nodes,
                 p->nproc, p->nproc == 1 ? "" : "s");
    else
        snprintf(waiting, sizeof waiting, "the rendezvous at %s (%s): "
                 "%d to %d nodes, %d worker%s here", ro.endpoint, kind,
                 ro.min_nodes, ro.max_nodes, p->nproc, p->nproc == 1 ? "" : "s");
    qearly_waiting(waiting);
    int err = amldist_rdzv_join(&ro, &c->rz);
    qearly_waiting(NULL);
    if (err < 0) {
        /* Refused, or told something impossible: the command line's
         * fault; else amlrun could not do its job. */
        int usage = err == AMLDIST_EDENIED || err == AMLDIST_EPROTO ||
                    err == AMLDIST_ECONFLICT || err == AMLDIST_EINVAL;
        /* A job that another node's failure ended before this node got a
         * round ends with that failure's status (127: its command was
         * not found), as the first failure's under torchrun and mpirun. */
        int ended = err == AMLDIST_EDENIED ? amldist_rdzv_join_status() : -1;
        msg("cannot join the job's rendezvous: %s; no worker started",
            amldist_last_error());
        if (ended > 0)
            return ended;
        return usage ? AMLRUN_EXIT_USAGE : AMLRUN_EXIT_SYSTEM;
    }
    if (control_round(c, b) < 0)
        return end_before_start(c, "amlrun:   this node could not plan its "
                                   "share of its machine's GPUs\n");
    if (c->numbering < 0) {
        /* The reason travels: the amlruns that could number their nodes
         * end with it too. */
        char summary[sizeof c->unnumbered + 16];
        msg("%s", c->unnumbered);
        snprintf(summary, sizeof summary, "amlrun:   %s\n", c->unnumbered);
        return end_before_start(c, summary);
    }
    /* Every amlrun sees the counts and ends the job so. */
    if (!c->numbering && !same_counts(c, p->nproc))
        return end_before_start(c, "amlrun:   the amlruns sharing a node "
                                   "start different numbers of workers\n");
    return -1;
}

void control_fail_early(const struct amlrun_opts *o, const struct plan *p,
                        int status)
{
    struct control c;
    amldist_rdzv_options_t ro;
    if (o->dry_run || join_options(o, p, NULL, &c, &ro) != 1)
        return;
    /* Its message, in the margin the other nodes print a summary in. */
    char summary[1100];
    snprintf(summary, sizeof summary, "amlrun:   %.1000s\n", msg_last());
    if (!o->quiet)
        msg("telling the job's other nodes (rendezvous at %s) that this "
            "node cannot start", c.endpoint);
    if (amldist_rdzv_join_failed(&ro, status, summary) < 0 && o->verbose)
        msg("the other nodes could not be told: %s", amldist_last_error());
}

void control_describe(const struct control *c)
{
    if (!c->rz)
        return;
    const amldist_rdzv_t *r = c->rz;
    char counts[200] = "";
    size_t n = 0;
    int nodes = amldist_rdzv_num_nodes(r);
    for (int i = 0; i < nodes && n + 16 < sizeof counts; i++)
        n += (size_t)snprintf(counts + n, sizeof counts - n, "%s%d",
                              i ? "," : "", amldist_rdzv_node_nproc(r, i));
    if (n + 16 >= sizeof counts)
        snprintf(counts + n, sizeof counts - n, ",...");
    msg("rendezvous %s: round %d: node %d of %d (workers per node: %s)%s",
        c->endpoint, amldist_rdzv_round(r), amldist_rdzv_node_rank(r), nodes,
        counts, amldist_rdzv_is_host(r) ? "; this node hosts it" : "");
}

void control_close(struct control *c)
{
    amldist_rdzv_close(c->rz);
    c->rz = NULL;
}
