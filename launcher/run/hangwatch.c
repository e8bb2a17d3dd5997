/* Hangs, --timeout and the notices of ranks still running (see
 * hangwatch.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/msg.h"
#include "output/ranklist.h"
#include "progress/hang.h"
#include "progress/page.h"
#include "run/events.h"
#include "run/gather.h"
#include "run/hangwatch.h"
#include "run/plane.h"
#include "run/progresspage.h"
#include "run/report.h"
#include "stacks/frames.h"
#include "stacks/stacks.h"
#include "util/clock.h"

/* The first notice of ranks still running, and the longest interval
 * between two. */
#define NOTICE_FIRST_S 5.0
#define NOTICE_MAX_S 600.0

static const char *plural(size_t n)
{
    return n == 1 ? "" : "s";
}

/* "0-6,8,10-11" of n ranks (sorted here) into buf; "" for none. */
static void rank_list(int *ranks, size_t n, char *buf, size_t size)
{
    qsort(ranks, n, sizeof *ranks, stk_int_cmp);
    (void)ranklist_format(ranks, n, buf, size);
}

/* This node's workers still running: their ranks in `ranks` (room for
 * j->n); the count. */
static size_t running(const struct job *j, int *ranks)
{
    size_t n = 0;
    for (int i = 0; i < j->n; i++)
        if (j->w[i].running)
            ranks[n++] = j->w[i].id.rank;
    return n;
}

void running_ranks(const struct job *j, char *buf, size_t size)
{
    int *ranks = malloc((size_t)(j->n > 0 ? j->n : 1) * sizeof *ranks);
    buf[0] = '\0';
    if (ranks)
        rank_list(ranks, running(j, ranks), buf, size);
    free(ranks);
}

/* A timer at `at_ns` (amldist__now_ns()'s clock, the loop's in ms, rounded
 * up), or 0 when it cannot be had (said). */
static int timer_at(struct job *j, int64_t at_ns, amldist__loop_timer_fn *fn)
{
    long long ms = at_ns / 1000000 + (at_ns % 1000000 != 0);
    int id = amldist__loop_timer(j->loop, ms, fn, j);
    if (id < 0) {
        msg("out of memory for a timer: a hang, a time limit or a notice "
            "may go unseen");
        return 0;
    }
    return id;
}

static void cancel(struct job *j, int *timer)
{
    if (*timer)
        amldist__loop_cancel(j->loop, *timer);
    *timer = 0;
}

static int64_t s_to_ns(double s)
{
    return (int64_t)(s * 1e9);
}

/* ---- --hang-timeout ----------------------------------------------------- */

/* This node's ranks of the attempt, as the decision sees them: their
 * output lines, and their calls of the progress API (the page's slots,
 * emptied at each start), all on CLOCK_MONOTONIC.  For each, its worker's
 * index in idx[] (may be NULL). */
size_t hang_view(const struct job *j, amldist__hang_rank_t *v, int *idx)
{
    const amldist__progress_page_t *pg = progress_page(j);
    size_t n = 0;
    for (int i = 0; i < j->n; i++) {
        const struct worker *w = &j->w[i];
        if (w->attempt != j->p.restarts)
            continue; /* not started in this attempt */
        amldist__progress_sample_t call = {0, 0, 0};
        if (pg)
            (void)amldist__progress_page_read(pg, (unsigned)i, &call);
        int64_t line = w->out.line_ns > w->err.line_ns ? w->out.line_ns
                                                       : w->err.line_ns;
        if (idx)
            idx[n] = i;
        v[n++] = (amldist__hang_rank_t){
            .rank = w->id.rank, .alive = w->running,
            .uses_api = call.calls > 0, .start_ns = w->start_ns,
            .progress_ns = call.t_ns, .line_ns = line, .end_ns = w->end_ns,
        };
    }
    return n;
}

/* How long the capture of every rank's stack may take. */
#define CAPTURE_MS 10000

