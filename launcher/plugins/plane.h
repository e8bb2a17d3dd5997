/*
 * The plane client: issue 20 across nodes, in amlrun (amldist_rdzv(3):
 * views, gathers): with a control plane,
 *   - --hang-timeout: this node sends its ranks' view to the host, which
 *     decides with every node's (one node alone cannot: its ranks may wait
 *     for a rank elsewhere), instead of deciding here;
 *   - every gather's request is answered from the loop: the host's hang
 *     with this node's stacks (job_stacks_start, stk_encode), another node's
 *     --status and --stacks with this node's part (node_part, gather.h);
 *     this node's own --status and --stacks ask every node: it is the
 *     job's gatherer (hooks.h, job_gather);
 *   - on the host's node, the hang's answers are merged and printed once
 *     (and written, --hang-report), nodes that did not answer named, and
 *     the round fails (job_stop): exit status 124, or a restart;
 *   - every node's progress marks go to the host's node, on the host's
 *     clock, for the job-wide slowest rank at the end.
 */
#ifndef AMLRUN_PLUGIN_PLANE_H
#define AMLRUN_PLUGIN_PLANE_H

#include "job/hooks.h"

/* Active with a control plane only. */
extern const struct job_plugin plane_plugin;

#endif /* AMLRUN_PLUGIN_PLANE_H */
