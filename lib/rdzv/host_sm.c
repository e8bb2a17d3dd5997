/*
 * The rendezvous host's state machine (see host_sm.h): every decision the
 * host makes, from events to actions, with no I/O.  The shape follows
 * torchelastic's dynamic rendezvous, where a pure function of the state
 * says what to do next and a separate executor does it.
 */
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/host_sm.h"

enum {
    M_JOINED,  /* waits for a round to form */
    M_RUNNING, /* in the round, its workers may run */
    M_DONE,    /* in the round, its workers are down */
    M_GONE     /* refused or lost: forgotten at the end of the step */
};

/* Agent ids declared dead, remembered to refuse them if they come back. */
#define LOST_MAX 1024
/* MASTER_PORT when node 0's agent offered none. */
#define DEFAULT_MASTER_PORT 29500

struct member {
    void *who;
    int state;
    uint64_t agent;
    int order;     /* -1: none */
    int nproc, port, seq;
    int node;      /* in the current round */
    int prev_node; /* in the last round it ran in, -1 */
    uint64_t machine; /* 0: shares its GPUs with no other node */
    char addr[INET6_ADDRSTRLEN];
    char local_addr[AMLDIST__RZ_ADDR_MAX + 1]; /* its --local-addr, "" */
};

struct amldist__rz_sm {
    amldist__rz_cfg_t cfg;
    struct member *m; /* admitted, in the order they joined */
    int nm;
    int phase, round, restarts, seq;
    long long now, started, min_at, over_at;
    /* The round's stop: its first failure (failed), whether the job then
     * restarts, and whether that restart counts against max_restarts. */
    int failed, restart_wanted, counted, status;
    char failure[AMLDIST__RZ_FINISH_MAX];
    /* One text of each kind per step is all a step ever sends. */
    char stop_why[AMLDIST__RZ_TEXT_MAX + 1];
    char refusal[AMLDIST__RZ_TEXT_MAX + 1];
    char waiting[AMLDIST__RZ_TEXT_MAX + 1];
    uint64_t lost[LOST_MAX];
    int nlost;
    amldist__rz_round_t rd;
    amldist__rz_action_t *acts;
    int nacts, cap;
};

amldist__rz_sm_t *amldist__rz_sm_new(const amldist__rz_cfg_t *cfg,
                                     long long now)
{
    amldist__rz_sm_t *sm = calloc(1, sizeof *sm);
    if (!sm)
        return NULL;
    sm->cfg = *cfg;
    /* At most max members are in the job; a step sends each at most an
     * ADMIT or REFUSE, a STOP or WAIT, and an ASSIGN, REFUSE or FINISH. */
    sm->cap = 3 * cfg->max + 4;
    sm->m = calloc((size_t)cfg->max, sizeof *sm->m);
    sm->acts = calloc((size_t)sm->cap, sizeof *sm->acts);
    if (!sm->m || amldist__rz_round_alloc(&sm->rd, cfg->max) < 0 ||
        !sm->acts) {
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
    free(sm->m);
    free(sm->rd.nproc);
    free(sm->acts);
    free(sm);
}

const amldist__rz_round_t *amldist__rz_sm_round(const amldist__rz_sm_t *sm)
{
    return &sm->rd;
}

int amldist__rz_sm_phase(const amldist__rz_sm_t *sm) { return sm->phase; }

static void emit(amldist__rz_sm_t *sm, int type, void *who, uint32_t value,
                 const char *text)
{
    if (sm->nacts < sm->cap) /* the bound in amldist__rz_sm_new() holds */
        sm->acts[sm->nacts++] = (amldist__rz_action_t){type, who, value, text};
}

static int in_job(const struct member *m) { return m->state != M_GONE; }

static int count_state(const amldist__rz_sm_t *sm, int state)
{
    int n = 0;
    for (int i = 0; i < sm->nm; i++)
        n += sm->m[i].state == state;
    return n;
}

static int count_in_job(const amldist__rz_sm_t *sm)
{
    int n = 0;
    for (int i = 0; i < sm->nm; i++)
        n += in_job(&sm->m[i]);
    return n;
}

static struct member *find(amldist__rz_sm_t *sm, const void *who)
{
    for (int i = 0; i < sm->nm; i++)
        if (sm->m[i].who == who && in_job(&sm->m[i]))
            return &sm->m[i];
    return NULL;
}

/* Refuse `who` (a member, or a joiner when m is NULL): it leaves. */
static void refuse(amldist__rz_sm_t *sm, void *who, struct member *m,
                   uint32_t reason, const char *fmt, ...)
    AMLDIST__PRINTF(5, 6);
static void refuse(amldist__rz_sm_t *sm, void *who, struct member *m,
                   uint32_t reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sm->refusal, sizeof sm->refusal, fmt, ap);
    va_end(ap);
    if (m)
        m->state = M_GONE;
    emit(sm, AMLDIST__RZ_A_REFUSE, who, reason, sm->refusal);
}

