/* What the per-node supervisor (supervise.h) is given to run. */
#ifndef AMLRUN_JOBSPEC_H
#define AMLRUN_JOBSPEC_H

#include <signal.h>

#include "output/eventlog.h"
#include "worker/bind.h"
#include "worker/command.h"
#include "cli/options.h"
#include "worker/workerenv.h"

struct job_spec {
    const struct amlrun_opts *o;
    const struct command *cmd;
    struct env_spec *env;
    int nproc;
    const char *host;
    const sigset_t *worker_mask;   /* the mask amlrun was started with */
    int pipe_was_ignored;
    int sfd;                       /* signalfd of the handled signals,
                                      non-blocking */
    int log_dir_fd;                /* -1: no --log-dir */
    struct amlrun_binding *binding; /* planned again at each round */
    amldist_rdzv_t *rz;            /* the control plane, or NULL */
    struct eventlog *events;       /* --event-log, or NULL */
};

#endif /* AMLRUN_JOBSPEC_H */