int job_stacks(struct job *j, struct stk_set *set)
{
    amldist__hang_rank_t *view = malloc((size_t)j->n * sizeof *view);
    int *idx = malloc((size_t)j->n * sizeof *idx);
    struct stk_target *t = calloc((size_t)j->n, sizeof *t);
    int64_t now = amldist__now_ns();
    size_t n = 0, nv = view && idx && t ? hang_view(j, view, idx) : 0;
    for (size_t k = 0; k < nv; k++) {
        const struct worker *w = &j->w[idx[k]];
        if (!w->running)
            continue;
        /* Per rank, its last call (its start before any); else its last
         * line (its start before any). */
        int64_t last = view[k].uses_api ? view[k].progress_ns
                                        : view[k].line_ns;
        if (last < view[k].start_ns)
            last = view[k].start_ns;
        t[n++] = (struct stk_target){
            .rank = w->id.rank, .local_rank = w->id.local, .node = w->id.node,
            .pid = w->pid, .last_progress_s = (double)(now - last) / 1e9,
            .python_fd = w->stack_fd,
        };
    }
    int rc = view && idx && t ? stk_capture(t, n, j->s->host, CAPTURE_MS, set)
                              : -1;
    free(t);
    free(idx);
    free(view);
    return rc;
}

/* The ranks of `set` merged, on stderr (and --hang-report): `stalled`
 * names the ranks that stopped progressing when progress is per rank;
 * NULL: the stacks name the outliers. */
static void stacks_out(struct job *j, const struct stk_set *set,
                       const char *reason, const int *stalled,
                       size_t nstalled)
{
    const struct amlrun_opts *o = j->s->o;
    struct stk_report r;
    memset(&r, 0, sizeof r);
    double timeout = strcmp(reason, "timeout") == 0 ? o->timeout
                                                    : o->hang_timeout;
    if (stk_merge(set, stalled, nstalled, reason, timeout, &r) < 0) {
        msg("out of memory reading the workers' stacks");
    } else {
        /* Into memory first: each of its lines goes out in one write. */
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        if (m) {
            stk_print(m, set, &r);
            if (fclose(m) == 0)
                (void)write_all(2, text, len);
        }
        free(text);
        if (o->hang_report && stk_write_json(o->hang_report, set, &r) < 0)
            msg_errno(errno, "--hang-report %s: cannot write it",
                      o->hang_report);
        else if (o->hang_report && !o->quiet)
            msg("the stacks are in %s", o->hang_report);
    }
    stk_report_free(&r);
}

/* This node's running ranks' stacks, merged (stacks_out). */
static void stacks_report(struct job *j, const char *reason,
                          const int *stalled, size_t nstalled)
{
    struct stk_set set = {NULL, 0};
    if (job_stacks(j, &set) < 0)
        msg("out of memory reading the workers' stacks");
    else
        stacks_out(j, &set, reason, stalled, nstalled);
    stk_set_free(&set);
}

static void on_look(void *arg);

static void hung(struct job *j, const amldist__hang_verdict_t *v,
                 int *stalled)
{
    const struct amlrun_opts *o = j->s->o;
    double idle = (double)v->idle_ns / 1e9;
    char list[96]; /* cut with ",..." beyond */
    char *why = j->hang_why;
    size_t size = sizeof j->hang_why;
    if (v->single_out) {
        rank_list(stalled, v->nstalled, list, sizeof list);
        snprintf(why, size, "hang: rank%s %s made no progress for %.1f s "
                 "(--hang-timeout %g)", plural(v->nstalled), list, idle,
                 o->hang_timeout);
    } else if (v->per_rank) {
        snprintf(why, size, "hang: no rank made progress for %.1f s "
                 "(--hang-timeout %g)", idle, o->hang_timeout);
    } else {
        snprintf(why, size, "hang: no rank wrote a line for %.1f s "
                 "(--hang-timeout %g)", idle, o->hang_timeout);
    }
    msg("%s: reading the stacks of the %d rank%s", why, j->live,
        plural((size_t)j->live));
    events_hang(j, "hang", idle, stalled, v->nstalled);
    /* Every rank stalled (a collective): the stacks single them out. */
    stacks_report(j, "hang", v->single_out ? stalled : NULL,
                  v->single_out ? v->nstalled : 0);
    report_tell_hang(j, idle);
    enum action a = policy_hung(&j->p);
    report_stopping(j, "hang", a);
    job_act(j, a, SIGTERM);
}

