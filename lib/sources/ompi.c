/*
 * Open MPI: OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE, and the node
 * count Open MPI 4 exports as OMPI_MCA_orte_num_nodes.  No variable holds the
 * node index: OMPI_COMM_WORLD_NODE_RANK is the rank among this node's
 * processes, and RANK / LOCAL_SIZE is wrong under --map-by node.
 *
 * Open MPI 4 runs one daemon per node, numbered from 0 (mpirun itself), and
 * tells each rank its daemon (OMPI_MCA_orte_local_daemon_uri =
 * "<job family>.<daemon>;tcp://...") and, away from mpirun's node, how many
 * daemons there are (OMPI_MCA_ess_base_num_procs).  The nodes of the job in
 * daemon order are its node indices; daemons that run no rank (mpirun's node
 * when it has none, other --host entries left unused) leave gaps that the
 * variables count but do not place.  When the count of gaps and our daemon
 * pin the index down, it is known without asking anybody: a PMIx query would
 * cost this rank (and any program it execs) its MPI_Init (sources/pmix_client.c).
 * Otherwise layout.c asks the PMIx server, when this reading is the one
 * used, and if it cannot, the node rank stays unknown.  Under a rankfile
 * (mpirun -rf) the daemons' numbers and node count are wrong
 * (ompi_rankfile.c): the file decides, or nothing does.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "sources/sources.h"
#include "sources/ompi_rankfile.h"

#define DAEMON_URI "OMPI_MCA_orte_local_daemon_uri"
#define HNP_URI "OMPI_MCA_orte_hnp_uri"
#define NUM_DAEMONS "OMPI_MCA_ess_base_num_procs"
#define NO_VM "OMPI_MCA_orte_no_vm"
/* mpirun -rf FILE exports the first, --mca rmaps_rank_file_path FILE the
 * second. */
#define RANKFILE "OMPI_MCA_orte_rankfile"
#define RANKFILE_MCA "OMPI_MCA_rmaps_rank_file_path"

/* "<job family>.<vpid>;<contact>" into its two numbers; -1 if malformed. */
static int parse_uri(const char *uri, long *family, long *vpid)
{
    char num[24];
    const char *dot, *semi;
    if (uri == NULL || (dot = strchr(uri, '.')) == NULL ||
        (semi = strchr(dot, ';')) == NULL || (size_t)(dot - uri) >= sizeof num ||
        (size_t)(semi - dot - 1) >= sizeof num)
        return -1;
    memcpy(num, uri, (size_t)(dot - uri));
    num[dot - uri] = '\0';
    if (amldist__parse_long(num, 0, 0xffffffffL, family) != 0)
        return -1;
    memcpy(num, dot + 1, (size_t)(semi - dot - 1));
    num[semi - dot - 1] = '\0';
    return amldist__parse_long(num, 0, 0xfffffffeL, vpid) != 0 ? -1 : 0;
}

#define NUM_APP_CTX "OMPI_NUM_APP_CTX"
#define MAPPING "OMPI_MCA_rmaps_base_mapping_policy"
#define MASTER_FIX \
    "; give it: mpirun -x MASTER_ADDR=<rank 0's host> (or --master-addr)"

/*
 * Do the variables place rank 0 on the first node of the daemons, mpirun's
 * when it runs ranks?  Only for one app context (each of several may have
 * hosts of its own: `-np 1 --host n1 A : -np 2 --host n0:2 B`) mapped by a
 * policy that fills the nodes from the first (not seq, which follows the
 * hostfile's lines, nor one Open MPI adds later).  0 if so; else 1, with
 * the reason in `why`.  Every rank of a job sees the same variables, so
 * every rank answers alike.
 */
