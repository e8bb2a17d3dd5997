/*
 * The per-node supervisor (see supervise.h): the composition of its parts
 * around the one event loop (net/loop.h).  The signalfd, the control
 * plane's descriptor and the workers' output pipes are the loop's watches,
 * the SIGKILL deadline its timer; the policy (policy.h) says what each
 * event means, start.h starts an attempt's workers, report.h says what
 * happened.  The optional parts are plugins (job/hooks.h, the list in
 * plugins.c): they are called at fixed moments, and their verdicts come
 * back here (on_verdict), where the supervisor alone decides and acts.
 * Signals come first: a callback that acts on the job takes the signals
 * that came before it does.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "contain/guard.h"
#include "job/hooks.h"
#include "output/exitstatus.h"
#include "output/msg.h"
#include "run/plugins.h"
#include "run/report.h"
#include "run/result.h"
#include "run/start.h"
#include "run/stdin.h"
#include "run/streams.h"
#include "run/supervise.h"
#include "util/clock.h"

int sig_stops_job(const struct amlrun_opts *o, int sig)
{
    return sig > 0 && sig < 64 && (o->stop_signals >> sig & 1);
}

/* SIGWINCH always (the workers' terminal); SIGUSR1 and SIGUSR2 without
 * --signals-to-handle.  With it, as under torchrun 2.x, a signal not
 * listed is not caught at all (main.c blocks it not). */
