/* Issue 20 across nodes in amlrun: the plane client (see plane.h). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/hooks.h"
#include "output/msg.h"
#include "output/output.h"
#include "output/ranklist.h"
#include "plugins/plane.h"
#include "progress/hang.h"
#include "progress/straggler.h"
#include "stacks/stacks.h"
#include "util/clock.h"

struct plane_hist;
struct plane_ask;

/* The plugin's state. */
struct plane {
    struct job *j;
    int view_timer;           /* the next view for the host, 0: none */
    int events_fd;            /* the gathers' descriptor, watched */
    struct plane_hist *marks; /* the host's node: every rank's */
    struct plane_ask *asks;   /* this node's gathers waited for */
};

/* ---- the views (--hang-timeout) --------------------------------------- */

/* An eighth of the timeout apart, from 100 ms to 0.5 s, as the library
 * sends them (amldist_rdzv_watch()). */
static long long view_every_ms(double timeout_s)
{
    long long ms = (long long)(timeout_s * 125);
    return ms < 100 ? 100 : ms > 500 ? 500 : ms;
}

/* This node's ranks as the hang rule sees them (their lines and their
 * calls of the progress API); NULL when out of memory. */
static amldist__hang_rank_t *ranks_view(struct job *j, size_t *n)
{
    amldist__hang_rank_t *h = malloc((size_t)(j->n > 0 ? j->n : 1) *
                                     sizeof *h);
    *n = h ? hang_view(j, h, NULL) : 0;
    return h;
}

/* A rank's last progress for the host, a long step it announced
 * (amldist_progress_expect) folded in: as if it had called at the step's
 * end less the timeout, which is how the rule reads an announced step
 * (progress/hang.c), so the view needs no field of its own. */
static int64_t announced(const amldist__hang_rank_t *r, int64_t timeout_ns)
{
    int64_t p = r->progress_ns;
    if (r->until_ns > timeout_ns && r->until_ns - timeout_ns > p)
        p = r->until_ns - timeout_ns;
    return p;
}

static void on_view(void *arg)
{
    struct plane *pl = arg;
    struct job *j = pl->j;
    pl->view_timer = 0;
    if (j->p.phase != PHASE_RUNNING)
        return;
    size_t n;
    amldist__hang_rank_t *h = ranks_view(j, &n);
    amldist_rdzv_view_t *v = malloc((n ? n : 1) * sizeof *v);
    int64_t timeout_ns = (int64_t)(j->s->o->hang_timeout * 1e9);
    if (h && v) {
        for (size_t i = 0; i < n; i++)
            v[i] = (amldist_rdzv_view_t){
                .rank = h[i].rank,
                .flags = (h[i].alive ? AMLDIST_RDZV_VIEW_ALIVE : 0u) |
                         (h[i].uses_api ? AMLDIST_RDZV_VIEW_API : 0u),
                .start_ns = h[i].start_ns,
                .progress_ns = announced(&h[i], timeout_ns),
                .line_ns = h[i].line_ns, .end_ns = h[i].end_ns};
        amldist_rdzv_set_view(j->s->rz, v, (int)n);
    }
    free(h);
    free(v);
    long long at = amldist__now_ns() / 1000000 +
                   view_every_ms(j->s->o->hang_timeout);
    /* 0, out of memory: the host sees the last view */
    pl->view_timer = job_timer(j, at, on_view, pl);
}

/* An attempt's workers have started: the views begin (--hang-timeout). */
static void attempt_start(void *self, struct job *j, int started)
{
    struct plane *pl = self;
    if (!started || j->s->o->hang_timeout <= 0)
        return;
    double ms = j->s->o->hang_timeout * 1000;
    amldist_rdzv_watch(j->s->rz, ms > 86400000 ? 86400000 : (int)ms);
    on_view(pl);
}

/* Its workers have all ended: the views stop. */
static void attempt_end(void *self, struct job *j)
{
    struct plane *pl = self;
    job_timer_cancel(j, pl->view_timer);
    pl->view_timer = 0;
    /* The attempt's ranks are no view of the next round's. */
    if (j->s->rz && j->s->o->hang_timeout > 0)
        amldist_rdzv_set_view(j->s->rz, NULL, 0);
}

/* ---- answers ---------------------------------------------------------- */

/* This node's running workers' stacks (job_stacks_start(), as for its own
 * hangs and --stacks), encoded as the answer to the host's hang. */
struct stacks_answer {
    struct job *j;
    unsigned id;
};