static int rank0_unplaced(const amldist__env_t *env, char *why, size_t size)
{
    static const char *const fill_first[] = {
        "slot", "node", "core", "socket", "numa", "board", "hwthread",
        "l1cache", "l2cache", "l3cache", "ppr"};
    const char *ctx = amldist__env_get(env, NUM_APP_CTX);
    const char *map = amldist__env_get(env, MAPPING);
    if (ctx != NULL && *ctx != '\0' && strcmp(ctx, "1") != 0) {
        snprintf(why, size, "%s=%.8s: an app context's own --host may put "
                 "rank 0 away from mpirun's node", NUM_APP_CTX, ctx);
        return 1;
    }
    if (map == NULL || *map == '\0')
        return 0;
    size_t n = strcspn(map, ":");
    for (size_t i = 0; i < sizeof fill_first / sizeof *fill_first; i++)
        if (n == strlen(fill_first[i]) &&
            strncasecmp(map, fill_first[i], n) == 0)
            return 0;
    snprintf(why, size, "%s=%.24s: the mapping, not mpirun's node, places "
             "rank 0", MAPPING, map);
    return 1;
}

/*
 * mpirun's node runs ranks: under a layout that places rank 0 on the first
 * node (src_ompi() asks rank0_unplaced() after this), rank 0 too, and its
 * address in OMPI_MCA_orte_hnp_uri is the master when it names exactly one
 * IPv4 address (a list may start with one that the other nodes cannot
 * reach).
 */
static void master_is_mpirun(const char *hnp, struct amldist *r)
{
    char host[AMLDIST__HOST_MAX];
    const char *p = strstr(hnp, ";tcp://");
    const char *colon;
    if (p == NULL || (colon = strchr(p += 7, ':')) == NULL ||
        (size_t)(colon - p) >= sizeof host ||
        memchr(p, ',', (size_t)(colon - p))) {
        amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                     "unknown: %s=%.60s: not one IPv4 address of mpirun's "
                     "node, which runs rank 0" MASTER_FIX,
                     HNP_URI, hnp);
        return;
    }
    memcpy(host, p, (size_t)(colon - p));
    host[colon - p] = '\0';
    if (amldist__valid_host(host) != 0 ||
        amldist__strlcpy(r->addr, host, sizeof r->addr) != 0) {
        r->addr[0] = '\0';
        return;
    }
    amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                 "%s=%.60s: mpirun's node, which runs rank 0", HNP_URI, hnp);
}

/*
 * The node index from this rank's daemon: 1 set, 0 not decidable (r->why
 * says why).  With D daemons for N nodes of ranks, D - N daemons run none;
 * daemon V then is node V - (gaps below it), somewhere in
 * [max(0, V - (D - N)), min(V, N - 1)].  Under --novm only mpirun's daemon
 * can be idle, so the gaps below V are exactly D - N.
 */
static int node_from_daemon(const amldist__env_t *env, struct amldist *r)
{
    long fam, vpid, hnp_fam, hnp_vpid, daemons;
    const char *uri = amldist__env_get(env, DAEMON_URI);
    const char *hnp = amldist__env_get(env, HNP_URI);
    long nodes = r->val[AMLDIST_FIELD_NUM_NODES];
    if (uri == NULL || hnp == NULL) {
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: no %s (Open MPI 4's daemon), and "
                     "OMPI_COMM_WORLD_NODE_RANK is not a node index",
                     uri == NULL ? DAEMON_URI : HNP_URI);
        return 0;
    }
    if (parse_uri(uri, &fam, &vpid) != 0 ||
        parse_uri(hnp, &hnp_fam, &hnp_vpid) != 0 || fam != hnp_fam ||
        hnp_vpid != 0) {
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: %s=\"%.32s\" and %s=\"%.32s\": not two "
                     "daemons of one mpirun",
                     DAEMON_URI, uri, HNP_URI, hnp);
        return 0;
    }
    if (vpid == 0) {
        /* mpirun's own node runs ranks: the first node. */
        amldist__set(r, AMLDIST_FIELD_NODE_RANK, 0,
                     "derived: %s is mpirun's (%s), the first node",
                     DAEMON_URI, HNP_URI);
        master_is_mpirun(hnp, r);
        return 1;
    }
    const char *dtext = amldist__env_get(env, NUM_DAEMONS);
    if (nodes < 1) {
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: daemon %ld (%s), and the node count is not "
                     "known (%.120s)",
                     vpid, DAEMON_URI, r->why[AMLDIST_FIELD_NUM_NODES]);
        return 0;
    }
    if (dtext == NULL ||
        amldist__parse_long(dtext, 1, 0xffffffffL, &daemons) != 0 ||
        nodes < 1 || daemons < nodes || vpid >= daemons) {
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: daemon %ld (%s), %s=%.12s and "
                     "OMPI_MCA_orte_num_nodes=%ld do not add up",
                     vpid, DAEMON_URI, NUM_DAEMONS,
                     dtext != NULL ? dtext : "(unset)", nodes);
        return 0;
    }
    long idle = daemons - nodes;
    if (idle == 0)
        master_is_mpirun(hnp, r);
    const char *novm = amldist__env_get(env, NO_VM);
    int no_vm = novm != NULL && (strcmp(novm, "1") == 0 ||
                                 strcmp(novm, "true") == 0);
    long lo = vpid - idle > 0 ? vpid - idle : 0;
    long hi = vpid < nodes - 1 ? vpid : nodes - 1;
    if (no_vm && idle <= 1)
        lo = hi = vpid - idle;
    if (lo == hi) {
        amldist__set(r, AMLDIST_FIELD_NODE_RANK, lo,
                     "derived: daemon %ld (%s) of %s=%ld for "
                     "OMPI_MCA_orte_num_nodes=%ld%s",
                     vpid, DAEMON_URI, NUM_DAEMONS, daemons, nodes,
                     no_vm ? ", " NO_VM "=1" : "");
        return 1;
    }
    amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                 "unknown: daemon %ld of %s=%ld for %ld nodes: %ld idle "
                 "may lie below it (mpirun --novm tells)",
                 vpid, NUM_DAEMONS, daemons, nodes, idle);
    return 0;
}

