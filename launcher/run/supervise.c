/* The per-node supervisor and its event loop (see supervise.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "output/exitstatus.h"
#include "contain/guard.h"
#include "output/msg.h"
#include "output/output.h"
#include "output/rootcause.h"
#include "run/spawn.h"
#include "run/supervise.h"
#include "output/torchlogs.h"

#define READ_BUF (64u << 10)

struct worker {
    struct worker_id id;
    pid_t pid;
    int running;
    int stopped;       /* the stop signal while it is stopped, else 0 */
    int tty_reported;  /* its SIGTTIN/SIGTTOU stop was reported */
    int status;
    double t_start;
    time_t t_end;      /* wall clock when it was reaped */
    char *error_file;  /* its TORCHELASTIC_ERROR_FILE in this attempt */
    int log_out, log_err;
    struct out_stream out, err;
};

struct job {
    const struct job_spec *s;
    struct worker *w;
    int n;
    int tfd;
    int null_fd;       /* /dev/null for the workers' stdin */
    int live;          /* workers running */
    int restarts;      /* restarts done */
    int stopping;      /* SIGTERM (or the user's signal) sent */
    int killed;        /* SIGKILL sent */
    int stop_signal;   /* signal that stopped the job, 0 */
    int restart_wanted;
    int fail;          /* first failed worker of this attempt, -1 */
    int fail_status;
    int spawn_status;  /* exit status after a failed start, -1 */
    char *buf;
    struct pollfd *pfd;
    struct out_stream **pstream;
    struct rundir *rd; /* error files, and logs in torchrun's layout */
    int torch_layout;
    /* With the control plane: the root cause block of this node's own
     * first failure in the round, printed at the end unless node 0 prints
     * the job's summary. */
    char *local_block;
};

static int stopped_status(int sig);

int sig_stops_job(int sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

int sig_forwarded(int sig)
{
    return sig == SIGUSR1 || sig == SIGUSR2 || sig == SIGWINCH;
}

int sig_job_control(int sig)
{
    return sig == SIGTSTP || sig == SIGCONT;
}

/* Signal a worker's whole group (its children too). */
static void signal_worker(const struct worker *w, int sig)
{
    if (kill(-w->pid, sig) < 0 && errno == ESRCH)
        kill(w->pid, sig); /* it left its group */
}

static void signal_all(struct job *j, int sig)
{
    for (int i = 0; i < j->n; i++)
        if (j->w[i].running)
            signal_worker(&j->w[i], sig);
}

static void arm_timer(struct job *j, double seconds)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (seconds > 0) {
        its.it_value.tv_sec = (time_t)seconds;
        its.it_value.tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9);
    }
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
        its.it_value.tv_nsec = 1; /* zero would disarm it */
    timerfd_settime(j->tfd, 0, &its, NULL);
}

static void disarm_timer(struct job *j)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    timerfd_settime(j->tfd, 0, &its, NULL);
}

/* The terminate sequence: `sig` now, SIGKILL after --term-timeout.  A
 * stopped worker acts on the signal only once continued, so SIGCONT follows
 * (as a shell's kill does for a stopped job); otherwise it would sit out
 * the whole --term-timeout. */
static void begin_stop(struct job *j, int sig)
{
    if (j->stopping)
        return;
    j->stopping = 1;
    signal_all(j, sig);
    signal_all(j, SIGCONT);
    if (j->live > 0)
        arm_timer(j, j->s->o->term_timeout);
}

static void kill_now(struct job *j)
{
    j->killed = 1;
    signal_all(j, SIGKILL);
}

/* After the last worker: whatever descendant is left was reparented to us
 * (we are a child subreaper), or is in the job's cgroup or PID namespace;
 * none may outlive the job. */
static void kill_strays(void)
{
    guard_kill_strays();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    for (char *p = buf, *end; *p; p = end) {
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        if (pid > 0 && (pid_t)pid != guard_pid())
            kill((pid_t)pid, SIGKILL);
    }
}

/* Read what a dead worker left in its pipes, without waiting for writers
 * that may still hold them. */
