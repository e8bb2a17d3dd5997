/* The supervisor's messages and the end-of-job summary (see report.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "output/exitstatus.h"
#include "output/json.h"
#include "output/msg.h"
#include "output/rootcause.h"
#include "output/torchlogs.h"
#include "run/events.h"
#include "run/hangwatch.h"
#include "run/report.h"

static const char *plural(int n)
{
    return n == 1 ? "" : "s";
}

void report_worker_end(const struct job *j, struct worker *w,
                       int first_failure)
{
    char what[96];
    w->t_done = now_s();
    /* torchrun's TERMINATED: stopped by the agent, not a failure of its
     * own (the first failure itself has just begun the stop). */
    w->terminated = !first_failure && (j->p.phase == PHASE_STOPPING ||
                                       j->p.phase == PHASE_KILLING);
    events_worker_exit(j, w);
    if (first_failure)
        events_failure(j, w, NULL);
    if (!first_failure) {
        if (j->s->o->verbose) {
            status_describe(w->status, what, sizeof what);
            msg("rank %d (local %d, pid %d): %s", w->id.rank, w->id.local,
                (int)w->pid, what);
        }
        return;
    }
    status_describe(w->status, what, sizeof what);
    msg("rank %d (local %d, pid %d, host %s): %s after %.2f s", w->id.rank,
        w->id.local, (int)w->pid, j->s->host, what, now_s() - w->t_start);
}

/* ", rank 3" or ", ranks 0-2,5": the ranks still running, for the
 * messages that stop them. */
static void still_running(const struct job *j, char *buf, size_t size)
{
    char list[256];
    running_ranks(j, list, sizeof list);
    snprintf(buf, size, ", rank%s %s", plural(j->live), list);
}

void report_stopping_others(const struct job *j)
{
    char ranks[272];
    if (j->live > 0)
        events_stop(j, "failure", SIGTERM);
    if (j->live > 0 && !j->s->o->quiet) {
        still_running(j, ranks, sizeof ranks);
        msg("stopping the other %d worker%s%s (SIGTERM, SIGKILL after %g s)",
            j->live, plural(j->live), ranks, j->s->o->term_timeout);
    }
}

void report_stopping(const struct job *j, const char *why, enum action a)
{
    char ranks[272];
    if (a != ACT_STOP || j->live == 0)
        return;
    events_stop(j, why, SIGTERM);
    still_running(j, ranks, sizeof ranks);
    msg("%s: stopping the %d worker%s%s (SIGTERM, SIGKILL after %g s)", why,
        j->live, plural(j->live), ranks, j->s->o->term_timeout);
}

void report_waiting(const struct job *j, double waited)
{
    char what[512];
    int pids = j->live <= 4;
    size_t o = 0;
    if (!pids) {
        char list[256];
        running_ranks(j, list, sizeof list);
        snprintf(what, sizeof what, "%d ranks (%s, node %d)", j->live, list,
                 j->w[0].id.node);
    } else {
        /* Few: each with its pid, as `ps` or `py-spy dump` want it. */
        const char *sep = "";
        char pidl[128] = "";
        size_t po = 0;
        int node = -1;
        o = (size_t)snprintf(what, sizeof what, "rank%s ", plural(j->live));
        for (int i = 0; i < j->n; i++) {
            const struct worker *w = &j->w[i];
            if (!w->running)
                continue;
            node = w->id.node;
            o += (size_t)snprintf(what + o, sizeof what - o, "%s%d", sep,
                                  w->id.rank);
            po += (size_t)snprintf(pidl + po, sizeof pidl - po, "%s%d", sep,
                                   (int)w->pid);
            sep = ",";
        }
        snprintf(what + o, sizeof what - o, " (node %d, pid%s %s)", node,
                 plural(j->live), pidl);
    }
    msg("%d of %d ranks done; waiting for %s for %.0f s", j->n - j->live,
        j->n, what, waited);
}

