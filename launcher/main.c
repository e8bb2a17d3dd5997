/*
 * amlrun: start a distributed training job.  This file only composes the
 * parts: options, the mode decision, per-process exec in place, and the
 * per-node supervisor with its signal set-up.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "amldist.h"
#include "cli/mode.h"
#include "cli/options.h"
#include "cli/optparse.h"
#include "contain/guard.h"
#include "head/headnode.h"
#include "output/msg.h"
#include "output/output.h"
#include "query/client.h"
#include "query/early.h"
#include "worker/command.h"
#include "worker/control.h"
#include "run/dryrun.h"
#include "run/plugins.h"
#include "run/inplace.h"
#include "worker/jobtoken.h"
#include "worker/spawn.h"
#include "run/result.h"
#include "run/supervise.h"
#include "worker/workerenv.h"

extern char **environ;

/* Started with a standard descriptor closed, our first pipe would become
 * fd 1 and a worker's output would land in the wrong place. */
static void ensure_std_fds(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) < 0)
            _exit(AMLRUN_EXIT_SYSTEM);
}

static int dry_run_node(const struct amlrun_opts *o, const struct plan *p,
                        const struct command *c, struct env_spec *es,
                        const struct amlrun_binding *b)
{
    printf("amlrun: mode: %s; %d worker%s on this node\n", p->why, p->nproc,
           p->nproc == 1 ? "" : "s");
    if (p->topo)
        printf("amlrun: GPUs: %s\n", amldist_topo_gpu_note(p->topo));
    printf("amlrun: command: %s\n", c->how);
    fflush(stdout);
    for (int i = 0; i < p->nproc; i++) {
        struct worker_id id;
        char **env = worker_env(es, i, 0, &id);
        if (!env)
            return AMLRUN_EXIT_SYSTEM;
        char **argv = command_argv_for(c, id.local);
        if (!argv) {
            amldist_envp_free(env);
            return AMLRUN_EXIT_SYSTEM;
        }
        if (o->bind.report_bindings)
            bind_report(b, i, id.rank, stdout);
        dryrun_line(stdout, &id, env, environ, c->path, argv, o->verbose);
        command_argv_free(c, argv);
        amldist_envp_free(env);
    }
    return 0;
}

/* Block the signals the supervisor reads from its signalfd.  Stop signals
 * that were ignored when amlrun started (nohup, `cmd &` in a script) stay
 * ignored, for amlrun and its workers alike.  SIGXFSZ is blocked too, and
 * read and dropped: a log write past `ulimit -f` then fails with EFBIG,
 * which amlrun reports, instead of killing it.  Blocking rather than
 * ignoring leaves nothing to undo in the workers: they start with the
 * mask and dispositions amlrun was started with. */
