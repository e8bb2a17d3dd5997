/*
 * Issue 20 across nodes, in amlrun (amldist_rdzv(3): views, gathers): with
 * a control plane,
 *   - --hang-timeout: this node sends its ranks' view to the host, which
 *     decides with every node's (one node alone cannot: its ranks may wait
 *     for a rank elsewhere), instead of deciding here;
 *   - every gather's request is answered from the loop: the host's hang
 *     and --stacks with this node's stacks (stk_capture, stk_encode),
 *     --status with this node's ranks;
 *   - on the host's node, the hang's answers are merged and printed once
 *     (and written, --hang-report), nodes that did not answer named, and
 *     the round fails: exit status 124, or a restart.
 */
#ifndef AMLRUN_PLANE_H
#define AMLRUN_PLANE_H

#include "run/job.h"

/* The gathers' descriptor in the job's loop (once); 0 or -1. */
int plane_watch(struct job *j);
/* An attempt's workers have started: the views begin (--hang-timeout). */
void plane_attempt(struct job *j);
/* Its workers have all ended: the views stop. */
void plane_attempt_end(struct job *j);

#endif /* AMLRUN_PLANE_H */