static void stop_all(amldist__rz_sm_t *sm, const char *fmt, ...)
    AMLDIST__PRINTF(2, 3);
static void stop_all(amldist__rz_sm_t *sm, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sm->stop_why, sizeof sm->stop_why, fmt, ap);
    va_end(ap);
    sm->phase = AMLDIST__RZ_P_STOPPING;
    for (int i = 0; i < sm->nm; i++)
        if (sm->m[i].state == M_RUNNING)
            emit(sm, AMLDIST__RZ_A_STOP, sm->m[i].who, (uint32_t)sm->round,
                 sm->stop_why);
}

static void end_job(amldist__rz_sm_t *sm, int status)
{
    sm->phase = AMLDIST__RZ_P_OVER;
    sm->status = status;
    sm->over_at = sm->now;
    for (int i = 0; i < sm->nm; i++)
        if (in_job(&sm->m[i]))
            emit(sm, AMLDIST__RZ_A_FINISH, sm->m[i].who, (uint32_t)status,
                 sm->failure);
}

/* Nodes: with orders, by order; else the host's own agent first, then the
 * ones that ran before in their old order, then newcomers by arrival. */
static uint64_t sort_key(const amldist__rz_sm_t *sm, const struct member *m)
{
    if (m->order >= 0)
        return (uint64_t)m->order;
    if (m->agent == sm->cfg.self_agent)
        return 0;
    if (m->prev_node >= 0)
        return 1 + (uint64_t)m->prev_node;
    return (1ull << 32) + (uint64_t)m->seq;
}

static int by_key(const void *a, const void *b, void *sm)
{
    uint64_t ka = sort_key(sm, *(struct member *const *)a);
    uint64_t kb = sort_key(sm, *(struct member *const *)b);
    return ka < kb ? -1 : ka > kb;
}

/* Close the round: every JOINED or DONE member gets a node rank. */
static void form_round(amldist__rz_sm_t *sm)
{
    struct member *nodes[AMLDIST_RDZV_MAX_NODES];
    int n = 0;
    for (int i = 0; i < sm->nm; i++) {
        struct member *m = &sm->m[i];
        if (m->state != M_JOINED && m->state != M_DONE)
            continue;
        if (n == sm->cfg.max || n == AMLDIST_RDZV_MAX_NODES)
            refuse(sm, m->who, m, AMLDIST__RZ_R_FULL,
                   "the job has its %d nodes", sm->cfg.max);
        else
            nodes[n++] = m;
    }
    qsort_r(nodes, (size_t)n, sizeof *nodes, by_key, sm);
    if (sm->phase != AMLDIST__RZ_P_FORMING) {
        sm->round++;
        sm->restarts += sm->counted;
    }
    amldist__rz_round_t *rd = &sm->rd;
    rd->round = sm->round;
    rd->restarts = sm->restarts;
    rd->nnodes = n;
    /* MASTER_ADDR: the host's option, else node 0's --local-addr (as
     * torchrun's), else node 0's address as the host sees it. */
    rd->flags = 0;
    const char *addr = nodes[0]->addr;
    if (sm->cfg.master_addr[0]) {
        addr = sm->cfg.master_addr;
        rd->flags |= AMLDIST__RZ_F_ADDR_OPTION;
    } else if (nodes[0]->local_addr[0]) {
        addr = nodes[0]->local_addr;
        rd->flags |= AMLDIST__RZ_F_ADDR_LOCAL;
    }
    amldist__strlcpy(rd->master_addr, addr, sizeof rd->master_addr);
    rd->master_port = sm->cfg.master_port > 0 ? sm->cfg.master_port
                                              : nodes[0]->port;
    if (sm->cfg.master_port > 0)
        rd->flags |= AMLDIST__RZ_F_PORT_OPTION;
    if (rd->master_port <= 0 || rd->master_port > 65535)
        rd->master_port = DEFAULT_MASTER_PORT;
    rd->last_call_ms = sm->cfg.last_call_ms;
    rd->join_timeout_ms = sm->cfg.join_timeout_ms;
    uint64_t machine[AMLDIST_RDZV_MAX_NODES];
    for (int i = 0; i < n; i++) {
        rd->nproc[i] = nodes[i]->nproc;
        machine[i] = nodes[i]->machine;
    }
    amldist__rz_share_gpus(rd, machine);
    for (int i = 0; i < n; i++) {
        nodes[i]->node = nodes[i]->prev_node = i;
        nodes[i]->state = M_RUNNING;
        rd->node = i;
        emit(sm, AMLDIST__RZ_A_ASSIGN, nodes[i]->who, (uint32_t)i, NULL);
    }
    sm->phase = AMLDIST__RZ_P_RUNNING;
    sm->failed = sm->restart_wanted = sm->counted = 0;
    sm->failure[0] = '\0';
}

