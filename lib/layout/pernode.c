/*
 * One process per node, read from what the launchers say: the workers of a
 * per-node launcher that an outer launcher runs alone on each node
 * (launch.py under mpirun --npernode 1), and a job with as many nodes as
 * ranks.  merge.c and layout.c apply them; amldist-env(7) states the rules.
 */
#include <string.h>

#include "layout/layout.h"

/*
 * The outer launcher runs this process alone on its node (local world size
 * 1), and the canonical world is k times its world: a per-node launcher
 * (launch.py, torch.distributed.launch) that numbers its k workers as
 * torchrun does, rank = outer rank * k + local rank.  When our rank (and
 * local rank, if given) falls in our outer rank's block, the numbers are
 * consistent and this node has k of them, whatever the node count says:
 * LOCAL_WORLD_SIZE, which such launchers leave out.
 */
void amldist__per_node_launcher(struct amldist *chosen,
                                const struct amldist *canon,
                                const struct amldist *outer)
{
    int cw = canon->val[AMLDIST_FIELD_WORLD_SIZE];
    int ow = outer->val[AMLDIST_FIELD_WORLD_SIZE];
    int rank = canon->val[AMLDIST_FIELD_RANK];
    int lrank = canon->val[AMLDIST_FIELD_LOCAL_RANK];
    int orank = outer->val[AMLDIST_FIELD_RANK];
    if (outer->val[AMLDIST_FIELD_LOCAL_WORLD_SIZE] != 1)
        return;
    /* The launcher that set the canonical variables runs where its outer
     * rank runs, alone there: the node it knows (Hydra's proxy, Open MPI's
     * daemon) is ours, and the job spans the same nodes.  (Two launchers
     * on one node would each number their workers from 0.) */
    static const amldist_field_t same_node[] = {AMLDIST_FIELD_NODE_RANK,
                                                AMLDIST_FIELD_NUM_NODES};
    for (size_t i = 0; i < 2; i++) {
        amldist_field_t f = same_node[i];
        if (!amldist__known(chosen, f) && amldist__known(outer, f))
            amldist__set(chosen, f, outer->val[f],
                         "derived: %s, the node of the launcher that set "
                         "RANK",
                         outer->why[f]);
    }
    if (ow < 1 || cw < ow || cw % ow != 0 || rank < 0 || orank < 0)
        return;
    int k = cw / ow;
    if (rank / k != orank || (lrank >= 0 && lrank != rank % k))
        return;
    /* Our rank 0 is then a worker of outer rank 0, on its node: the
     * outer launcher's master (mpirun's node, PMIx's host of rank 0) is
     * ours, as amlrun's workers get it from the same reading. */
    if (!amldist__known(chosen, AMLDIST_FIELD_MASTER_ADDR) &&
        amldist__known(outer, AMLDIST_FIELD_MASTER_ADDR)) {
        memcpy(chosen->addr, outer->addr, sizeof chosen->addr);
        memcpy(chosen->why[AMLDIST_FIELD_MASTER_ADDR],
               outer->why[AMLDIST_FIELD_MASTER_ADDR], AMLDIST__WHY_MAX);
    }
    if (amldist__known(chosen, AMLDIST_FIELD_LOCAL_WORLD_SIZE))
        return;
    amldist__set(chosen, AMLDIST_FIELD_LOCAL_WORLD_SIZE, k,
                 "derived: %s / %s, one launcher per node (%s) whose "
                 "workers are numbered %s * %d + local rank",
                 canon->why[AMLDIST_FIELD_WORLD_SIZE],
                 outer->why[AMLDIST_FIELD_WORLD_SIZE],
                 outer->why[AMLDIST_FIELD_LOCAL_WORLD_SIZE],
                 outer->why[AMLDIST_FIELD_RANK], k);
}

/*
 * As many nodes as ranks: every node runs at least one, so exactly one
 * (torchrun reads --nnodes equal to the world so: one launcher per node, a
 * PyTorchJob's pods).  The node index of canonical variables, if nothing
 * says it, is the rank.
 */
void amldist__one_per_node(struct amldist *h)
{
    const char *nodes = h->why[AMLDIST_FIELD_NUM_NODES];
    const char *world = h->why[AMLDIST_FIELD_WORLD_SIZE];
    if (!amldist__known(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE))
        amldist__set(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE, 1,
                     "derived: %s equals %s (one process per node)", nodes,
                     world);
    if (h->val[AMLDIST_FIELD_LOCAL_WORLD_SIZE] != 1)
        return;
    if (!amldist__known(h, AMLDIST_FIELD_LOCAL_RANK))
        amldist__set(h, AMLDIST_FIELD_LOCAL_RANK, 0,
                     "derived: %s equals %s (one process per node)", nodes,
                     world);
    /* An MPI launcher's ranks may know their node from its daemons, which
     * need not number nodes in rank order: only a set of canonical
     * variables, which names no node order at all, gets this one. */
    if (!amldist__known(h, AMLDIST_FIELD_NODE_RANK) &&
        amldist__known(h, AMLDIST_FIELD_RANK) && strcmp(h->source, "env") == 0)
        amldist__set(h, AMLDIST_FIELD_NODE_RANK, h->val[AMLDIST_FIELD_RANK],
                     "derived: %s, one process per node (%s equals %s)",
                     h->why[AMLDIST_FIELD_RANK], nodes, world);
}
