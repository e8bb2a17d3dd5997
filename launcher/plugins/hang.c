/* Hangs, --timeout and the notices of ranks still running (see hang.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/gather.h"
#include "job/hooks.h"
#include "output/exitstatus.h"
#include "output/msg.h"
#include "output/output.h"
#include "output/ranklist.h"
#include "plugins/hang.h"
#include "progress/hang.h"
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

/* Time amlrun could not observe (it was stopped, or blocked writing to a
 * console that did not read) is not time without progress; but a gap
 * shorter than a tenth of the timeout is not counted: a look some ms late
 * on a busy machine is no gap, and restarting the clock at each would put
 * a real hang off for ever there, while a gap that short makes progress
 * look older by a tenth at most. */
#define UNSEEN_DIV 10
#define UNSEEN_MIN_NS 50000000LL

/* A verdict waiting for this node's stacks, read beside the loop: it is
 * given once they are printed. */
struct pending {
    enum stop_reason reason;     /* STOP_HANG or STOP_TIMEOUT */
    int *stalled;                /* the ranks named, NULL: the stacks tell */
    size_t nstalled;
    char peer[256];              /* for the other nodes (job_stop) */
    struct job_capture *capture; /* NULL: none waits */
};

/* The watch's own state: its timers (0: none), and what it knows. */
struct hang_watch {
    struct job *j;
    int hang_timer;    /* --hang-timeout's next look */
    int64_t look_due;  /* when that look is due (amldist__now_ns()) */
    int64_t look_last; /* when the last look was made, or the watch began */
    int64_t since;     /* the clock's last restart: progress before it is
                          taken as made then (0: none) */
    int64_t blocked;   /* out_console_blocked()'s total at the last look */
    int timeout_timer; /* the job's --timeout */
    int notice_timer;  /* the next notice of ranks still running */
    int timeout_late;  /* --timeout on a node not the host's: its fallback */
    double t_first_done; /* now_s() when the attempt's first rank ended */
    double notice_every; /* the interval after the next notice, in s */
    char why[256];     /* the last hang or --timeout, in words */
    struct pending pending; /* a verdict waiting for the stacks */
};

/* A timer at `at_ns` (amldist__now_ns()'s clock, the loop's in ms, rounded
 * up), or 0 when it cannot be had (said). */
static int timer_at(struct hang_watch *hw, int64_t at_ns, job_timer_fn *fn)
{
    long long ms = at_ns / 1000000 + (at_ns % 1000000 != 0);
    int id = job_timer(hw->j, ms, fn, hw);
    if (!id)
        msg("out of memory for a timer: a hang, a time limit or a notice "
            "may go unseen");
    return id;
}

static void cancel(struct hang_watch *hw, int *timer)
{
    job_timer_cancel(hw->j, *timer);
    *timer = 0;
}

static int64_t s_to_ns(double s)
{
    return (int64_t)(s * 1e9);
}

/* ---- the stacks --------------------------------------------------------- */

/* The ranks of `set` merged, on stderr (and --hang-report): `stalled`
 * names the ranks that stopped progressing when progress is per rank;
 * NULL: the stacks name the outliers. */