static void drain(struct job *j, struct worker *w)
{
    struct out_stream *ss[2] = {&w->out, &w->err};
    for (int k = 0; k < 2; k++) {
        for (int rounds = 0; rounds < 64 && ss[k]->fd >= 0; rounds++) {
            struct pollfd p = {ss[k]->fd, POLLIN, 0};
            if (poll(&p, 1, 0) <= 0)
                break;
            out_stream_read(ss[k], j->buf, READ_BUF);
        }
    }
}

/* This node's first failure, for the job: its root cause block and last
 * lines go to the host, which stops every node and has node 0 print them. */
static void tell_failure(struct job *j, struct worker *w)
{
    char what[96], head[256], tail_err[OUT_TAIL_MAX + 512],
        tail_out[OUT_TAIL_MAX + 512];
    status_describe(w->status, what, sizeof what);
    snprintf(head, sizeof head, "amlrun:   rank %d (local %d, pid %d) on "
             "host %s: %s\n", w->id.rank, w->id.local, (int)w->pid,
             j->s->host, what);
    struct failure f = {
        .rank = w->id.rank, .local = w->id.local, .pid = w->pid,
        .status = w->status, .host = j->s->host, .when = w->t_end,
        .error_file = w->error_file,
    };
    free(j->local_block);
    j->local_block = rootcause_text(&f, getenv("TORCHELASTIC_ERROR_FILE"));
    if (w->error_file && access(w->error_file, F_OK) == 0)
        rundir_keep(j->rd);
    out_stream_tail(&w->err, "amlrun:   | ", 10, tail_err, sizeof tail_err);
    out_stream_tail(&w->out, "amlrun:   | ", 5, tail_out, sizeof tail_out);
    char *sum = NULL;
    size_t size = 0;
    FILE *m = open_memstream(&sum, &size);
    if (m) {
        fprintf(m, "%s%s", head, j->local_block ? j->local_block : "");
        if (*tail_err)
            fprintf(m, "amlrun:   last lines of its stderr:\n%s", tail_err);
        if (*tail_out)
            fprintf(m, "amlrun:   last lines of its stdout:\n%s", tail_out);
        if (fclose(m) != 0) {
            free(sum);
            sum = NULL;
        }
    }
    if (amldist_rdzv_fail(j->s->rz, 0, w->id.rank,
                          status_exit_code(w->status), sum ? sum : head) < 0)
        msg("telling the other nodes: %s", amldist_last_error());
    free(sum);
}

/* This node ends the job, whatever restarts are left: a stop signal, a
 * worker that could not start. */
static void tell_final(struct job *j, int status, const char *why)
{
    char text[512];
    snprintf(text, sizeof text, "amlrun:   host %s: %s\n", j->s->host, why);
    if (j->s->rz &&
        amldist_rdzv_fail(j->s->rz, AMLDIST_RDZV_FINAL, -1, status, text) < 0)
        msg("telling the other nodes: %s", amldist_last_error());
}

static void worker_done(struct job *j, struct worker *w, int status)
{
    w->running = 0;
    w->status = status;
    w->t_end = time(NULL);
    j->live--;
    guard_del(w->pid);
    drain(j, w);
    if (!status_failed(status) || j->fail >= 0 || j->stopping) {
        if (j->s->o->verbose) {
            char what[96];
            status_describe(status, what, sizeof what);
            msg("rank %d (local %d, pid %d): %s", w->id.rank, w->id.local,
                (int)w->pid, what);
        }
        return;
    }
    char what[96];
    status_describe(status, what, sizeof what);
    msg("rank %d (local %d, pid %d, host %s): %s after %.2f s", w->id.rank,
        w->id.local, (int)w->pid, j->s->host, what, now_s() - w->t_start);
    j->fail = (int)(w - j->w);
    j->fail_status = status;
    j->restart_wanted = j->restarts < j->s->o->max_restarts;
    if (j->s->rz)
        tell_failure(j, w);
    if (j->live > 0 && !j->s->o->quiet)
        msg("stopping the other %d worker%s (SIGTERM, SIGKILL after %g s)",
            j->live, j->live == 1 ? "" : "s", j->s->o->term_timeout);
    begin_stop(j, SIGTERM);
}

