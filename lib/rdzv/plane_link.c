/*
 * Issue 20's plane on the agent's side (see plane_link.h), every
 * backend's: the decider's clock (a TIMEQ each heartbeat, quicker until a
 * few samples are in), this node's view of its ranks while it watches for
 * hangs, the caller's asks and answers (chunked, behind the connection's
 * queue), the gathers whose answers come in, and the per-step marks both
 * ways.  Nothing here waits for the caller: what it hands over is queued
 * under mu, and the caller takes what is for it when its events
 * descriptor says so.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdzv/plane_link.h"

/* The first samples come quick, so that the offset is known as soon as
 * the workers start. */
#define TIMEQ_QUICK_MS 50
#define TIMEQ_QUICK_SAMPLES AMLDIST__RZ_TIMEQ_QUICK
#define MARKS_EVERY_MS 1000

/* A gather whose answers come in, one slot an answering agent. */
struct amldist__rz_gathering {
    struct amldist__rz_gathering *next;
    uint32_t tag, topic;
    struct amldist__rz_slot {
        int used, status;
        uint32_t node;
        char addr[64];
        unsigned char *buf;
        size_t len;
    } *s;
    size_t ns;
    size_t total;
};

static struct amldist__rz_gathering *gathering_new(uint32_t tag,
                                                  uint32_t topic)
{
    struct amldist__rz_gathering *g = calloc(1, sizeof *g);
    if (g) {
        g->tag = tag;
        g->topic = topic;
    }
    return g;
}

static void gathering_free(struct amldist__rz_gathering *g)
{
    for (size_t i = 0; i < g->ns; i++)
        free(g->s[i].buf);
    free(g->s);
    free(g);
}

static void track(amldist__rz_link_t *t, struct amldist__rz_gathering *g)
{
    g->next = t->g;
    t->g = g;
}

/* The gather's slot for index i, grown to it; NULL past the bound. */
static struct amldist__rz_slot *slot(struct amldist__rz_gathering *g,
                                     uint32_t i)
{
    if (i >= (uint32_t)AMLDIST_RDZV_MAX_NODES + 1024)
        return NULL;
    if (i >= g->ns) {
        size_t n = g->ns ? g->ns : 4;
        while (n <= i)
            n *= 2;
        struct amldist__rz_slot *s = realloc(g->s, n * sizeof *s);
        if (!s)
            return NULL;
        memset(s + g->ns, 0, (n - g->ns) * sizeof *s);
        g->s = s;
        g->ns = n;
    }
    return &g->s[i];
}

/* The complete gather handed to the caller (under mu). */
static void deliver(amldist__rz_link_t *t, struct amldist__rz_gathering *g,
                    uint32_t flags, const unsigned char *arg, size_t arg_len)
{
    struct amldist__rz_got *out =
        amldist__rz_got_new(g->tag, g->topic, arg, arg_len);
    if (!out)
        return;
    out->pub.refused = (flags & AMLDIST__RZ_G_REFUSED) != 0;
    size_t n = 0;
    for (size_t i = 0; i < g->ns; i++)
        n += g->s[i].used;
    out->pub.answers = calloc(n ? n : 1, sizeof *out->pub.answers);
    if (!out->pub.answers) {
        amldist_rdzv_gather_free(&out->pub);
        return;
    }
    for (size_t i = 0; i < g->ns; i++) {
        struct amldist__rz_slot *s = &g->s[i];
        if (!s->used)
            continue;
        amldist_rdzv_answer_t *a = &out->pub.answers[out->pub.n++];
        a->node = s->node == AMLDIST__RZ_NONE ? -1 : (int)s->node;
        a->status = s->status;
        amldist__strlcpy(a->addr, s->addr, sizeof a->addr);
        a->blob = s->buf;
        a->len = s->len;
        s->buf = NULL;
    }
    pthread_mutex_lock(&t->s->mu);
    struct amldist__rz_got **end = &t->s->pl.got;
    while (*end)
        end = &(*end)->next;
    *end = out;
    amldist__rz_plane_signal(t->s);
    pthread_mutex_unlock(&t->s->mu);
}

/* One RESULT of gather g for its agent at index: a chunk of its answer,
 * or that it is missing or too big. */
