/* Per-process mode: exec in place (see inplace.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dryrun.h"
#include "inplace.h"
#include "msg.h"
#include "workerenv.h"

extern char **environ;

/* Options that only mean something when amlrun supervises workers. */
static void warn_ignored(const struct amlrun_opts *o)
{
    if (o->quiet)
        return;
    if (o->prefix_fmt || o->log_dir || o->ranks.n || o->local_ranks.n)
        msg("per-process mode: output options have no effect (the command "
            "runs in place of amlrun)");
    if (o->max_restarts > 0)
        msg("per-process mode: --max-restarts has no effect (the launcher "
            "that started amlrun decides)");
}

int inplace_run(const struct amlrun_opts *o, const struct plan *p,
                const struct command *c)
{
    warn_ignored(o);
    int nlocal = amldist_local_world_size(p->layout);
    int local = amldist_local_rank(p->layout);
    if (nlocal < 1 || local < 0) {
        msg("per-process mode: the launcher's layout has no local rank "
            "(source %s); use --nproc-per-node", amldist_source(p->layout));
        return AMLRUN_EXIT_USAGE;
    }
    struct amlrun_binding *b = NULL;
    struct amlrun_bind_opts bo = o->bind;
    bo.per_process = 1; /* plan the whole node, not our own cpuset */
    if (bind_setup(&bo, nlocal, NULL, &b) < 0)
        return AMLRUN_EXIT_USAGE;
    struct env_spec es = {o, p->layout, 0, environ, b, 0};
    struct worker_id id;
    int rc = AMLRUN_EXIT_SYSTEM;
    char **env = worker_env(&es, 0, 0, &id);
    char **argv = env ? command_argv_for(c, id.local) : NULL;
    char **sh = argv ? command_sh_argv(c->path, argv) : NULL;
    if (!sh)
        goto out;
    if (o->bind.report_bindings)
        bind_report(b, id.local, id.rank, stderr);
    if (o->dry_run) {
        printf("amlrun: mode: %s\n", p->why);
        dryrun_line(stdout, &id, env, environ, c->path, argv, o->verbose);
        rc = 0;
        goto out;
    }
    if (o->verbose)
        msg("mode: %s", p->why);
    int err = bind_apply_child(b, id.local);
    if (err) {
        msg_errno(err, "rank %d (local %d): binding failed", id.rank, id.local);
        goto out;
    }
    fflush(NULL);
    execve(c->path, argv, env);
    err = errno;
    if (err == ENOEXEC) {
        execve("/bin/sh", sh, env);
        err = errno;
    }
    char why[PATH_MAX + 64];
    msg("rank %d (local %d): cannot run %s: %s", id.rank, id.local, c->path,
        command_exec_error(c->path, err, why, sizeof why));
    rc = err == ENOENT ? AMLRUN_EXIT_NOTFOUND : AMLRUN_EXIT_NOEXEC;
out:
    free(sh);
    command_argv_free(c, argv);
    amldist_envp_free(env);
    bind_free(b);
    return rc;
}
