/*
 * The rendezvous host's state machine (see host_sm.h), as the I/O sees it:
 * made, fed one event at a time, freed.  The step hands each event to its
 * handler: a JOIN to host_sm_join.c, time passing to host_sm_form.c and
 * host_sm_watch.c, the views, gathers and marks to host_sm_watch.c, and
 * the end of a round to this file's own (a node's failure, its workers
 * done, its agent lost, and what follows once every node is down).  The
 * handlers share host_sm.c's helpers, below them all.
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/host_sm_state.h"

amldist__rz_sm_t *amldist__rz_sm_new(const amldist__rz_cfg_t *cfg,
                                     long long now)
{
    amldist__rz_sm_t *sm = calloc(1, sizeof *sm);
    if (!sm)
        return NULL;
    sm->cfg = *cfg;
    /* At most max members are in the job; a step sends each at most an
     * ADMIT or REFUSE, a STOP or WAIT, and an ASSIGN, REFUSE or FINISH;
     * a QUERY each; and each gather's asker a RESULT for each of them and
     * its END (host_sm_watch.c). */
    sm->cap = 4 * cfg->max + 4 + AMLDIST__RZ_GATHERS_MAX * (cfg->max + 2);
    sm->hang_round = -1;
    sm->plane_agent = cfg->self_agent;
    sm->m = calloc((size_t)cfg->max, sizeof *sm->m);
    sm->acts = calloc((size_t)sm->cap, sizeof *sm->acts);
    size_t max = (size_t)cfg->max;
    sm->hsum_leaves = 1;
    while (sm->hsum_leaves < cfg->max)
        sm->hsum_leaves *= 2;
    sm->hsum = calloc(2 * (size_t)sm->hsum_leaves, sizeof *sm->hsum);
    sm->hdirty = calloc(max, sizeof *sm->hdirty);
    if (!sm->m || amldist__rz_round_alloc(&sm->rd, cfg->max) < 0 ||
        !sm->acts || !sm->hsum || !sm->hdirty ||
        amldist__u64map_init(&sm->by_who, max) < 0 ||
        amldist__u64map_init(&sm->by_agent, max) < 0 ||
        amldist__u64map_init(&sm->by_order, max) < 0) {
        amldist__rz_sm_free(sm);
        return NULL;
    }
    sm->started = now;
    sm->phase = AMLDIST__RZ_P_FORMING;
    return sm;
}

void amldist__rz_sm_free(amldist__rz_sm_t *sm)
{
    if (!sm)
        return;
    for (int i = 0; i < sm->nm; i++)
        free(sm->m[i].views);
    for (int i = 0; i < AMLDIST__RZ_GATHERS_MAX; i++) {
        free(sm->gathers[i].e);
        amldist__u64map_free(&sm->gathers[i].by_who);
    }
    for (int i = 0; i < sm->nspent; i++)
        free(sm->spent[i]);
    free(sm->m);
    free(sm->rd.nproc);
    free(sm->acts);
    free(sm->hsum);
    free(sm->hdirty);
    amldist__u64map_free(&sm->by_who);
    amldist__u64map_free(&sm->by_agent);
    amldist__u64map_free(&sm->by_order);
    free(sm);
}

static int count_state(const amldist__rz_sm_t *sm, int state)
{
    return sm->nstate[state];
}

static void end_job(amldist__rz_sm_t *sm, int status)
{
    sm->phase = AMLDIST__RZ_P_OVER;
    sm->status = status;
    sm->over_at = sm->now;
    for (int i = 0; i < sm->nm; i++)
        if (amldist__rz_in_job(&sm->m[i]))
            amldist__rz_sm_emit(sm, AMLDIST__RZ_A_FINISH, sm->m[i].who,
                                (uint32_t)status, sm->failure);
}

