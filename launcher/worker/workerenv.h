/*
 * Each worker's environment, composed in the parent: the library's
 * canonical variables (amldist_export_envp on amlrun's environment), then
 * torchrun's extras, then the rank's binding variables, then the
 * OMP_NUM_THREADS default.  amlrun computes no rank itself.
 */
#ifndef AMLRUN_WORKERENV_H
#define AMLRUN_WORKERENV_H

#include "amldist.h"
#include "worker/bind.h"
#include "worker/command.h"
#include "worker/control.h"
#include "cli/options.h"

struct env_spec {
    const struct amlrun_opts *o;
    const amldist_t *layout;  /* amlrun's own layout */
    int nproc;                /* workers per node; 0: in place (layout is
                                 the worker's) */
    char *const *base;        /* amlrun's environment */
    const struct amlrun_binding *binding;
    int omp_noted;            /* the OMP_NUM_THREADS notice was printed */
    const struct control *ctl; /* the control plane, or NULL */
    int torch;                /* the workers' torch (torchver.h), 0: unknown */
};

/* The first torch that reads TORCH_NCCL_ASYNC_ERROR_HANDLING (2.2). */
#define TORCH_NEW_NCCL_NAME 2002

/* env_spec.torch for command c: its torch's version (torch_version()),
 * or 0 without asking when `base` already names the NCCL error handling
 * variable, the one thing the version decides. */
int workers_torch(const struct command *c, char *const *base);

/* Where a worker sits, for prefixes, logs and messages.  A value the
 * launcher does not give is negative (the library's code): show it with
 * worker_id_str(), never as a number. */
struct worker_id {
    int rank, local, node;
    int world; /* WORLD_SIZE */
};

/* v in decimal, or "?" when unknown; buf holds at least 12 bytes. */
const char *worker_id_str(int v, char *buf);

/* The heap environment (free it with amldist_envp_free()) of worker `index`
 * (0..nproc-1) in attempt `restart`, or NULL after a message. */
char **worker_env(struct env_spec *e, int index, int restart,
                  struct worker_id *id);

#endif /* AMLRUN_WORKERENV_H */
