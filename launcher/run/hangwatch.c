/* Hangs, --timeout and the notices of ranks still running (see
 * hangwatch.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/msg.h"
#include "progress/hang.h"
#include "run/events.h"
#include "run/hangwatch.h"
#include "run/plane.h"
#include "run/report.h"

/* The first notice of ranks still running, and the longest interval
 * between two. */
#define NOTICE_FIRST_S 5.0
#define NOTICE_MAX_S 600.0

static const char *plural(size_t n)
{
    return n == 1 ? "" : "s";
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void rank_list(int *ranks, size_t n, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    qsort(ranks, n, sizeof *ranks, cmp_int);
    for (size_t i = 0; i < n && o < size;) {
        size_t k = i;
        while (k + 1 < n && ranks[k + 1] <= ranks[k] + 1)
            k++;
        int w = ranks[k] == ranks[i]
                    ? snprintf(buf + o, size - o, "%s%d", o ? "," : "",
                               ranks[i])
                    : snprintf(buf + o, size - o, "%s%d-%d", o ? "," : "",
                               ranks[i], ranks[k]);
        if (w < 0)
            break;
        o += (size_t)w;
        i = k + 1;
    }
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

/* A timer at `at_ns` (out_now_ns()'s clock, the loop's in ms, rounded
 * up), or 0 when it cannot be had (said). */
static int timer_at(struct job *j, int64_t at_ns, amldist__loop_timer_fn *fn)
{
    long long ms = at_ns / 1000000 + (at_ns % 1000000 != 0);
    int id = amldist__loop_timer(j->loop, ms, fn, j);
    if (id < 0) {
        msg("out of memory for a timer: %s", fn ? "a hang or a time limit "
            "may go unseen" : "");
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

/* ---- the stacks ------------------------------------------------------- */

/* Every rank's stack, merged, on stderr (and --hang-report): `stalled`
 * names the ranks that stopped progressing when progress is per rank. */
static void stacks_report(struct job *j, const char *reason,
                          const int *stalled, size_t nstalled)
{
    (void)j;
    (void)reason;
    (void)stalled;
    (void)nstalled;
}

/* ---- --hang-timeout ----------------------------------------------------- */

size_t hang_view(const struct job *j, amldist__hang_rank_t *v)
{
    size_t n = 0;
    for (int i = 0; i < j->n; i++) {
        const struct worker *w = &j->w[i];
        if (w->attempt != j->p.restarts)
            continue; /* not started in this attempt */
        int64_t line = w->out.line_ns > w->err.line_ns ? w->out.line_ns
                                                       : w->err.line_ns;
        v[n++] = (amldist__hang_rank_t){
            .rank = w->id.rank, .alive = w->running, .uses_api = 0,
            .start_ns = w->start_ns, .progress_ns = 0, .line_ns = line,
            .end_ns = w->end_ns,
        };
    }
    return n;
}

static void on_look(void *arg);

static void hung(struct job *j, const amldist__hang_verdict_t *v,
                 int *stalled)
{
    const struct amlrun_opts *o = j->s->o;
    double idle = (double)v->idle_ns / 1e9;
    char list[256];
    if (v->per_rank) {
        rank_list(stalled, v->nstalled, list, sizeof list);
        msg("hang: rank%s %s made no progress for %.1f s (--hang-timeout "
            "%g): reading the stacks of the %d rank%s", plural(v->nstalled),
            list, idle, o->hang_timeout, j->live, plural((size_t)j->live));
    } else {
        msg("hang: no rank wrote a line for %.1f s (--hang-timeout %g): "
            "reading the stacks of the %d rank%s", idle, o->hang_timeout,
            j->live, plural((size_t)j->live));
    }
    events_hang(j, "hang", idle, stalled, v->nstalled);
    stacks_report(j, "hang", v->per_rank ? stalled : NULL, v->nstalled);
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
    int64_t now = out_now_ns();
    if (!view || !stalled) {
        /* Out of memory: look again later. */
        j->hang_timer = timer_at(j, now + s_to_ns(1), on_look);
    } else if (amldist__hang_check(view, hang_view(j, view), now,
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
    if (j->s->o->hang_timeout > 0 && j->p.phase == PHASE_RUNNING)
        j->hang_timer = timer_at(
            j, out_now_ns() + s_to_ns(j->s->o->hang_timeout), on_look);
}

/* ---- --timeout ---------------------------------------------------------- */

static void on_timeout(void *arg)
{
    struct job *j = arg;
    j->timeout_timer = 0;
    job_take_signals(j);
    const struct amlrun_opts *o = j->s->o;
    int stacks = j->p.phase == PHASE_RUNNING && j->live > 0;
    if (stacks)
        msg("--timeout %g: the job ran %.1f s: reading the stacks of the %d "
            "rank%s", o->timeout, now_s() - j->t_begin, j->live,
            plural((size_t)j->live));
    else
        msg("--timeout %g: the job ran %.1f s: it ends", o->timeout,
            now_s() - j->t_begin);
    events_hang(j, "timeout", now_s() - j->t_begin, NULL, 0);
    if (stacks)
        stacks_report(j, "timeout", NULL, 0);
    char why[96];
    snprintf(why, sizeof why, "--timeout %g: the job stops", o->timeout);
    report_tell_final(j, AMLRUN_EXIT_HANG, why);
    enum action a = policy_timeout(&j->p);
    report_stopping(j, "timeout", a);
    job_act(j, a, SIGTERM);
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
    j->notice_timer = timer_at(j, out_now_ns() + s_to_ns(j->notice_every),
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
    j->notice_timer = timer_at(j, out_now_ns() + s_to_ns(NOTICE_FIRST_S),
                               on_notice);
}

void watch_attempt_end(struct job *j)
{
    plane_attempt_end(j);
    cancel(j, &j->hang_timer);
    cancel(j, &j->notice_timer);
    j->t_first_done = 0;
}