/*
 * Under a rankfile the daemons say nothing reliable (ompi_rankfile.c): the
 * node count, the node index and the master come from the file, all three
 * or none, on every rank alike.  1 when read.
 */
static int from_rankfile(const char *var, const char *path,
                         struct amldist *r)
{
    amldist__rankfile_t rf;
    char why[96];
    static const char distrust[] =
        "OMPI_MCA_orte_num_nodes is not used under a rankfile: Open MPI 4's "
        "daemons away from mpirun count its nodes twice";
    if (amldist__ompi_rankfile(path, r->val[AMLDIST_FIELD_RANK],
                               r->val[AMLDIST_FIELD_WORLD_SIZE], &rf, why,
                               sizeof why) != 0) {
        amldist__why(r, AMLDIST_FIELD_NUM_NODES, "unknown: %s; %s=%.48s: %s",
                     distrust, var, path, why);
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: %s=%.48s orders the nodes, and %s", var,
                     path, why);
        amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                     "unknown: %s=%.48s places rank 0, and %s", var,
                     path, why);
        return 0;
    }
    amldist__set(r, AMLDIST_FIELD_NUM_NODES, rf.nodes,
                 "%s=%.64s: %ld hosts (%s)", var, path, rf.nodes,
                 distrust);
    amldist__set(r, AMLDIST_FIELD_NODE_RANK, rf.node,
                 "%s=%.64s: its hosts numbered by their first rank, this "
                 "rank's host",
                 var, path);
    /* "localhost" names mpirun's node to mpirun, not to the other nodes. */
    if (amldist__valid_host(rf.rank0_host) == 0 &&
        strcmp(rf.rank0_host, "localhost") != 0 &&
        strncmp(rf.rank0_host, "127.", 4) != 0 &&
        amldist__strlcpy(r->addr, rf.rank0_host, sizeof r->addr) == 0)
        amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                     "%s=%.64s: the host of rank 0", var, path);
    else
        amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                     "unknown: %s=%.64s places rank 0 on \"%.64s\", which "
                     "is no address for the other nodes",
                     var, path, rf.rank0_host);
    return 1;
}

/* The node count, unless a remote daemon's says more nodes than daemons. */
static int num_nodes(const amldist__env_t *env, struct amldist *r)
{
    int rc = amldist__env_field(env, r, AMLDIST_FIELD_NUM_NODES,
                                "OMPI_MCA_orte_num_nodes");
    long daemons;
    const char *dtext = amldist__env_get(env, NUM_DAEMONS);
    if (rc == 1 && dtext != NULL &&
        amldist__parse_long(dtext, 1, 0xffffffffL, &daemons) == 0 &&
        r->val[AMLDIST_FIELD_NUM_NODES] > daemons) {
        long nodes = r->val[AMLDIST_FIELD_NUM_NODES];
        r->val[AMLDIST_FIELD_NUM_NODES] = AMLDIST_EUNKNOWN;
        amldist__why(r, AMLDIST_FIELD_NUM_NODES,
                     "unknown: OMPI_MCA_orte_num_nodes=%ld is more than the "
                     "%s=%ld daemons that run ranks",
                     nodes, NUM_DAEMONS, daemons);
    }
    return rc < 0 ? rc : 0;
}