int sig_forwarded(const struct amlrun_opts *o, int sig)
{
    if (sig_stops_job(o, sig))
        return 0;
    return sig == SIGWINCH ||
           (!o->signals_to_handle && (sig == SIGUSR1 || sig == SIGUSR2));
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

/* ---- what the policy decided --------------------------------------------- */

static void on_deadline(void *arg);

/* SIGKILL --term-timeout seconds from now (rounded up to a millisecond). */
static void arm_deadline(struct job *j)
{
    double ms = j->s->o->term_timeout * 1000.0;
    long long whole = (long long)ms;
    if (j->deadline)
        amldist__loop_cancel(j->loop, j->deadline);
    j->deadline = amldist__loop_timer(
        j->loop, amldist__now_ms() + whole + ((double)whole < ms),
        on_deadline, j);
    if (j->deadline < 0)
        j->deadline = 0;
}

/* The stop sequence: `sig` now, SIGKILL at the deadline.  A stopped worker
 * acts on the signal only once continued, so SIGCONT follows (as a shell's
 * kill does for a stopped job); otherwise it would sit out the whole
 * --term-timeout. */
static void job_act(struct job *j, enum action a, int sig)
{
    switch (a) {
    case ACT_STOP:
        signal_all(j, sig);
        signal_all(j, SIGCONT);
        if (j->live > 0)
            arm_deadline(j);
        break;
    case ACT_PASS:
        signal_all(j, sig);
        break;
    case ACT_KILL:
        signal_all(j, SIGKILL);
        break;
    case ACT_NONE:
        break;
    }
}

/* ---- the workers' ends and stops ----------------------------------------- */

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

static void worker_done(struct job *j, struct worker *w, int status)
{
    w->running = 0;
    w->status = status;
    w->t_end = time(NULL);
    w->end_ns = amldist__now_ns();
    j->live--;
    guard_del(w->pid);
    drain(j, w);
    worker_close_stack(w);
    stdin_worker_end(j, w);
    enum action a = status_failed(status)
                        ? policy_failed(&j->p, (int)(w - j->w), status)
                        : ACT_NONE;
    report_worker_end(j, w, a != ACT_NONE);
    job_hooks_worker_exit(j, w, a != ACT_NONE);
    if (a == ACT_NONE)
        return;
    if (j->s->rz)
        report_tell_failure(j, w);
    report_stopping_others(j);
    job_act(j, a, SIGTERM);
}

static struct worker *find_worker(struct job *j, pid_t pid)
{
    for (int i = 0; i < j->n; i++)
        if (j->w[i].running && j->w[i].pid == pid)
            return &j->w[i];
    return NULL;
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
    j->cont_ns = amldist__now_ns();
    signal_all(j, SIGCONT);
}

static void reap(struct job *j)
{
    /* While a capture reads the ranks' stacks, their ends wait (for at
     * most its deadline): what the stacks show is decided first (a hang's
     * verdict, then a rank that died meanwhile), as when the capture held
     * the loop; signals, output and queries are still served. */
    if (j->captures) {
        j->reap_later = 1;
        return;
    }
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
        if (si.si_code == CLD_TRAPPED) {
            /* A capture's thread traces it (job/capture.c): the kernel
             * shows a tracee of our own thread group to its real parent
             * too (__WNOTHREAD does not hide it), and the event is the
             * tracer's.  Neither killed nor waited for here: the rest is
             * reaped once no capture runs (job_take_signals). */
            j->reap_later = 1;
            return;
        }
        if (si.si_code == CLD_STOPPED || si.si_code == CLD_CONTINUED) {
            /* Take the event (WNOWAIT left it there); an exit is not
             * taken by these flags, and is reaped on the next round. */
            siginfo_t taken;
            memset(&taken, 0, sizeof taken);
            while (waitid(P_PID, (id_t)pid, &taken,
                          WSTOPPED | WCONTINUED | WNOHANG) < 0 &&
                   errno == EINTR) {
            }
            if (w && taken.si_pid == pid) {
                w->stopped = taken.si_code == CLD_STOPPED ? taken.si_status : 0;
                if (!w->stopped)
                    w->cont_ns = amldist__now_ns();
                report_worker_stopped(j, w, w->stopped);
            }
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

/* ---- the loop's callbacks ------------------------------------------------- */

static void on_signal(struct job *j, int sig)
{
    if (sig == SIGCHLD) {
        reap(j);
    } else if (sig_forwarded(j->s->o, sig)) {
        if (sig == SIGWINCH)
            streams_resize(j); /* the size first, then the news */
        signal_all(j, sig);
    } else if (sig == SIGTSTP) {
        suspend(j, sig);
    } else if (sig == SIGCONT) {
        /* After our own stop, or a `kill -CONT` meant for the job. */
        j->cont_ns = amldist__now_ns();
        signal_all(j, SIGCONT);
    } else if (sig_stops_job(j->s->o, sig)) {
        enum action a = policy_stop_signal(&j->p, sig, j->live);
        report_stop_signal(j, sig, a);
        job_act(j, a, sig);
    }
}

/* The signals that came (the signalfd does not block); whether any did. */
static int job_take_signals(struct job *j)
{
    struct signalfd_siginfo si[16];
    ssize_t n = read(j->s->sfd, si, sizeof si);
    int any = n >= (ssize_t)sizeof si[0];
    for (ssize_t i = 0; any && i < n / (ssize_t)sizeof si[0]; i++)
        on_signal(j, (int)si[i].ssi_signo);
    /* What a capture's tracee held up (reap()), once no capture runs. */
    if (j->reap_later && !j->captures) {
        j->reap_later = 0;
        reap(j);
    }
    return any;
}

static void on_signals(void *arg, int fd, short revents)
{
    (void)fd;
    (void)revents;
    job_take_signals(arg);
}

static void on_deadline(void *arg)
{
    struct job *j = arg;
    j->deadline = 0;
    job_take_signals(j); /* exits already told of are not workers running */
    enum action a = policy_deadline(&j->p, j->live);
    if (a == ACT_KILL)
        report_deadline(j);
    job_act(j, a, SIGKILL);
}

/* The control plane: while the workers run, the host may order every
 * node's workers stopped; while this node waits, wait_for_job asks what
 * the job does next. */
static void on_control(void *arg, int fd, short revents)
{
    struct job *j = arg;
    (void)fd;
    (void)revents;
    /* After the signals, on the next round (the descriptor stays readable
     * until this node stops anyway). */
    if (job_take_signals(j) || j->p.phase != PHASE_RUNNING)
        return;
    if (amldist_rdzv_state(j->s->rz) != AMLDIST_RDZV_STOP)
        return;
    enum action a = policy_peer_stop(&j->p);
    if (a != ACT_NONE)
        report_peer_stop(j);
    job_act(j, a, SIGTERM);
}

static int watch_controls(struct job *j)
{
    if (amldist__loop_watch(j->loop, j->s->sfd, POLLIN, on_signals, j) < 0)
        return -1;
    if (j->s->rz && amldist__loop_watch(j->loop, amldist_rdzv_fd(j->s->rz), 0,
                                        on_control, j) < 0)
        return -1;
    return 0;
}

/* A plugin's verdict (job_stop): the attempt, or for a reason that is not
 * restartable the job, stops; the other nodes are told, as a failure of
 * the round or as the job's end. */
static void on_verdict(struct job *j, enum stop_reason r,
                       const struct stop_detail *d)
{
    const struct stop_row *row = stop_row(r);
    if (d && d->why && d->why[0])
        snprintf(j->stop_why, sizeof j->stop_why, "%s", d->why);
    if (d && d->peer_text && row->restartable)
        report_tell_round_failure(j, row->exit_status, d->peer_text);
    else if (d && d->peer_text)
        report_tell_final(j, row->exit_status, d->peer_text);
    /* A restartable verdict fails the attempt (its row's exit status
     * unless a restart follows); another ends the job whatever restarts
     * are left. */
    enum action a = policy_verdict(&j->p, row->restartable, row->exit_status);
    report_stopping(j, r, a);
    job_act(j, a, SIGTERM);
}

/* job_drain(): what the running workers wrote and amlrun has not read. */
static void drain_running(struct job *j)
{
    for (int i = 0; i < j->n; i++)
        if (j->w[i].running)
            drain(j, &j->w[i]);
}

static const struct job_actions actions = {on_verdict, job_take_signals,
                                           drain_running};

/* ---- an attempt ----------------------------------------------------------- */

static void start_attempt(struct job *j)
{
    int failed = 0;
    for (int i = 0; i < j->n; i++) {
        j->w[i].out.fd = j->w[i].err.fd = -1;
        j->w[i].running = j->w[i].stopped = j->w[i].tty_reported = 0;
        j->w[i].cont_ns = 0;
    }
    /* All forked first, then every exec waited for: the workers' execs
     * overlap instead of each waiting for the one before. */
    int forked = 0, status = 0;
    while (forked < j->n && !failed) {
        if (start_worker(j, forked, &status) < 0)
            failed = 1; /* said; no more are forked */
        else
            forked++;
    }
    /* One failure is said: one that stopped the forking was said there;
     * else the lowest rank's (when the command cannot run at all every
     * worker fails the same way).  Every child forked is waited for,
     * failed or not. */
    int first = failed ? forked : j->n;
    for (int i = 0; i < forked; i++) {
        int st, say = !failed && i < first;
        if (start_worker_end(j, i, say, &st) < 0 && say) {
            first = i;
            status = st;
        }
    }
    if (first < j->n) {
        /* Reported once, here; the ones started are stopped. */
        enum action a = policy_start_failed(&j->p, status);
        report_tell_final(j, status, "a worker could not start");
        job_act(j, a, SIGTERM);
        failed = 1;
    }
    for (int i = 0; i < j->n; i++) {
        stream_watch(j, &j->w[i], &j->w[i].out);
        stream_watch(j, &j->w[i], &j->w[i].err);
    }
    if (!failed) {
        report_started(j);
        stdin_note(j);
    }
    job_hooks_attempt_start(j, !failed);
}

/* The loop of one attempt: until every worker has ended and every pipe is
 * drained. */
static void run_attempt(struct job *j)
{
    int ctl = j->s->rz ? amldist_rdzv_fd(j->s->rz) : -1;
    while (j->live > 0 || open_streams(j) > 0) {
        /* Until this node stops anyway: the descriptor stays readable. */
        if (ctl >= 0)
            amldist__loop_events(j->loop, ctl,
                                 j->p.phase == PHASE_RUNNING ? POLLIN : 0);
        if (amldist__loop_once(j->loop, -1) < 0) {
            msg_errno(errno, "poll");
            job_act(j, policy_abort(&j->p), SIGKILL);
            return;
        }
    }
}

static void end_attempt(struct job *j)
{
    job_hooks_attempt_end(j);
    /* A reaped worker's pid may be the next attempt's: no capture reads
     * on past this attempt. */
    job_stacks_cancel_all(j, 0);
    if (j->deadline)
        amldist__loop_cancel(j->loop, j->deadline);
    j->deadline = 0;
    for (int i = 0; i < j->n; i++) {
        stream_close(j, &j->w[i].out);
        stream_close(j, &j->w[i].err);
    }
    job_close_attempt_logs(j);
}

/* Every worker here has ended: wait for the rest of the job, still
 * answering signals (a stop request then ends the whole job).  1: a new
 * round; 0: the job is over; < 0: an error. */
static int wait_for_job(struct job *j)
{
    amldist_rdzv_t *rz = j->s->rz;
    amldist_rdzv_done(rz, policy_status(&j->p));
    amldist__loop_events(j->loop, amldist_rdzv_fd(rz), POLLIN);
    for (;;) {
        int rc = amldist_rdzv_wait(rz, 0);
        if (rc != AMLDIST_ETIMEDOUT)
            return rc;
        if (amldist__loop_once(j->loop, -1) < 0)
            return -1;
    }
}

int supervise(const struct job_spec *s)
{
    struct job j;
    int rz_next = -1;
    if (job_init(&j, s) < 0 || watch_controls(&j) < 0) {
        msg_errno(errno, "setting up the job");
        job_free(&j);
        return AMLRUN_EXIT_SYSTEM;
    }
    if (job_open_rundir(&j) < 0) {
        job_free(&j);
        return AMLRUN_EXIT_SYSTEM;
    }
    if (job_plugins_attach(&j, job_plugin_list, &actions) < 0) {
        msg_errno(errno, "setting up the job");
        job_free(&j);
        return AMLRUN_EXIT_SYSTEM;
    }
    for (;;) {
        policy_attempt(&j.p);
        if (rundir_attempt(j.rd, s->rz ? amldist_rdzv_round(s->rz)
                                       : j.p.restarts) < 0) {
            policy_start_failed(&j.p, AMLRUN_EXIT_SYSTEM);
            break;
        }
        start_attempt(&j);
        run_attempt(&j);
        end_attempt(&j);
        if (s->rz) {
            if (out_console_gone() && !j.p.stop_signal)
                report_tell_final(&j, 1, "its console is gone");
            policy_ended(&j.p, 1, 0);
            rz_next = wait_for_job(&j);
            int restarts = rz_next == 1 ? amldist_rdzv_restart_count(s->rz) : 0;
            if (rz_next == 1) {
                report_round(&j, restarts);
                /* The machine's nodes may have changed (an elastic job):
                 * its GPUs are split again; a plan that fails to follow
                 * keeps the last one (said). */
                (void)control_round(s->env->ctl, s->binding);
            }
            if (policy_round(&j.p, rz_next == 1, restarts) != PHASE_RESTARTING)
                break;
        } else {
            if (policy_ended(&j.p, 0, out_console_gone()) != PHASE_RESTARTING)
                break;
            report_restart(&j);
        }
        free(j.local_block); /* a failure of an earlier round */
        j.local_block = NULL;
    }
    /* No worker is left and none will start: the guard may end the
     * containment and exit while the job is reported and its run directory
     * removed (main() reaps it). */
    guard_stop();
    int status;
    if (s->rz) {
        status = rz_next == 0 ? amldist_rdzv_exit_status(s->rz)
                              : AMLRUN_EXIT_SYSTEM;
        /* Never 0 for workers that did not all succeed here: a host that
         * says the job succeeded while it had them stopped (an impostor's
         * FINISH 0) is not believed. */
        int mine = policy_status(&j.p);
        if (status == 0 && (mine != 0 || j.p.peer_stopped)) {
            status = mine ? mine : AMLDIST_RDZV_STATUS_LOST;
            report_not_done(&j, status);
        } else {
            report_job(&j, status);
        }
    } else {
        status = policy_status(&j.p);
        if (j.p.start_status < 0 && j.p.fail >= 0)
            report_root_cause(&j);
        else
            report_hang_end(&j, status);
    }
    job_hooks_job_finish(&j, status);
    report_slurm_stop(&j, status);
    report_success(&j, status);
    result_write(&j, status);
    job_hooks_job_end(&j, status);
    job_free(&j);
    return status;
}
