/*
 * This node's part of an answer (see gather.h): for a status, one "node"
 * record and one "rank" record per local worker (query/qtext.h), read from
 * the supervisor's own state and /proc; for stacks, the stacks of every
 * running worker (job_stacks_start(), read beside the loop, then stk_encode(),
 * the text any node can carry).
 *
 * A rank's progress (its last step, that step's age, its lag behind the
 * median rank) is a plugin's field (hooks.h: the straggler readings).
 *
 * A rank's CPU % is its process's (utime + stime of /proc/PID/stat, its
 * threads included, not its children) over the QP_CPU_INTERVAL_MS after
 * the request, measured on a timer of the loop.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "output/exitstatus.h"
#include "output/msg.h"
#include "query/proto.h"
#include "query/qtext.h"
#include "job/gather.h"
#include "job/hooks.h"
#include "job/job.h"
#include "stacks/stacks.h"
#include "util/clock.h"

/* What /proc/PID/stat says of a process. */
struct pstat {
    pid_t pid;            /* 0: not read */
    char state;
    unsigned long long ticks; /* utime + stime */
    long threads;
    long long rss_pages;
};

static int read_pstat(pid_t pid, struct pstat *ps)
{
    memset(ps, 0, sizeof *ps);
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_small(path, buf, sizeof buf) < 0)
        return -1;
    /* After the command's ")" (which may hold anything): field 3 on. */
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long long utime, stime;
    long threads;
    long long rss;
    if (sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
                      "%*d %*d %*d %*d %ld %*d %*u %*u %lld",
               &ps->state, &utime, &stime, &threads, &rss) != 5)
        return -1;
    ps->pid = pid;
    ps->ticks = utime + stime;
    ps->threads = threads;
    ps->rss_pages = rss;
    return 0;
}

static const char *state_word(char s)
{
    switch (s) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "disk-sleep";
    case 'T': return "stopped";
    case 't': return "tracing-stop";
    case 'Z': return "zombie";
    case 'X': return "dead";
    case 'I': return "idle";
    default: return "?";
    }
}

static const char *phase_word(enum phase ph)
{
    switch (ph) {
    case PHASE_RUNNING: return "running";
    case PHASE_STOPPING: return "stopping";
    case PHASE_KILLING: return "killing";
    case PHASE_WAITING: return "waiting";
    case PHASE_RESTARTING: return "restarting";
    case PHASE_DONE: return "done";
    }
    return "?";
}

/* This node's address: --local-addr, else, on node 0 of a static job, the
 * master address the workers get; "-" otherwise (the control plane knows
 * each node's). */
static const char *node_addr(const struct job *j)
{
    const struct amlrun_opts *o = j->s->o;
    if (o->local_addr)
        return o->local_addr;
    if (!j->s->rz && job_node(j) == 0)
        return amldist_master_addr(j->s->env->layout);
    return NULL;
}

/* The age of the worker's last whole output line, -1 when none. */
static double output_age(const struct worker *w)
{
    int64_t t = w->out.line_ns > w->err.line_ns ? w->out.line_ns
                                                 : w->err.line_ns;
    return t > 0 ? (double)(amldist__now_ns() - t) / 1e9 : -1;
}

static void rank_record(FILE *f, struct job *j, const struct worker *w,
                        const struct pstat *before, double interval,
                        double now)
{
    char buf[96];
    long page = sysconf(_SC_PAGESIZE);
    long hz = sysconf(_SC_CLK_TCK);
    fputs("rank", f);
    qt_int(f, "rank", w->id.rank);
    qt_int(f, "local", w->id.local);
    qt_int(f, "node", job_node(j));
    struct pstat now_ps = {0};
    int alive = w->running && w->pid > 0 && read_pstat(w->pid, &now_ps) == 0;
    if (w->pid > 0)
        qt_int(f, "pid", w->pid);
    else
        qt_str(f, "pid", NULL);
    if (alive) {
        qt_str(f, "state", state_word(now_ps.state));
        double cpu = -1;
        if (before && before->pid == w->pid && interval > 0 && hz > 0)
            cpu = (double)(now_ps.ticks - before->ticks) / (double)hz /
                  interval * 100.0;
        qt_num(f, "cpu", cpu, 1);
        qt_int(f, "rss", now_ps.rss_pages * page);
        qt_int(f, "threads", now_ps.threads);
    } else {
        if (w->attempt < 0 || w->pid <= 0) {
            qt_str(f, "state", "not-started");
        } else if (w->running) {
            qt_str(f, "state", "?");
        } else {
            status_describe(w->status, buf, sizeof buf);
            qt_str(f, "state", "ended");
            qt_str(f, "status", buf);
        }
        qt_str(f, "cpu", NULL);
        qt_str(f, "rss", NULL);
    }
    qt_num(f, "age", w->pid > 0 ? (w->running ? now : w->t_done) - w->t_start
                                : -1, 1);
    qt_num(f, "out_age", output_age(w), 1);
    job_hooks_status(j, w, f); /* the plugins' fields (progress) */
    fputc('\n', f);
}

