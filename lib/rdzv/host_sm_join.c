/*
 * Who may join (the host's state machine, host_sm.h): a JOIN is refused
 * when it is another job's or run's, asks for other options, is stale or
 * replayed, takes a node rank already taken, or finds the job full or
 * over; else the agent is admitted, which may begin the last call or, in
 * a running elastic job, re-form the job with it.
 */
#include <stdint.h>

#include "rdzv/host_sm_state.h"

static const char *taken_order(const amldist__rz_sm_t *sm, int order)
{
    const struct amldist__rz_member *m = amldist__rz_sm_by_order(sm, order);
    return m ? m->addr : NULL;
}

static int mixed_order(const amldist__rz_sm_t *sm, int order)
{
    int n = sm->nm - sm->ngone; /* in the job, failing ones too */
    return order < 0 ? sm->nordered > 0 : sm->nordered < n;
}

/* The workers of the job's members: of every later round at most. */
static long long workers(const amldist__rz_sm_t *sm)
{
    return sm->nworkers;
}

/* 1: a member has this agent id (a replay); 2: a lost one had it. */
static int known_agent(const amldist__rz_sm_t *sm, uint64_t agent)
{
    if (amldist__rz_sm_by_agent(sm, agent))
        return 1;
    for (int i = 0; i < sm->nlost && i < AMLDIST__RZ_LOST_MAX; i++)
        if (sm->lost[i] == agent)
            return 2;
    return 0;
}

static void admit(amldist__rz_sm_t *sm, const amldist__rz_event_t *ev,
                  int order)
{
    struct amldist__rz_member init = {
        .who = ev->who, .state = AMLDIST__RZ_M_JOINED,
        .agent = ev->join.agent, .order = order,
        .nproc = (int)ev->join.nproc, .port = (int)ev->join.port,
        .seq = sm->seq++, .prev_node = -1, .view_round = -1};
    init.machine = ev->join.machine;
    /* its FAIL follows: host_sm_step.c */
    init.failing = ev->join.round == AMLDIST__RZ_ROUND_FAILING;
    amldist__strlcpy(init.addr, ev->addr ? ev->addr : "", sizeof init.addr);
    amldist__strlcpy(init.reached, ev->local ? ev->local : "",
                     sizeof init.reached);
    amldist__strlcpy(init.local_addr, ev->join.local_addr,
                     sizeof init.local_addr);
    struct amldist__rz_member *m = amldist__rz_sm_add(sm, &init);
    if (!m)
        return;
    amldist__rz_sm_emit(sm, AMLDIST__RZ_A_ADMIT, ev->who, 0, NULL);
    if (m->failing)
        return;
    int began = 0;
    if (sm->phase == AMLDIST__RZ_P_FORMING && sm->min_at == 0 &&
        amldist__rz_sm_count_in_job(sm) >= sm->cfg.min) {
        sm->min_at = sm->now;
        began = 1;
    }
    if (sm->phase == AMLDIST__RZ_P_FORMING && sm->min_at &&
        amldist__rz_sm_count_in_job(sm) < sm->cfg.max &&
        sm->cfg.last_call_ms > 0)
        amldist__rz_sm_say_waiting(sm, began ? NULL : ev->who);
    if (sm->phase == AMLDIST__RZ_P_RUNNING) {
        /* torchrun's behaviour: a new node restarts every node's workers
         * in a round with it; not counted as a restart. */
        sm->restart_wanted = 1;
        sm->counted = 0;
        amldist__rz_sm_stop_all(
            sm, "a node (%s) joined: the job re-forms with %d nodes", m->addr,
            amldist__rz_sm_count_in_job(sm));
    }
}