/* Every node's workers are down (or its agent gone): what comes next. */
static void round_settled(amldist__rz_sm_t *sm)
{
    if ((sm->phase != AMLDIST__RZ_P_RUNNING &&
         sm->phase != AMLDIST__RZ_P_STOPPING) ||
        count_state(sm, AMLDIST__RZ_M_RUNNING) > 0)
        return;
    if (sm->phase == AMLDIST__RZ_P_RUNNING) { /* every node succeeded */
        end_job(sm, 0);
        return;
    }
    int left = count_state(sm, AMLDIST__RZ_M_DONE) +
               count_state(sm, AMLDIST__RZ_M_JOINED);
    if (sm->restart_wanted && left >= sm->cfg.min)
        amldist__rz_sm_form_round(sm);
    else if (sm->failed)
        end_job(sm, sm->status);
    else
        end_job(sm, AMLDIST_RDZV_STATUS_LOST);
}

static void remember_lost(amldist__rz_sm_t *sm, uint64_t agent)
{
    sm->lost[sm->nlost++ % AMLDIST__RZ_LOST_MAX] = agent;
}

static void on_lost(amldist__rz_sm_t *sm, struct amldist__rz_member *m,
                    const char *why)
{
    int was = m->state;
    amldist__rz_sm_set_state(sm, m, AMLDIST__RZ_M_GONE);
    if (was == AMLDIST__RZ_M_JOINED) {
        if (sm->phase == AMLDIST__RZ_P_FORMING &&
            amldist__rz_sm_count_in_job(sm) < sm->cfg.min)
            sm->min_at = 0;
        return;
    }
    remember_lost(sm, m->agent);
    if (sm->phase == AMLDIST__RZ_P_OVER)
        return;
    int left = amldist__rz_sm_count_in_job(sm);
    if (!sm->failed) {
        char text[600];
        snprintf(text, sizeof text, "node %d (%s) was lost: %s", m->node,
                 m->addr, why);
        /* An elastic job goes on with the nodes left, without counting it
         * as a restart; a fixed-size one cannot. */
        int elastic = sm->cfg.min < sm->cfg.max && left >= sm->cfg.min;
        amldist__rz_sm_first_failure(sm, AMLDIST_RDZV_STATUS_LOST, !elastic,
                                     0, text);
        if (sm->phase == AMLDIST__RZ_P_RUNNING)
            amldist__rz_sm_stop_all(sm, "%s", text);
    } else if (left < sm->cfg.min) {
        sm->restart_wanted = 0;
    }
    round_settled(sm);
}

/* The first line of a FAIL's summary, without its "amlrun:" margin:
 * *len bytes from the result (0: none). */
static const char *summary_line(const amldist__rz_event_t *ev, int *len)
{
    const unsigned char *s = ev->text, *end = ev->text + ev->text_len;
    if (end - s >= 7 && memcmp(s, "amlrun:", 7) == 0)
        s += 7;
    while (s < end && *s == ' ')
        s++;
    const unsigned char *nl = memchr(s, '\n', (size_t)(end - s));
    *len = (int)((nl ? nl : end) - s);
    return (const char *)s;
}

/* The FAIL of a node that joined only to say it cannot start: while the
 * round forms, the job is over with its status and reason, every member
 * told now and every later joiner when it comes (host_sm_join.c). */
static void failed_early(amldist__rz_sm_t *sm, struct amldist__rz_member *m,
                         const amldist__rz_event_t *ev)
{
    if (sm->phase != AMLDIST__RZ_P_FORMING)
        return;
    int status = (int)(ev->status & 0xff);
    /* One line, which every node prints as its join's error. */
    int n1;
    const char *s = summary_line(ev, &n1);
    char who[64] = "a node";
    if (m->order >= 0)
        snprintf(who, sizeof who, "node %d", m->order);
    char text[AMLDIST__RZ_FINISH_MAX];
    snprintf(text, sizeof text, "%s (%s) could not start, exit status %d%s%.*s",
             who, m->addr, status, n1 > 0 ? ": " : "", n1 > 400 ? 400 : n1,
             s);
    amldist__rz_sm_first_failure(sm, status, 1, 0, text);
    /* The host stays for the nodes still to come only when the failing
     * node is its own: a node that can start ends now, with its reason. */
    sm->failed_early = 1;
    sm->host_stays = m->agent == sm->cfg.self_agent;
    sm->told += sm->ncounted;
    end_job(sm, status);
}