static void stacks_out(struct job *j, const struct stk_set *set,
                       enum stop_reason reason, const int *stalled,
                       size_t nstalled)
{
    const struct amlrun_opts *o = j->s->o;
    struct stk_report r;
    memset(&r, 0, sizeof r);
    double timeout = reason == STOP_TIMEOUT ? o->timeout : o->hang_timeout;
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
                (void)msg_write(text, len);
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

static void give_verdict(struct hang_watch *hw);

/* The stacks are read: printed, then the verdict.  A hang whose attempt
 * stopped meanwhile for another reason (a failure, a signal) is no
 * verdict any more; --timeout ends the job all the same. */
static void stacks_read(void *arg, struct stk_set *set, int rc)
{
    struct hang_watch *hw = arg;
    struct pending *pd = &hw->pending;
    pd->capture = NULL;
    if (rc == -1)
        msg("out of memory reading the workers' stacks");
    else if (rc == 0)
        stacks_out(hw->j, set, pd->reason, pd->stalled, pd->nstalled);
    if (pd->reason == STOP_TIMEOUT || hw->j->p.phase == PHASE_RUNNING) {
        give_verdict(hw);
    } else {
        free(pd->stalled);
        pd->stalled = NULL;
    }
}

/* Read this node's running ranks' stacks, then give the verdict (at once
 * when they cannot be read). */
static void stacks_then_verdict(struct hang_watch *hw)
{
    struct pending *pd = &hw->pending;
    pd->capture = job_stacks_start(hw->j, stacks_read, hw);
    if (pd->capture)
        return;
    msg("out of memory reading the workers' stacks");
    give_verdict(hw);
}

static void give_verdict(struct hang_watch *hw)
{
    struct pending *pd = &hw->pending;
    enum stop_reason r = pd->reason;
    char peer[sizeof pd->peer];
    snprintf(peer, sizeof peer, "%s", pd->peer);
    free(pd->stalled);
    pd->stalled = NULL;
    pd->nstalled = 0;
    job_stop(hw->j, r, &(struct stop_detail){hw->why, peer});
}

/* The attempt ends with a verdict still waiting for the stacks: a hang's
 * is moot (its ranks are gone), --timeout's is given now. */
static void pending_end(struct hang_watch *hw)
{
    struct pending *pd = &hw->pending;
    if (!pd->capture)
        return;
    job_stacks_cancel(hw->j, pd->capture);
    pd->capture = NULL;
    if (pd->reason == STOP_TIMEOUT) {
        give_verdict(hw);
    } else {
        free(pd->stalled);
        pd->stalled = NULL;
    }
}

/* ---- --hang-timeout ----------------------------------------------------- */

static void hung(struct hang_watch *hw, const amldist__hang_verdict_t *v,
                 int *stalled)
{
    struct job *j = hw->j;
    const struct amlrun_opts *o = j->s->o;
    double idle = (double)v->idle_ns / 1e9;
    char list[96]; /* cut with ",..." beyond */
    if (v->single_out) {
        rank_list(stalled, v->nstalled, list, sizeof list);
        snprintf(hw->why, sizeof hw->why, "hang: rank%s %s made no progress "
                 "for %.1f s (--hang-timeout %g)", plural(v->nstalled), list,
                 idle, o->hang_timeout);
    } else if (v->per_rank) {
        snprintf(hw->why, sizeof hw->why, "hang: no rank made progress for "
                 "%.1f s (--hang-timeout %g)", idle, o->hang_timeout);
    } else {
        snprintf(hw->why, sizeof hw->why, "hang: no rank wrote any output "
                 "for %.1f s (--hang-timeout %g)", idle, o->hang_timeout);
    }
    msg("%s: reading the stacks of the %d rank%s", hw->why, j->live,
        plural((size_t)j->live));
    struct job_hang found = {STOP_HANG, o->hang_timeout, idle, stalled,
                             v->nstalled};
    job_publish(j, TOPIC_HANG, &found);
    /* Every rank stalled (a collective): the stacks single them out. */
    struct pending *pd = &hw->pending;
    pd->reason = STOP_HANG;
    pd->nstalled = 0;
    if (v->single_out && (pd->stalled = malloc(v->nstalled * sizeof *stalled))) {
        memcpy(pd->stalled, stalled, v->nstalled * sizeof *stalled);
        pd->nstalled = v->nstalled;
    }
    snprintf(pd->peer, sizeof pd->peer, "amlrun:   host %s: hang: no "
             "progress for %.1f s (--hang-timeout %g)\n", j->s->host, idle,
             o->hang_timeout);
    stacks_then_verdict(hw);
}

static void on_look(void *arg);

/* The next look, at `at_ns`. */
static void arm_look(struct hang_watch *hw, int64_t at_ns)
{
    hw->look_due = at_ns;
    hw->hang_timer = timer_at(hw, at_ns, on_look);
}

/* The end of time amlrun could not observe since the last look, 0: none
 * worth counting (UNSEEN_DIV): the look itself came late (amlrun was
 * stopped, or blocked), amlrun was continued, or its console writes
 * blocked that long. */
static int64_t unseen_until(struct hang_watch *hw, int64_t now, int64_t gap)
{
    int64_t until = 0, total, end;
    if (now - hw->look_due >= gap)
        until = now;
    if (hw->j->cont_ns > hw->look_last && hw->j->cont_ns > until)
        until = hw->j->cont_ns;
    out_console_blocked(&total, &end);
    if (total - hw->blocked >= gap && end > until)
        until = end;
    hw->blocked = total;
    hw->look_last = now;
    return until;
}

/* The decision over this node's view, the clock restarted at hw->since
 * (every live rank's progress at least as new). */
static int decide(struct hang_watch *hw, amldist__hang_rank_t *view,
                  int *stalled, amldist__hang_verdict_t *v)
{
    size_t n = hang_view(hw->j, view, NULL);
    for (size_t i = 0; i < n; i++)
        if (view[i].alive && view[i].start_ns < hw->since)
            view[i].start_ns = hw->since;
    return amldist__hang_check(view, n, amldist__now_ns(),
                               s_to_ns(hw->j->s->o->hang_timeout), stalled,
                               v);
}

static void look(struct hang_watch *hw, amldist__hang_rank_t *view,
                 int *stalled)
{
    struct job *j = hw->j;
    int64_t now = amldist__now_ns(), timeout = s_to_ns(j->s->o->hang_timeout);
    int64_t gap = timeout / UNSEEN_DIV > UNSEEN_MIN_NS ? timeout / UNSEEN_DIV
                                                        : UNSEEN_MIN_NS;
    int64_t unseen = unseen_until(hw, now, gap);
    if (unseen > hw->since) {
        /* Not time without progress: what came meanwhile is read, and
         * the clock starts again. */
        job_drain(j);
        hw->since = unseen;
        if (j->s->o->verbose)
            msg("hang watch: amlrun could not watch the workers for a "
                "while (stopped, or its console did not read): the clock "
                "starts again");
    }
    amldist__hang_verdict_t v;
    /* Before a verdict, what the pipes hold: a look may come before the
     * loop reads what the workers wrote while it waited. */
    if (decide(hw, view, stalled, &v)) {
        job_drain(j);
        if (decide(hw, view, stalled, &v)) {
            hung(hw, &v, stalled);
            return;
        }
    }
    if (v.next_ns != AMLDIST__HANG_NEVER)
        arm_look(hw, v.next_ns);
    else if (j->live > 0) /* every one stopped: look again after a while */
        arm_look(hw, now + timeout);
}

static void on_look(void *arg)
{
    struct hang_watch *hw = arg;
    struct job *j = hw->j;
    hw->hang_timer = 0;
    if (j->p.phase != PHASE_RUNNING || j->live == 0)
        return;
    amldist__hang_rank_t *view = malloc((size_t)j->n * sizeof *view);
    int *stalled = malloc((size_t)j->n * sizeof *stalled);
    if (!view || !stalled) /* out of memory: look again later */
        arm_look(hw, amldist__now_ns() + s_to_ns(1));
    else
        look(hw, view, stalled);
    free(view);
    free(stalled);
}

static void attempt_start(void *self, struct job *j, int started)
{
    struct hang_watch *hw = self;
    /* Across nodes, the rendezvous host decides, from every node's view
     * (the plane's). */
    double sec = j->s->o->hang_timeout;
    if (!started || j->s->rz || sec <= 0 || j->p.phase != PHASE_RUNNING)
        return;
    hw->look_last = amldist__now_ns();
    out_console_blocked(&hw->blocked, &(int64_t){0});
    arm_look(hw, hw->look_last + s_to_ns(sec));
    if (hw->hang_timer && j->s->o->verbose)
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

/* The verdict waiting is --timeout's: the job stops, 124 on every node,
 * whatever restarts are left. */
static void pend_timeout(struct hang_watch *hw)
{
    struct pending *pd = &hw->pending;
    pd->reason = STOP_TIMEOUT;
    snprintf(pd->peer, sizeof pd->peer, "--timeout %g: the job stops",
             hw->j->s->o->timeout);
}

static void timeout_stop(struct hang_watch *hw)
{
    pend_timeout(hw);
    give_verdict(hw);
}

/* Every node's stacks (parts in node order, n == 0: out of memory). */
static void timeout_parts(void *arg, struct part *parts, size_t n)
{
    struct hang_watch *hw = arg;
    struct stk_set set = {NULL, 0};
    job_sync(hw->j);
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
        stacks_out(hw->j, &set, STOP_TIMEOUT, NULL, 0);
    stk_set_free(&set);
    timeout_stop(hw);
}

static void timeout_mine(void *arg, struct part *p)
{
    struct hang_watch *hw = arg;
    job_gather(hw->j, PART_STACKS, p, timeout_parts, hw);
}

/* A node not the host's: the host's node reports and stops the job; this
 * is its fallback, later.  Whether it was armed. */
static int timeout_later(struct hang_watch *hw);

static void on_timeout(void *arg)
{
    struct hang_watch *hw = arg;
    struct job *j = hw->j;
    hw->timeout_timer = 0;
    const struct amlrun_opts *o = j->s->o;
    int nodes = job_plane_nodes(j) > 1;
    int host = nodes && job_plane_is_host(j);
    if (nodes && !host && !hw->timeout_late && timeout_later(hw))
        return;
    /* The host's node: the ranks of every node may run, its own ended. */
    int every = host && (j->p.phase == PHASE_RUNNING ||
                         j->p.phase == PHASE_WAITING);
    int stacks = every || (j->p.phase == PHASE_RUNNING && j->live > 0);
    double ran = now_s() - j->t_begin;
    snprintf(hw->why, sizeof hw->why, "--timeout %g: the job ran %.1f s",
             o->timeout, ran);
    if (every)
        msg("%s: reading the stacks of the ranks of every node", hw->why);
    else if (stacks)
        msg("%s: reading the stacks of the %d rank%s", hw->why, j->live,
            plural((size_t)j->live));
    else
        msg("%s: it ends", hw->why);
    struct job_hang found = {STOP_TIMEOUT, o->timeout, ran, NULL, 0};
    job_publish(j, TOPIC_HANG, &found);
    if (every && node_part(j, PART_STACKS, timeout_mine, hw))
        return; /* timeout_parts() stops the job */
    struct pending *pd = &hw->pending;
    if (pd->capture) {
        /* A hang's stacks are being read: they serve --timeout, which
         * ends the job once they are printed. */
        pend_timeout(hw);
        return;
    }
    if (!stacks) {
        timeout_stop(hw);
        return;
    }
    pend_timeout(hw);
    stacks_then_verdict(hw); /* stacks_read() stops the job */
}

static int timeout_later(struct hang_watch *hw)
{
    hw->timeout_late = 1;
    hw->timeout_timer = timer_at(hw, amldist__now_ns() +
                                 s_to_ns(TIMEOUT_FALLBACK_S), on_timeout);
    if (hw->j->s->o->verbose)
        msg("--timeout %g: the rendezvous host's node stops the job "
            "(this node itself in %g s if it does not)", hw->j->s->o->timeout,
            TIMEOUT_FALLBACK_S);
    return 1;
}

/* ---- ranks still running after others ended ----------------------------- */

/* Ranks still run, `waited` s after the first of the others ended. */
static void say_waiting(const struct job *j, double waited)
{
    char what[512];
    size_t o = 0;
    if (j->live > 4) {
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
        o = (size_t)snprintf(what, sizeof what, "rank%s ",
                             plural((size_t)j->live));
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
                 plural((size_t)j->live), pidl);
    }
    msg("%d of %d ranks done; waiting for %s for %.0f s", j->n - j->live,
        j->n, what, waited);
}

static void on_notice(void *arg)
{
    struct hang_watch *hw = arg;
    struct job *j = hw->j;
    hw->notice_timer = 0;
    if (j->p.phase != PHASE_RUNNING || j->live == 0)
        return;
    say_waiting(j, now_s() - hw->t_first_done);
    hw->notice_every = hw->notice_every * 2 > NOTICE_MAX_S
                           ? NOTICE_MAX_S : hw->notice_every * 2;
    hw->notice_timer = timer_at(hw, amldist__now_ns() +
                                s_to_ns(hw->notice_every), on_notice);
}

/* A worker of the attempt ended well while others run: the notices. */
static void worker_exit(void *self, struct job *j, const struct worker *w,
                        int first_failure)
{
    struct hang_watch *hw = self;
    if (first_failure || status_failed(w->status))
        return;
    if (hw->t_first_done == 0)
        hw->t_first_done = now_s();
    if (hw->notice_timer || j->s->o->quiet || j->live == 0 ||
        j->p.phase != PHASE_RUNNING)
        return;
    hw->notice_every = NOTICE_FIRST_S;
    hw->notice_timer = timer_at(hw, amldist__now_ns() +
                                s_to_ns(NOTICE_FIRST_S), on_notice);
}

/* The attempt's workers have all ended: its timers go. */
static void attempt_end(void *self, struct job *j)
{
    struct hang_watch *hw = self;
    (void)j;
    pending_end(hw);
    cancel(hw, &hw->hang_timer);
    cancel(hw, &hw->notice_timer);
    hw->t_first_done = 0;
}

/* ---- the plugin --------------------------------------------------------- */

static int attach(struct job *j, void **self)
{
    struct hang_watch *hw = calloc(1, sizeof *hw);
    if (!(*self = hw))
        return -1;
    hw->j = j;
    if (j->s->o->timeout > 0)
        hw->timeout_timer = timer_at(
            hw, s_to_ns(j->t_begin + j->s->o->timeout), on_timeout);
    return 0;
}

static void detach(void *self, struct job *j)
{
    struct hang_watch *hw = self;
    (void)j;
    cancel(hw, &hw->hang_timer);
    cancel(hw, &hw->notice_timer);
    cancel(hw, &hw->timeout_timer);
    if (hw->pending.capture)
        job_stacks_cancel(j, hw->pending.capture);
    free(hw->pending.stalled);
    free(hw);
}

const struct job_plugin hang_plugin = {
    .name = "hang",
    .attach = attach,
    .attempt_start = attempt_start,
    .worker_exit = worker_exit,
    .attempt_end = attempt_end,
    .detach = detach,
};
