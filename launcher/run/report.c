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
#include "stacks/channel.h"
#include "job/hooks.h"
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

void report_stopping_others(struct job *j)
{
    char ranks[272];
    if (j->live > 0)
        job_hooks_stopping(j, STOP_FAILURE, SIGTERM);
    if (j->live > 0 && !j->s->o->quiet) {
        still_running(j, ranks, sizeof ranks);
        msg("stopping the other %d worker%s%s (SIGTERM, SIGKILL after %g s)",
            j->live, plural(j->live), ranks, j->s->o->term_timeout);
    }
}

void report_stopping(struct job *j, enum stop_reason r, enum action a)
{
    char ranks[272];
    if (a != ACT_STOP || j->live == 0)
        return;
    job_hooks_stopping(j, r, SIGTERM);
    still_running(j, ranks, sizeof ranks);
    msg("%s: stopping the %d worker%s%s (SIGTERM, SIGKILL after %g s)",
        stop_row(r)->name,
        j->live, plural(j->live), ranks, j->s->o->term_timeout);
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
    if (!j->stop_why[0] || status != AMLRUN_EXIT_HANG)
        return;
    char why[sizeof j->stop_why + PATH_MAX + 32];
    snprintf(why, sizeof why, "%s%s%s", j->stop_why,
             path ? "; the stacks in " : "", path ? path : "");
    msg("job failed (exit status %d): %s", status, why);
    const char *agent = getenv("TORCHELASTIC_ERROR_FILE");
    if (agent && *agent)
        hang_error_file(why, agent);
}

void report_tell_round_failure(const struct job *j, int status,
                               const char *text)
{
    if (j->s->rz && amldist_rdzv_fail(j->s->rz, 0, -1, status, text) < 0)
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

int report_start_failure(struct job *j, const struct worker *w,
                         enum spawn_stage stage, int err)
{
    job_hooks_start_failed(j, w,
                           stage == SPAWN_EXEC   ? "cannot run the command"
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
    if (j->s->o->verbose)
        msg("started %d worker%s", j->n, plural(j->n));
}

void report_stop_signal(struct job *j, int sig, enum action a)
{
    char name[32];
    signal_name(sig, name, sizeof name);
    if (a != ACT_NONE)
        job_hooks_stopping(j, STOP_SIGNAL, sig);
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

void report_deadline(struct job *j)
{
    job_hooks_stopping(j, STOP_DEADLINE, SIGKILL);
    msg("%d worker%s still running %g s after SIGTERM: sending SIGKILL",
        j->live, plural(j->live), j->s->o->term_timeout);
}

void report_peer_stop(struct job *j)
{
    job_hooks_stopping(j, STOP_PEER, SIGTERM);
    char ranks[272];
    still_running(j, ranks, sizeof ranks);
    if (!j->s->o->quiet)
        msg("stopping the %d worker%s of this node%s (SIGTERM, SIGKILL "
            "after %g s): %s", j->live, plural(j->live), ranks,
            j->s->o->term_timeout, amldist_rdzv_stop_reason(j->s->rz));
}

void report_restart(struct job *j)
{
    job_hooks_round(j, j->p.restarts, 0);
    if (!j->s->o->quiet)
        msg("restarting the %d worker%s of this node (restart %d of %d)",
            j->n, plural(j->n), j->p.restarts, j->s->o->max_restarts);
}

void report_round(struct job *j, int restarts)
{
    amldist_rdzv_t *rz = j->s->rz;
    job_hooks_round(j, restarts > j->p.restarts ? restarts : -1, 1);
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
        .python = stk_is_python(j->s->cmd->path, j->s->cmd->runs_python),
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
        (void)msg_write(text ? text : block, strlen(text ? text : block));
    free(text);
    free(block);
    /* The summary names the error file: it must still be there to read. */
    if (w->error_file && access(w->error_file, F_OK) == 0)
        rundir_keep(j->rd);
}

/* Another node's failure text: its first line as it is, each line after
 * it in amlrun's block margin, whatever it begins with (that node's own
 * "amlrun: " lines, its root cause block's head, indented into it).  The
 * library has escaped its control characters (amldist_rdzv(3)), so with
 * the margin no line of it can pass for one of amlrun's own. */
static void put_margined(FILE *m, const char *text)
{
    static const char margin[] = "amlrun:   ";
    size_t n = strcspn(text, "\n");
    fprintf(m, "%.*s\n", (int)n, text);
    for (text += n; *text == '\n' && text[1]; text += n) {
        const char *line = ++text, *pre = margin;
        n = strcspn(text, "\n");
        if (!strncmp(line, margin, sizeof margin - 1))
            pre = ""; /* in the margin already */
        else if (!strncmp(line, "amlrun:", 7))
            for (line += 7; *line == ' '; line++) {
            } /* its own prefix, dropped */
        fprintf(m, "%s%.*s\n", pre, (int)(n - (size_t)(line - text)), line);
    }
}

void report_job(const struct job *j, int status)
{
    amldist_rdzv_t *rz = j->s->rz;
    if (status == 0)
        return;
    int node0 = amldist_rdzv_node_rank(rz) == 0;
    if (node0 || status == AMLDIST_RDZV_STATUS_LOST) {
        char *text = NULL;
        size_t size = 0;
        FILE *m = open_memstream(&text, &size);
        if (m) {
            fprintf(m, "amlrun: job failed (exit status %d): first failure: ",
                    status);
            put_margined(m, amldist_rdzv_failure(rz));
            /* One write: the block stays whole beside other writers. */
            if (fclose(m) == 0)
                (void)msg_write(text, size);
        }
        free(text);
    }
    if (!node0 && j->local_block)
        (void)msg_write(j->local_block, strlen(j->local_block));
}

void report_not_done(const struct job *j, int status)
{
    const char *why = amldist_rdzv_stop_reason(j->s->rz);
    msg("the job's host at %s ended the job as a success, but this node's "
        "workers did not all succeed (%s): exit status %d%s%s",
        j->s->env->ctl->endpoint,
        j->p.peer_stopped ? "amlrun stopped them for the host"
                          : "they failed or were stopped here",
        status, why && *why ? "; the host's reason: " : "",
        why && *why ? why : "");
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