static void take_chunk(struct amldist__rz_gathering *g, uint32_t index,
                       uint32_t node, uint32_t flags, const unsigned char *d,
                       size_t dl)
{
    struct amldist__rz_slot *s = slot(g, index);
    if (!s)
        return;
    s->used = 1;
    s->node = node;
    if (flags & AMLDIST__RZ_G_MISSING) {
        s->status = AMLDIST_ETIMEDOUT;
        size_t n = dl < sizeof s->addr - 1 ? dl : sizeof s->addr - 1;
        memcpy(s->addr, d, n);
        s->addr[n] = '\0';
        free(s->buf);
        s->buf = NULL;
        s->len = 0;
        return;
    }
    if ((flags & AMLDIST__RZ_G_TOOBIG) || s->status ||
        s->len + dl > AMLDIST__RZ_BLOB_MAX ||
        g->total + dl > AMLDIST__RZ_GATHER_MAX) {
        s->status = AMLDIST_ERANGE;
        free(s->buf);
        s->buf = NULL;
        s->len = 0;
        return;
    }
    if (dl) {
        unsigned char *b = realloc(s->buf, s->len + dl);
        if (!b) {
            s->status = AMLDIST_ENOMEM;
            return;
        }
        memcpy(b + s->len, d, dl);
        s->buf = b;
        s->len += dl;
        g->total += dl;
    }
}

static void on_result(amldist__rz_link_t *t, const unsigned char *p,
                      uint32_t len)
{
    uint32_t tag = amldist__net_get_u32(p), topic = amldist__net_get_u32(p + 4);
    uint32_t flags = amldist__net_get_u32(p + 16);
    const unsigned char *d = p + AMLDIST__RZ_RESULT_HEAD;
    size_t dl = len - AMLDIST__RZ_RESULT_HEAD;
    struct amldist__rz_gathering **pg = &t->g;
    while (*pg && (*pg)->tag != tag)
        pg = &(*pg)->next;
    /* The decider's own gather (a hang) comes to its own agent unasked;
     * anything else unasked is dropped. */
    if (!*pg && tag == 0 && topic == AMLDIST_RDZV_TOPIC_HANG && t->own) {
        struct amldist__rz_gathering *g = gathering_new(0, topic);
        if (!g)
            return;
        track(t, g);
        pg = &t->g;
    }
    struct amldist__rz_gathering *g = *pg;
    if (!g)
        return;
    if (flags & AMLDIST__RZ_G_END) {
        *pg = g->next;
        deliver(t, g, flags, d, dl);
        gathering_free(g);
        return;
    }
    take_chunk(g, amldist__net_get_u32(p + 8), amldist__net_get_u32(p + 12),
               flags, d, dl);
}

static void on_query(amldist__rz_link_t *t, const unsigned char *p,
                     uint32_t len)
{
    struct amldist__rz_req *q = amldist__rz_req_new(
        amldist__net_get_u32(p), amldist__net_get_u32(p + 4),
        amldist__net_get_u32(p + 8), p + 12, len - 12);
    if (!q)
        return;
    pthread_mutex_lock(&t->s->mu);
    if (t->s->pl.nreqs >= AMLDIST__RZ_REQS_MAX) {
        /* A caller that never takes them: the host names it missing. */
        pthread_mutex_unlock(&t->s->mu);
        amldist_rdzv_request_free(&q->pub);
        return;
    }
    struct amldist__rz_req **end = &t->s->pl.reqs;
    while (*end)
        end = &(*end)->next;
    *end = q;
    t->s->pl.nreqs++;
    amldist__rz_plane_signal(t->s);
    pthread_mutex_unlock(&t->s->mu);
}

