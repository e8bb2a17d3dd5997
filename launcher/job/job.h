/*
 * The job: this node's workers and the state the supervisor keeps of
 * them, as every part sees it (the supervisor in launcher/run, which alone
 * changes it, and the plugins, which read it and act only through
 * hooks.h).  A plugin's own state is its own, never a field here.
 */
#ifndef AMLRUN_JOB_H
#define AMLRUN_JOB_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "net/loop.h"
#include "progress/hang.h"
#include "output/output.h"
#include "job/jobspec.h"
#include "job/policy.h"
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
    int64_t cont_ns;   /* when it was last continued (amldist__now_ns());
                          0: not since its start */
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
    /* The write end of its stdin pipe when amlrun relays its own stdin
     * to it (run/stdin.h), non-blocking, -1: none; how much of the relay's
     * chunk it has taken. */
    int in_fd;
    size_t in_off;
    /* The read end of its Python stack channel (stacks/stacks.h), for
     * stk_capture()'s python_fd; -1: none (a native worker). */
    int stack_fd;
};

/* amlrun's stdin as the workers get it (run/stdin.h). */
struct job_stdin {
    int legacy;        /* no --stdin, not in a terminal: the first local
                          worker inherits amlrun's stdin unless a tty */
    int relay;         /* amlrun reads it and writes it to the workers */
    int rank;          /* the one rank that gets it, -1: all (or none) */
    int none;          /* --stdin none */
    int tty;           /* amlrun's stdin is a terminal */
    int watched, eof;
    int recheck;       /* the timer that looks again for the foreground */
    int told;          /* --stdin RANK's rank not here: said once */
    size_t len;        /* the chunk being written to the workers */
    char buf[4096];
};

struct job_plugins; /* hooks.h: the plugins attached to the job */
struct amldist__progress_page;

struct job {
    const struct job_spec *s;
    struct worker *w;
    int n;
    int live;          /* workers running */
    struct policy p;   /* the phase, restarts, the failure, the stop */
    amldist__loop_t *loop; /* the signalfd, the control plane, the pipes */
    int deadline;      /* the SIGKILL deadline's timer, 0 */
    int null_fd;       /* /dev/null for the workers' stdin */
    struct job_stdin in;
    /* amlrun's stdout and stderr are terminals: the workers' streams to
     * them are ptys, live (output/pty.h, output.h) */
    int console_tty[2];
    int show_timer;    /* the timer of the live streams' partial lines */
    int pty_failed;    /* a pty could not be had: said, pipes since */
    char *buf;
    double t_begin;    /* now_s() when supervision began */
    struct rundir *rd; /* error files, and logs in torchrun's layout */
    int torch_layout;
    /* With the control plane: the root cause block of this node's own
     * first failure in the round, printed at the end unless node 0 prints
     * the job's summary. */
    char *local_block;
    /* The workers' progress page (page.c): made with the job, each
     * worker's slot in its environment; NULL without one. */
    struct amldist__progress_page *page;
    /* The plugins, their hooks, topics and timers (hooks.h). */
    struct job_plugins *plugins;
    char stop_why[256]; /* the last hang or --timeout, in words, or "" */
    int64_t cont_ns;   /* when amlrun itself was last continued (SIGCONT,
                          amldist__now_ns()); 0: never */
    struct job_capture *captures; /* capture.c: those not yet done */
    int reap_later;    /* the supervisor's reap met a capture's tracee: the
                          rest is reaped once no capture runs */
};

/* ---- what every part may ask of the job (job.c) ---- */

/* This node's rank in the job (the control plane's, else the layout's),
 * negative when not known. */
int job_node(const struct job *j);
/* What the control plane says of the job, for every part but the plane
 * client (the one plugin that speaks to it): the nodes in the job's round
 * (-1: no control plane), the round (-1: none), the job's restarts (this
 * node's without a control plane), and whether this node's amlrun hosts
 * the rendezvous (1) or not (0). */
int job_plane_nodes(const struct job *j);
int job_plane_round(const struct job *j);
int job_plane_restarts(const struct job *j);
int job_plane_is_host(const struct job *j);
/* The ranks of this node's workers still running, as "0-6,8,10-11". */
void running_ranks(const struct job *j, char *buf, size_t size);
/* This node's ranks of the attempt, as the hang decision sees them (room
 * for j->n in v; each one's worker index in idx[], which may be NULL); the
 * count.  A worker stopped (SIGSTOP, Ctrl-Z) is not live (never stalled,
 * and no sign of life for the others), one continued is seen as starting
 * then: time stopped is not time without progress. */
size_t hang_view(const struct job *j, amldist__hang_rank_t *v, int *idx);
/* What a capture reads (stacks.h): every running rank, its last progress
 * from its calls or else its output; the count, targets in *t (free it),
 * or -1 when out of memory. */
struct stk_target;
long job_stack_targets(const struct job *j, struct stk_target **t);

/* ---- the ranks' stacks, read beside the loop (capture.c) ---- */

/* Every running rank's stack (hangs, --timeout, --stacks), read on the
 * capture's own thread while the loop goes on (signals, exits, output),
 * each rank stopped only while its threads are read.  done(arg, set, rc)
 * comes from the loop when it is read, before the workers' ends that came
 * meanwhile (the supervisor reaps them after: what the stacks show is
 * decided first, as when a capture held the loop): set the
 * ranks (freed after done returns), rc 0, -1 when out of memory, or
 * JOB_STACKS_CUT when the attempt ended first (set empty).  NULL when it
 * cannot start (out of memory): done is never called then. */
#define JOB_STACKS_CUT (-2)
struct stk_set;
struct job_capture;
typedef void job_stacks_fn(void *arg, struct stk_set *set, int rc);
struct job_capture *job_stacks_start(struct job *j, job_stacks_fn *done,
                                     void *arg);
/* Forget a capture not yet done: done is not called (this waits for its
 * thread, at most its deadline). */
void job_stacks_cancel(struct job *j, struct job_capture *c);
/* Every capture not yet done, cut short at an attempt's end (a reaped
 * worker's pid may be the next attempt's): each done() gets
 * JOB_STACKS_CUT; `quiet` (the job's end, its plugins gone): none is
 * called. */
void job_stacks_cancel_all(struct job *j, int quiet);

/* ---- the workers' progress page (page.c) ---- */

/* The page for j->n workers, in j->page; without one (a failure, said
 * under -v), the workers simply get no page. */
void job_page_init(struct job *j);
void job_page_free(struct job *j);
/* Worker `index` is about to start: its slot emptied, the two variables
 * that name it in *env.  -1 when out of memory. */
int job_page_worker_env(struct job *j, int index, char ***env);
/* The page's descriptor, which every worker inherits; -1 without one. */
int job_page_fd(const struct job *j);

#endif /* AMLRUN_JOB_H */