static void on_look(void *arg)
{
    struct job *j = arg;
    j->hang_timer = 0;
    job_take_signals(j); /* exits already told of are no live ranks */
    if (j->p.phase != PHASE_RUNNING || j->live == 0)
        return;
    amldist__hang_rank_t *view = malloc((size_t)j->n * sizeof *view);
    int *stalled = malloc((size_t)j->n * sizeof *stalled);
    amldist__hang_verdict_t v;
    int64_t now = amldist__now_ns();
    if (!view || !stalled) {
        /* Out of memory: look again later. */
        j->hang_timer = timer_at(j, now + s_to_ns(1), on_look);
    } else if (amldist__hang_check(view, hang_view(j, view, NULL), now,
                                   s_to_ns(j->s->o->hang_timeout), stalled,
                                   &v)) {
        hung(j, &v, stalled);
    } else if (v.next_ns != AMLDIST__HANG_NEVER) {
        j->hang_timer = timer_at(j, v.next_ns, on_look);
    }
    free(view);
    free(stalled);
}

void watch_attempt(struct job *j)
{
    /* Across nodes, the rendezvous host decides, from every node's view. */
    if (j->s->rz) {
        plane_attempt(j);
        return;
    }
    double sec = j->s->o->hang_timeout;
    if (sec <= 0 || j->p.phase != PHASE_RUNNING)
        return;
    j->hang_timer = timer_at(j, amldist__now_ns() + s_to_ns(sec), on_look);
    if (j->hang_timer && j->s->o->verbose)
        msg("hang watch: a hang is %g s without progress; first look in "
            "%.1f s", sec, sec);
}

/* ---- --timeout ---------------------------------------------------------- */

/* Across nodes, --timeout is the rendezvous host's node's: it gathers every
 * node's stacks (job_gather(), as for --stacks), prints them merged once
 * and ends the job on every node (124).  Another node's own timer waits
 * this much longer, for a host's node that is gone or has no --timeout:
 * the gather's 15 s, and more. */
#define TIMEOUT_FALLBACK_S 30.0

/* The job stops: 124 on every node, whatever restarts are left. */
static void timeout_stop(struct job *j)
{
    char why[96];
    snprintf(why, sizeof why, "--timeout %g: the job stops",
             j->s->o->timeout);
    report_tell_final(j, AMLRUN_EXIT_HANG, why);
    enum action a = policy_timeout(&j->p);
    report_stopping(j, "timeout", a);
    job_act(j, a, SIGTERM);
}

/* Every node's stacks (parts in node order, n == 0: out of memory). */
static void timeout_parts(void *arg, struct part *parts, size_t n)
{
    struct job *j = arg;
    struct stk_set set = {NULL, 0};
    job_take_signals(j);
    for (size_t i = 0; i < n; i++) {
        if (parts[i].error && parts[i].node < 0)
            msg("--timeout: %s", parts[i].error);
        else if (parts[i].error && !strncmp(parts[i].error, "node ", 5))
            msg("--timeout: no stacks from %s", parts[i].error);
        else if (parts[i].error)
            msg("--timeout: no stacks from node %d: %s", parts[i].node,
                parts[i].error);
        else if (stk_decode(parts[i].data, parts[i].len, &set) < 0)
            msg("--timeout: node %d sent stacks that do not decode",
                parts[i].node);
        part_free(&parts[i]);
    }
    free(parts);
    if (n == 0)
        msg("out of memory reading the workers' stacks");
    else
        stacks_out(j, &set, "timeout", NULL, 0);
    stk_set_free(&set);
    timeout_stop(j);
}