static int status_text(struct job *j, const struct pstat *before,
                       double interval, struct part *p)
{
    char *data = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&data, &len);
    if (!f)
        return -1;
    double now = now_s();
    fputs("node", f);
    qt_int(f, "node", job_node(j));
    qt_str(f, "host", j->s->host);
    qt_str(f, "addr", node_addr(j));
    qt_str(f, "state", phase_word(j->p.phase));
    qt_int(f, "pid", getpid());
    qt_num(f, "uptime", now - j->t_begin, 1);
    qt_int(f, "restarts", job_plane_restarts(j));
    qt_int(f, "max_restarts", j->p.max_restarts);
    qt_int(f, "nproc", j->n);
    qt_num(f, "cpu_interval", interval, 2);
    fputc('\n', f);
    for (int i = 0; i < j->n; i++)
        rank_record(f, j, &j->w[i], before ? &before[i] : NULL, interval,
                    now);
    if (fclose(f) != 0) {
        free(data);
        return -1;
    }
    p->node = job_node(j);
    p->data = data;
    p->len = len;
    return 0;
}

/* ---- making a part, on a timer of the loop ---------------------------------- */

/* A part being made: a status samples every worker now and again
 * QP_CPU_INTERVAL_MS later; stacks are read on the loop's next round. */
struct making {
    struct job *j;
    enum part_kind kind;
    part_ready_fn *ready;
    void *arg;
    int timer;            /* 0 once it fired */
    double t0;
    struct pstat *before; /* a status's first sample */
    struct job_capture *capture; /* stacks being read, or NULL */
};

/* The part is made (or could not be): to ready(), and m is done. */
static void deliver(struct making *m, struct part *p, int rc)
{
    if (rc < 0 && !p->error)
        p->error = strdup(rc == JOB_STACKS_CUT
                              ? "the attempt ended before the stacks were read"
                              : "out of memory");
    part_ready_fn *ready = m->ready;
    void *rarg = m->arg;
    free(m->before);
    free(m);
    ready(rarg, p);
}

/* The stacks of every running worker (job.h: they run on), read beside
 * the loop, as stk_encode()'s text. */
static void stacks_read(void *arg, struct stk_set *set, int rc)
{
    struct making *m = arg;
    struct part p = {job_node(m->j), NULL, 0, NULL};
    m->capture = NULL;
    if (rc == 0 && !(p.data = stk_encode(set, &p.len)))
        rc = -1;
    deliver(m, &p, rc);
}

static void made(void *arg)
{
    struct making *m = arg;
    struct part p = {job_node(m->j), NULL, 0, NULL};
    m->timer = 0;
    if (m->kind == PART_STACKS) {
        if ((m->capture = job_stacks_start(m->j, stacks_read, m)))
            return;
        deliver(m, &p, -1);
        return;
    }
    int rc = status_text(m->j, m->before, now_s() - m->t0, &p);
    deliver(m, &p, rc);
}

void *node_part(struct job *j, enum part_kind k, part_ready_fn *ready,
                void *arg)
{
    struct making *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->j = j;
    m->kind = k;
    m->ready = ready;
    m->arg = arg;
    m->t0 = now_s();
    long long at = amldist__now_ms();
    if (k == PART_STATUS) {
        m->before = calloc((size_t)j->n, sizeof *m->before);
        if (!m->before) {
            free(m);
            return NULL;
        }
        for (int i = 0; i < j->n; i++)
            if (j->w[i].running && j->w[i].pid > 0)
                (void)read_pstat(j->w[i].pid, &m->before[i]);
        at += QP_CPU_INTERVAL_MS;
    }
    m->timer = amldist__loop_timer(j->loop, at, made, m);
    if (m->timer < 0) {
        free(m->before);
        free(m);
        return NULL;
    }
    return m;
}

void node_part_cancel(struct job *j, void *handle)
{
    struct making *m = handle;
    if (!m)
        return;
    if (m->timer)
        amldist__loop_cancel(j->loop, m->timer);
    job_stacks_cancel(j, m->capture);
    free(m->before);
    free(m);
}
