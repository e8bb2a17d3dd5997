/*
 * Issue 20 across nodes, in amlrun (amldist_rdzv(3): views, gathers): with
 * a control plane,
 *   - --hang-timeout: this node sends its ranks' view to the host, which
 *     decides with every node's (one node alone cannot: its ranks may wait
 *     for a rank elsewhere), instead of deciding here;
 *   - every gather's request is answered from the loop: the host's hang
 *     with this node's stacks (job_stacks, stk_encode), another node's
 *     --status and --stacks with this node's part (node_part, gather.h);
 *     this node's own --status and --stacks ask every node (job_gather);
 *   - on the host's node, the hang's answers are merged and printed once
 *     (and written, --hang-report), nodes that did not answer named, and
 *     the round fails: exit status 124, or a restart;
 *   - every node's progress marks go to the host's node, on the host's
 *     clock, for the job-wide slowest rank at the end.
 */
#ifndef AMLRUN_PLANE_H
#define AMLRUN_PLANE_H

#include "progress/page.h"
#include "run/gather.h"
#include "run/job.h"

/* The gathers' descriptor in the job's loop (once); 0 or -1. */
int plane_watch(struct job *j);
/* An attempt's workers have started: the views begin (--hang-timeout). */
void plane_attempt(struct job *j);
/* Its workers have all ended: the views stop. */
void plane_attempt_end(struct job *j);
/* Worker `rank`'s new progress marks (this node's clock), for the host's
 * node: it compares every node's ranks on one clock. */
void plane_marks(struct job *j, int rank, const amldist__progress_mark_t *m,
                 size_t n);
/* At the job's end, on the host's node: "amlrun: slowest rank R: node N
 * (host H), M ms behind the median over K steps" when one rank of the job
 * was consistently last (progress_report_slowest()'s line, job-wide); on
 * every node with -v, its clock's offset from the host's. */
void plane_report_slowest(struct job *j);
/* job_gather() across nodes: every node asked for its part of kind k
 * (this node's is `mine`, taken), done() called from the loop with them
 * all in node order, a node that did not answer as a part whose error
 * names it.  0, or -1 when the ask could not be made (mine not taken). */
int plane_gather(struct job *j, enum part_kind k, struct part *mine,
                 gather_done_fn *done, void *arg);
/* What the host's node knows of every rank's marks, and the gathers still
 * waited for (their done() is not called). */
void plane_free(struct job *j);

#endif /* AMLRUN_PLANE_H */
