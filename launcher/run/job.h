/*
 * The supervisor's state, shared by its parts: supervise.c (the event loop
 * and the composition), start.c (an attempt's workers), report.c (the
 * messages and the end-of-job summary).  Not for the rest of amlrun.
 */
#ifndef AMLRUN_JOB_H
#define AMLRUN_JOB_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "net/loop.h"
#include "output/output.h"
#include "run/policy.h"
#include "run/jobspec.h"
#include "worker/spawn.h"
#include "worker/workerenv.h"

#define READ_BUF (64u << 10)

struct job;

struct worker {
    struct job *job;
    struct worker_id id;
    pid_t pid;
    /* Forked, its exec not yet confirmed (start_worker_end): the child,
     * and what it may still read (spawn.h): its command line and
     * environment, NULL otherwise. */
    struct spawn spawn;
    char **spawn_argv, **spawn_sh, **spawn_env;
    int running;
    int stopped;       /* the stop signal while it is stopped, else 0 */
    int tty_reported;  /* its SIGTTIN/SIGTTOU stop was reported */
    int terminated;    /* it ended after amlrun began to stop the workers */
    int attempt;       /* the restart count it was started in, -1 none */
    int status;
    double t_start;
    time_t t_end;      /* wall clock when it was reaped */
    double t_done;     /* now_s() then (t_start's clock) */
    int64_t start_ns, end_ns; /* the same two on amldist__now_ns()'s clock, for
                                 the hang decision (end_ns 0: running) */
    char *error_file;  /* its TORCHELASTIC_ERROR_FILE in this attempt */
    int log_out, log_err;
    struct out_stream out, err;
    /* The read end of its Python stack channel (stacks/stacks.h), for
     * stk_capture()'s python_fd; -1: none (a native worker). */
    int stack_fd;
};

struct job {
    const struct job_spec *s;
    struct worker *w;
    int n;
    int live;          /* workers running */
    struct policy p;   /* the phase, restarts, the failure, the stop */
    amldist__loop_t *loop; /* the signalfd, the control plane, the pipes */
    int deadline;      /* the SIGKILL deadline's timer, 0 */
    int null_fd;       /* /dev/null for the workers' stdin */
    char *buf;
    double t_begin;    /* now_s() when supervision began */
    struct rundir *rd; /* error files, and logs in torchrun's layout */
    int torch_layout;
    /* With the control plane: the root cause block of this node's own
     * first failure in the round, printed at the end unless node 0 prints
     * the job's summary. */
    char *local_block;
    struct jobquery *query; /* --status and --stacks (jobquery.h), NULL */
    /* The workers' progress page and its readings (progresspage.h). */
    struct progress_watch *progress;
    /* Timers of hangwatch.c (0: none): --hang-timeout's next look, the
     * job's --timeout, the next notice of ranks still running after
     * others ended (notice_every: the interval after it, in s). */
    int hang_timer, timeout_timer, notice_timer;
    int timeout_late; /* --timeout on a node not the host's: its fallback */
    int plane_timer; /* plane.c: the next view for the host */
    struct plane_hist *marks; /* plane.c, the host's node: every rank's */
    struct plane_ask *asks;   /* plane.c: this node's gathers waited for */
    double t_first_done; /* now_s() when the attempt's first rank ended */
    double notice_every;
    char hang_why[256]; /* the last hang or --timeout, in words, or "" */
};

/* supervise.c: what the policy decided, done (the stop sequence, SIGKILL
 * ...), and the signals that came, taken before an action on the job. */
void job_act(struct job *j, enum action a, int sig);
int job_take_signals(struct job *j);
/* start.c: this node's rank in the job (the control plane's, else the
 * layout's), negative when not known. */
int job_node(const struct job *j);

#endif /* AMLRUN_JOB_H */