static void stacks_answered(void *arg, struct stk_set *set, int rc)
{
    struct stacks_answer *sa = arg;
    size_t len = 0;
    char *text = rc == 0 ? stk_encode(set, &len) : NULL;
    if (!text && rc != JOB_STACKS_CUT)
        msg("the stacks of this node's ranks for another node: out of "
            "memory");
    /* None (the attempt ended first): an empty answer, so that the host
     * is not kept waiting. */
    if (amldist_rdzv_answer(sa->j->s->rz, sa->id, text ? text : "",
                            text ? len : 0) < 0)
        msg("answering another node: %s", amldist_last_error());
    free(text);
    free(sa);
}

/* The host's hang: this node's stacks, read beside the loop, as the
 * answer; 0, or -1 when they cannot be read (out of memory). */
static int node_stacks(struct job *j, unsigned id)
{
    struct stacks_answer *sa = malloc(sizeof *sa);
    if (!sa)
        return -1;
    *sa = (struct stacks_answer){j, id};
    if (job_stacks_start(j, stacks_answered, sa))
        return 0;
    free(sa);
    return -1;
}

/* Another node's --status or --stacks: this node's part, made on the
 * loop (node_part), then the answer: 'D' and its data, or 'E' and its
 * error's text. */
struct part_answer {
    struct job *j;
    unsigned id;
};

static void answer_part(struct job *j, unsigned id, const struct part *p)
{
    const char *body = p && !p->error ? p->data : p ? p->error : "out of memory";
    size_t len = p && !p->error ? p->len : strlen(body);
    char *b = malloc(len + 1);
    if (b) {
        b[0] = p && !p->error ? 'D' : 'E';
        if (len)
            memcpy(b + 1, body, len);
    }
    if (amldist_rdzv_answer(j->s->rz, id, b ? b : "E", b ? len + 1 : 1) < 0)
        msg("answering another node: %s", amldist_last_error());
    free(b);
}

static void part_made(void *arg, struct part *p)
{
    struct part_answer *pa = arg;
    answer_part(pa->j, pa->id, p);
    part_free(p); /* its contents are ours, the part itself node_part()'s */
    free(pa);
}

static void answer(struct job *j, const amldist_rdzv_request_t *q)
{
    size_t len = 0;
    char *blob = NULL;
    int own = q->asker == amldist_rdzv_node_rank(j->s->rz);
    if (q->topic == AMLDIST_RDZV_TOPIC_HANG) {
        if (node_stacks(j, q->id) == 0)
            return;
        msg("the stacks of this node's ranks for another node: out of "
            "memory");
    } else if ((q->topic == AMLDIST_RDZV_TOPIC_STATUS ||
                q->topic == AMLDIST_RDZV_TOPIC_STACKS) && !own) {
        struct part_answer *pa = malloc(sizeof *pa);
        if (pa) {
            *pa = (struct part_answer){j, q->id};
            if (node_part(j, q->topic == AMLDIST_RDZV_TOPIC_STATUS
                                 ? PART_STATUS : PART_STACKS,
                          part_made, pa))
                return;
            free(pa);
        }
        answer_part(j, q->id, NULL);
        return;
    }
    /* Its own ask (its part is already made), or an unknown topic: an
     * empty answer, so that nobody is kept waiting. */
    if (amldist_rdzv_answer(j->s->rz, q->id, blob ? blob : "", len) < 0)
        msg("answering another node: %s", amldist_last_error());
    free(blob);
}

/* ---- this node's --status and --stacks, of every node ---------------------- */

struct plane_ask {
    struct plane_ask *next;
    unsigned tag;
    struct part mine;
    gather_done_fn *done;
    void *arg;
};

/* job_gather() across nodes: every node asked for its part of kind k
 * (this node's is `mine`, taken), done() called from the loop with them
 * all in node order, a node that did not answer as a part whose error
 * names it.  0, or -1 when the ask could not be made (mine not taken). */
static int plane_gather(void *self, struct job *j, enum part_kind k,
                        struct part *mine, gather_done_fn *done, void *arg)
{
    struct plane *pl = self;
    struct plane_ask *a = calloc(1, sizeof *a);
    /* Stacks are read within 10 s on each node; a status in a moment. */
    if (!a || amldist_rdzv_gather(j->s->rz, k == PART_STATUS
                                                ? AMLDIST_RDZV_TOPIC_STATUS
                                                : AMLDIST_RDZV_TOPIC_STACKS,
                                  NULL, 0, k == PART_STATUS ? 5000 : 15000,
                                  &a->tag) < 0) {
        free(a);
        return -1;
    }
    a->mine = *mine;
    a->done = done;
    a->arg = arg;
    a->next = pl->asks;
    pl->asks = a;
    return 0;
}

