/*
 * The host's decisions of issue 20 (see host_sm.h), pure as the rest of
 * the machine: every node's view of its ranks and amlrun's hang rule
 * (progress/hang.h) applied to all of them, on the host's clock; gathers, where one agent asks, every agent
 * answers with an opaque blob, and the host relays the answers to the
 * asker, naming those that did not answer in time; the per-step marks
 * every node sends, relayed to the host's own agent.
 *
 * The host's own gather: when the job is found hung, every agent is asked
 * for its stacks (topic AMLDIST_RDZV_TOPIC_HANG), the answers going to the
 * host's own agent, whose node merges and prints them and then fails the
 * round (status AMLDIST_RDZV_STATUS_HANG); should it not, the host fails
 * the round itself HANG_GRACE_MS after the gather's end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "progress/hang.h"
#include "rdzv/host_sm_state.h"

#define HANG_GATHER_MS 15000 /* amlrun reads its stacks within 10 s */
#define HANG_GRACE_MS 10000
#define GATHER_DEFAULT_MS 5000

static struct amldist__rz_member *own(amldist__rz_sm_t *sm)
{
    return amldist__rz_sm_by_agent(sm, sm->plane_agent);
}

static struct amldist__rz_member *member(amldist__rz_sm_t *sm, void *who)
{
    return amldist__rz_sm_by_who(sm, who);
}

static uint32_t node_of(const struct amldist__rz_member *m)
{
    return m && (m->state == AMLDIST__RZ_M_RUNNING ||
                 m->state == AMLDIST__RZ_M_DONE)
               ? (uint32_t)m->node
               : AMLDIST__RZ_NONE;
}

static void result(amldist__rz_sm_t *sm, struct amldist__rz_gather *g,
                   uint32_t index, uint32_t node, uint32_t flags,
                   const unsigned char *data, size_t len)
{
    if (!g->asker)
        return;
    size_t k = (size_t)sm->nacts;
    amldist__rz_sm_emit(sm, AMLDIST__RZ_A_RESULT, g->asker, 0, NULL);
    if ((size_t)sm->nacts == k + 1) {
        amldist__rz_action_t *a = &sm->acts[k];
        a->tag = g->tag;
        a->topic = g->topic;
        a->index = index;
        a->node = node;
        a->flags = flags;
        a->data = data;
        a->len = len;
    }
}

/* The gather ends: END to the asker, the gather forgotten. */
static void finish(amldist__rz_sm_t *sm, struct amldist__rz_gather *g,
                   uint32_t flags)
{
    /* The END's data outlives the slot's reuse within the step. */
    memcpy(g->end_arg, g->arg, g->arg_len);
    result(sm, g, AMLDIST__RZ_NONE, AMLDIST__RZ_NONE,
           AMLDIST__RZ_G_END | flags, g->end_arg, g->arg_len);
    /* Its entries (the MISSING addresses the step's RESULTs point to)
     * are freed at the next step. */
    if (sm->nspent < AMLDIST__RZ_GATHERS_MAX)
        sm->spent[sm->nspent++] = g->e;
    else
        free(g->e); /* not reached: one end per gather and step */
    g->e = NULL;
    g->used = 0;
    g->n = g->nover = 0;
    g->total = 0;
    amldist__u64map_free(&g->by_who);
}

/* Entry e of gather g is over: answered whole, too big, or missing. */
static void set_over(struct amldist__rz_gather *g,
                     struct amldist__rz_gentry *e)
{
    if (!e->over) {
        e->over = 1;
        g->nover++;
    }
}

static void finish_if_over(amldist__rz_sm_t *sm, struct amldist__rz_gather *g)
{
    if (g->nover == g->n)
        finish(sm, g, 0);
}