static void on_fail(amldist__rz_sm_t *sm, struct amldist__rz_member *m,
                    const amldist__rz_event_t *ev)
{
    int status = (int)(ev->status & 0xff);
    if (m->failing) {
        failed_early(sm, m, ev);
        return;
    }
    if ((int)ev->round != sm->round ||
        (m->state != AMLDIST__RZ_M_RUNNING && m->state != AMLDIST__RZ_M_DONE))
        return; /* a late word about an older round */
    int final = (ev->flags & AMLDIST_RDZV_FINAL) != 0;
    if (sm->phase == AMLDIST__RZ_P_STOPPING && final)
        sm->restart_wanted = 0; /* a stop request ends the job */
    if (sm->failed || (sm->phase != AMLDIST__RZ_P_RUNNING &&
                       sm->phase != AMLDIST__RZ_P_STOPPING))
        return;
    char text[AMLDIST__RZ_FINISH_MAX];
    int n = snprintf(text, sizeof text, "node %d (%s)", m->node, m->addr);
    if (ev->rank != AMLDIST__RZ_NONE)
        n += snprintf(text + n, sizeof text - (size_t)n, ", rank %u",
                      ev->rank);
    n += snprintf(text + n, sizeof text - (size_t)n, ": exit status %d%s",
                  status, ev->text_len ? "\n" : "");
    size_t room = sizeof text - (size_t)n - 1, sl = ev->text_len;
    memcpy(text + n, ev->text, sl < room ? sl : room);
    text[n + (int)(sl < room ? sl : room)] = '\0';
    amldist__rz_sm_first_failure(sm, status, final, 1, text);
    if (sm->phase != AMLDIST__RZ_P_RUNNING)
        return;
    if (ev->rank != AMLDIST__RZ_NONE) {
        amldist__rz_sm_stop_all(
            sm, "node %d (%s), a worker, failed with exit status %d", m->node,
            m->addr, status);
        return;
    }
    /* Not a worker (a stop signal, a worker that could not start): the
     * summary's first line says what. */
    int n1;
    const char *s = summary_line(ev, &n1);
    if (n1 > 0)
        amldist__rz_sm_stop_all(sm, "node %d (%s): %.*s", m->node, m->addr,
                                n1 > 300 ? 300 : n1, s);
    else
        amldist__rz_sm_stop_all(sm, "node %d (%s) stopped with exit status %d",
                                m->node, m->addr, status);
}

static void on_done(amldist__rz_sm_t *sm, struct amldist__rz_member *m,
                    const amldist__rz_event_t *ev)
{
    if ((int)ev->round != sm->round || m->state != AMLDIST__RZ_M_RUNNING)
        return;
    int status = (int)(ev->status & 0xff);
    m->port = (int)ev->port;
    amldist__rz_sm_set_state(sm, m, AMLDIST__RZ_M_DONE);
    /* Workers the host had stopped did not fail: only a status given while
     * the round still ran is one. */
    if (status != 0 && !sm->failed && sm->phase == AMLDIST__RZ_P_RUNNING) {
        char text[128];
        snprintf(text, sizeof text, "node %d (%s): exit status %d", m->node,
                 m->addr, status);
        amldist__rz_sm_first_failure(sm, status, 0, 1, text);
        amldist__rz_sm_stop_all(sm, "%s", text);
    }
    round_settled(sm);
}

