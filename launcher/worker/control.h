/*
 * The node agents' control plane in amlrun (amldist_rdzv(3)): which jobs
 * use it, and how the command line becomes its options.
 *  - --rdzv-backend c10d: the nodes meet at --rdzv-endpoint, the same
 *    command line on every node, and get their node ranks there;
 *  - static, with more than one agent (--nnodes N --node-rank I, or one
 *    amlrun per node under mpirun or srun): the agents meet at MASTER_ADDR,
 *    port MASTER_PORT+2 (AMLDIST_CONTROL_PORT), ordered by their rank,
 *    unless --no-node-check.
 * Either way the first failure anywhere stops every node, restarts are the
 * whole job's, and every agent exits with the job's status.
 */
#ifndef AMLRUN_CONTROL_H
#define AMLRUN_CONTROL_H

#include "amldist.h"
#include "cli/mode.h"
#include "cli/options.h"
#include "worker/bind.h"

struct control {
    amldist_rdzv_t *rz; /* NULL: no control plane (one agent, or off) */
    /* Workers are numbered by the rendezvous (one agent per node, any
     * worker counts); else by amldist_derive_child(), which needs every
     * agent to start the same count. */
    int numbering;
    char unnumbered[768]; /* numbering < 0: why, for every node */
    int verbose;
    char endpoint[1200];
};

/* Join the job's control plane if it has one, telling it the GPUs the
 * binding `b` uses (the agents of one machine split them) and planning
 * this node's share of them.  -1 to go on (c->rz may be NULL), or an exit
 * status after a message. */
int control_join(const struct amlrun_opts *o, const struct plan *p,
                 struct amlrun_binding *b, struct control *c);
/* This node cannot start (its command, say: the message just printed,
 * and its exit status): a job with a control plane is told at once, so
 * that its other nodes end with this reason rather than waiting for this
 * one until the join timeout (amldist_rdzv_join_failed()). */
void control_fail_early(const struct amlrun_opts *o, const struct plan *p,
                        int status);
/* At every round: the rendezvous's warnings (this node's master address
 * or timeouts not used), and the binding planned again on this node's
 * share of its machine's GPUs.  0, or -1 after a message. */
int control_round(const struct control *c, struct amlrun_binding *b);
/* How a static job's workers are numbered, the same on every amlrun of
 * the job: 1 by the rendezvous (one amlrun per node), 0 from the
 * launcher's node index and count (nodes shared), -1 when the launcher
 * cannot number shared nodes alike (no node count), with the reason and the
 * fix in `why`. */
int control_numbering(const amldist_t *l, char *why, size_t size);
/* One line on what the rendezvous gave this node (--verbose). */
void control_describe(const struct control *c);
void control_close(struct control *c);

#endif /* AMLRUN_CONTROL_H */