/* Ask every agent of the job; NULL when too many gathers are open. */
static struct amldist__rz_gather *
start_gather(amldist__rz_sm_t *sm, void *asker, uint32_t tag, uint32_t topic,
             uint32_t timeout_ms, const unsigned char *arg, size_t arg_len)
{
    struct amldist__rz_gather *g = NULL;
    for (int i = 0; i < AMLDIST__RZ_GATHERS_MAX && !g; i++)
        if (!sm->gathers[i].used)
            g = &sm->gathers[i];
    int n = sm->nm - sm->ngone; /* every member asked: failing ones too */
    if (!g || arg_len > AMLDIST__RZ_ARG_MAX ||
        !(g->e = calloc((size_t)(n ? n : 1), sizeof *g->e)))
        return NULL;
    if (amldist__u64map_init(&g->by_who, (size_t)n) < 0) {
        free(g->e);
        g->e = NULL;
        return NULL;
    }
    g->used = 1;
    g->id = ++sm->next_gather;
    g->tag = tag;
    g->topic = topic;
    g->asker = asker;
    if (timeout_ms == 0)
        timeout_ms = GATHER_DEFAULT_MS;
    if (timeout_ms > AMLDIST__RZ_GATHER_MS_MAX)
        timeout_ms = AMLDIST__RZ_GATHER_MS_MAX;
    g->deadline = sm->now + timeout_ms;
    memcpy(g->arg, arg, arg_len);
    g->arg_len = arg_len;
    for (int i = 0; i < sm->nm; i++) {
        struct amldist__rz_member *m = &sm->m[i];
        if (!amldist__rz_in_job(m))
            continue;
        amldist__u64map_put(&g->by_who, (uintptr_t)m->who, g->n);
        struct amldist__rz_gentry *e = &g->e[g->n++];
        e->who = m->who;
        e->node = node_of(m);
        amldist__strlcpy(e->addr, m->addr, sizeof e->addr);
        size_t k = (size_t)sm->nacts;
        amldist__rz_sm_emit(sm, AMLDIST__RZ_A_QUERY, m->who, g->id, NULL);
        if ((size_t)sm->nacts == k + 1) {
            amldist__rz_action_t *a = &sm->acts[k];
            a->topic = topic;
            /* A hang is the host's own question. */
            a->node = topic == AMLDIST_RDZV_TOPIC_HANG
                          ? AMLDIST__RZ_NONE
                          : node_of(member(sm, asker));
            a->data = g->arg;
            a->len = g->arg_len;
        }
    }
    return g;
}

void amldist__rz_sm_on_ask(amldist__rz_sm_t *sm, struct amldist__rz_member *m,
                           const amldist__rz_event_t *ev)
{
    /* Hangs are the host's to declare; a node in no round has no job to
     * ask about. */
    int refuse = ev->topic == AMLDIST_RDZV_TOPIC_HANG ||
                 node_of(m) == AMLDIST__RZ_NONE ||
                 sm->phase == AMLDIST__RZ_P_OVER;
    if (!refuse && start_gather(sm, m->who, ev->tag, ev->topic,
                                ev->timeout_ms, ev->text, ev->text_len))
        return;
    struct amldist__rz_gather g = {.tag = ev->tag, .topic = ev->topic,
                                   .asker = m->who};
    result(sm, &g, AMLDIST__RZ_NONE, AMLDIST__RZ_NONE,
           AMLDIST__RZ_G_END | AMLDIST__RZ_G_REFUSED, NULL, 0);
}

void amldist__rz_sm_on_answer(amldist__rz_sm_t *sm,
                              struct amldist__rz_member *m,
                              const amldist__rz_event_t *ev)
{
    struct amldist__rz_gather *g = NULL;
    for (int i = 0; i < AMLDIST__RZ_GATHERS_MAX && !g; i++)
        if (sm->gathers[i].used && sm->gathers[i].id == ev->id)
            g = &sm->gathers[i];
    int k = g ? amldist__u64map_get(&g->by_who, (uintptr_t)m->who) : -1;
    /* A request never made, one this agent was not asked, or an answer
     * already whole (late or twice): nothing to relay. */
    if (k < 0 || g->e[k].over)
        return;
    struct amldist__rz_gentry *e = &g->e[k];
    if (e->got + ev->text_len > AMLDIST__RZ_BLOB_MAX ||
        g->total + ev->text_len > AMLDIST__RZ_GATHER_MAX) {
        set_over(g, e);
        result(sm, g, (uint32_t)k, e->node,
               AMLDIST__RZ_G_TOOBIG | AMLDIST__RZ_G_LAST, NULL, 0);
    } else {
        e->got += ev->text_len;
        g->total += ev->text_len;
        if (ev->flags & AMLDIST__RZ_G_LAST)
            set_over(g, e);
        result(sm, g, (uint32_t)k, e->node, ev->flags & AMLDIST__RZ_G_LAST,
               ev->text, ev->text_len);
    }
    finish_if_over(sm, g);
}

static void missing(amldist__rz_sm_t *sm, struct amldist__rz_gather *g, int k)
{
    struct amldist__rz_gentry *e = &g->e[k];
    set_over(g, e);
    result(sm, g, (uint32_t)k, e->node,
           AMLDIST__RZ_G_MISSING | AMLDIST__RZ_G_LAST,
           (const unsigned char *)e->addr, strlen(e->addr));
}