static struct worker *find_worker(struct job *j, pid_t pid)
{
    for (int i = 0; i < j->n; i++)
        if (j->w[i].running && j->w[i].pid == pid)
            return &j->w[i];
    return NULL;
}

/* A worker stopped by `sig`, or continued (sig 0).  Workers run in
 * background process groups: one that reads the terminal stops with
 * SIGTTIN (SIGTTOU: writes to it under `stty tostop`, or changes its
 * settings) and would wait there for ever, so that is said, once. */
static void worker_stopped(struct job *j, struct worker *w, int sig)
{
    char name[32];
    w->stopped = sig;
    if ((sig == SIGTTIN || sig == SIGTTOU) && !w->tty_reported) {
        w->tty_reported = 1;
        signal_name(sig, name, sizeof name);
        msg("rank %d (local %d, pid %d): stopped by %s: it %s the terminal, "
            "which only amlrun's process group may do; it waits until "
            "continued (kill -CONT %d) or the job ends", w->id.rank,
            w->id.local, (int)w->pid, name,
            sig == SIGTTIN ? "read from" : "wrote to or set up",
            (int)getpid());
    } else if (j->s->o->verbose) {
        if (sig)
            signal_name(sig, name, sizeof name);
        msg("rank %d (local %d, pid %d): %s%s", w->id.rank, w->id.local,
            (int)w->pid, sig ? "stopped by " : "continued", sig ? name : "");
    }
}

/* Ctrl-Z (SIGTSTP): stop every worker's group as the shell would have, had
 * they been in the foreground group, then amlrun itself; on SIGCONT (fg,
 * bg) continue them.  amlrun has no handler, so unblocking the signal
 * raised here stops it with the default action and the shell sees a
 * stopped job.  In an orphaned process group the kernel discards it, and
 * the workers are continued at once. */
static void suspend(struct job *j, int sig)
{
    signal_all(j, sig);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    raise(sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    /* Continued (or never stopped). */
    sigprocmask(SIG_BLOCK, &one, NULL);
    signal_all(j, SIGCONT);
}

static void reap(struct job *j)
{
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_ALL, 0, &si,
                   WEXITED | WSTOPPED | WCONTINUED | WNOHANG | WNOWAIT) < 0) {
            if (errno == EINTR)
                continue;
            return; /* ECHILD */
        }
        if (si.si_pid == 0)
            return;
        pid_t pid = si.si_pid;
        struct worker *w = find_worker(j, pid);
        if (si.si_code == CLD_STOPPED || si.si_code == CLD_CONTINUED) {
            /* Take the event (WNOWAIT left it there); an exit is not
             * taken by these flags, and is reaped on the next round. */
            siginfo_t taken;
            memset(&taken, 0, sizeof taken);
            while (waitid(P_PID, (id_t)pid, &taken,
                          WSTOPPED | WCONTINUED | WNOHANG) < 0 &&
                   errno == EINTR) {
            }
            if (w && taken.si_pid == pid)
                worker_stopped(j, w, taken.si_code == CLD_STOPPED
                                         ? taken.si_status : 0);
            continue;
        }
        /* The worker is a zombie now, so its pid, and with it its group id,
         * cannot be reused: kill what is left of the group before reaping. */
        if (w)
            kill(-pid, SIGKILL);
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (w)
            worker_done(j, w, status);
        if (j->live == 0)
            kill_strays();
    }
}

static void on_signal(struct job *j, int sig)
{
    char name[32];
    if (sig == SIGCHLD) {
        reap(j);
    } else if (sig_forwarded(sig)) {
        signal_all(j, sig);
    } else if (sig == SIGTSTP) {
        suspend(j, sig);
    } else if (sig == SIGCONT) {
        /* After our own stop, or a `kill -CONT` meant for the job. */
        signal_all(j, SIGCONT);
    } else if (sig_stops_job(sig)) {
        signal_name(sig, name, sizeof name);
        j->restart_wanted = 0;
        if (!j->stop_signal) {
            /* The first stop request, even while the workers stop for
             * another reason (a failure here or on another node): it is
             * passed on, and it ends the job whatever restarts are left. */
            char why[64];
            snprintf(why, sizeof why, "%s received: the job stops", name);
            tell_final(j, stopped_status(sig), why);
            j->stop_signal = sig;
            if (!j->s->o->quiet && j->live > 0)
                msg("%s received: stopping %d worker%s (SIGKILL after %g s)",
                    name, j->live, j->live == 1 ? "" : "s",
                    j->s->o->term_timeout);
            else if (!j->s->o->quiet)
                msg("%s", why);
            if (!j->stopping)
                begin_stop(j, sig);
            else
                signal_all(j, sig);
        } else if (!j->killed && j->live > 0) {
            /* A second stop request means "now". */
            msg("%s received again: killing %d worker%s", name, j->live,
                j->live == 1 ? "" : "s");
            kill_now(j);
        }
    }
}

