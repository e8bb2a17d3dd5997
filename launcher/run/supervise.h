/*
 * The per-node supervisor: starts the workers, then runs the one event
 * loop over a signalfd (signals and child exits), a timerfd (the SIGKILL
 * deadline) and the workers' output pipes, until every worker has ended
 * and every pipe is drained.  No polling interval anywhere.
 */
#ifndef AMLRUN_SUPERVISE_H
#define AMLRUN_SUPERVISE_H

#include <signal.h>

#include "run/bind.h"
#include "run/command.h"
#include "cli/options.h"
#include "run/workerenv.h"

struct job_spec {
    const struct amlrun_opts *o;
    const struct command *cmd;
    struct env_spec *env;
    int nproc;
    const char *host;
    const sigset_t *worker_mask;   /* the mask amlrun was started with */
    int pipe_was_ignored;
    int sfd;                       /* signalfd of the handled signals */
    int log_dir_fd;                /* -1: no --log-dir */
    const struct amlrun_binding *binding;
    amldist_rdzv_t *rz;            /* the control plane, or NULL */
};

/* Run the job; returns amlrun's exit status. */
int supervise(const struct job_spec *s);

/* The signals amlrun handles: stop the job / pass on / job control
 * (SIGTSTP stops the workers, then amlrun; SIGCONT continues them). */
int sig_stops_job(int sig);
int sig_forwarded(int sig);
int sig_job_control(int sig);

#endif /* AMLRUN_SUPERVISE_H */
