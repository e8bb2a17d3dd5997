/*
 * Forming a round (the host's state machine, host_sm.h): when max nodes
 * joined, or min did and the last call is over, every waiting member gets
 * a node rank and the round's ASSIGN; when the join timeout passes first,
 * every member is refused and the job is over.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/host_sm_state.h"

/* MASTER_PORT when node 0's agent offered none. */
#define DEFAULT_MASTER_PORT 29500

/* Nodes: with orders, by order; else the host's own agent first, then the
 * ones that ran before in their old order, then newcomers by arrival. */
static uint64_t sort_key(const amldist__rz_sm_t *sm,
                         const struct amldist__rz_member *m)
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
    uint64_t ka = sort_key(sm, *(struct amldist__rz_member *const *)a);
    uint64_t kb = sort_key(sm, *(struct amldist__rz_member *const *)b);
    return ka < kb ? -1 : ka > kb;
}

/* MASTER_ADDR of a round of n nodes (nodes[0] is node 0), its source in
 * *flags: the host's option, else node 0's --local-addr (as torchrun's),
 * else node 0's address as the host sees it.  That one is loopback when
 * node 0's agent runs on the host's machine and dialed a name that
 * resolves to loopback there (Debian's "127.0.1.1 <hostname>"): a node
 * that came over the network would send its workers to its own loopback,
 * so the host's own address as the first such node reached it takes its
 * place.  Every node on loopback (one machine) keeps loopback. */
static const char *master_addr(const amldist__rz_sm_t *sm,
                               struct amldist__rz_member *const *nodes, int n,
                               unsigned *flags)
{
    if (sm->cfg.master_addr[0]) {
        *flags |= AMLDIST__RZ_F_ADDR_OPTION;
        return sm->cfg.master_addr;
    }
    if (nodes[0]->local_addr[0]) {
        *flags |= AMLDIST__RZ_F_ADDR_LOCAL;
        return nodes[0]->local_addr;
    }
    if (!amldist__rz_addr_loopback(nodes[0]->addr))
        return nodes[0]->addr;
    for (int i = 1; i < n; i++)
        if (!amldist__rz_addr_loopback(nodes[i]->addr) &&
            nodes[i]->reached[0] &&
            !amldist__rz_addr_loopback(nodes[i]->reached)) {
            *flags |= AMLDIST__RZ_F_ADDR_REACHED;
            return nodes[i]->reached;
        }
    return nodes[0]->addr;
}