static void read_signals(struct job *j)
{
    struct signalfd_siginfo si[16];
    ssize_t n = read(j->s->sfd, si, sizeof si);
    for (ssize_t i = 0; i < n / (ssize_t)sizeof si[0]; i++)
        on_signal(j, (int)si[i].ssi_signo);
}

static void on_timer(struct job *j)
{
    uint64_t ticks;
    if (read(j->tfd, &ticks, sizeof ticks) != (ssize_t)sizeof ticks)
        return;
    if (j->live > 0 && !j->killed) {
        msg("%d worker%s still running %g s after SIGTERM: sending SIGKILL",
            j->live, j->live == 1 ? "" : "s", j->s->o->term_timeout);
        kill_now(j);
    }
}

static int open_logs(struct job *j, struct worker *w)
{
    if (j->torch_layout || j->s->log_dir_fd < 0 || w->log_out >= 0)
        return 0;
    const char *dir = j->s->o->log_dir;
    w->log_out = out_log_file(j->s->log_dir_fd, dir, w->id.rank, "stdout");
    if (w->log_out < 0)
        return -1;
    w->log_err = out_log_file(j->s->log_dir_fd, dir, w->id.rank, "stderr");
    return w->log_err < 0 ? -1 : 0;
}

/* The worker's directory in this attempt: its error file and, in
 * torchrun's layout, the log files of the streams -r/--tee name (new ones
 * each attempt).  amlrun's own --log-dir files are opened once. */
static int worker_files(struct job *j, struct worker *w, int index)
{
    const struct amlrun_opts *o = j->s->o;
    free(w->error_file);
    w->error_file = NULL;
    if (!j->torch_layout) {
        int none_out, none_err; /* STD_NONE: no files opened */
        return rundir_worker(j->rd, index, w->id.rank, STD_NONE,
                             &w->error_file, &none_out, &none_err) < 0 ||
                       open_logs(j, w) < 0 ? -1 : 0;
    }
    int streams = std_map_get(&o->redirects, index) |
                  std_map_get(&o->tee, index);
    return rundir_worker(j->rd, index, w->id.rank, streams, &w->error_file,
                         &w->log_out, &w->log_err);
}

/* Set up one stream; its pipe's write end goes to *wr. */
static int stream_setup(struct job *j, struct worker *w, struct out_stream *s,
                        int which, int *wr)
{
    const struct amlrun_opts *o = j->s->o;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    memset(s, 0, sizeof *s);
    s->fd = p[0];
    *wr = p[1];
    s->log = which == 1 ? w->log_out : w->log_err;
    int index = (int)(w - j->w);
    s->console = rankset_has(&o->ranks, w->id.rank) &&
                 rankset_has(&o->local_ranks, w->id.local) ? which : -1;
    /* torchrun: a redirected stream goes only to its file, unless it is
     * also tee'd. */
    if (j->torch_layout && (std_map_get(&o->redirects, index) & which) &&
        !(std_map_get(&o->tee, index) & which))
        s->console = -1;
    int prefixed = o->prefix_streams == PREFIX_BY_TEE
                       ? std_map_get(&o->tee, index) : o->prefix_streams;
    if (o->prefix_fmt && (prefixed & which)) {
        s->prefix = out_prefix(o->prefix_fmt, w->id.rank, w->id.local,
                               w->id.node, j->s->host,
                               which == 1 ? "stdout" : "stderr");
        if (!s->prefix)
            return -1;
        s->prefix_len = strlen(s->prefix);
    }
    return 0;
}