void amldist__rz_sm_watch_lost(amldist__rz_sm_t *sm, void *who)
{
    for (int i = 0; i < AMLDIST__RZ_GATHERS_MAX; i++) {
        struct amldist__rz_gather *g = &sm->gathers[i];
        if (!g->used)
            continue;
        if (g->asker == who)
            g->asker = NULL; /* the others' answers go nowhere now */
        int k = amldist__u64map_get(&g->by_who, (uintptr_t)who);
        if (k >= 0) {
            if (!g->e[k].over)
                missing(sm, g, k);
            g->e[k].who = NULL; /* its pointer may be reused */
            amldist__u64map_del(&g->by_who, (uintptr_t)who);
        }
        finish_if_over(sm, g);
    }
}

void amldist__rz_sm_on_view(amldist__rz_sm_t *sm, struct amldist__rz_member *m,
                            const amldist__rz_event_t *ev)
{
    if ((int)ev->round != sm->round || m->state != AMLDIST__RZ_M_RUNNING)
        return;
    amldist__rz_view_t *v = NULL;
    if (ev->nviews &&
        !(v = malloc(ev->nviews * sizeof *v)))
        return;
    if (ev->nviews)
        memcpy(v, ev->views, ev->nviews * sizeof *v);
    /* Views again after a gap: the clock restarts (hang_since_ns). */
    if (m->view_round == sm->round && m->nviews &&
        sm->now_ns - m->view_at_ns > AMLDIST__RZ_VIEW_LATE_NS(ev->timeout_ms))
        sm->hang_since_ns = sm->now_ns;
    free(m->views);
    m->views = v;
    m->nviews = ev->nviews;
    m->view_round = sm->round;
    m->view_timeout_ms = ev->timeout_ms;
    m->view_at_ns = sm->now_ns;
    m->sum_ok = 0;
    amldist__rz_sm_hang_touch(sm, m);
    sm->hang_next_ns = 0; /* decide again now */
    amldist__rz_sm_watch_tick(sm);
}

/* Whether member m's view counts: a node of this round that watches. */
static int watching(const amldist__rz_sm_t *sm,
                    const struct amldist__rz_member *m)
{
    return m->state == AMLDIST__RZ_M_RUNNING && m->view_round == sm->round &&
           m->view_timeout_ms;
}

/* One rank of a node's view as the rule reads it, a live rank's start no
 * earlier than the clock's restart (hang_since_ns); no announced step: it
 * came folded into the progress. */
static amldist__hang_rank_t to_rank(const amldist__rz_sm_t *sm,
                                    const amldist__rz_view_t *v)
{
    amldist__hang_rank_t r = {
        .rank = (int)(v->rank & 0x7fffffff),
        .alive = (v->flags & AMLDIST_RDZV_VIEW_ALIVE) != 0,
        .uses_api = (v->flags & AMLDIST_RDZV_VIEW_API) != 0,
        .start_ns = v->start_ns, .progress_ns = v->progress_ns,
        .line_ns = v->line_ns, .end_ns = v->end_ns};
    if (r.alive && r.start_ns < sm->hang_since_ns)
        r.start_ns = sm->hang_since_ns;
    return r;
}

/* Member m's view summed up by the rule's own reading of each rank
 * (progress/hang.h): redone only when its view or the clock's restart
 * changed. */
static void sum_up(const amldist__rz_sm_t *sm, struct amldist__rz_member *m)
{
    if (m->sum_ok && m->sum_since == sm->hang_since_ns)
        return;
    m->sum_ok = 1;
    m->sum_since = sm->hang_since_ns;
    m->sum_live = 0;
    m->sum_life = 0;
    m->sum_oldest = AMLDIST__HANG_NEVER;
    for (size_t j = 0; j < m->nviews; j++) {
        amldist__hang_rank_t r = to_rank(sm, &m->views[j]);
        int64_t life = amldist__hang_last_life(&r, 0);
        if (life > m->sum_life)
            m->sum_life = life;
        m->sum_live += r.alive != 0;
        int64_t last = amldist__hang_api_last(&r, 0);
        if (r.alive && r.uses_api && last < m->sum_oldest)
            m->sum_oldest = last;
    }
}

