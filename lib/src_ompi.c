/*
 * Open MPI: OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE, and the node
 * count Open MPI 4 exports as OMPI_MCA_orte_num_nodes.  No variable holds the
 * node index: OMPI_COMM_WORLD_NODE_RANK is the rank among this node's
 * processes, and RANK / LOCAL_SIZE is wrong under --map-by node.  One node
 * means node 0; otherwise the PMIx server is asked (PMIX_NODEID), and if it
 * cannot be, the node rank stays unknown.
 */
#include <stdio.h>

#include "layout.h"

static void node_from_pmix(const amldist__env_t *env, struct amldist *r)
{
    amldist__pmix_info_t info;
    char why[160];
    if (amldist__pmix_query(env, &info, why, sizeof why) != 0) {
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: Open MPI exports no node index "
                     "(OMPI_COMM_WORLD_NODE_RANK is not one) and %s",
                     why);
        return;
    }
    if (!amldist__known(r, AMLDIST_FIELD_NUM_NODES) && info.num_nodes > 0)
        amldist__set(r, AMLDIST_FIELD_NUM_NODES, info.num_nodes,
                     "PMIx PMIX_NUM_NODES=%ld", info.num_nodes);
    long nodes = r->val[AMLDIST_FIELD_NUM_NODES];
    if (info.node_id < 0)
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: the PMIx server has no PMIX_NODEID");
    else if (nodes > 0 && info.node_id >= nodes)
        /* Node ids are daemon ids: a mpirun host that runs no rank leaves a
         * gap, and the id is then not an index. */
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: PMIx PMIX_NODEID=%ld is not below the node "
                     "count %ld",
                     info.node_id, nodes);
    else
        amldist__set(r, AMLDIST_FIELD_NODE_RANK, info.node_id,
                     "PMIx PMIX_NODEID=%ld", info.node_id);
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
    if ((rc = amldist__env_field(env, r, AMLDIST_FIELD_NUM_NODES,
                                 "OMPI_MCA_orte_num_nodes")) < 0)
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
        node_from_pmix(env, r);
    }
    return 1;
}
