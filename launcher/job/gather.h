/*
 * One node's part of an answer to --status or --stacks, and the parts of
 * every node of the job.  On one node the answer is this node's part; with
 * a control plane, job_gather() is where the parts of the other nodes are
 * asked for (each node making its own with node_part()) and merged, in
 * node order, before the asker's done() is called from the loop.
 *
 * For the control plane (amldist_rdzv(3)'s gathers): a request of topic
 * AMLDIST_RDZV_TOPIC_STATUS or _STACKS from another node is answered with
 * node_part(PART_STATUS or PART_STACKS) and, in its ready(), the part's
 * data as the blob (an error part as its text); job_gather() asks every
 * node with amldist_rdzv_gather() and turns the answers into parts, a
 * node that did not answer into a part whose error names it.  Status
 * parts are records (query/qtext.h) that the asker simply concatenates;
 * stacks parts are stk_encode() texts, decoded one by one (stk_decode
 * appends) and merged by the asking amlrun --stacks.
 */
#ifndef AMLRUN_GATHER_H
#define AMLRUN_GATHER_H

#include <stddef.h>

struct job;

enum part_kind { PART_STATUS, PART_STACKS };

struct part {
    int node;        /* the node's rank, -1 not known */
    char *data;      /* malloc'd: status records (query/qtext.h) or the
                        node's stk_encode() text */
    size_t len;
    char *error;     /* malloc'd one line when the node could not say,
                        else NULL (data NULL) */
};

void part_free(struct part *p);

/* This node's part, handed to ready() from a timer of the loop, never
 * before node_part() returns (a status measures CPU use over
 * QP_CPU_INTERVAL_MS first; stacks are read on the next round): ready owns
 * the part.  Returns a handle for node_part_cancel(), or NULL when out of
 * memory (ready() is then never called). */
typedef void part_ready_fn(void *arg, struct part *p);
void *node_part(struct job *j, enum part_kind k, part_ready_fn *ready,
                void *arg);
/* Forget a part not yet made: ready() is not called. */
void node_part_cancel(struct job *j, void *handle);

/* Every node's part, this node's `mine` among them (taken): done() gets
 * them in node order and owns them (the array and each part; n == 0: out
 * of memory).  One node: at once, from within job_gather(); with the
 * control plane, later from the loop, where the asker may be gone (the
 * supervisor's client then only frees what it gets). */
typedef void gather_done_fn(void *arg, struct part *parts, size_t n);
void job_gather(struct job *j, enum part_kind k, struct part *mine,
                gather_done_fn *done, void *arg);

#endif /* AMLRUN_GATHER_H */
