/*
 * The launcher's side of topology and binding.  amlrun parses the options
 * into struct amlrun_bind_opts (options.h); everything else (discovery, the plan, the
 * environment each rank gets, applying it) is computed by libamldist and
 * composed here.  The plan is made in the parent before any fork;
 * bind_apply_child() is the only part that runs between fork and exec and
 * it is async-signal-safe.
 */
#ifndef AMLRUN_BIND_H
#define AMLRUN_BIND_H

#include <stdio.h>

#include "amldist.h"
#include "cli/options.h"

struct amlrun_binding; /* the plan for the ranks of this node */

/* Plan binding for `nlocal` ranks on this node (local ranks 0..nlocal-1),
 * on `topo` when it is already loaded (borrowed: it must outlive the
 * binding), else on the topology o->topology names.  Returns 0, or -1 after
 * printing "amlrun: ..." to stderr.  *out may be NULL when binding is off. */
int bind_setup(const struct amlrun_bind_opts *o, int nlocal,
               const amldist_topo_t *topo, struct amlrun_binding **out);
/* Add the rank's variables (AMLDIST_GPU, AMLDIST_CPUS, CUDA_* ...) to a heap
 * envp built with realloc, and OMP_NUM_THREADS by the library's rule (also
 * when b is NULL: nothing planned) unless envp sets it; nlocal is the
 * number of workers on the node.  Returns 1 when it set OMP_NUM_THREADS=1
 * for a rank that shares its cores or runs unbound beside others (worth a
 * notice), 0 otherwise, or -1. */
int bind_worker_env(const struct amlrun_binding *b, int local_rank,
                    int nlocal, char ***envp);
/* In the child, between fork and exec: async-signal-safe.  Returns 0 or an
 * errno value, which it learns from errno (amldist_plan_apply). */
int bind_apply_child(const struct amlrun_binding *b, int local_rank);
/* 1 when bind_apply_child has something to apply for the rank (its cpus or
 * its memory), 0 when it would make no call at all. */
int bind_child_applies(const struct amlrun_binding *b, int local_rank);
/* "amlrun: NUMA locality of GPUs and NICs from ... (topology: ...)", for
 * -v; --report-bindings prints it before local rank 0's line. */
void bind_say_locality(const struct amlrun_binding *b, FILE *f);
/* One --report-bindings line for the rank. */
void bind_report(const struct amlrun_binding *b, int local_rank, int rank,
                 FILE *f);
/* The GPUs the plan uses, named by PCI bus id ("0000:07:00.0,..."), for
 * the rendezvous to tell the agents of one machine that share them; NULL
 * without any. */
const char *bind_gpu_ids(struct amlrun_binding *b);
/* Plan again with this node's share of its machine's GPUs
 * (amldist_rdzv_gpu_share()): local rank r gets GPU (first + r) mod the
 * GPUs.  0, or -1 after a message (the plan stays as it was). */
int bind_share(struct amlrun_binding *b, int first, int machine_ranks);
/* amldist_topo_gpu_note() of the topology planned on (NULL without one). */
const char *bind_gpu_note(const struct amlrun_binding *b);
void bind_free(struct amlrun_binding *b);
/* --output: draw the plan with lstopo (run/picture.h).  0, or -1 after a
 * message. */
int bind_picture(const struct amlrun_binding *b, const char *path);
struct json;
/* "binding": the rank's plan as an object (null when nothing is planned). */
void bind_json(const struct amlrun_binding *b, int lrank, struct json *j);
/* amlrun --topo: print the topology matrix (json: as JSON, topo_json()),
 * and with o->output draw the plan of `nlocal` ranks (0: one per GPU);
 * returns the exit status. */
int topo_main(const struct amlrun_bind_opts *o, int nlocal, int json);
/* --topo=json: the topology from the library's queries; 0 or -1. */
int topo_json(const amldist_topo_t *t, FILE *f);

#endif /* AMLRUN_BIND_H */