void amldist__rz_sm_on_join(amldist__rz_sm_t *sm, const amldist__rz_event_t *ev)
{
    const amldist__rz_join_t *j = &ev->join;
    void *who = ev->who;
    int order = j->order == AMLDIST__RZ_NONE ? -1 : (int)j->order;
    const char *by = NULL;
    if (j->token != sm->cfg.token) {
        amldist__rz_sm_refuse(sm, who, NULL, AMLDIST__RZ_R_TOKEN,
                              "another job's token (this job's comes from %s)",
                              sm->cfg.token_source);
    } else if (j->run != sm->cfg.run) {
        amldist__rz_sm_refuse(sm, who, NULL, AMLDIST__RZ_R_RUN,
                              "another run id (--rdzv-id)");
    } else if ((int)j->min != sm->cfg.min || (int)j->max != sm->cfg.max ||
               (int)j->max_restarts != sm->cfg.max_restarts) {
        amldist__rz_sm_refuse(
            sm, who, NULL, AMLDIST__RZ_R_OPTIONS,
            "--nnodes %u:%u and --max-restarts %u differ from the job's %d:%d "
            "and %d",
            j->min, j->max, j->max_restarts, sm->cfg.min, sm->cfg.max,
            sm->cfg.max_restarts);
    } else if ((int)j->keepalive_ms != sm->cfg.keepalive_ms ||
               (int)j->keepalive_misses != sm->cfg.keepalive_misses) {
        /* Each side declares the other dead by its own values: a node
         * beating every 30 s would be lost after the host's 3 s. */
        amldist__rz_sm_refuse(
            sm, who, NULL, AMLDIST__RZ_R_OPTIONS,
            "--rdzv-conf keep_alive_interval=%g,keep_alive_max_attempt=%u "
            "differ from the job's "
            "keep_alive_interval=%g,keep_alive_max_attempt=%d (the rendezvous "
            "host's): give every node the same",
            j->keepalive_ms / 1000.0, j->keepalive_misses,
            sm->cfg.keepalive_ms / 1000.0, sm->cfg.keepalive_misses);
    } else if (j->nproc < 1 || j->nproc > AMLDIST__RZ_NPROC_MAX ||
               (order >= 0 && j->order > (1u << 30))) {
        amldist__rz_sm_refuse(sm, who, NULL, AMLDIST__RZ_R_PROTO,
                              "worker count %u or order %u out of range",
                              j->nproc, j->order);
    } else if (sm->phase == AMLDIST__RZ_P_OVER && sm->failed_early &&
               j->round != AMLDIST__RZ_ROUND_FAILING) {
        /* Told as the members were, with the status: a FINISH. */
        sm->told++;
        amldist__rz_sm_emit(sm, AMLDIST__RZ_A_FINISH, who,
                            (uint32_t)sm->status, sm->failure);
    } else if (sm->phase == AMLDIST__RZ_P_OVER) {
        amldist__rz_sm_refuse(sm, who, NULL, AMLDIST__RZ_R_OVER,
                              "the job is over%s%s",
                              sm->failed_early ? ": " : "",
                              sm->failed_early ? sm->failure : "");
    } else if (j->round == AMLDIST__RZ_ROUND_FAILING) {
        /* A node that cannot start: heard while the round forms (a round
         * that runs goes on without it), in one of the job's places. */
        if (sm->phase != AMLDIST__RZ_P_FORMING ||
            sm->nm - sm->ngone >= sm->cfg.max)
            amldist__rz_sm_refuse(sm, who, NULL, AMLDIST__RZ_R_FULL,
                                  "the job %s without this node",
                                  sm->phase == AMLDIST__RZ_P_FORMING
                                      ? "has its nodes"
                                      : "runs");
        else
            admit(sm, ev, order);
    } else if (j->round != 0) {
        amldist__rz_sm_refuse(sm, who, NULL, AMLDIST__RZ_R_STALE,
                              "a stale agent (it asks for round %u)", j->round);
    } else if (known_agent(sm, j->agent) == 1) {
        amldist__rz_sm_refuse(sm, who, NULL, AMLDIST__RZ_R_STALE,
                              "an agent with this id has joined already (a "
                              "replayed JOIN)");
    } else if (known_agent(sm, j->agent) == 2) {
        amldist__rz_sm_refuse(sm, who, NULL, AMLDIST__RZ_R_STALE,
                              "a stale agent: this job declared it lost");
    } else if (mixed_order(sm, order)) {
        amldist__rz_sm_refuse(
            sm, who, NULL, AMLDIST__RZ_R_ORDER, "%s",
            order < 0
                ? "the other nodes' ranks come from a launcher or "
                  "--node-rank, this one's do not"
                : "this node's rank comes from a launcher or --node-rank, "
                  "the other nodes' do not");
    } else if (order >= 0 && (by = taken_order(sm, order)) != NULL) {
        amldist__rz_sm_refuse(sm, who, NULL, AMLDIST__RZ_R_ORDER,
                              "node rank %d is already %s's", order, by);
    } else if (amldist__rz_sm_count_in_job(sm) >= sm->cfg.max ||
               (sm->phase != AMLDIST__RZ_P_FORMING &&
                sm->cfg.min == sm->cfg.max)) {
        amldist__rz_sm_refuse(sm, who, NULL, AMLDIST__RZ_R_FULL,
                              "the job has its %d node%s (round %d)",
                              sm->cfg.max, sm->cfg.max == 1 ? "" : "s",
                              sm->round);
    } else if (workers(sm) + j->nproc > AMLDIST__RZ_WORLD_MAX) {
        /* Every agent would reject the round's ASSIGN as malformed. */
        amldist__rz_sm_refuse(
            sm, who, NULL, AMLDIST__RZ_R_FULL,
            "this node's %u workers would make the job's %lld, more than the "
            "%d that its agents can number",
            j->nproc, workers(sm) + j->nproc, AMLDIST__RZ_WORLD_MAX);
    } else {
        admit(sm, ev, order);
    }
}
