/*
 * A worker's layout in a round of the control plane, numbered as torchrun
 * numbers the workers of nodes with different worker counts: the ranks of
 * one node are contiguous and follow those of the nodes before it; and
 * amldist_rdzv_worker_layout(), which asks it of the caller's round.
 */
#include <stdlib.h>

#include "layout/layout.h"
#include "rdzv/handle.h"

int amldist__rz_layout(const amldist__rz_round_t *rd, int index,
                       amldist_t **out)
{
    long long base = 0, world = 0;
    for (int i = 0; i < rd->nnodes; i++) {
        if (i < rd->node)
            base += rd->nproc[i];
        world += rd->nproc[i];
    }
    struct amldist *c = malloc(sizeof *c);
    if (c == NULL)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    amldist__reading_init(c, "amlrun");
    int own = rd->nproc[rd->node];
    amldist__set(c, AMLDIST_FIELD_RANK, (long)(base + index),
                 "rendezvous round %d: %lld workers on the nodes before node "
                 "%d + local %d", rd->round, base, rd->node, index);
    amldist__set(c, AMLDIST_FIELD_WORLD_SIZE, (long)world,
                 "rendezvous round %d: the workers of all %d nodes",
                 rd->round, rd->nnodes);
    amldist__set(c, AMLDIST_FIELD_LOCAL_RANK, index,
                 "rendezvous: worker %d of this node", index);
    amldist__set(c, AMLDIST_FIELD_LOCAL_WORLD_SIZE, own,
                 "rendezvous: this node's worker count");
    amldist__set(c, AMLDIST_FIELD_NODE_RANK, rd->node,
                 "rendezvous round %d: this node's rank", rd->round);
    amldist__set(c, AMLDIST_FIELD_NUM_NODES, rd->nnodes,
                 "rendezvous round %d: nodes in the round", rd->round);
    amldist__set(c, AMLDIST_FIELD_MASTER_PORT, rd->master_port,
                 "rendezvous round %d: node 0's store port", rd->round);
    amldist__strlcpy(c->addr, rd->master_addr, sizeof c->addr);
    amldist__why(c, AMLDIST_FIELD_MASTER_ADDR,
                 "rendezvous round %d: node 0's address", rd->round);
    *out = c;
    return 0;
}

int amldist_rdzv_worker_layout(const amldist_rdzv_t *r, int index,
                               amldist_t **out)
{
    amldist__clear_error();
    if (!r || !out || r->cur.round < 0)
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_worker_layout: "
                             "no handle, out or round");
    *out = NULL;
    int node = r->cur.node, own = r->cur.nproc[node];
    if (index < 0 || index >= own)
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_worker_layout: "
                             "worker %d of %d", index, own);
    return amldist__rz_layout(&r->cur, index, out);
}