static void on_marks(amldist__rz_link_t *t, const unsigned char *p,
                     uint32_t len)
{
    uint32_t node = amldist__net_get_u32(p), n = amldist__net_get_u32(p + 4);
    if ((uint64_t)n * AMLDIST__RZ_MARK_LEN != len - 8)
        return;
    pthread_mutex_lock(&t->s->mu);
    struct amldist__rz_plane_shared *pl = &t->s->pl;
    if (!pl->marks_in)
        pl->marks_in = malloc(AMLDIST__RZ_MARKS_IN * sizeof *pl->marks_in);
    for (uint32_t i = 0; pl->marks_in && i < n; i++) {
        const unsigned char *q = p + 8 + (size_t)i * AMLDIST__RZ_MARK_LEN;
        if (pl->in_n == AMLDIST__RZ_MARKS_IN) { /* the oldest goes */
            pl->in_first = (pl->in_first + 1) % AMLDIST__RZ_MARKS_IN;
            pl->in_n--;
        }
        amldist_rdzv_mark_t *m =
            &pl->marks_in[(pl->in_first + pl->in_n++) % AMLDIST__RZ_MARKS_IN];
        m->node = (int)node;
        m->rank = (int)amldist__net_get_u32(q);
        m->step = amldist__rz_get_u64(q + 4);
        m->t_ns = (long long)amldist__rz_get_u64(q + 12);
    }
    pthread_mutex_unlock(&t->s->mu);
}

void amldist__rz_link_frame(amldist__rz_link_t *t, unsigned type,
                             const unsigned char *p, uint32_t len)
{
    switch (type) {
    case AMLDIST__RZ_TIMEA: {
        int64_t t4 = amldist__rz_clock_ns(), off, err;
        if (amldist__rz_clock_add(&t->clk, (int64_t)amldist__rz_get_u64(p),
                                  (int64_t)amldist__rz_get_u64(p + 8),
                                  (int64_t)amldist__rz_get_u64(p + 16),
                                  t4) < 0 ||
            amldist__rz_clock_best(&t->clk, &off, &err) < 0)
            return;
        pthread_mutex_lock(&t->s->mu);
        t->s->pl.clk_have = 1;
        t->s->pl.clk_offset = off;
        t->s->pl.clk_error = err;
        pthread_mutex_unlock(&t->s->mu);
        return;
    }
    case AMLDIST__RZ_QUERY:
        on_query(t, p, len);
        return;
    case AMLDIST__RZ_RESULT:
        on_result(t, p, len);
        return;
    case AMLDIST__RZ_MARKS:
        on_marks(t, p, len);
        return;
    }
}

/* This node's view on the host's clock. */
static int send_view(amldist__rz_link_t *t, int round, int watch_ms,
                     const amldist_rdzv_view_t *v, int n, int64_t shift)
{
    size_t len = AMLDIST__RZ_VIEW_HEAD + (size_t)n * AMLDIST__RZ_VIEW_RANK;
    unsigned char *b = malloc(len);
    if (!b)
        return 0;
    amldist__net_put_u32(b, (uint32_t)round);
    amldist__net_put_u32(b + 4, (uint32_t)watch_ms);
    amldist__net_put_u32(b + 8, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        unsigned char *q = b + AMLDIST__RZ_VIEW_HEAD +
                           (size_t)i * AMLDIST__RZ_VIEW_RANK;
        amldist__net_put_u32(q, (uint32_t)v[i].rank);
        amldist__net_put_u32(q + 4, v[i].flags);
        const long long ts[4] = {v[i].start_ns, v[i].progress_ns,
                                 v[i].line_ns, v[i].end_ns};
        for (int k = 0; k < 4; k++)
            amldist__rz_put_u64(q + 8 + 8 * k,
                                (uint64_t)(ts[k] ? ts[k] + shift : 0));
    }
    int rc = amldist__conn_send(t->c, AMLDIST__RZ_VIEW, b, len);
    free(b);
    return rc;
}

/* The caller's answers, cut into chunks behind the connection's queue. */
static int queue_answer(amldist__rz_link_t *t, struct amldist__rz_answer *a)
{
    size_t off = 0;
    do {
        size_t n = a->len - off < AMLDIST__RZ_CHUNK_MAX ? a->len - off
                                                        : AMLDIST__RZ_CHUNK_MAX;
        unsigned char head[8];
        amldist__net_put_u32(head, a->id);
        amldist__net_put_u32(head + 4, off + n == a->len ? AMLDIST__RZ_G_LAST
                                                         : 0);
        if (amldist__rz_outbox_push(&t->out, AMLDIST__RZ_ANSWER, head,
                                    sizeof head, a->blob + off, n) < 0)
            return -1;
        off += n;
    } while (off < a->len);
    return 0;
}