/* Member m's leaf of the sums' tree: nothing when it does not watch. */
static struct amldist__rz_hsum leaf_of(const amldist__rz_sm_t *sm,
                                       struct amldist__rz_member *m)
{
    if (!watching(sm, m))
        return amldist__rz_hsum_none;
    sum_up(sm, m);
    return (struct amldist__rz_hsum){
        .n = (int64_t)m->nviews, .live = (int64_t)m->sum_live,
        .life = m->sum_life, .oldest = m->sum_oldest,
        .late_at = m->nviews ? m->view_at_ns + AMLDIST__RZ_VIEW_LATE_NS(
                                                   m->view_timeout_ms)
                             : INT64_MAX,
        .timeout = m->view_timeout_ms};
}

/* The sums of every member that watches: the tree made anew when the
 * round, the clock's restart or the members' places changed, else only
 * the paths of the members that sent a view or changed state since. */
static const struct amldist__rz_hsum *sums(amldist__rz_sm_t *sm)
{
    if (!sm->hsum_ok || sm->hsum_round != sm->round ||
        sm->hsum_since != sm->hang_since_ns) {
        for (int i = 0; i < sm->hsum_leaves; i++) {
            struct amldist__rz_hsum l = amldist__rz_hsum_none;
            if (i < sm->nm)
                l = leaf_of(sm, &sm->m[i]);
            amldist__rz_sm_hsum_leaf(sm, i, &l);
        }
        amldist__rz_sm_hsum_fix(sm, -1);
        for (int i = 0; i < sm->nhdirty; i++)
            sm->m[sm->hdirty[i]].hdirty = 0;
        sm->nhdirty = 0;
        sm->hsum_ok = 1;
        sm->hsum_round = sm->round;
        sm->hsum_since = sm->hang_since_ns;
    }
    for (int i = 0; i < sm->nhdirty; i++) {
        int k = sm->hdirty[i];
        struct amldist__rz_hsum l = leaf_of(sm, &sm->m[k]);
        sm->m[k].hdirty = 0;
        amldist__rz_sm_hsum_leaf(sm, k, &l);
        amldist__rz_sm_hsum_fix(sm, k);
    }
    sm->nhdirty = 0;
    return &sm->hsum[1];
}

/* The rule's answer from the members' sums, where it is "not hung": the
 * next time to decide (AMLDIST__HANG_NEVER: none), as amldist__hang_check
 * gives it; -1 where it may be hung, which only the ranks themselves tell
 * (then decide() asks the rule over every rank, once). */
static int64_t not_hung_until(const struct amldist__rz_hsum *s, int64_t now,
                              int64_t timeout)
{
    int64_t life = s->life, oldest = s->oldest;
    if (s->live == 0)
        return AMLDIST__HANG_NEVER;
    if ((oldest != AMLDIST__HANG_NEVER && now - oldest >= timeout) ||
        now - life >= timeout)
        return -1;
    /* Every live API rank's progress is within the timeout: the first due
     * is the oldest's. */
    int64_t due_life = amldist__hang_due(life, timeout);
    int64_t due_oldest = amldist__hang_due(oldest, timeout);
    return due_oldest < due_life ? due_oldest : due_life;
}