/* The round's first failure: what every node is told, and what follows. */
static void first_failure(amldist__rz_sm_t *sm, int status, int final,
                          int counts, const char *text)
{
    sm->failed = 1;
    sm->status = status;
    amldist__strlcpy(sm->failure, text, sizeof sm->failure);
    sm->counted = counts;
    sm->restart_wanted =
        !final && (!counts || sm->restarts < sm->cfg.max_restarts);
}

/* Every node's workers are down (or its agent gone): what comes next. */
static void round_settled(amldist__rz_sm_t *sm)
{
    if ((sm->phase != AMLDIST__RZ_P_RUNNING &&
         sm->phase != AMLDIST__RZ_P_STOPPING) ||
        count_state(sm, M_RUNNING) > 0)
        return;
    if (sm->phase == AMLDIST__RZ_P_RUNNING) { /* every node succeeded */
        end_job(sm, 0);
        return;
    }
    int left = count_state(sm, M_DONE) + count_state(sm, M_JOINED);
    if (sm->restart_wanted && left >= sm->cfg.min)
        form_round(sm);
    else if (sm->failed)
        end_job(sm, sm->status);
    else
        end_job(sm, AMLDIST_RDZV_STATUS_LOST);
}

static void remember_lost(amldist__rz_sm_t *sm, uint64_t agent)
{
    sm->lost[sm->nlost++ % LOST_MAX] = agent;
}

static void on_lost(amldist__rz_sm_t *sm, struct member *m, const char *why)
{
    int was = m->state;
    m->state = M_GONE;
    if (was == M_JOINED) {
        if (sm->phase == AMLDIST__RZ_P_FORMING &&
            count_in_job(sm) < sm->cfg.min)
            sm->min_at = 0;
        return;
    }
    remember_lost(sm, m->agent);
    if (sm->phase == AMLDIST__RZ_P_OVER)
        return;
    int left = count_in_job(sm);
    if (!sm->failed) {
        char text[600];
        snprintf(text, sizeof text, "node %d (%s) was lost: %s", m->node,
                 m->addr, why);
        /* An elastic job goes on with the nodes left, without counting it
         * as a restart; a fixed-size one cannot. */
        int elastic = sm->cfg.min < sm->cfg.max && left >= sm->cfg.min;
        first_failure(sm, AMLDIST_RDZV_STATUS_LOST, !elastic, 0, text);
        if (sm->phase == AMLDIST__RZ_P_RUNNING)
            stop_all(sm, "%s", text);
    } else if (left < sm->cfg.min) {
        sm->restart_wanted = 0;
    }
    round_settled(sm);
}

static const char *taken_order(const amldist__rz_sm_t *sm, int order)
{
    for (int i = 0; i < sm->nm; i++)
        if (in_job(&sm->m[i]) && sm->m[i].order == order)
            return sm->m[i].addr;
    return NULL;
}

static int mixed_order(const amldist__rz_sm_t *sm, int order)
{
    for (int i = 0; i < sm->nm; i++)
        if (in_job(&sm->m[i]) && (sm->m[i].order < 0) != (order < 0))
            return 1;
    return 0;
}

/* The workers of the job's members: of every later round at most. */
static long long workers(const amldist__rz_sm_t *sm)
{
    long long n = 0;
    for (int i = 0; i < sm->nm; i++)
        if (in_job(&sm->m[i]))
            n += sm->m[i].nproc;
    return n;
}