static void report_start_failure(struct job *j, const struct worker *w,
                                 enum spawn_stage stage, int err)
{
    if (stage == SPAWN_EXEC) {
        char why[PATH_MAX + 64];
        msg("rank %d (local %d): cannot run %s: %s", w->id.rank, w->id.local,
            j->s->cmd->path,
            command_exec_error(j->s->cmd->path, err, why, sizeof why));
        j->spawn_status = err == ENOENT ? AMLRUN_EXIT_NOTFOUND
                                        : AMLRUN_EXIT_NOEXEC;
    } else {
        msg_errno(err, "rank %d (local %d): %s", w->id.rank, w->id.local,
                  stage == SPAWN_BIND ? "binding failed"
                                      : "cannot start the worker");
        j->spawn_status = AMLRUN_EXIT_SYSTEM;
    }
}

static int start_worker(struct job *j, int index)
{
    const struct job_spec *s = j->s;
    struct worker *w = &j->w[index];
    char **env = worker_env(s->env, index, j->restarts, &w->id);
    if (!env)
        return -1;
    char **argv = command_argv_for(s->cmd, w->id.local);
    char **sh = argv ? command_sh_argv(s->cmd->path, argv) : NULL;
    int wr_out = -1, wr_err = -1, ok = 0;
    if (!argv || !sh) {
        msg("out of memory starting local worker %d", index);
    } else if (worker_files(j, w, index) < 0) {
        /* message printed */
    } else if (amldist_envp_set(&env, "TORCHELASTIC_ERROR_FILE", w->error_file) < 0) {
        msg("out of memory starting local worker %d", index);
    } else if (stream_setup(j, w, &w->out, 1, &wr_out) < 0 ||
               stream_setup(j, w, &w->err, 2, &wr_err) < 0) {
        msg_errno(errno, "output pipes for local worker %d", index);
    } else {
        ok = 1;
    }
    if (ok && s->o->bind.report_bindings && j->restarts == 0)
        bind_report(s->binding, index, w->id.rank, stderr);
    if (ok) {
        /* One stdin for the job: the first worker's, unless it is a
         * terminal (a background process group reading it would stop). */
        int in = index == 0 && !isatty(0) ? 0 : j->null_fd;
        struct spawn_req r = {
            .path = s->cmd->path, .argv = argv, .envp = env, .sh_argv = sh,
            .stdin_fd = in, .stdout_fd = wr_out, .stderr_fd = wr_err,
            .binding = s->binding, .local_rank = index,
            .mask = s->worker_mask, .ignore_sighup = s->o->ignore_sighup,
            .pipe_was_ignored = s->pipe_was_ignored,
        };
        enum spawn_stage stage = SPAWN_OK;
        int err = 0;
        pid_t pid = spawn_worker(&r, &stage, &err);
        if (pid > 0) {
            w->pid = pid;
            w->running = 1;
            w->t_start = now_s();
            j->live++;
        } else {
            report_start_failure(j, w, stage, err);
            ok = 0;
        }
    }
    if (wr_out >= 0)
        close(wr_out);
    if (wr_err >= 0)
        close(wr_err);
    if (!ok) {
        out_stream_close(&w->out);
        out_stream_close(&w->err);
        if (j->spawn_status < 0)
            j->spawn_status = AMLRUN_EXIT_SYSTEM;
    }
    command_argv_free(s->cmd, argv);
    free(sh);
    amldist_envp_free(env);
    return ok ? 0 : -1;
}

static void start_all(struct job *j)
{
    for (int i = 0; i < j->n; i++) {
        j->w[i].out.fd = j->w[i].err.fd = -1;
        j->w[i].running = j->w[i].stopped = j->w[i].tty_reported = 0;
    }
    for (int i = 0; i < j->n; i++) {
        if (start_worker(j, i) < 0) {
            /* Reported once, here; the ones already started are stopped. */
            if (j->spawn_status < 0)
                j->spawn_status = AMLRUN_EXIT_SYSTEM;
            tell_final(j, j->spawn_status, "a worker could not start");
            j->restart_wanted = 0;
            begin_stop(j, SIGTERM);
            return;
        }
    }
    if (j->s->o->verbose)
        msg("started %d worker%s", j->n, j->n == 1 ? "" : "s");
}