/* What is due to send, taken under mu (plane_io()). */
struct due {
    int running, round, node;
    struct amldist__rz_ask *asks;
    struct amldist__rz_answer *answers;
    amldist_rdzv_view_t *views; /* want_view: a copy of the caller's */
    int nviews, watch_ms, want_view;
    int64_t shift;              /* the views' local times to the host's */
    amldist_rdzv_mark_t *marks; /* room for AMLDIST__RZ_MARKS_MAX */
    int nmarks;
};

/* Under mu: the caller's asks, answers, view and marks as they are due
 * (the view each AMLDIST__RZ_VIEW_EVERY_MS of the watch, the marks once a
 * second, or at once when the caller said its workers are done: what it
 * had goes before its DONE). */
static void take_due(amldist__rz_link_t *t, long long now, struct due *d)
{
    struct amldist__rz_plane_shared *pl = &t->s->pl;
    d->running = t->s->have_next && t->s->state != C_OVER;
    d->round = t->s->next.round;
    d->node = t->s->next.node;
    d->asks = pl->asks;
    d->answers = pl->answers;
    pl->asks = NULL;
    pl->answers = NULL;
    d->watch_ms = pl->watch_ms;
    d->shift = amldist__rz_clock_shift_ns() + pl->clk_offset;
    /* Only a view the caller made since the last one sent: a caller that
     * stopped (SIGSTOP, a console that does not read) sends none, and the
     * host takes its ranks as unseen, not stalled; its old view sent
     * again would look like ranks without progress. */
    if (t->c->fd >= 0 && d->running && d->watch_ms > 0 &&
        now >= t->next_view) {
        t->next_view = now + AMLDIST__RZ_VIEW_EVERY_MS(d->watch_ms);
        d->want_view = pl->view_fresh;
        pl->view_fresh = 0;
    }
    if (d->want_view) {
        d->nviews = pl->nviews;
        d->views = d->nviews ? malloc((size_t)d->nviews * sizeof *d->views)
                             : NULL;
        if (d->views)
            memcpy(d->views, pl->views, (size_t)d->nviews * sizeof *d->views);
        else
            d->nviews = 0;
    }
    if (pl->nmarks_out && (now >= t->next_marks || t->s->done)) {
        t->next_marks = now + MARKS_EVERY_MS;
        d->nmarks = pl->nmarks_out;
        memcpy(d->marks, pl->marks_out, (size_t)d->nmarks * sizeof *d->marks);
        pl->nmarks_out = 0;
        if (d->nmarks < AMLDIST__RZ_MARKS_MAX / 4 && pl->stride > 1)
            pl->stride /= 2;
    }
}

/* No connection to the decider now (it moved, and the next one is not
 * reached yet): each ask answered at once as refused, never a silent
 * wait. */
static void refuse_asks(amldist__rz_link_t *t, const struct amldist__rz_ask *a)
{
    for (; a; a = a->next) {
        struct amldist__rz_gathering *g = gathering_new(a->tag, a->topic);
        if (g) {
            deliver(t, g, AMLDIST__RZ_G_REFUSED, a->arg, a->arg_len);
            gathering_free(g);
        }
    }
}

/* The caller's asks, each a gather this agent then waits for. */
static int send_asks(amldist__rz_link_t *t, const struct amldist__rz_ask *a)
{
    for (; a; a = a->next) {
        unsigned char b[12 + AMLDIST__RZ_ARG_MAX];
        struct amldist__rz_gathering *g = gathering_new(a->tag, a->topic);
        if (g)
            track(t, g);
        amldist__net_put_u32(b, a->tag);
        amldist__net_put_u32(b + 4, a->topic);
        amldist__net_put_u32(b + 8, a->timeout_ms);
        memcpy(b + 12, a->arg, a->arg_len);
        if (amldist__conn_send(t->c, AMLDIST__RZ_ASK, b, 12 + a->arg_len) < 0)
            return -1;
    }
    return 0;
}

static int send_marks(amldist__rz_link_t *t, const struct due *d)
{
    unsigned char b[8 + AMLDIST__RZ_MARK_LEN * AMLDIST__RZ_MARKS_MAX];
    amldist__net_put_u32(b, (uint32_t)d->node);
    amldist__net_put_u32(b + 4, (uint32_t)d->nmarks);
    for (int i = 0; i < d->nmarks; i++) {
        unsigned char *q = b + 8 + (size_t)i * AMLDIST__RZ_MARK_LEN;
        amldist__net_put_u32(q, (uint32_t)d->marks[i].rank);
        amldist__rz_put_u64(q + 4, d->marks[i].step);
        amldist__rz_put_u64(q + 12, (uint64_t)d->marks[i].t_ns);
    }
    return amldist__conn_send(t->c, AMLDIST__RZ_MARKS, b,
                              8 + (size_t)d->nmarks * AMLDIST__RZ_MARK_LEN);
}

