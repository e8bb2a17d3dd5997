/*
 * Open MPI: OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE, and the node
 * count Open MPI 4 exports as OMPI_MCA_orte_num_nodes.  No variable holds the
 * node index: OMPI_COMM_WORLD_NODE_RANK is the rank among this node's
 * processes, and RANK / LOCAL_SIZE is wrong under --map-by node.  One node
 * means node 0; otherwise layout.c asks the PMIx server (PMIX_NODEID) when
 * this reading is the one used, and if it cannot, the node rank stays
 * unknown.
 */
#include "layout.h"

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
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: Open MPI exports no node index "
                     "(OMPI_COMM_WORLD_NODE_RANK is not one)");
        r->want_pmix = 1;
    }
    return 1;
}
