/* Per-process mode: exec in place (see inplace.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "run/dryrun.h"
#include "run/inplace.h"
#include "output/msg.h"
#include "worker/workerenv.h"

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
    if (o->event_log || o->event_console || o->signals_to_handle)
        msg("per-process mode: --event-log, --event-log-handler and "
            "--signals-to-handle have no effect (no supervisor: the command "
            "runs in place of amlrun)");
    if (o->hang_timeout > 0 || o->timeout > 0 || o->hang_report)
        msg("per-process mode: --hang-timeout, --hang-report and --timeout "
            "have no effect (no supervisor: the command runs in place of "
            "amlrun; give them to a per-node amlrun)");
}

/*
 * The launcher does not say how many ranks share the node (Azure ML's
 * PyTorch distribution, launch.py's workers: RANK, LOCAL_RANK, no
 * LOCAL_WORLD_SIZE).  Binding divides the node among its ranks, so it needs
 * that number: take one rank per usable GPU, which is how such jobs are
 * laid out, when this rank's local rank names one of them.  Otherwise
 * nothing can be divided safely: 1 with *nlocal set, or 0 (run unbound).
 */
static int plan_size_unknown(const struct amlrun_opts *o, const struct plan *p,
                             int local, amldist_topo_t **topo, int *nlocal)
{
    char words[LIBWORDS_MAX];
    const char *why = plan_explain(p, AMLDIST_FIELD_LOCAL_WORLD_SIZE, words);
    int gpus = 0;
    if (amldist_topo_load(topo, o->bind.topology, 0) == 0)
        gpus = amldist_topo_num_gpus(*topo);
    if (gpus > local) {
        *nlocal = gpus;
        if (o->verbose)
            msg("per-process mode: LOCAL_WORLD_SIZE is not known (%s): "
                "binding plans one rank per GPU (%d)", why, gpus);
        return 1;
    }
    /* Without GPUs every rank comes here: one says so for the node.  A rank
     * beyond the GPUs says so itself. */
    if ((local == 0 || gpus > 0) && !o->quiet)
        msg("warning: per-process mode: LOCAL_WORLD_SIZE is not known (%s) "
            "and %s: running unbound (set LOCAL_WORLD_SIZE to bind)", why,
            gpus > 0 ? "this rank's local rank is beyond the node's GPUs"
                     : "there is no GPU to count ranks by");
    *nlocal = local + 1;
    return 0;
}

int inplace_run(const struct amlrun_opts *o, const struct plan *p,
                const struct command *c)
{
    warn_ignored(o);
    int nlocal = amldist_local_world_size(p->layout);
    int local = amldist_local_rank(p->layout);
    struct amlrun_binding *b = NULL;
    amldist_topo_t *topo = NULL;
    struct amlrun_bind_opts bo = o->bind;
    bo.per_process = 1; /* plan the whole node, not our own cpuset */
    int bind = nlocal > 0 || plan_size_unknown(o, p, local, &topo, &nlocal);
    if (bind && bind_setup(&bo, nlocal, topo, &b) < 0) {
        amldist_topo_free(topo);
        return AMLRUN_EXIT_USAGE;
    }
    struct env_spec es = {o, p->layout, 0, environ, b, 0, NULL, 0};
    es.torch = workers_torch(c, environ);
    struct worker_id id;
    int rc = AMLRUN_EXIT_SYSTEM;
    char **env = worker_env(&es, 0, 0, &id);
    char **argv = env ? command_argv_for(c, id.local) : NULL;
    char **sh = argv ? command_sh_argv(c->path, argv) : NULL;
    if (!sh)
        goto out;
    if (o->bind.report_bindings)
        bind_report(b, id.local, id.rank, stderr);
    if (o->dry_run == OPT_JSON) {
        rc = dryrun_json(o, p, c, &es, b, stdout);
        goto out;
    }
    if (o->dry_run) {
        printf("amlrun: mode: %s\n", p->why);
        printf("amlrun: command: %s\n", c->how);
        dryrun_line(stdout, &id, env, environ, c->path, argv, o->verbose);
        rc = 0;
        /* Every process plans the whole node: local rank 0 draws it. */
        if (o->bind.output && id.local == 0 &&
            bind_picture(b, o->bind.output) < 0)
            rc = AMLRUN_EXIT_SYSTEM;
        goto out;
    }
    if (o->verbose) {
        msg("mode: %s", p->why);
        msg("command: %s", c->how);
    }
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
    amldist_topo_free(topo);
    return rc;
}
