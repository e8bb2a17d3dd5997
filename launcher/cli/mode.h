/*
 * The mode decision, in one place:
 *   --mode process, or no --nproc-per-node while the library found a
 *       launcher (MPI, Slurm, Azure ML, torchrun, canonical variables):
 *       per-process, exec the command in place;
 *   --mode node, or --nproc-per-node given, or no launcher found:
 *       per-node, start and supervise --nproc-per-node workers (default 1).
 * amlrun's own layout comes from amldist_init_opts() with --nnodes,
 * --node-rank, --master-addr and --master-port as overrides.
 */
#ifndef AMLRUN_MODE_H
#define AMLRUN_MODE_H

#include "amldist.h"
#include "cli/options.h"

struct plan {
    enum run_mode mode;  /* MODE_NODE or MODE_PROCESS */
    amldist_t *layout;   /* amlrun's own */
    int nproc;           /* workers to start (per-node mode) */
    /* Read to count GPUs (--nproc-per-node gpu|auto), then reused for
     * binding; NULL otherwise. */
    amldist_topo_t *topo;
    char why[200];       /* the reason, for --verbose and --dry-run */
};

/* Returns -1 on success, else an exit status after a message. */
int plan_make(const struct amlrun_opts *o, struct plan *p);
void plan_free(struct plan *p);

#endif /* AMLRUN_MODE_H */
