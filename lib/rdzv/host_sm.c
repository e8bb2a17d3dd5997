/*
 * The rendezvous host's state machine (see host_sm.h): every decision the
 * host makes, from events to actions, with no I/O.  The shape follows
 * torchelastic's dynamic rendezvous, where a pure function of the state
 * says what to do next and a separate executor does it.
 *
 * This file holds what the machine's handlers share, below them all: the
 * actions they emit, a refusal, the stop of every node, a round's first
 * failure.  The machine itself (made, fed one event at a time, freed) and
 * the end of a round are host_sm_step.c's; who may join host_sm_join.c's;
 * forming a round (and the join timeout) host_sm_form.c's; the views,
 * gathers and marks host_sm_watch.c's.
 */
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/host_sm_state.h"

const amldist__rz_round_t *amldist__rz_sm_round(const amldist__rz_sm_t *sm)
{
    return &sm->rd;
}

int amldist__rz_sm_phase(const amldist__rz_sm_t *sm) { return sm->phase; }

void amldist__rz_sm_set_plane_agent(amldist__rz_sm_t *sm, uint64_t agent)
{
    sm->plane_agent = agent;
}

const struct amldist__rz_hsum amldist__rz_hsum_none = {
    .oldest = INT64_MAX, .late_at = INT64_MAX, .timeout = UINT32_MAX};

void amldist__rz_sm_hang_touch(amldist__rz_sm_t *sm,
                               struct amldist__rz_member *m)
{
    if (!sm->hsum_ok || m->hdirty)
        return; /* the whole tree is to make anyway, or m is listed */
    m->hdirty = 1;
    sm->hdirty[sm->nhdirty++] = (int)(m - sm->m);
}

void amldist__rz_sm_hsum_leaf(amldist__rz_sm_t *sm, int i,
                              const struct amldist__rz_hsum *s)
{
    sm->hsum[sm->hsum_leaves + i] = *s;
}

static void hsum_node(struct amldist__rz_hsum *t, int k)
{
    const struct amldist__rz_hsum *a = &t[2 * k], *b = &t[2 * k + 1];
    t[k] = (struct amldist__rz_hsum){
        .n = a->n + b->n, .live = a->live + b->live,
        .life = a->life > b->life ? a->life : b->life,
        .oldest = a->oldest < b->oldest ? a->oldest : b->oldest,
        .late_at = a->late_at < b->late_at ? a->late_at : b->late_at,
        .timeout = a->timeout < b->timeout ? a->timeout : b->timeout};
}

void amldist__rz_sm_hsum_fix(amldist__rz_sm_t *sm, int i)
{
    if (i >= 0) {
        for (int k = (sm->hsum_leaves + i) / 2; k >= 1; k /= 2)
            hsum_node(sm->hsum, k);
        return;
    }
    for (int k = sm->hsum_leaves - 1; k >= 1; k--)
        hsum_node(sm->hsum, k);
}

void amldist__rz_sm_emit(amldist__rz_sm_t *sm, int type, void *who,
                         uint32_t value, const char *text)
{
    if (sm->nacts < sm->cap) /* the bound in amldist__rz_sm_new() holds */
        sm->acts[sm->nacts++] = (amldist__rz_action_t){
            .type = type, .who = who, .value = value, .text = text};
}

int amldist__rz_sm_count_in_job(const amldist__rz_sm_t *sm)
{
    return sm->ncounted;
}

static struct amldist__rz_member *at(const amldist__rz_sm_t *sm, int i)
{
    return i >= 0 ? &sm->m[i] : NULL;
}

struct amldist__rz_member *amldist__rz_sm_by_who(const amldist__rz_sm_t *sm,
                                                 const void *who)
{
    return at(sm, amldist__u64map_get(&sm->by_who, (uintptr_t)who));
}

struct amldist__rz_member *amldist__rz_sm_by_agent(const amldist__rz_sm_t *sm,
                                                   uint64_t agent)
{
    return at(sm, amldist__u64map_get(&sm->by_agent, agent));
}

struct amldist__rz_member *amldist__rz_sm_by_order(const amldist__rz_sm_t *sm,
                                                   int order)
{
    return order < 0 ? NULL
                     : at(sm, amldist__u64map_get(&sm->by_order,
                                                  (uint64_t)order));
}

/* Member i in the index (the first holder of an id or rank keeps it). */
static void index_put(amldist__rz_sm_t *sm, int i)
{
    struct amldist__rz_member *m = &sm->m[i];
    amldist__u64map_put(&sm->by_who, (uintptr_t)m->who, i);
    if (amldist__u64map_get(&sm->by_agent, m->agent) >= 0)
        sm->dups++;
    else
        amldist__u64map_put(&sm->by_agent, m->agent, i);
    if (m->order < 0)
        return;
    if (amldist__u64map_get(&sm->by_order, (uint64_t)m->order) >= 0)
        sm->dups++;
    else
        amldist__u64map_put(&sm->by_order, (uint64_t)m->order, i);
}

/* Key `key` of map `map` held by member i no more: by another member in
 * the job that has it, if any (only after dups). */