/* The hang rule over every node's view of this round. */
static void decide(amldist__rz_sm_t *sm)
{
    const struct amldist__rz_hsum *s = sums(sm);
    size_t n = (size_t)s->n;
    uint32_t timeout_ms = s->timeout == UINT32_MAX ? 0 : s->timeout;
    int unknown = sm->now_ns > s->late_at;
    sm->hang_next_ns = INT64_MAX;
    if (!timeout_ms || !n)
        return;
    if (unknown) {
        /* A node's ranks unseen: no verdict on them, nor on the ranks
         * that may wait for them.  Its next view decides again (and
         * restarts the clock); look again meanwhile all the same. */
        sm->hang_next_ns = sm->now_ns + AMLDIST__RZ_VIEW_LATE_NS(timeout_ms);
        return;
    }
    /* Decided as of the time every node's view has surely reached. */
    int64_t slack = AMLDIST__RZ_VIEW_SLACK_NS(timeout_ms);
    int64_t until = not_hung_until(s, sm->now_ns - slack,
                                   (int64_t)timeout_ms * 1000000);
    if (until >= 0) {
        sm->hang_next_ns = until == AMLDIST__HANG_NEVER ? INT64_MAX
                                                        : until + slack;
        return;
    }
    amldist__hang_rank_t *all = malloc(n * sizeof *all);
    int *stalled = malloc(n * sizeof *stalled);
    if (!all || !stalled) {
        free(all);
        free(stalled);
        sm->hang_next_ns = 0;
        return;
    }
    size_t k = 0;
    for (int i = 0; i < sm->nm; i++) {
        struct amldist__rz_member *m = &sm->m[i];
        if (!watching(sm, m))
            continue;
        for (size_t j = 0; j < m->nviews; j++)
            all[k++] = to_rank(sm, &m->views[j]);
    }
    amldist__hang_verdict_t verdict;
    if (amldist__hang_check(all, n, sm->now_ns - slack,
                            (int64_t)timeout_ms * 1000000, stalled,
                            &verdict)) {
        /* timeout ms | count | the stalled ranks (as many as fit) */
        unsigned char arg[AMLDIST__RZ_ARG_MAX];
        size_t ns = verdict.nstalled, fit = (sizeof arg - 8) / 4;
        if (ns > fit)
            ns = fit;
        amldist__net_put_u32(arg, timeout_ms);
        amldist__net_put_u32(arg + 4, (uint32_t)ns);
        for (size_t i = 0; i < ns; i++)
            amldist__net_put_u32(arg + 8 + 4 * i, (uint32_t)stalled[i]);
        struct amldist__rz_member *o = own(sm);
        sm->hang_round = sm->round;
        sm->hang_end = sm->now + HANG_GATHER_MS + HANG_GRACE_MS;
        if (!start_gather(sm, o ? o->who : NULL, 0, AMLDIST_RDZV_TOPIC_HANG,
                          HANG_GATHER_MS, arg, 8 + 4 * ns))
            sm->hang_end = sm->now; /* no gather: the round ends now */
    } else {
        sm->hang_next_ns = verdict.next_ns == AMLDIST__HANG_NEVER
                               ? INT64_MAX
                               : verdict.next_ns + slack;
    }
    free(all);
    free(stalled);
}

void amldist__rz_sm_watch_tick(amldist__rz_sm_t *sm)
{
    for (int i = 0; i < AMLDIST__RZ_GATHERS_MAX; i++) {
        struct amldist__rz_gather *g = &sm->gathers[i];
        if (!g->used || sm->now < g->deadline)
            continue;
        for (int k = 0; k < g->n; k++)
            if (!g->e[k].over)
                missing(sm, g, k);
        finish(sm, g, 0);
    }
    if (sm->phase != AMLDIST__RZ_P_RUNNING)
        return;
    if (sm->hang_round == sm->round) {
        if (sm->now >= sm->hang_end) {
            char text[160];
            snprintf(text, sizeof text, "the job hung (no progress within "
                     "--hang-timeout), and the host's node did not end it");
            amldist__rz_sm_round_fails(sm, AMLDIST_RDZV_STATUS_HANG, text);
        }
        return;
    }
    if (sm->now_ns >= sm->hang_next_ns)
        decide(sm);
}

long long amldist__rz_sm_watch_deadline(const amldist__rz_sm_t *sm)
{
    long long t = -1;
    for (int i = 0; i < AMLDIST__RZ_GATHERS_MAX; i++)
        if (sm->gathers[i].used && (t < 0 || sm->gathers[i].deadline < t))
            t = sm->gathers[i].deadline;
    if (sm->phase != AMLDIST__RZ_P_RUNNING)
        return t;
    long long h = -1;
    if (sm->hang_round == sm->round)
        h = sm->hang_end;
    else if (sm->hang_next_ns != INT64_MAX)
        /* ns ahead of the last step's, on the ms clock (rounded up) */
        h = sm->now + (sm->hang_next_ns > sm->now_ns
                           ? (sm->hang_next_ns - sm->now_ns + 999999) / 1000000
                           : 0);
    return h >= 0 && (t < 0 || h < t) ? h : t;
}

void amldist__rz_sm_on_marks(amldist__rz_sm_t *sm, struct amldist__rz_member *m,
                             const amldist__rz_event_t *ev)
{
    struct amldist__rz_member *o = own(sm);
    if (!o || m->state != AMLDIST__RZ_M_RUNNING)
        return;
    size_t k = (size_t)sm->nacts;
    amldist__rz_sm_emit(sm, AMLDIST__RZ_A_MARKS, o->who, ev->rank, NULL);
    if ((size_t)sm->nacts == k + 1) {
        sm->acts[k].node = (uint32_t)m->node;
        sm->acts[k].data = ev->text;
        sm->acts[k].len = ev->text_len;
    }
}