static int by_node(const void *x, const void *y)
{
    const struct part *a = x, *b = y;
    return (a->node > b->node) - (a->node < b->node);
}

static char *copy(const void *p, size_t n)
{
    char *c = malloc(n + 1);
    if (c) {
        memcpy(c, p, n);
        c[n] = '\0';
    }
    return c;
}

/* The parts of a gather this node asked for, to its done(). */
static void parts_of(struct plane *pl, const amldist_rdzv_gather_t *g)
{
    struct job *j = pl->j;
    struct plane_ask **pa = &pl->asks, *a;
    while (*pa && (*pa)->tag != g->tag)
        pa = &(*pa)->next;
    if (!(a = *pa))
        return;
    *pa = a->next;
    int self = amldist_rdzv_node_rank(j->s->rz);
    struct part *parts = calloc((size_t)g->n + 2, sizeof *parts);
    size_t n = 0;
    if (parts)
        parts[n++] = a->mine;
    else
        part_free(&a->mine);
    for (int i = 0; parts && i < g->n; i++) {
        const amldist_rdzv_answer_t *ans = &g->answers[i];
        if (ans->node == self)
            continue;
        struct part *p = &parts[n++];
        p->node = ans->node;
        char why[160];
        if (ans->status) {
            snprintf(why, sizeof why, "node %d (%s): %s", ans->node,
                     ans->addr[0] ? ans->addr : "?",
                     ans->status == AMLDIST_ERANGE ? "its answer was too large"
                                                   : "no answer in time");
            p->error = strdup(why);
        } else if (ans->len >= 1 && ans->blob[0] == 'D') {
            p->data = copy(ans->blob + 1, ans->len - 1);
            p->len = ans->len - 1;
        } else {
            p->error = ans->len > 1 ? copy(ans->blob + 1, ans->len - 1)
                                    : strdup("no answer");
        }
    }
    if (parts && g->refused)
        parts[n++] = (struct part){.node = -1,
                                   .error = strdup("the other nodes could "
                                                   "not be asked (the "
                                                   "rendezvous host was "
                                                   "busy, or not reached: "
                                                   "the decider moved)")};
    if (parts)
        qsort(parts, n, sizeof *parts, by_node);
    a->done(a->arg, parts, parts ? n : 0);
    free(a);
}

/* ---- the host's node: the hang, reported once ---------------------------- */