/* 1: a member has this agent id (a replay); 2: a lost one had it. */
static int known_agent(const amldist__rz_sm_t *sm, uint64_t agent)
{
    for (int i = 0; i < sm->nm; i++)
        if (in_job(&sm->m[i]) && sm->m[i].agent == agent)
            return 1;
    for (int i = 0; i < sm->nlost && i < LOST_MAX; i++)
        if (sm->lost[i] == agent)
            return 2;
    return 0;
}

/* The last call has begun (who: NULL, every member hears it), or node
 * `who` joined during it: how many nodes are in and when the round forms,
 * one line for each agent (a silent wait of last_call_ms looks like a
 * hang; a line at every join would be thousands in a large job). */
static void say_waiting(amldist__rz_sm_t *sm, void *who)
{
    int n = count_in_job(sm), more = sm->cfg.max - n;
    long long left = sm->min_at + sm->cfg.last_call_ms - sm->now;
    /* Tenths of a second at most: "30 s", "0.5 s", "12.3 s". */
    double s = left > 0 ? (double)((left + 50) / 100) / 10 : 0;
    snprintf(sm->waiting, sizeof sm->waiting, "rendezvous: %d node%s of "
             "%d:%d in; the round forms in %g s (last_call_timeout), or "
             "at once if %d more join%s", n, n == 1 ? "" : "s", sm->cfg.min,
             sm->cfg.max, s, more, more == 1 ? "s" : "");
    for (int i = 0; i < sm->nm; i++)
        if (sm->m[i].state == M_JOINED && (!who || sm->m[i].who == who))
            emit(sm, AMLDIST__RZ_A_WAIT, sm->m[i].who, 0, sm->waiting);
}

static void admit(amldist__rz_sm_t *sm, const amldist__rz_event_t *ev,
                  int order)
{
    struct member *m = &sm->m[sm->nm++];
    *m = (struct member){.who = ev->who, .state = M_JOINED,
                         .agent = ev->join.agent, .order = order,
                         .nproc = (int)ev->join.nproc,
                         .port = (int)ev->join.port, .seq = sm->seq++,
                         .prev_node = -1};
    m->machine = ev->join.machine;
    amldist__strlcpy(m->addr, ev->addr ? ev->addr : "", sizeof m->addr);
    amldist__strlcpy(m->local_addr, ev->join.local_addr,
                     sizeof m->local_addr);
    emit(sm, AMLDIST__RZ_A_ADMIT, ev->who, 0, NULL);
    int began = 0;
    if (sm->phase == AMLDIST__RZ_P_FORMING && sm->min_at == 0 &&
        count_in_job(sm) >= sm->cfg.min) {
        sm->min_at = sm->now;
        began = 1;
    }
    if (sm->phase == AMLDIST__RZ_P_FORMING && sm->min_at &&
        count_in_job(sm) < sm->cfg.max && sm->cfg.last_call_ms > 0)
        say_waiting(sm, began ? NULL : ev->who);
    if (sm->phase == AMLDIST__RZ_P_RUNNING) {
        /* torchrun's behaviour: a new node restarts every node's workers
         * in a round with it; not counted as a restart. */
        sm->restart_wanted = 1;
        sm->counted = 0;
        stop_all(sm, "a node (%s) joined: the job re-forms with %d nodes",
                 m->addr, count_in_job(sm));
    }
}

