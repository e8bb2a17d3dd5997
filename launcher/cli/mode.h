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
#include "cli/libwords.h"
#include "cli/options.h"

struct plan {
    enum run_mode mode;  /* MODE_NODE or MODE_PROCESS */
    amldist_t *layout;   /* amlrun's own */
    int nproc;           /* workers to start (per-node mode) */
    /* Read to count GPUs (--nproc-per-node gpu|auto), then reused for
     * binding; NULL otherwise. */
    amldist_topo_t *topo;
    char why[200];       /* the reason, for --verbose and --dry-run */
    /* amlrun's words for the options it gave the library */
    struct libwords words;
};

/* Returns -1 on success, else an exit status after a message. */
int plan_make(const struct amlrun_opts *o, struct plan *p);
void plan_free(struct plan *p);
/* A text of the library (its last error, an explanation of p's layout),
 * the options amlrun gave it named as the user gave them (libwords.h): buf
 * (LIBWORDS_MAX bytes) or the text. */
const char *plan_words(const struct plan *p, const char *text, char *buf);
const char *plan_explain(const struct plan *p, amldist_field_t f, char *buf);

#endif /* AMLRUN_MODE_H */