void report_success(const struct job *j, int status)
{
    amldist_rdzv_t *rz = j->s->rz;
    if (status != 0 || j->s->o->quiet || j->n == 0 ||
        (rz && amldist_rdzv_node_rank(rz) != 0))
        return;
    /* With a control plane, node 0 speaks for the job: its ranks. */
    int ranks = rz ? j->w[0].id.world : j->n;
    msg("%d rank%s exited 0 in %.1f s (restarts %d)", ranks, plural(ranks),
        now_s() - j->t_begin, j->p.restarts);
}

/* For an agent above amlrun (torchrun's TORCHELASTIC_ERROR_FILE): the
 * hang as torch's error file says a failure, its message and a
 * timestamp. */
static void hang_error_file(const char *why, const char *path)
{
    char ts[24];
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    FILE *f = fopen(path, "we");
    struct json js;
    int bad = !f;
    if (f) {
        json_begin(&js, f);
        json_object(&js, NULL);
        json_object(&js, "message");
        json_str(&js, "message", why);
        json_object(&js, "extraInfo");
        json_str(&js, "py_callstack", "");
        json_str(&js, "timestamp", ts);
        json_close(&js);
        json_int(&js, "errorCode", AMLRUN_EXIT_HANG);
        bad = json_end(&js) < 0;
        bad |= fclose(f) != 0;
    }
    if (bad)
        msg_errno(errno, "TORCHELASTIC_ERROR_FILE %s", path);
}

void report_hang_end(const struct job *j, int status)
{
    const char *path = j->s->o->hang_report;
    if (!j->hang_why[0] || status != AMLRUN_EXIT_HANG)
        return;
    char why[sizeof j->hang_why + PATH_MAX + 32];
    snprintf(why, sizeof why, "%s%s%s", j->hang_why,
             path ? "; the stacks in " : "", path ? path : "");
    msg("job failed (exit status %d): %s", status, why);
    const char *agent = getenv("TORCHELASTIC_ERROR_FILE");
    if (agent && *agent)
        hang_error_file(why, agent);
}

void report_tell_hang(const struct job *j, double idle)
{
    char text[256];
    snprintf(text, sizeof text, "amlrun:   host %s: hang: no progress for "
             "%.1f s (--hang-timeout %g)\n", j->s->host, idle,
             j->s->o->hang_timeout);
    if (j->s->rz && amldist_rdzv_fail(j->s->rz, 0, -1, AMLRUN_EXIT_HANG,
                                      text) < 0)
        msg("telling the other nodes: %s", amldist_last_error());
}

/* Workers run in background process groups: one that reads the terminal
 * stops with SIGTTIN (SIGTTOU: writes to it under `stty tostop`, or changes
 * its settings) and would wait there for ever, so that is said, once. */