static void on_join(amldist__rz_sm_t *sm, const amldist__rz_event_t *ev)
{
    const amldist__rz_join_t *j = &ev->join;
    void *who = ev->who;
    int order = j->order == AMLDIST__RZ_NONE ? -1 : (int)j->order;
    const char *by = NULL;
    if (j->token != sm->cfg.token) {
        refuse(sm, who, NULL, AMLDIST__RZ_R_TOKEN, "another job's token "
               "(this job's comes from %s)", sm->cfg.token_source);
    } else if (j->run != sm->cfg.run) {
        refuse(sm, who, NULL, AMLDIST__RZ_R_RUN, "another run id "
               "(--rdzv-id)");
    } else if ((int)j->min != sm->cfg.min || (int)j->max != sm->cfg.max ||
               (int)j->max_restarts != sm->cfg.max_restarts) {
        refuse(sm, who, NULL, AMLDIST__RZ_R_OPTIONS, "--nnodes %u:%u and "
               "--max-restarts %u differ from the job's %d:%d and %d",
               j->min, j->max, j->max_restarts, sm->cfg.min, sm->cfg.max,
               sm->cfg.max_restarts);
    } else if ((int)j->keepalive_ms != sm->cfg.keepalive_ms ||
               (int)j->keepalive_misses != sm->cfg.keepalive_misses) {
        /* Each side declares the other dead by its own values: a node
         * beating every 30 s would be lost after the host's 3 s. */
        refuse(sm, who, NULL, AMLDIST__RZ_R_OPTIONS, "--rdzv-conf "
               "keep_alive_interval=%g,keep_alive_max_attempt=%u differ "
               "from the job's keep_alive_interval=%g,"
               "keep_alive_max_attempt=%d (the rendezvous host's): give "
               "every node the same", j->keepalive_ms / 1000.0,
               j->keepalive_misses, sm->cfg.keepalive_ms / 1000.0,
               sm->cfg.keepalive_misses);
    } else if (j->nproc < 1 || j->nproc > AMLDIST__RZ_NPROC_MAX ||
               (order >= 0 && j->order > (1u << 30))) {
        refuse(sm, who, NULL, AMLDIST__RZ_R_PROTO, "worker count %u or "
               "order %u out of range", j->nproc, j->order);
    } else if (sm->phase == AMLDIST__RZ_P_OVER) {
        refuse(sm, who, NULL, AMLDIST__RZ_R_OVER, "the job is over");
    } else if (j->round != 0) {
        refuse(sm, who, NULL, AMLDIST__RZ_R_STALE, "a stale agent (it asks "
               "for round %u)", j->round);
    } else if (known_agent(sm, j->agent) == 1) {
        refuse(sm, who, NULL, AMLDIST__RZ_R_STALE, "an agent with this id "
               "has joined already (a replayed JOIN)");
    } else if (known_agent(sm, j->agent) == 2) {
        refuse(sm, who, NULL, AMLDIST__RZ_R_STALE, "a stale agent: this job "
               "declared it lost");
    } else if (mixed_order(sm, order)) {
        refuse(sm, who, NULL, AMLDIST__RZ_R_ORDER, "%s", order < 0
               ? "the other nodes' ranks come from a launcher or "
                 "--node-rank, this one's do not"
               : "this node's rank comes from a launcher or --node-rank, "
                 "the other nodes' do not");
    } else if (order >= 0 && (by = taken_order(sm, order)) != NULL) {
        refuse(sm, who, NULL, AMLDIST__RZ_R_ORDER, "node rank %d is already "
               "%s's", order, by);
    } else if (count_in_job(sm) >= sm->cfg.max ||
               (sm->phase != AMLDIST__RZ_P_FORMING &&
                sm->cfg.min == sm->cfg.max)) {
        refuse(sm, who, NULL, AMLDIST__RZ_R_FULL, "the job has its %d "
               "node%s (round %d)", sm->cfg.max, sm->cfg.max == 1 ? "" : "s",
               sm->round);
    } else if (workers(sm) + j->nproc > AMLDIST__RZ_WORLD_MAX) {
        /* Every agent would reject the round's ASSIGN as malformed. */
        refuse(sm, who, NULL, AMLDIST__RZ_R_FULL, "this node's %u workers "
               "would make the job's %lld, more than the %d that its agents "
               "can number", j->nproc, workers(sm) + j->nproc,
               AMLDIST__RZ_WORLD_MAX);
    } else {
        admit(sm, ev, order);
    }
}

static void on_fail(amldist__rz_sm_t *sm, struct member *m,
                    const amldist__rz_event_t *ev)
{
    int status = (int)(ev->status & 0xff);
    if ((int)ev->round != sm->round ||
        (m->state != M_RUNNING && m->state != M_DONE))
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
    first_failure(sm, status, final, 1, text);
    if (sm->phase != AMLDIST__RZ_P_RUNNING)
        return;
    if (ev->rank != AMLDIST__RZ_NONE) {
        stop_all(sm, "node %d (%s), a worker, failed with exit status %d",
                 m->node, m->addr, status);
        return;
    }
    /* Not a worker (a stop signal, a worker that could not start): the
     * summary's first line says what, without its "amlrun:" margin. */
    const unsigned char *s = ev->text, *end = ev->text + ev->text_len;
    if (end - s >= 7 && memcmp(s, "amlrun:", 7) == 0)
        s += 7;
    while (s < end && *s == ' ')
        s++;
    const unsigned char *nl = memchr(s, '\n', (size_t)(end - s));
    int n1 = (int)((nl ? nl : end) - s);
    if (n1 > 0)
        stop_all(sm, "node %d (%s): %.*s", m->node, m->addr,
                 n1 > 300 ? 300 : n1, (const char *)s);
    else
        stop_all(sm, "node %d (%s) stopped with exit status %d", m->node,
                 m->addr, status);
}