/* Close the round: every JOINED or DONE member gets a node rank. */
void amldist__rz_sm_form_round(amldist__rz_sm_t *sm)
{
    struct amldist__rz_member *nodes[AMLDIST_RDZV_MAX_NODES];
    int n = 0;
    for (int i = 0; i < sm->nm; i++) {
        struct amldist__rz_member *m = &sm->m[i];
        if ((m->state != AMLDIST__RZ_M_JOINED &&
             m->state != AMLDIST__RZ_M_DONE) || m->failing)
            continue;
        if (n == sm->cfg.max || n == AMLDIST_RDZV_MAX_NODES)
            amldist__rz_sm_refuse(sm, m->who, m, AMLDIST__RZ_R_FULL,
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
    rd->flags = 0;
    amldist__strlcpy(rd->master_addr, master_addr(sm, nodes, n, &rd->flags),
                     sizeof rd->master_addr);
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
        amldist__rz_sm_set_state(sm, nodes[i], AMLDIST__RZ_M_RUNNING);
        rd->node = i;
        amldist__rz_sm_emit(sm, AMLDIST__RZ_A_ASSIGN, nodes[i]->who,
                            (uint32_t)i, NULL);
    }
    sm->phase = AMLDIST__RZ_P_RUNNING;
    sm->failed = sm->restart_wanted = sm->counted = 0;
    sm->failure[0] = '\0';
}

/* The last call has begun (who: NULL, every member hears it), or node
 * `who` joined during it: how many nodes are in and when the round forms,
 * one line for each agent (a silent wait of last_call_ms looks like a
 * hang; a line at every join would be thousands in a large job). */
void amldist__rz_sm_say_waiting(amldist__rz_sm_t *sm, void *who)
{
    int n = amldist__rz_sm_count_in_job(sm), more = sm->cfg.max - n;
    long long left = sm->min_at + sm->cfg.last_call_ms - sm->now;
    /* Tenths of a second at most: "30 s", "0.5 s", "12.3 s". */
    double s = left > 0 ? (double)((left + 50) / 100) / 10 : 0;
    snprintf(sm->waiting, sizeof sm->waiting, "rendezvous: %d node%s of "
             "%d:%d in; the round forms in %g s (last_call_timeout), or "
             "at once if %d more join%s", n, n == 1 ? "" : "s", sm->cfg.min,
             sm->cfg.max, s, more, more == 1 ? "s" : "");
    for (int i = 0; i < sm->nm; i++)
        if (sm->m[i].state == AMLDIST__RZ_M_JOINED && !sm->m[i].failing &&
            (!who || sm->m[i].who == who))
            amldist__rz_sm_emit(sm, AMLDIST__RZ_A_WAIT, sm->m[i].who, 0,
                                sm->waiting);
}

/* Every AMLDIST__RZ_SAY_MS while the round forms, one line to each
 * member: what is awaited, where, and for how long now (its node ranks
 * when the nodes have theirs: the static rendezvous's, an outer
 * launcher's). */
static void say_still_waiting(amldist__rz_sm_t *sm)
{
    long long last = sm->said_at ? sm->said_at : sm->started;
    if (sm->now - last < AMLDIST__RZ_SAY_MS)
        return;
    sm->said_at = sm->now;
    if (sm->min_at) { /* the last call's line, its time left now */
        if (sm->cfg.last_call_ms > 0)
            amldist__rz_sm_say_waiting(sm, NULL);
        return;
    }
    int n = amldist__rz_sm_count_in_job(sm), missing = sm->cfg.min - n;
    char which[200] = "";
    size_t k = 0;
    int ordered = sm->nordered > 0;
    for (int o = 0; ordered && o < sm->cfg.max && k < sizeof which - 24; o++) {
        const struct amldist__rz_member *t = amldist__rz_sm_by_order(sm, o);
        if (t && !t->failing)
            continue;
        int w = snprintf(which + k, sizeof which - k, "%s%d",
                         k ? ", " : " (node ", o);
        k += w > 0 ? (size_t)w : 0;
    }
    if (k >= sizeof which - 24)
        snprintf(which + k, sizeof which - k, ", ...");
    if (k)
        amldist__strlcpy(which + strlen(which), ")",
                         sizeof which - strlen(which));
    /* (a long endpoint cuts the line: it is a note, still whole enough) */
    int w = snprintf(sm->waiting, sizeof sm->waiting,
                     "waiting for %d of %d node%s%s at %s, %lld s of %.0f s "
                     "(join timeout)", missing, sm->cfg.min,
                     sm->cfg.min == 1 ? "" : "s", which, sm->cfg.endpoint,
                     (sm->now - sm->started) / 1000,
                     sm->cfg.join_timeout_ms / 1000.0);
    if (w < 0)
        sm->waiting[0] = '\0';
    for (int i = 0; i < sm->nm; i++)
        if (sm->m[i].state == AMLDIST__RZ_M_JOINED && !sm->m[i].failing)
            amldist__rz_sm_emit(sm, AMLDIST__RZ_A_WAIT, sm->m[i].who, 0,
                                sm->waiting);
}

void amldist__rz_sm_on_tick(amldist__rz_sm_t *sm)
{
    if (sm->phase != AMLDIST__RZ_P_FORMING)
        return;
    int n = amldist__rz_sm_count_in_job(sm);
    if (n >= sm->cfg.max ||
        (n >= sm->cfg.min && sm->min_at &&
         sm->now - sm->min_at >= sm->cfg.last_call_ms)) {
        amldist__rz_sm_form_round(sm);
    } else if (sm->now - sm->started >= sm->cfg.join_timeout_ms) {
        for (int i = 0; i < sm->nm; i++)
            if (amldist__rz_in_job(&sm->m[i]))
                amldist__rz_sm_refuse(
                    sm, sm->m[i].who, &sm->m[i], AMLDIST__RZ_R_TIMEOUT,
                    "only %d of the %d nodes needed joined within %.0f s", n,
                    sm->cfg.min, sm->cfg.join_timeout_ms / 1000.0);
        sm->phase = AMLDIST__RZ_P_OVER;
        sm->over_at = sm->now;
    } else {
        say_still_waiting(sm);
    }
}