int amldist__rz_sm_step(amldist__rz_sm_t *sm, const amldist__rz_event_t *ev,
                        const amldist__rz_action_t **acts)
{
    sm->nacts = 0;
    for (int i = 0; i < sm->nspent; i++)
        free(sm->spent[i]);
    sm->nspent = 0;
    sm->now = ev->now;
    sm->now_ns = ev->now_ns;
    struct amldist__rz_member *m =
        ev->type == AMLDIST__RZ_EV_JOIN || ev->type == AMLDIST__RZ_EV_TICK ||
                ev->type == AMLDIST__RZ_EV_HUNG
            ? NULL
            : amldist__rz_sm_by_who(sm, ev->who);
    switch (ev->type) {
    case AMLDIST__RZ_EV_JOIN:
        if (!amldist__rz_sm_by_who(sm, ev->who))
            amldist__rz_sm_on_join(sm, ev);
        break;
    case AMLDIST__RZ_EV_FAIL:
        if (m)
            on_fail(sm, m, ev);
        break;
    case AMLDIST__RZ_EV_DONE:
        if (m)
            on_done(sm, m, ev);
        break;
    case AMLDIST__RZ_EV_LOST:
        if (m) {
            on_lost(sm, m, ev->why ? ev->why : "");
            amldist__rz_sm_watch_lost(sm, m->who);
        }
        break;
    case AMLDIST__RZ_EV_TICK:
        amldist__rz_sm_on_tick(sm);
        amldist__rz_sm_watch_tick(sm);
        break;
    case AMLDIST__RZ_EV_VIEW:
        if (m)
            amldist__rz_sm_on_view(sm, m, ev);
        break;
    case AMLDIST__RZ_EV_ASK:
        if (m)
            amldist__rz_sm_on_ask(sm, m, ev);
        break;
    case AMLDIST__RZ_EV_ANSWER:
        if (m)
            amldist__rz_sm_on_answer(sm, m, ev);
        break;
    case AMLDIST__RZ_EV_MARKS:
        if (m)
            amldist__rz_sm_on_marks(sm, m, ev);
        break;
    case AMLDIST__RZ_EV_HUNG:
        if ((int)ev->round == sm->round) {
            char text[AMLDIST__RZ_TEXT_MAX + 1];
            size_t n = ev->text_len < sizeof text - 1 ? ev->text_len
                                                      : sizeof text - 1;
            memcpy(text, ev->text, n);
            text[n] = '\0';
            amldist__rz_sm_round_fails(sm, AMLDIST_RDZV_STATUS_HANG, text);
        }
        break;
    }
    /* Members refused or lost are forgotten once a quarter of the array
     * is theirs: a step costs what it touched. */
    amldist__rz_sm_compact(sm, 0);
    *acts = sm->acts;
    return sm->nacts;
}

long long amldist__rz_sm_next_deadline(const amldist__rz_sm_t *sm)
{
    long long w = amldist__rz_sm_watch_deadline(sm);
    if (sm->phase != AMLDIST__RZ_P_FORMING)
        return w;
    long long t = sm->started + sm->cfg.join_timeout_ms;
    if (sm->min_at && sm->min_at + sm->cfg.last_call_ms < t)
        t = sm->min_at + sm->cfg.last_call_ms;
    long long say = (sm->said_at ? sm->said_at : sm->started) +
                    AMLDIST__RZ_SAY_MS;
    if (say < t)
        t = say;
    return w >= 0 && w < t ? w : t;
}

int amldist__rz_sm_drained(const amldist__rz_sm_t *sm, long long now)
{
    /* A job that did not end here has no one to wait for: the agents see
     * the host's connection close. */
    if (sm->host_stays && sm->phase == AMLDIST__RZ_P_OVER)
        /* The nodes still to come are told why the job ended: each would
         * otherwise wait for its join timeout. */
        return sm->told >= sm->cfg.max - 1 ||
               now - sm->started >= sm->cfg.join_timeout_ms;
    if (sm->phase != AMLDIST__RZ_P_OVER || now - sm->over_at > sm->cfg.dead_ms)
        return 1;
    /* Strangers that never joined are not waited for. */
    return sm->nm - sm->ngone == 0 ||
           (sm->nm - sm->ngone == 1 && amldist__rz_sm_by_agent(
                                           sm, sm->cfg.self_agent));
}