/* "node 2 (10.0.0.3), node 5 (...)": the nodes that sent no stacks. */
static void missing_nodes(const amldist_rdzv_gather_t *g, char *buf,
                          size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < g->n && o < size; i++) {
        const amldist_rdzv_answer_t *a = &g->answers[i];
        if (a->status == 0)
            continue;
        int w = snprintf(buf + o, size - o, "%snode %d (%s: %s)",
                         o ? ", " : "", a->node, a->addr[0] ? a->addr : "?",
                         a->status == AMLDIST_ERANGE ? "too large"
                                                     : "no answer in time");
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

static void hang_report(struct job *j, const amldist_rdzv_gather_t *g)
{
    const struct amlrun_opts *o = j->s->o;
    double timeout = g->hang_timeout_ms / 1000.0;
    int *stalled = malloc((size_t)(g->nstalled > 0 ? g->nstalled : 1) *
                          sizeof *stalled);
    if (!stalled)
        return;
    memcpy(stalled, g->stalled, (size_t)g->nstalled * sizeof *stalled);
    char list[256], missing[1024];
    if (g->nstalled > 0) {
        ranklist_format(stalled, (size_t)g->nstalled, list, sizeof list);
        msg("hang: rank%s %s of the job made no progress for %g s "
            "(--hang-timeout, as the rendezvous host saw every node): the "
            "stacks of every node", g->nstalled == 1 ? "" : "s", list,
            timeout);
    } else {
        msg("hang: no rank of any node showed progress for %g s "
            "(--hang-timeout, as the rendezvous host saw every node): the "
            "stacks of every node", timeout);
    }
    struct stk_set all = {0};
    for (int i = 0; i < g->n; i++) {
        const amldist_rdzv_answer_t *a = &g->answers[i];
        if (a->status == 0 &&
            stk_decode((const char *)a->blob, a->len, &all) < 0)
            msg("hang: node %d sent stacks that do not decode", a->node);
    }
    struct stk_report rep;
    if (stk_merge(&all, g->nstalled ? stalled : NULL, (size_t)g->nstalled,
                  STOP_HANG, timeout, &rep) == 0) {
        stk_print(stderr, &all, &rep);
        if (o->hang_report && stk_write_json(o->hang_report, &all, &rep) < 0)
            msg_errno(errno, "--hang-report %s", o->hang_report);
        stk_report_free(&rep);
    }
    missing_nodes(g, missing, sizeof missing);
    if (missing[0])
        msg("hang: no stacks from %s", missing);
    stk_set_free(&all);
    /* The round fails here, for every node: 124, or a restart.  This
     * node's own workers may all have ended already (the others wait for a
     * rank elsewhere): the supervisor has nothing of its own to stop then. */
    struct job_hang found = {STOP_HANG, o->hang_timeout, timeout, stalled,
                             (size_t)g->nstalled};
    job_publish(j, TOPIC_HANG, &found);
    free(stalled);
    char peer[256];
    snprintf(peer, sizeof peer, "amlrun:   host %s: hang: no progress for "
             "%.1f s (--hang-timeout %g)\n", j->s->host, timeout,
             o->hang_timeout);
    job_stop(j, STOP_HANG, &(struct stop_detail){NULL, peer});
}

/* ---- the loop ------------------------------------------------------------- */

static void on_events(void *arg, int fd, short revents)
{
    struct plane *pl = arg;
    struct job *j = pl->j;
    amldist_rdzv_request_t *q;
    amldist_rdzv_gather_t *g;
    (void)fd;
    (void)revents;
    while (amldist_rdzv_next_request(j->s->rz, &q) == 1) {
        answer(j, q);
        amldist_rdzv_request_free(q);
    }
    while (amldist_rdzv_next_gather(j->s->rz, &g) == 1) {
        job_sync(j);
        if (g->topic != AMLDIST_RDZV_TOPIC_HANG)
            parts_of(pl, g);
        else if (j->p.phase == PHASE_RUNNING || j->p.phase == PHASE_WAITING)
            hang_report(j, g); /* of this round: it still runs */
        amldist_rdzv_gather_free(g);
    }
}


/* ---- stragglers across nodes --------------------------------------------- */

/* Each rank's newest marks, on the host's clock (the host's node). */
#define HIST AMLDIST__STRAGGLER_MAX_STEPS
struct plane_hist {
    struct rank_hist {
        int node;
        amldist__progress_mark_t *m; /* a ring of HIST, NULL: none yet */
        size_t head, len;
    } *r;
    int n; /* ranks (the job's world) */
};

/* Take what the host passed on into the histories. */
static void drain_marks(struct plane *pl)
{
    struct job *j = pl->j;
    amldist_rdzv_mark_t in[256];
    int k;
    int world = j->n > 0 ? j->w[0].id.world : 0;
    if (!pl->marks && world > 0 && (pl->marks = calloc(1, sizeof *pl->marks)) &&
        !(pl->marks->r = calloc((size_t)world, sizeof *pl->marks->r))) {
        free(pl->marks);
        pl->marks = NULL;
    }
    if (pl->marks && !pl->marks->n)
        pl->marks->n = world;
    while ((k = amldist_rdzv_take_marks(j->s->rz, in, 256)) > 0) {
        for (int i = 0; i < k && pl->marks; i++) {
            if (in[i].rank < 0 || in[i].rank >= pl->marks->n)
                continue;
            struct rank_hist *h = &pl->marks->r[in[i].rank];
            if (!h->m && !(h->m = malloc(HIST * sizeof *h->m)))
                continue;
            h->node = in[i].node;
            h->m[(h->head + h->len) % HIST] =
                (amldist__progress_mark_t){in[i].step, in[i].t_ns};
            if (h->len < HIST)
                h->len++;
            else
                h->head = (h->head + 1) % HIST;
        }
    }
}

/* A worker's new progress marks (this node's clock, TOPIC_MARKS), for the
 * host's node: it compares every node's ranks on one clock. */
static void on_marks(void *self, struct job *j, const void *data)
{
    struct plane *pl = self;
    const struct job_marks *jm = data;
    const amldist__progress_mark_t *m = jm->m;
    size_t n = jm->n;
    int rank = jm->rank;
    amldist_rdzv_mark_t out[64];
    while (n) {
        int k = n < 64 ? (int)n : 64;
        for (int i = 0; i < k; i++)
            out[i] = (amldist_rdzv_mark_t){0, rank, m[i].step, m[i].t_ns};
        amldist_rdzv_put_marks(j->s->rz, out, k);
        m += k;
        n -= (size_t)k;
    }
    if (amldist_rdzv_is_host(j->s->rz) == 1)
        drain_marks(pl);
}

/* At the job's end, on the host's node: "amlrun: slowest rank R: node N
 * (host H), M ms behind the median over K steps" when one rank of the job
 * was consistently last (the straggler plugin's line, job-wide); on every
 * node with -v, its clock's offset from the host's. */
static void job_finish(void *self, struct job *j, int status)
{
    struct plane *pl = self;
    (void)status;
    long long off, err;
    /* -v: this node's clock against the host's, as the marks and views
     * were moved by it. */
    if (j->s->rz && j->s->o->verbose &&
        amldist_rdzv_clock_offset_ns(j->s->rz, &off, &err) == 0)
        msg("rendezvous: the host's clock reads this node's %+.3f ms, "
            "within %.3f ms", (double)off / 1e6, (double)err / 1e6);
    if (!j->s->rz || amldist_rdzv_is_host(j->s->rz) != 1 || j->s->o->quiet)
        return;
    drain_marks(pl);
    struct plane_hist *ph = pl->marks;
    if (!ph)
        return;
    amldist__straggler_rank_t *ranks = calloc((size_t)ph->n, sizeof *ranks);
    amldist__straggler_lag_t *lags = calloc((size_t)ph->n, sizeof *lags);
    int *index = calloc((size_t)ph->n, sizeof *index);
    amldist__progress_mark_t **lin = calloc((size_t)ph->n, sizeof *lin);
    size_t nr = 0;
    for (int r = 0; ranks && lags && index && lin && r < ph->n; r++) {
        struct rank_hist *h = &ph->r[r];
        if (!h->len || !(lin[nr] = malloc(h->len * sizeof **lin)))
            continue;
        for (size_t k = 0; k < h->len; k++)
            lin[nr][k] = h->m[(h->head + k) % HIST];
        ranks[nr] = (amldist__straggler_rank_t){lin[nr], h->len};
        index[nr++] = r;
    }
    amldist__straggler_t v;
    if (nr >= 2 && amldist__straggler_compute(ranks, nr, lags, &v) == 0 &&
        v.slowest >= 0) {
        int rank = index[v.slowest], node = ph->r[rank].node;
        double ms = (double)lags[v.slowest].lag_ns / 1e6;
        char host[300] = "";
        if (node == amldist_rdzv_node_rank(j->s->rz))
            snprintf(host, sizeof host, " (host %s)", j->s->host);
        msg("slowest rank %d: node %d%s, %.*f ms behind the median over %u "
            "steps (every node's, on one clock)", rank, node, host,
            ms < 10 ? 1 : 0, ms, v.steps);
    }
    for (size_t i = 0; lin && i < nr; i++)
        free(lin[i]);
    free(lin);
    free(index);
    free(lags);
    free(ranks);
}

/* What the host's node knows of every rank's marks, and the gathers still
 * waited for (their done() is not called). */
static void detach(void *self, struct job *j)
{
    struct plane *pl = self;
    job_timer_cancel(j, pl->view_timer);
    if (pl->events_fd >= 0)
        amldist__loop_unwatch(j->loop, pl->events_fd);
    while (pl->asks) {
        struct plane_ask *a = pl->asks;
        pl->asks = a->next;
        part_free(&a->mine);
        free(a);
    }
    if (pl->marks) {
        for (int r = 0; r < pl->marks->n; r++)
            free(pl->marks->r[r].m);
        free(pl->marks->r);
        free(pl->marks);
    }
    free(pl);
}

/* With a control plane only: the gathers' descriptor in the job's loop,
 * the marks, the cross-node gathers. */
static int attach(struct job *j, void **self)
{
    *self = NULL;
    if (!j->s->rz)
        return 0;
    struct plane *pl = calloc(1, sizeof *pl);
    if (!pl)
        return -1;
    pl->j = j;
    pl->events_fd = -1;
    *self = pl;
    int fd = amldist_rdzv_events_fd(j->s->rz);
    if (amldist__loop_watch(j->loop, fd, POLLIN, on_events, pl) < 0 ||
        job_subscribe(j, TOPIC_MARKS, on_marks, pl) < 0)
        return -1;
    pl->events_fd = fd;
    job_set_gatherer(j, plane_gather, pl);
    return 0;
}

const struct job_plugin plane_plugin = {
    .name = "plane",
    .attach = attach,
    .attempt_start = attempt_start,
    .attempt_end = attempt_end,
    .job_finish = job_finish,
    .detach = detach,
};