/* The host ordered every node's workers stopped. */
static void on_peer_stop(struct job *j)
{
    if (amldist_rdzv_state(j->s->rz) != AMLDIST_RDZV_STOP || j->stopping)
        return;
    j->restart_wanted = 0;
    if (!j->s->o->quiet)
        msg("stopping the %d worker%s of this node (SIGTERM, SIGKILL after "
            "%g s): %s", j->live, j->live == 1 ? "" : "s",
            j->s->o->term_timeout, amldist_rdzv_stop_reason(j->s->rz));
    begin_stop(j, SIGTERM);
}

/* The loop of one attempt: until every worker has ended and every pipe is
 * drained. */
static void run_loop(struct job *j)
{
    for (;;) {
        int np = 0;
        j->pfd[np++] = (struct pollfd){j->s->sfd, POLLIN, 0};
        j->pfd[np++] = (struct pollfd){j->tfd, POLLIN, 0};
        /* Until this node stops anyway: the descriptor stays readable. */
        int rzfd = j->s->rz && !j->stopping ? amldist_rdzv_fd(j->s->rz) : -1;
        j->pfd[np++] = (struct pollfd){rzfd, POLLIN, 0};
        int open_streams = 0;
        for (int i = 0; i < j->n; i++) {
            struct out_stream *ss[2] = {&j->w[i].out, &j->w[i].err};
            for (int k = 0; k < 2; k++) {
                if (ss[k]->fd < 0)
                    continue;
                j->pstream[np] = ss[k];
                j->pfd[np++] = (struct pollfd){ss[k]->fd, POLLIN, 0};
                open_streams++;
            }
        }
        if (j->live == 0 && open_streams == 0)
            return;
        if (poll(j->pfd, (nfds_t)np, -1) < 0) {
            if (errno == EINTR)
                continue;
            msg_errno(errno, "poll");
            kill_now(j);
            return;
        }
        if (j->pfd[0].revents) {
            /* A worker reaped here had its pipes drained: the revents
             * below may be stale, and reading a pipe that a stray still
             * holds open would block for good.  Poll again. */
            read_signals(j);
            continue;
        }
        if (j->pfd[1].revents)
            on_timer(j);
        if (j->pfd[2].revents)
            on_peer_stop(j);
        for (int i = 3; i < np; i++)
            if (j->pfd[i].revents && j->pstream[i]->fd >= 0)
                out_stream_read(j->pstream[i], j->buf, READ_BUF);
    }
}

static int job_init(struct job *j, const struct job_spec *s)
{
    memset(j, 0, sizeof *j);
    j->s = s;
    j->n = s->nproc;
    j->fail = -1;
    j->spawn_status = -1;
    j->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    j->null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    j->w = calloc((size_t)j->n, sizeof *j->w);
    j->buf = malloc(READ_BUF);
    j->pfd = calloc((size_t)j->n * 2 + 3, sizeof *j->pfd);
    j->pstream = calloc((size_t)j->n * 2 + 3, sizeof *j->pstream);
    if (j->tfd < 0 || j->null_fd < 0 || !j->w || !j->buf || !j->pfd ||
        !j->pstream)
        return -1;
    for (int i = 0; i < j->n; i++)
        j->w[i].log_out = j->w[i].log_err = -1;
    return 0;
}

static void job_free(struct job *j)
{
    for (int i = 0; j->w && i < j->n; i++) {
        out_stream_close(&j->w[i].out);
        out_stream_close(&j->w[i].err);
        free(j->w[i].error_file);
        if (j->w[i].log_out >= 0)
            close(j->w[i].log_out);
        if (j->w[i].log_err >= 0)
            close(j->w[i].log_err);
    }
    if (j->tfd >= 0)
        close(j->tfd);
    if (j->null_fd >= 0)
        close(j->null_fd);
    free(j->w);
    free(j->buf);
    free(j->pfd);
    free(j->pstream);
    free(j->local_block);
    rundir_close(j->rd);
}