static void timeout_mine(void *arg, struct part *p)
{
    struct job *j = arg;
    job_gather(j, PART_STACKS, p, timeout_parts, j);
}

static void on_timeout(void *arg)
{
    struct job *j = arg;
    j->timeout_timer = 0;
    job_take_signals(j);
    const struct amlrun_opts *o = j->s->o;
    amldist_rdzv_t *rz = j->s->rz;
    int nodes = rz && amldist_rdzv_num_nodes(rz) > 1;
    int host = nodes && amldist_rdzv_is_host(rz) == 1;
    if (nodes && !host && !j->timeout_late) {
        /* The host's node reports and stops the job; this is its
         * fallback. */
        j->timeout_late = 1;
        j->timeout_timer = timer_at(j, amldist__now_ns() +
                                    s_to_ns(TIMEOUT_FALLBACK_S), on_timeout);
        if (o->verbose)
            msg("--timeout %g: the rendezvous host's node stops the job "
                "(this node itself in %g s if it does not)", o->timeout,
                TIMEOUT_FALLBACK_S);
        return;
    }
    /* The host's node: the ranks of every node may run, its own ended. */
    int every = host && (j->p.phase == PHASE_RUNNING ||
                         j->p.phase == PHASE_WAITING);
    int stacks = every || (j->p.phase == PHASE_RUNNING && j->live > 0);
    snprintf(j->hang_why, sizeof j->hang_why, "--timeout %g: the job ran "
             "%.1f s", o->timeout, now_s() - j->t_begin);
    if (every)
        msg("%s: reading the stacks of the ranks of every node",
            j->hang_why);
    else if (stacks)
        msg("%s: reading the stacks of the %d rank%s", j->hang_why, j->live,
            plural((size_t)j->live));
    else
        msg("%s: it ends", j->hang_why);
    events_hang(j, "timeout", now_s() - j->t_begin, NULL, 0);
    if (every && node_part(j, PART_STACKS, timeout_mine, j))
        return; /* timeout_parts() stops the job */
    if (stacks)
        stacks_report(j, "timeout", NULL, 0);
    timeout_stop(j);
}

void watch_job(struct job *j)
{
    if (j->s->o->timeout > 0)
        j->timeout_timer = timer_at(
            j, s_to_ns(j->t_begin + j->s->o->timeout), on_timeout);
}

/* ---- ranks still running after others ended ----------------------------- */

static void on_notice(void *arg)
{
    struct job *j = arg;
    j->notice_timer = 0;
    job_take_signals(j);
    if (j->p.phase != PHASE_RUNNING || j->live == 0)
        return;
    report_waiting(j, now_s() - j->t_first_done);
    j->notice_every = j->notice_every * 2 > NOTICE_MAX_S
                          ? NOTICE_MAX_S : j->notice_every * 2;
    j->notice_timer = timer_at(j, amldist__now_ns() + s_to_ns(j->notice_every),
                               on_notice);
}

void watch_worker_done(struct job *j)
{
    if (j->t_first_done == 0)
        j->t_first_done = now_s();
    if (j->notice_timer || j->s->o->quiet || j->live == 0 ||
        j->p.phase != PHASE_RUNNING)
        return;
    j->notice_every = NOTICE_FIRST_S;
    j->notice_timer = timer_at(j, amldist__now_ns() + s_to_ns(NOTICE_FIRST_S),
                               on_notice);
}

void watch_attempt_end(struct job *j)
{
    plane_attempt_end(j);
    cancel(j, &j->hang_timer);
    cancel(j, &j->notice_timer);
    j->t_first_done = 0;
}