/* A TIMEQ when one is due (the host's own agent shares its clock: it
 * asks nothing). */
static int send_timeq(amldist__rz_link_t *t, const struct due *d,
                      long long now)
{
    if (!d->running || t->own || now < t->next_timeq)
        return 0;
    unsigned char q[8];
    t->next_timeq = now + (t->clk.n < TIMEQ_QUICK_SAMPLES
                                  ? TIMEQ_QUICK_MS
                                  : AMLDIST__RZ_BEAT_MS(t->cfg->keepalive_ms,
                                                        t->cfg->dead_ms));
    amldist__rz_put_u64(q, (uint64_t)amldist__rz_clock_ns());
    /* The host hears this agent by it: it is this keepalive's BEAT too
     * (thread.c): one frame each keepalive to the host, not two (issue
     * 40); c10d's host answers it with its next beat (tcp/host.c). */
    if (t->last_beat)
        *t->last_beat = now;
    return amldist__conn_send(t->c, AMLDIST__RZ_TIMEQ, q, sizeof q);
}

int amldist__rz_link_io(amldist__rz_link_t *t)
{
    long long now = amldist__now_ms();
    amldist_rdzv_mark_t marks[AMLDIST__RZ_MARKS_MAX];
    struct due d = {.marks = marks};
    int bad = 0;
    pthread_mutex_lock(&t->s->mu);
    take_due(t, now, &d);
    pthread_mutex_unlock(&t->s->mu);
    if (t->c->fd >= 0) {
        bad = send_asks(t, d.asks) < 0;
        for (struct amldist__rz_answer *a = d.answers; a && !bad; a = a->next)
            bad = queue_answer(t, a) < 0;
        if (!bad && d.want_view)
            bad = send_view(t, d.round, d.watch_ms, d.views, d.nviews,
                            d.shift) < 0;
        if (!bad && d.nmarks)
            bad = send_marks(t, &d) < 0;
        if (!bad)
            bad = send_timeq(t, &d, now) < 0;
        if (!bad)
            bad = amldist__rz_outbox_pump(&t->out, t->c) < 0;
    } else {
        refuse_asks(t, d.asks);
    }
    amldist__rz_asks_free(d.asks);
    amldist__rz_answers_free(d.answers);
    free(d.views);
    return bad ? -1 : 0;
}

long long amldist__rz_link_wake(const amldist__rz_link_t *t)
{
    long long w = -1;
    pthread_mutex_lock(&t->s->mu);
    int running = t->s->have_next && t->s->state != C_OVER;
    if (running && t->c->fd >= 0) {
        if (!t->own)
            w = t->next_timeq;
        if (t->s->pl.watch_ms > 0 && (w < 0 || t->next_view < w))
            w = t->next_view;
        if (t->s->pl.nmarks_out && (w < 0 || t->next_marks < w))
            w = t->next_marks;
    }
    pthread_mutex_unlock(&t->s->mu);
    return w;
}

void amldist__rz_link_drop(amldist__rz_link_t *t)
{
    while (t->g) {
        struct amldist__rz_gathering *g = t->g;
        t->g = g->next;
        deliver(t, g, AMLDIST__RZ_G_REFUSED, NULL, 0);
        gathering_free(g);
    }
    amldist__rz_outbox_clear(&t->out);
    /* Another decider, another clock: its offset is learnt anew. */
    memset(&t->clk, 0, sizeof t->clk);
    t->next_timeq = t->next_view = 0;
    pthread_mutex_lock(&t->s->mu);
    t->s->pl.clk_have = 0;
    t->s->pl.clk_offset = t->s->pl.clk_error = 0;
    pthread_mutex_unlock(&t->s->mu);
}

void amldist__rz_link_free(amldist__rz_link_t *t)
{
    while (t->g) {
        struct amldist__rz_gathering *g = t->g;
        t->g = g->next;
        gathering_free(g);
    }
    amldist__rz_outbox_clear(&t->out);
}
