/*
 * The caller's options (amldist_options_t) over the chosen reading: alone
 * they describe a per-node launcher; under a launcher they may fill in
 * what it leaves open, never replace what it says.
 */
#include "layout/layout.h"

int amldist__apply_options(struct amldist *h, const amldist_options_t *o,
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