static void on_done(amldist__rz_sm_t *sm, struct member *m,
                    const amldist__rz_event_t *ev)
{
    if ((int)ev->round != sm->round || m->state != M_RUNNING)
        return;
    int status = (int)(ev->status & 0xff);
    m->port = (int)ev->port;
    m->state = M_DONE;
    /* Workers the host had stopped did not fail: only a status given while
     * the round still ran is one. */
    if (status != 0 && !sm->failed && sm->phase == AMLDIST__RZ_P_RUNNING) {
        char text[128];
        snprintf(text, sizeof text, "node %d (%s): exit status %d", m->node,
                 m->addr, status);
        first_failure(sm, status, 0, 1, text);
        stop_all(sm, "%s", text);
    }
    round_settled(sm);
}

static void on_tick(amldist__rz_sm_t *sm)
{
    if (sm->phase != AMLDIST__RZ_P_FORMING)
        return;
    int n = count_in_job(sm);
    if (n >= sm->cfg.max ||
        (n >= sm->cfg.min && sm->min_at &&
         sm->now - sm->min_at >= sm->cfg.last_call_ms)) {
        form_round(sm);
    } else if (sm->now - sm->started >= sm->cfg.join_timeout_ms) {
        for (int i = 0; i < sm->nm; i++)
            if (in_job(&sm->m[i]))
                refuse(sm, sm->m[i].who, &sm->m[i], AMLDIST__RZ_R_TIMEOUT,
                       "only %d of the %d nodes needed joined within %.0f s",
                       n, sm->cfg.min, sm->cfg.join_timeout_ms / 1000.0);
        sm->phase = AMLDIST__RZ_P_OVER;
        sm->over_at = sm->now;
    }
}

/* Members refused or lost in the step are forgotten after it. */
static void sweep(amldist__rz_sm_t *sm)
{
    int k = 0;
    for (int i = 0; i < sm->nm; i++)
        if (in_job(&sm->m[i]))
            sm->m[k++] = sm->m[i];
    sm->nm = k;
}

int amldist__rz_sm_step(amldist__rz_sm_t *sm, const amldist__rz_event_t *ev,
                        const amldist__rz_action_t **acts)
{
    sm->nacts = 0;
    sm->now = ev->now;
    struct member *m = ev->type == AMLDIST__RZ_EV_JOIN ||
                               ev->type == AMLDIST__RZ_EV_TICK
                           ? NULL
                           : find(sm, ev->who);
    switch (ev->type) {
    case AMLDIST__RZ_EV_JOIN:
        if (!find(sm, ev->who))
            on_join(sm, ev);
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
        if (m)
            on_lost(sm, m, ev->why ? ev->why : "");
        break;
    case AMLDIST__RZ_EV_TICK:
        on_tick(sm);
        break;
    }
    sweep(sm);
    *acts = sm->acts;
    return sm->nacts;
}

long long amldist__rz_sm_next_deadline(const amldist__rz_sm_t *sm)
{
    if (sm->phase != AMLDIST__RZ_P_FORMING)
        return -1;
    long long t = sm->started + sm->cfg.join_timeout_ms;
    if (sm->min_at && sm->min_at + sm->cfg.last_call_ms < t)
        t = sm->min_at + sm->cfg.last_call_ms;
    return t;
}

int amldist__rz_sm_drained(const amldist__rz_sm_t *sm, long long now)
{
    /* A job that did not end here has no one to wait for: the agents see
     * the host's connection close. */
    if (sm->phase != AMLDIST__RZ_P_OVER || now - sm->over_at > sm->cfg.dead_ms)
        return 1;
    /* Strangers that never joined are not waited for. */
    for (int i = 0; i < sm->nm; i++)
        if (sm->m[i].agent != sm->cfg.self_agent)
            return 0;
    return 1;
}