static int setup_signals(const struct amlrun_opts *o, sigset_t *orig,
                         int *pipe_was_ignored)
{
    static const int handled[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
                                  SIGUSR1, SIGUSR2, SIGWINCH, SIGCHLD,
                                  SIGXFSZ, SIGTSTP, SIGCONT, SIGALRM,
                                  SIGPWR,  SIGXCPU, SIGVTALRM, SIGPROF};
    sigset_t set;
    sigemptyset(&set);
    struct sigaction sa = {0}, old;
    sa.sa_handler = SIG_IGN;
    if (o->ignore_sighup)
        sigaction(SIGHUP, &sa, NULL);
    for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++) {
        int sig = handled[i];
        /* A signal --signals-to-handle does not list keeps its default
         * action, as in torchrun 2.x (see amlrun(1)). */
        if (!sig_stops_job(o, sig) && !sig_forwarded(o, sig) &&
            !sig_job_control(sig) && sig != SIGCHLD && sig != SIGXFSZ)
            continue;
        if ((sig_stops_job(o, sig) || sig_job_control(sig)) &&
            sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaddset(&set, sig);
    }
    sigaction(SIGPIPE, &sa, &old);
    *pipe_was_ignored = old.sa_handler == SIG_IGN;
    if (sigprocmask(SIG_BLOCK, &set, orig) < 0)
        return -1;
    return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* --dry-run's line of a rendezvous backend: where the nodes meet (port 0:
 * none given, etcd's list or its default port). */
static void say_rendezvous(const struct amlrun_opts *o)
{
    char port[16] = "";
    if (o->endpoint_port)
        snprintf(port, sizeof port, ":%d", o->endpoint_port);
    printf("amlrun: rendezvous: %s at %s%s; the node rank comes from it, "
           "shown here as for a node alone\n", o->rdzv_backend, o->owned_addr,
           port);
}

/* Join the job's control plane (control_join), --status answering from
 * before it: from a thread of the socket's own, stopped before anything
 * forks (query/early.h). */
static int join_answering(const struct amlrun_opts *o, const struct plan *p,
                          struct amlrun_binding *b, struct control *ctl)
{
    struct qearly_job ej = {o->run_id, o->cmd, o->ncmd,
                            o->nnodes > 0 ? o->nnodes
                                          : amldist_world_size(p->layout)};
    qearly_start(&ej, o->verbose, o->quiet, 1);
    int rc = control_join(o, p, b, ctl);
    qearly_pause();
    return rc;
}

static int node_job(const struct amlrun_opts *o, const struct plan *p,
                    const struct command *c)
{
    struct amlrun_binding *b = NULL;
    if (bind_setup(&o->bind, p->nproc, p->topo, &b) < 0) {
        control_fail_early(o, p, AMLRUN_EXIT_USAGE);
        return AMLRUN_EXIT_USAGE;
    }
    if (o->verbose && !o->bind.report_bindings)
        bind_say_locality(b, stderr);
    struct env_spec es = {o, p->layout, p->nproc, environ, b, 0, NULL, 0};
    es.torch = workers_torch(c, environ);
    if (o->verbose && es.torch)
        msg("torch %d.%d under %s", es.torch / 1000, es.torch % 1000, c->path);
    int rc;
    if (o->dry_run) {
        if (options_c10d(o) && o->dry_run != OPT_JSON)
            say_rendezvous(o);
        rc = o->dry_run == OPT_JSON ? dryrun_json(o, p, c, &es, b, stdout)
                                    : dry_run_node(o, p, c, &es, b);
        if (rc == 0 && o->bind.output && bind_picture(b, o->bind.output) < 0)
            rc = AMLRUN_EXIT_SYSTEM;
        bind_free(b);
        return rc;
    }
    if (o->verbose)
        msg("mode: %s; %d worker%s on this node", p->why, p->nproc,
            p->nproc == 1 ? "" : "s");
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    /* Before the rendezvous: a log that cannot be opened is an error at
     * once, and the job's first event comes first. */
    struct eventlog *events = NULL;
    if ((o->result_json && result_check("--result-json", o->result_json) < 0) ||
        (o->hang_report && result_check("--hang-report", o->hang_report) < 0)) {
        control_fail_early(o, p, AMLRUN_EXIT_USAGE);
        bind_free(b);
        return AMLRUN_EXIT_USAGE;
    }
    if (o->event_log && !(events = eventlog_open(o->event_log))) {
        control_fail_early(o, p, AMLRUN_EXIT_USAGE);
        bind_free(b);
        return AMLRUN_EXIT_USAGE;
    }
    plugins_job_start(events, o, host,
                     options_c10d(o) ? -1 : amldist_node_rank(p->layout),
                     p->nproc, c->path);
    struct control ctl;
    if ((rc = join_answering(o, p, b, &ctl)) >= 0) {
        eventlog_close(events);
        bind_free(b);
        return rc;
    }
    es.ctl = &ctl;
    if (o->verbose)
        control_describe(&ctl);
    const char *gpus = p->topo ? amldist_topo_gpu_note(p->topo)
                               : bind_gpu_note(b);
    if (o->verbose && gpus != NULL)
        msg("GPUs: %s", gpus);
    if (o->verbose)
        msg("command: %s", c->how);
    int log_dir_fd = -1;
    if (o->log_dir && (log_dir_fd = out_log_dir(o->log_dir)) < 0) {
        eventlog_close(events);
        bind_free(b);
        return AMLRUN_EXIT_USAGE;
    }
    sigset_t orig;
    int pipe_was_ignored = 0;
    int sfd = setup_signals(o, &orig, &pipe_was_ignored);
    if (sfd < 0) {
        msg_errno(errno, "setting up signal handling");
        rc = AMLRUN_EXIT_SYSTEM;
        goto out;
    }
    /* Orphans of our workers come to us, not to init, while we live; the
     * guard covers the moment we die. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (guard_start() < 0)
        msg_errno(errno, "warning: no orphan guard");
    if (o->verbose)
        msg("orphans: %s", guard_describe());
    struct job_spec js = {o, c, &es, p->nproc, host, &orig, pipe_was_ignored,
                          sfd, log_dir_fd, b, ctl.rz, events};
    rc = supervise(&js);
    guard_stop();
    if (guard_pid() > 0)
        waitpid(guard_pid(), NULL, 0);
    close(sfd);
out:
    eventlog_close(events);
    control_close(&ctl);
    if (log_dir_fd >= 0)
        close(log_dir_fd);
    bind_free(b);
    return rc;
}

/* A node's job; its --status socket gone at its end, whatever ended it. */
static int node_run(const struct amlrun_opts *o, const struct plan *p,
                    const struct command *c)
{
    int rc = node_job(o, p, c);
    qearly_close();
    return rc;
}

/* A job whose every rank this amlrun starts gets a per-launch secret. */
static void give_job_token(const struct amlrun_opts *o, int one_node)
{
    if (!o->dry_run && job_token_export(one_node) < 0 && o->verbose)
        msg("no randomness for a job token: the bootstrap uses the one "
            "derived from the job's variables");
}

/* The job's secret before anything starts (run/jobtoken.h): of a job of
 * several nodes, each node's amlrun (one per node in per-process mode)
 * says what is open when it has none. */
static int secret_check(const struct amlrun_opts *o, const struct plan *p)
{
    const amldist_t *l = p->layout;
    int several, first = 1;
    if (p->mode == MODE_PROCESS) {
        int local = amldist_local_world_size(l);
        several = local > 0 && amldist_world_size(l) > local;
        first = amldist_local_rank(l) == 0;
    } else {
        several = amldist_world_size(l) > 1 || (options_c10d(o) && o->nnodes > 1);
    }
    return job_secret_check(several, first && !o->quiet && !o->dry_run,
                            p->mode != MODE_PROCESS);
}

/* SIGCHLD ignored when amlrun started (by a parent that set SIG_IGN before
 * its exec, which Linux keeps): the kernel would reap every child at once,
 * and amlrun, never told how its workers ended, would wait for them for
 * ever; a worker could not learn of its own children either.  Back to its
 * default, for amlrun and what it starts. */
static void default_sigchld(void)
{
    struct sigaction sa = {0};
    sa.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &sa, NULL);
}

int main(int argc, char **argv)
{
    ensure_std_fds();
    default_sigchld();
    spawn_note_inherited();
    (void)msg_stdout_waits();
    if (amldist_version() >> 16 != AMLDIST_VERSION_MAJOR) {
        msg("built for libamldist %d.x but runs with %s",
            AMLDIST_VERSION_MAJOR, amldist_version_string());
        return AMLRUN_EXIT_SYSTEM;
    }
    struct amlrun_opts o;
    int rc = options_parse(argc, argv, &o);
    if (rc >= 0)
        goto out;
    if (o.status || o.stacks) {
        rc = query_main(o.status ? QUERY_STATUS : QUERY_STACKS,
                        o.status == OPT_JSON, o.ncmd ? o.cmd[0] : NULL);
        goto out;
    }
    if (o.make_secret) {
        rc = job_secret_make();
        goto out;
    }
    if (o.topo) {
        rc = topo_main(&o.bind, o.nproc_kind == NPROC_NUM ? o.nproc : 0,
                       o.topo == OPT_JSON);
        goto out;
    }
    if (headnode_wanted(&o.head)) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n < 0) {
            msg_errno(errno, "/proc/self/exe");
            rc = AMLRUN_EXIT_SYSTEM;
            goto out;
        }
        self[n] = '\0';
        /* Every node's amlrun gets it through the launcher's AMLDIST_*
         * forwarding, so the whole job shares one secret (a refused file
         * of the user's is still refused first). */
        if ((rc = job_secret_check(0, 0, 1)) >= 0)
            goto out;
        give_job_token(&o, 0);
        rc = headnode_run(&o.head, self, argc, argv);
        goto out;
    }
    struct plan plan;
    rc = plan_make(&o, &plan);
    if (rc >= 0)
        goto out;
    struct command cmd;
    rc = command_build(&o, &cmd);
    if (rc >= 0 && plan.mode != MODE_PROCESS)
        control_fail_early(&o, &plan, rc);
    if (rc < 0)
        rc = secret_check(&o, &plan);
    if (rc < 0) {
        if (plan.mode == MODE_PROCESS) {
            rc = inplace_run(&o, &plan, &cmd);
        } else {
            /* One node: this amlrun starts every rank, so it can give them
             * a secret; several nodes' amlruns have none to share (those of
             * a c10d rendezvous neither, though each starts alone). */
            if (amldist_world_size(plan.layout) == 1 &&
                !(options_c10d(&o) && o.nnodes > 1))
                give_job_token(&o, 1);
            rc = node_run(&o, &plan, &cmd);
        }
    }
    command_free(&cmd);
    plan_free(&plan);
out:
    options_free(&o);
    fflush(stdout);
    return rc;
}