void report_worker_stopped(const struct job *j, struct worker *w, int sig)
{
    char name[32];
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

int report_start_failure(const struct job *j, const struct worker *w,
                         enum spawn_stage stage, int err)
{
    events_failure(j, w, stage == SPAWN_EXEC ? "cannot run the command"
                         : stage == SPAWN_BIND ? "binding failed"
                                               : "cannot start the worker");
    if (stage == SPAWN_EXEC) {
        char why[PATH_MAX + 64];
        msg("rank %d (local %d): cannot run %s: %s", w->id.rank, w->id.local,
            j->s->cmd->path,
            command_exec_error(j->s->cmd->path, err, why, sizeof why));
        return err == ENOENT ? AMLRUN_EXIT_NOTFOUND : AMLRUN_EXIT_NOEXEC;
    }
    msg_errno(err, "rank %d (local %d): %s", w->id.rank, w->id.local,
              stage == SPAWN_BIND ? "binding failed"
                                  : "cannot start the worker");
    return AMLRUN_EXIT_SYSTEM;
}

void report_started(const struct job *j)
{
    events_attempt_started(j);
    if (j->s->o->verbose)
        msg("started %d worker%s", j->n, plural(j->n));
}

void report_stop_signal(const struct job *j, int sig, enum action a)
{
    char name[32];
    signal_name(sig, name, sizeof name);
    if (a != ACT_NONE)
        events_stop(j, "signal", sig);
    if (a == ACT_STOP || a == ACT_PASS) {
        /* The first stop request: it ends the job on every node. */
        char why[64];
        snprintf(why, sizeof why, "%s received: the job stops", name);
        report_tell_final(j, policy_stopped_status(sig), why);
        char ranks[272];
        if (!j->s->o->quiet && j->live > 0) {
            still_running(j, ranks, sizeof ranks);
            msg("%s received: stopping %d worker%s%s (SIGKILL after %g s)",
                name, j->live, plural(j->live), ranks,
                j->s->o->term_timeout);
        }
        else if (!j->s->o->quiet)
            msg("%s", why);
    } else if (a == ACT_KILL) {
        /* A second stop request means "now". */
        msg("%s received again: killing %d worker%s", name, j->live,
            plural(j->live));
    }
}

void report_deadline(const struct job *j)
{
    events_stop(j, "deadline", SIGKILL);
    msg("%d worker%s still running %g s after SIGTERM: sending SIGKILL",
        j->live, plural(j->live), j->s->o->term_timeout);
}

void report_peer_stop(const struct job *j)
{
    events_stop(j, "peer", SIGTERM);
    char ranks[272];
    still_running(j, ranks, sizeof ranks);
    if (!j->s->o->quiet)
        msg("stopping the %d worker%s of this node%s (SIGTERM, SIGKILL "
            "after %g s): %s", j->live, plural(j->live), ranks,
            j->s->o->term_timeout, amldist_rdzv_stop_reason(j->s->rz));
}

void report_restart(const struct job *j)
{
    events_restart(j, j->p.restarts);
    if (!j->s->o->quiet)
        msg("restarting the %d worker%s of this node (restart %d of %d)",
            j->n, plural(j->n), j->p.restarts, j->s->o->max_restarts);
}

void report_round(const struct job *j, int restarts)
{
    amldist_rdzv_t *rz = j->s->rz;
    if (restarts > j->p.restarts)
        events_restart(j, restarts);
    events_rendezvous(j);
    if (!j->s->o->quiet && restarts > j->p.restarts)
        msg("restarting the workers of all %d nodes (restart %d of %d; "
            "this node is node %d)", amldist_rdzv_num_nodes(rz), restarts,
            j->s->o->max_restarts, amldist_rdzv_node_rank(rz));
    else if (!j->s->o->quiet)
        msg("the job re-forms with %d nodes (this node is node %d): "
            "restarting the workers", amldist_rdzv_num_nodes(rz),
            amldist_rdzv_node_rank(rz));
}

void report_rundir(const struct job *j, int keep, int base)
{
    const struct amlrun_opts *o = j->s->o;
    if ((keep && base < 0 && !o->quiet) || o->verbose)
        msg("%s in %s", keep ? "log files (torchrun's layout)" : "error files",
            rundir_path(j->rd));
}

static struct failure failure_of(const struct job *j, const struct worker *w)
{
    struct failure f = {
        .rank = w->id.rank, .local = w->id.local, .pid = w->pid,
        .status = w->status, .host = j->s->host, .when = w->t_end,
        .error_file = w->error_file,
    };
    return f;
}

/* The file that holds all of a worker's stream (1 stdout, 2 stderr), if
 * one exists now: --log-dir's rank<R>.std*, or in torchrun's layout the
 * std*.log beside its error file (-r, --tee).  Never a name for a file
 * that is not there. */
static int log_path(const struct job *j, const struct worker *w, int which,
                    char *buf, size_t size)
{
    const char *name = which == 1 ? "stdout" : "stderr";
    int n = -1;
    if (!j->torch_layout && j->s->log_dir_fd >= 0) {
        n = snprintf(buf, size, "%s/rank%d.%s", j->s->o->log_dir,
                     w->id.rank, name);
    } else if (j->torch_layout && w->error_file) {
        const char *slash = strrchr(w->error_file, '/');
        if (slash)
            n = snprintf(buf, size, "%.*s/%s.log",
                         (int)(slash - w->error_file), w->error_file, name);
    }
    return n > 0 && (size_t)n < size && access(buf, F_OK) == 0 ? 0 : -1;
}

/* A failing worker's last lines, the same in the job's summary on one node
 * and on many: on many (all) always, since the summary is printed
 * elsewhere; on one node those of a stream the console did not show
 * (--ranks, -r), or its error would be shown nowhere.  Then the log file
 * that holds the rest, where there is one. */
static void put_tails(FILE *m, const struct job *j, const struct worker *w,
                      int all)
{
    static const struct { int which, lines; } streams[] = {{2, 10}, {1, 5}};
    for (size_t i = 0; i < sizeof streams / sizeof streams[0]; i++) {
        int which = streams[i].which;
        const struct out_stream *s = which == 1 ? &w->out : &w->err;
        if (!all && s->console >= 0)
            continue;
        char tail[OUT_TAIL_MAX + 512], path[PATH_MAX];
        out_stream_tail(s, "amlrun:   | ", streams[i].lines, tail,
                        sizeof tail);
        const char *name = which == 1 ? "stdout" : "stderr";
        if (*tail)
            fprintf(m, "amlrun:   last lines of its %s:\n%s", name, tail);
        if (*tail && log_path(j, w, which, path, sizeof path) == 0)
            fprintf(m, "amlrun:   all of its %s: %s\n", name, path);
        else if (*tail && !all)
            fprintf(m, "amlrun:   (no more of its %s was kept: %s keeps "
                    "all of it)\n", name, j->torch_layout
                        ? "in torchrun's layout, -r or --tee"
                        : "--log-dir DIR");
    }
}

/* This node's first failure, for the job: its root cause block and last
 * lines go to the host, which stops every node and has node 0 print them. */
void report_tell_failure(struct job *j, const struct worker *w)
{
    char what[96], head[256];
    status_describe(w->status, what, sizeof what);
    snprintf(head, sizeof head, "amlrun:   rank %d (local %d, pid %d) on "
             "host %s: %s\n", w->id.rank, w->id.local, (int)w->pid,
             j->s->host, what);
    struct failure f = failure_of(j, w);
    free(j->local_block);
    j->local_block = rootcause_text(&f, getenv("TORCHELASTIC_ERROR_FILE"));
    if (w->error_file && access(w->error_file, F_OK) == 0)
        rundir_keep(j->rd);
    char *sum = NULL;
    size_t size = 0;
    FILE *m = open_memstream(&sum, &size);
    if (m) {
        fprintf(m, "%s%s", head, j->local_block ? j->local_block : "");
        put_tails(m, j, w, 1);
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

void report_tell_final(const struct job *j, int status, const char *why)
{
    char text[512];
    snprintf(text, sizeof text, "amlrun:   host %s: %s\n", j->s->host, why);
    if (j->s->rz &&
        amldist_rdzv_fail(j->s->rz, AMLDIST_RDZV_FINAL, -1, status, text) < 0)
        msg("telling the other nodes: %s", amldist_last_error());
}

void report_root_cause(struct job *j)
{
    const struct worker *w = &j->w[j->p.fail];
    struct failure f = failure_of(j, w);
    /* Like torchrun's own @record: an agent above amlrun that gave it an
     * error file gets the root cause's. */
    char *block = rootcause_text(&f, getenv("TORCHELASTIC_ERROR_FILE"));
    char *text = NULL;
    size_t size = 0;
    FILE *m = block ? open_memstream(&text, &size) : NULL;
    if (m) {
        fputs(block, m);
        put_tails(m, j, w, 0);
        if (fclose(m) != 0) {
            free(text);
            text = NULL;
        }
    }
    /* One write: the block stays whole beside other writers. */
    if (text || block)
        (void)write_all(2, text ? text : block, strlen(text ? text : block));
    free(text);
    free(block);
    /* The summary names the error file: it must still be there to read. */
    if (w->error_file && access(w->error_file, F_OK) == 0)
        rundir_keep(j->rd);
}

void report_job(const struct job *j, int status)
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

void report_slurm_stop(const struct job *j, int status)
{
    const struct policy *p = &j->p;
    if (p->stop_signal && p->fail < 0 && p->start_status < 0 &&
        status != 128 + p->stop_signal && j->s->o->verbose)
        msg("stopped by SIGTERM as one of the tasks of Slurm step %s: exit "
            "status 1, so that srun's (its tasks' highest) is the failing "
            "task's", getenv("SLURM_STEP_ID") ? getenv("SLURM_STEP_ID")
                                              : getenv("SLURM_STEPID"));
}