/* torchrun's layout writes new log files each attempt. */
static void close_attempt_logs(struct job *j)
{
    for (int i = 0; j->torch_layout && i < j->n; i++) {
        if (j->w[i].log_out >= 0)
            close(j->w[i].log_out);
        if (j->w[i].log_err >= 0)
            close(j->w[i].log_err);
        j->w[i].log_out = j->w[i].log_err = -1;
    }
}

/* Every worker's error file lives in a run directory: --log-dir's in
 * torchrun's layout, else a private one, removed at the end unless it
 * holds redirected output (torchrun keeps its temporary logs too). */
static int open_rundir(struct job *j)
{
    const struct amlrun_opts *o = j->s->o;
    j->torch_layout = options_torchrun_layout(o);
    int base = j->torch_layout ? j->s->log_dir_fd : -1;
    int keep = j->torch_layout &&
               (std_map_any(&o->redirects) || std_map_any(&o->tee));
    j->rd = rundir_open(base, base >= 0 ? o->log_dir : NULL, o->run_id, keep);
    if (!j->rd)
        return -1;
    if ((keep && base < 0 && !o->quiet) || o->verbose)
        msg("%s in %s", keep ? "log files (torchrun's layout)" : "error files",
            rundir_path(j->rd));
    return 0;
}

static void report_root_cause(struct job *j)
{
    const struct worker *w = &j->w[j->fail];
    struct failure f = {
        .rank = w->id.rank, .local = w->id.local, .pid = w->pid,
        .status = w->status, .host = j->s->host, .when = w->t_end,
        .error_file = w->error_file,
    };
    /* Like torchrun's own @record: an agent above amlrun that gave it an
     * error file gets the root cause's. */
    rootcause_report(&f, getenv("TORCHELASTIC_ERROR_FILE"));
    /* The summary names the error file: it must still be there to read. */
    if (w->error_file && access(w->error_file, F_OK) == 0)
        rundir_keep(j->rd);
}

/*
 * srun exits with the highest status of its tasks, a signal counting as
 * 128+n, and srun --kill-on-bad-exit (head-node mode passes it) ends the
 * step with SIGTERM as soon as one task fails.  Had the other nodes'
 * amlruns exited 143 then, the job's status would be 143, not the failing
 * rank's.  So a task of a Slurm step of several tasks that SIGTERM stopped
 * exits 1: lower than, or equal to, any status a failing task can have.
 * SIGINT (srun's double Ctrl-C) and a lone task keep 128+n.
 */
static int stopped_status(int sig)
{
    const char *step = getenv("SLURM_STEP_ID");
    const char *tasks = getenv("SLURM_STEP_NUM_TASKS");
    if (!step)
        step = getenv("SLURM_STEPID");
    if (!tasks)
        tasks = getenv("SLURM_NTASKS");
    if (sig != SIGTERM || !step || !*step || !tasks || atoi(tasks) < 2)
        return 128 + sig;
    return 1;
}

/* This node's own status in the round: its failure, its stop signal, or 0
 * (workers that the host had stopped did not fail). */
static int local_status(const struct job *j)
{
    if (j->spawn_status >= 0)
        return j->spawn_status;
    if (j->fail >= 0)
        return status_exit_code(j->fail_status);
    return j->stop_signal ? stopped_status(j->stop_signal) : 0;
}

/* Every worker here has ended: wait for the rest of the job, still
 * answering signals (a stop request then ends the whole job).  1: a new
 * round; 0: the job is over; < 0: an error. */
