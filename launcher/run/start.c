/* The job's state and an attempt's workers (see start.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output/lineprefix.h"
#include "output/msg.h"
#include "output/pty.h"
#include "output/torchlogs.h"
#include "job/hooks.h"
#include "run/report.h"
#include "run/start.h"
#include "run/stdin.h"
#include "stacks/channel.h"
#include "stacks/stacks.h"
#include "util/clock.h"

int job_init(struct job *j, const struct job_spec *s)
{
    memset(j, 0, sizeof *j);
    j->s = s;
    j->n = s->nproc;
    policy_init(&j->p, s->o->max_restarts);
    j->null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    j->w = calloc((size_t)j->n, sizeof *j->w);
    j->buf = malloc(READ_BUF);
    j->loop = amldist__loop_new();
    j->t_begin = now_s();
    if (j->null_fd < 0 || !j->w || !j->buf || !j->loop)
        return -1;
    for (int i = 0; i < j->n; i++) {
        j->w[i].job = j;
        j->w[i].log_out = j->w[i].log_err = -1;
        j->w[i].out.fd = j->w[i].err.fd = -1;
        j->w[i].in_fd = -1;
        j->w[i].stack_fd = -1;
        j->w[i].spawn = (struct spawn)SPAWN_NONE;
    }
    j->console_tty[0] = isatty(1);
    j->console_tty[1] = isatty(2);
    stdin_plan(j);
    job_page_init(j);
    return 0;
}

void job_free(struct job *j)
{
    job_plugins_detach(j); /* while the loop is there */
    job_stacks_cancel_all(j, 1);
    for (int i = 0; j->w && i < j->n; i++) {
        out_stream_close(&j->w[i].out);
        out_stream_close(&j->w[i].err);
        if (j->w[i].in_fd >= 0)
            close(j->w[i].in_fd);
        free(j->w[i].error_file);
        worker_close_stack(&j->w[i]);
        if (j->w[i].log_out >= 0)
            close(j->w[i].log_out);
        if (j->w[i].log_err >= 0)
            close(j->w[i].log_err);
    }
    if (j->null_fd >= 0)
        close(j->null_fd);
    amldist__loop_free(j->loop);
    free(j->w);
    free(j->buf);
    free(j->local_block);
    rundir_close(j->rd);
    job_page_free(j);
}

/* Removed at the end unless it holds redirected output (torchrun keeps its
 * temporary logs too). */
int job_open_rundir(struct job *j)
{
    const struct amlrun_opts *o = j->s->o;
    j->torch_layout = options_torchrun_layout(o);
    int base = j->torch_layout ? j->s->log_dir_fd : -1;
    int keep = j->torch_layout &&
               (std_map_any(&o->redirects) || std_map_any(&o->tee));
    j->rd = rundir_open(base, base >= 0 ? o->log_dir : NULL, o->run_id, keep,
                        o->verbose);
    if (!j->rd)
        return -1;
    report_rundir(j, keep, base);
    return 0;
}