static void index_drop(amldist__rz_sm_t *sm, amldist__u64map_t *map,
                       uint64_t key, int i, int by_agent)
{
    if (amldist__u64map_get(map, key) != i)
        return;
    amldist__u64map_del(map, key);
    for (int k = 0; sm->dups && k < sm->nm; k++)
        if (k != i && amldist__rz_in_job(&sm->m[k]) &&
            (by_agent ? sm->m[k].agent == key
                      : (uint64_t)sm->m[k].order == key)) {
            amldist__u64map_put(map, key, k);
            return;
        }
}

struct amldist__rz_member *
amldist__rz_sm_add(amldist__rz_sm_t *sm, const struct amldist__rz_member *init)
{
    if (sm->nm == sm->cfg.max)
        amldist__rz_sm_compact(sm, 1);
    if (sm->nm == sm->cfg.max)
        return NULL; /* not reached: at most max are in the job */
    struct amldist__rz_member *m = &sm->m[sm->nm];
    *m = *init;
    index_put(sm, sm->nm++);
    sm->nstate[m->state]++;
    sm->ncounted += !m->failing;
    sm->nordered += m->order >= 0;
    sm->nworkers += m->nproc;
    return m;
}

void amldist__rz_sm_set_state(amldist__rz_sm_t *sm,
                              struct amldist__rz_member *m, int state)
{
    if (m->state == state || m->state == AMLDIST__RZ_M_GONE)
        return;
    amldist__rz_sm_hang_touch(sm, m); /* it may watch no more */
    sm->nstate[m->state]--;
    m->state = state;
    if (state != AMLDIST__RZ_M_GONE) {
        sm->nstate[state]++;
        return;
    }
    int i = (int)(m - sm->m);
    sm->ngone++;
    sm->ncounted -= !m->failing;
    sm->nordered -= m->order >= 0;
    sm->nworkers -= m->nproc;
    if (amldist__u64map_get(&sm->by_who, (uintptr_t)m->who) == i)
        amldist__u64map_del(&sm->by_who, (uintptr_t)m->who);
    index_drop(sm, &sm->by_agent, m->agent, i, 1);
    if (m->order >= 0)
        index_drop(sm, &sm->by_order, (uint64_t)m->order, i, 0);
}

void amldist__rz_sm_compact(amldist__rz_sm_t *sm, int all)
{
    if (!sm->ngone || (!all && 4 * sm->ngone < sm->nm))
        return;
    int k = 0;
    for (int i = 0; i < sm->nm; i++) {
        if (amldist__rz_in_job(&sm->m[i])) {
            if (k != i) /* none copied onto itself */
                sm->m[k] = sm->m[i];
            k++;
        } else
            free(sm->m[i].views);
    }
    sm->nm = k;
    sm->ngone = 0;
    sm->dups = 0;
    /* The sums' leaves are places in m: the tree is made anew. */
    sm->hsum_ok = 0;
    for (int i = 0; i < sm->nm; i++)
        sm->m[i].hdirty = 0;
    sm->nhdirty = 0;
    amldist__u64map_clear(&sm->by_who);
    amldist__u64map_clear(&sm->by_agent);
    amldist__u64map_clear(&sm->by_order);
    for (int i = 0; i < sm->nm; i++)
        index_put(sm, i);
}

void amldist__rz_sm_refuse(amldist__rz_sm_t *sm, void *who,
                           struct amldist__rz_member *m, uint32_t reason,
                           const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sm->refusal, sizeof sm->refusal, fmt, ap);
    va_end(ap);
    if (m)
        amldist__rz_sm_set_state(sm, m, AMLDIST__RZ_M_GONE);
    amldist__rz_sm_emit(sm, AMLDIST__RZ_A_REFUSE, who, reason, sm->refusal);
}

void amldist__rz_sm_stop_all(amldist__rz_sm_t *sm, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sm->stop_why, sizeof sm->stop_why, fmt, ap);
    va_end(ap);
    sm->phase = AMLDIST__RZ_P_STOPPING;
    for (int i = 0; i < sm->nm; i++)
        if (sm->m[i].state == AMLDIST__RZ_M_RUNNING)
            amldist__rz_sm_emit(sm, AMLDIST__RZ_A_STOP, sm->m[i].who,
                                (uint32_t)sm->round, sm->stop_why);
}

/* The round's first failure: what every node is told, and what follows. */
void amldist__rz_sm_first_failure(amldist__rz_sm_t *sm, int status,
                                  int final, int counts, const char *text)
{
    sm->failed = 1;
    sm->status = status;
    amldist__strlcpy(sm->failure, text, sizeof sm->failure);
    sm->counted = counts;
    sm->restart_wanted =
        !final && (!counts || sm->restarts < sm->cfg.max_restarts);
}

void amldist__rz_sm_round_fails(amldist__rz_sm_t *sm, int status,
                                const char *text)
{
    if (sm->failed || sm->phase != AMLDIST__RZ_P_RUNNING)
        return;
    amldist__rz_sm_first_failure(sm, status, 0, 1, text);
    amldist__rz_sm_stop_all(sm, "%s", text);
}