static int wait_for_job(struct job *j)
{
    amldist_rdzv_t *rz = j->s->rz;
    amldist_rdzv_done(rz, local_status(j));
    for (;;) {
        int rc = amldist_rdzv_wait(rz, 0);
        if (rc != AMLDIST_ETIMEDOUT)
            return rc;
        struct pollfd p[2] = {{j->s->sfd, POLLIN, 0},
                              {amldist_rdzv_fd(rz), POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return -1;
        if (p[0].revents)
            read_signals(j);
    }
}

static void announce_round(struct job *j)
{
    amldist_rdzv_t *rz = j->s->rz;
    int restarts = amldist_rdzv_restart_count(rz);
    if (!j->s->o->quiet && restarts > j->restarts)
        msg("restarting the workers of all %d nodes (restart %d of %d; "
            "this node is node %d)", amldist_rdzv_num_nodes(rz), restarts,
            j->s->o->max_restarts, amldist_rdzv_node_rank(rz));
    else if (!j->s->o->quiet)
        msg("the job re-forms with %d nodes (this node is node %d): "
            "restarting the workers", amldist_rdzv_num_nodes(rz),
            amldist_rdzv_node_rank(rz));
    j->restarts = restarts;
}

/* The end of a job with a control plane: node 0 prints the job's first
 * failure (every node, when the host itself was lost); a node whose own
 * worker failed prints its root cause block too. */
static void report_job(struct job *j, int status)
{
    amldist_rdzv_t *rz = j->s->rz;
    if (status == 0)
        return;
    int node0 = amldist_rdzv_node_rank(rz) == 0;
    if (node0 || status == AMLDIST_RDZV_STATUS_LOST) {
        const char *f = amldist_rdzv_failure(rz);
        size_t n = strlen(f) + 128;
        char *text = malloc(n);
        if (text) {
            snprintf(text, n, "amlrun: job failed (exit status %d): first "
                     "failure: %s%s", status, f,
                     *f && f[strlen(f) - 1] == '\n' ? "" : "\n");
            (void)write_all(2, text, strlen(text));
        }
        free(text);
    }
    if (!node0 && j->local_block)
        (void)write_all(2, j->local_block, strlen(j->local_block));
}

int supervise(const struct job_spec *s)
{
    struct job j;
    int rz_next = -1;
    if (job_init(&j, s) < 0) {
        msg_errno(errno, "setting up the job");
        job_free(&j);
        return AMLRUN_EXIT_SYSTEM;
    }
    if (open_rundir(&j) < 0) {
        job_free(&j);
        return AMLRUN_EXIT_SYSTEM;
    }
    for (;;) {
        if (rundir_attempt(j.rd, s->rz ? amldist_rdzv_round(s->rz)
                                       : j.restarts) < 0) {
            j.spawn_status = AMLRUN_EXIT_SYSTEM;
            break;
        }
        start_all(&j);
        run_loop(&j);
        disarm_timer(&j);
        for (int i = 0; i < j.n; i++) {
            out_stream_close(&j.w[i].out);
            out_stream_close(&j.w[i].err);
        }
        close_attempt_logs(&j);
        if (s->rz) {
            if (out_console_gone() && !j.stop_signal)
                tell_final(&j, 1, "its console is gone");
            if ((rz_next = wait_for_job(&j)) != 1)
                break;
            announce_round(&j);
        } else {
            if (!j.restart_wanted || j.stop_signal || j.spawn_status >= 0 ||
                out_console_gone())
                break;
            j.restarts++;
            if (!s->o->quiet)
                msg("restarting the %d worker%s of this node (restart %d of "
                    "%d)", j.n, j.n == 1 ? "" : "s", j.restarts,
                    s->o->max_restarts);
        }
        j.fail = -1;
        j.stopping = j.killed = j.restart_wanted = 0;
        free(j.local_block); /* a failure of an earlier round */
        j.local_block = NULL;
    }
    int status = 0;
    if (s->rz) {
        status = rz_next == 0 ? amldist_rdzv_exit_status(s->rz)
                              : AMLRUN_EXIT_SYSTEM;
        report_job(&j, status);
    } else if (j.spawn_status >= 0) {
        status = j.spawn_status;
    } else if (j.fail >= 0) {
        status = status_exit_code(j.fail_status);
        report_root_cause(&j);
    } else if (j.stop_signal) {
        status = stopped_status(j.stop_signal);
    }
    if (j.stop_signal && j.fail < 0 && j.spawn_status < 0 &&
        status != 128 + j.stop_signal && s->o->verbose)
        msg("stopped by SIGTERM as one of the tasks of Slurm step %s: exit "
            "status 1, so that srun's (its tasks' highest) is the failing "
            "task's", getenv("SLURM_STEP_ID") ? getenv("SLURM_STEP_ID")
                                              : getenv("SLURM_STEPID"));
    job_free(&j);
    return status;
}