int amldist__src_ompi(const amldist__env_t *env, struct amldist *r)
{
    amldist__reading_init(r, "ompi");
    int rc = amldist__env_quad(env, r, "OMPI_COMM_WORLD_RANK",
                               "OMPI_COMM_WORLD_SIZE",
                               "OMPI_COMM_WORLD_LOCAL_RANK",
                               "OMPI_COMM_WORLD_LOCAL_SIZE");
    if (rc <= 0)
        return rc;
    const char *var = RANKFILE;
    const char *rankfile = amldist__env_get(env, var);
    if (rankfile == NULL || *rankfile == '\0')
        rankfile = amldist__env_get(env, var = RANKFILE_MCA);
    int ranked = rankfile != NULL && *rankfile != '\0';
    if (ranked && r->val[AMLDIST_FIELD_LOCAL_WORLD_SIZE] !=
                      r->val[AMLDIST_FIELD_WORLD_SIZE]) {
        if (!from_rankfile(var, rankfile, r))
            r->want_pmix = 1;
        r->node_only = amldist__ompi_node_only(env);
        return 1;
    }
    if (!ranked && (rc = num_nodes(env, r)) < 0)
        return rc;

    int world = r->val[AMLDIST_FIELD_WORLD_SIZE];
    int local_world = r->val[AMLDIST_FIELD_LOCAL_WORLD_SIZE];
    if (local_world == world) {
        amldist__set(r, AMLDIST_FIELD_NODE_RANK, 0,
                     "derived: OMPI_COMM_WORLD_LOCAL_SIZE == "
                     "OMPI_COMM_WORLD_SIZE=%d (one node)",
                     world);
        if (!amldist__known(r, AMLDIST_FIELD_NUM_NODES))
            amldist__set(r, AMLDIST_FIELD_NUM_NODES, 1,
                         "derived: OMPI_COMM_WORLD_LOCAL_SIZE == "
                         "OMPI_COMM_WORLD_SIZE=%d (one node)",
                         world);
    } else if (r->val[AMLDIST_FIELD_NUM_NODES] == 1) {
        amldist__set(r, AMLDIST_FIELD_NODE_RANK, 0,
                     "derived: OMPI_MCA_orte_num_nodes=1");
    } else {
        char why[112];
        /* Several nodes: a master variable of mpirun's shell would reach
         * this node alone (ompi_env.c). */
        r->node_only = amldist__ompi_node_only(env);
        if (!node_from_daemon(env, r))
            r->want_pmix = 1;
        /* Where the layout decides, not mpirun's node, every rank asks the
         * PMIx server for the master and the node numbers (its node list,
         * in the mapping's order, is the one numbering all ranks can
         * share), or every rank says the same. */
        if (rank0_unplaced(env, why, sizeof why)) {
            r->addr[0] = '\0';
            amldist__why(r, AMLDIST_FIELD_MASTER_ADDR, "unknown: %s%s", why,
                         MASTER_FIX);
            r->want_pmix = r->pmix_first = 1;
        } else if (!amldist__known(r, AMLDIST_FIELD_MASTER_ADDR)) {
            /* Ranks on one node may see their node run rank 0 while ranks
             * of another cannot tell whether mpirun's node, idle or not,
             * holds it: all of them then ask the PMIx server, or all say
             * the same. */
            if (r->why[AMLDIST_FIELD_MASTER_ADDR][0] == '\0')
                amldist__why(r, AMLDIST_FIELD_MASTER_ADDR,
                             "unknown: mpirun's node (%s) may run no rank, "
                             "and then only the PMIx server knows the host "
                             "of rank 0" MASTER_FIX,
                             HNP_URI);
            r->want_pmix = 1;
        }
    }
    return 1;
}