void job_close_attempt_logs(struct job *j)
{
    for (int i = 0; j->torch_layout && i < j->n; i++) {
        if (j->w[i].log_out >= 0)
            close(j->w[i].log_out);
        if (j->w[i].log_err >= 0)
            close(j->w[i].log_err);
        j->w[i].log_out = j->w[i].log_err = -1;
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

/* Set up one stream; its pipe's (pty's) write end goes to *wr. */
static int stream_setup(struct job *j, struct worker *w, struct out_stream *s,
                        int which, int *wr)
{
    const struct amlrun_opts *o = j->s->o;
    int index = (int)(w - j->w);
    int console = rankset_has(&o->ranks, w->id.rank) &&
                  rankset_has(&o->local_ranks, w->id.local) ? which : -1;
    /* torchrun: a redirected stream goes only to its file, unless it is
     * also tee'd. */
    if (j->torch_layout && (std_map_get(&o->redirects, index) & which) &&
        !(std_map_get(&o->tee, index) & which))
        console = -1;
    /* A stream shown on a terminal is a terminal to the worker too, and
     * live (output.h); any other is a pipe, as it always was. */
    int live = console >= 0 && j->console_tty[which - 1] && !j->pty_failed;
    int p[2];
    if (live && out_pty_open(which, &p[0], &p[1]) < 0) {
        /* No pty here (no /dev/pts in a container, the kernel's limit):
         * the pipes of a console that is not a terminal, said once. */
        if (!j->pty_failed)
            msg_errno(errno, "no pseudo-terminal for the workers' output "
                             "(it goes through pipes, shown line by line)");
        j->pty_failed = 1;
        live = 0;
    }
    if (!live && pipe2(p, O_CLOEXEC) < 0)
        return -1;
    memset(s, 0, sizeof *s);
    s->fd = p[0];
    *wr = p[1];
    s->log = which == 1 ? w->log_out : w->log_err;
    s->console = console;
    s->live = live;
    int prefixed = o->prefix_streams == PREFIX_BY_TEE
                       ? std_map_get(&o->tee, index) : o->prefix_streams;
    if (o->prefix_fmt && (prefixed & which)) {
        /* torchrun's prefix on the lines torchrun prefixes (tee'd): its
         * template, else its TailLog's own "[{role}{local_rank}]:",
         * "[default0]:" (torchrun 1.13 and 2.x alike) */
        if (!o->prefix_given)
            s->prefix = torch_line_prefix(o->prefix_template
                                              ? o->prefix_template
                                              : TORCH_LINE_PREFIX,
                                          o->role, w->id.rank, w->id.local);
        else
            s->prefix = out_prefix(o->prefix_fmt, w->id.rank, w->id.local,
                                   w->id.node, j->s->host,
                                   which == 1 ? "stdout" : "stderr");
        if (!s->prefix)
            return -1;
        s->prefix_len = strlen(s->prefix);
    }
    return 0;
}

/* ---- the Python stack channel (stacks/channel.h) ---- */

void worker_close_stack(struct worker *w)
{
    if (w->stack_fd >= 0)
        close(w->stack_fd);
    w->stack_fd = -1;
}

/* A Python worker's channel: its read end in w->stack_fd, the write end
 * in *wr (inherited: spawn_req.keep_fd), named in *env.  0, or -1 with
 * errno. */
static int stack_channel(const struct job_spec *s, struct worker *w,
                         char ***env, int *wr)
{
    int fds[2];
    worker_close_stack(w);
    if (!stk_channel_wanted_argv(s->cmd->path, s->cmd->argv,
                                 s->cmd->runs_python))
        return 0;
    if (stk_channel_open(fds) < 0)
        return -1;
    if (stk_channel_env(env, fds[1]) < 0) {
        close(fds[0]);
        close(fds[1]);
        errno = ENOMEM;
        return -1;
    }
    w->stack_fd = fds[0];
    *wr = fds[1];
    return 0;
}

static void spawn_args_free(const struct job_spec *s, char **argv, char **sh,
                            char **env)
{
    command_argv_free(s->cmd, argv);
    free(sh);
    amldist_envp_free(env);
}

int start_worker(struct job *j, int index, int *status)
{
    const struct job_spec *s = j->s;
    struct worker *w = &j->w[index];
    int restarts = j->p.restarts;
    *status = AMLRUN_EXIT_SYSTEM;
    w->terminated = 0;
    w->attempt = -1;
    char **env = worker_env(s->env, index, restarts, &w->id);
    if (!env)
        return -1;
    if (index == 0 && stdin_check(j, &w->id, status) < 0) {
        amldist_envp_free(env);
        return -1;
    }
    if (job_page_worker_env(j, index, &env) < 0 ||
        job_hooks_worker_env(j, index, &env) < 0) {
        msg("out of memory starting local worker %d", index);
        amldist_envp_free(env);
        return -1;
    }
    char **argv = command_argv_for(s->cmd, w->id.local);
    char **sh = argv ? command_sh_argv(s->cmd->path, argv) : NULL;
    int wr_out = -1, wr_err = -1, wr_stack = -1, rd_in = -1, in = -1, ok = 0;
    if (!argv || !sh) {
        msg("out of memory starting local worker %d", index);
    } else if (worker_files(j, w, index) < 0) {
        /* message printed */
    } else if (amldist_envp_set(&env, "TORCHELASTIC_ERROR_FILE", w->error_file) < 0) {
        msg("out of memory starting local worker %d", index);
    } else if (stream_setup(j, w, &w->out, 1, &wr_out) < 0 ||
               stream_setup(j, w, &w->err, 2, &wr_err) < 0) {
        msg_errno(errno, "output pipes for local worker %d", index);
    } else if (stack_channel(s, w, &env, &wr_stack) < 0) {
        msg_errno(errno, "stack channel for local worker %d", index);
    } else if ((in = stdin_for(j, w, index, &rd_in)) < 0) {
        msg_errno(errno, "stdin pipe for local worker %d", index);
    } else {
        ok = 1;
    }
    if (ok && s->o->bind.report_bindings && restarts == 0)
        bind_report(s->binding, index, w->id.rank, stderr);
    if (ok) {
        struct spawn_req r = {
            .path = s->cmd->path, .argv = argv, .envp = env, .sh_argv = sh,
            .stdin_fd = in, .stdout_fd = wr_out, .stderr_fd = wr_err,
            .binding = s->binding, .local_rank = index,
            .mask = s->worker_mask, .ignore_sighup = s->o->ignore_sighup,
            .pipe_was_ignored = s->pipe_was_ignored,
            .keep_fd = wr_stack, .page_fd = job_page_fd(j),
        };
        enum spawn_stage stage = SPAWN_OK;
        int err = 0;
        if (spawn_begin(&r, &w->spawn, &stage, &err) == 0) {
            /* The child may read them until start_worker_end. */
            w->spawn_argv = argv;
            w->spawn_sh = sh;
            w->spawn_env = env;
            argv = sh = env = NULL;
        } else {
            *status = report_start_failure(j, w, stage, err);
            ok = 0;
        }
    }
    if (wr_out >= 0)
        close(wr_out);
    if (wr_err >= 0)
        close(wr_err);
    if (wr_stack >= 0)
        close(wr_stack);
    if (rd_in >= 0)
        close(rd_in);
    if (!ok) {
        out_stream_close(&w->out);
        out_stream_close(&w->err);
        worker_close_stack(w);
        stdin_worker_end(j, w);
    }
    spawn_args_free(s, argv, sh, env);
    return ok ? 0 : -1;
}

int start_worker_end(struct job *j, int index, int report, int *status)
{
    struct worker *w = &j->w[index];
    enum spawn_stage stage = SPAWN_OK;
    int err = 0;
    pid_t pid = w->spawn.pid;
    int rc = spawn_end(&w->spawn, &stage, &err);
    spawn_args_free(j->s, w->spawn_argv, w->spawn_sh, w->spawn_env);
    w->spawn_argv = w->spawn_sh = w->spawn_env = NULL;
    if (rc == 0) {
        w->pid = pid;
        w->running = 1;
        w->t_start = now_s();
        w->start_ns = amldist__now_ns();
        w->end_ns = 0;
        j->live++;
        w->attempt = j->p.restarts;
        job_hooks_worker_start(j, w);
        return 0;
    }
    *status = report ? report_start_failure(j, w, stage, err)
                     : AMLRUN_EXIT_SYSTEM;
    out_stream_close(&w->out);
    out_stream_close(&w->err);
    worker_close_stack(w);
    stdin_worker_end(j, w);
    return -1;
}
