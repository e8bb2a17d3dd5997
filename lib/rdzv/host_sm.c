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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/host_sm_state.h"

const amldist__rz_round_t *amldist__rz_sm_round(const amldist__rz_sm_t *sm)
{
    return &sm->rd;
}

int amldist__rz_sm_phase(const amldist__rz_sm_t *sm) { return sm->phase; }

void amldist__rz_sm_emit(amldist__rz_sm_t *sm, int type, void *who,
                         uint32_t value, const char *text)
{
    if (sm->nacts < sm->cap) /* the bound in amldist__rz_sm_new() holds */
        sm->acts[sm->nacts++] = (amldist__rz_action_t){
            .type = type, .who = who, .value = value, .text = text};
}

int amldist__rz_sm_count_in_job(const amldist__rz_sm_t *sm)
{
    int n = 0;
    for (int i = 0; i < sm->nm; i++)
        n += amldist__rz_in_job(&sm->m[i]) && !sm->m[i].failing;
    return n;
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
        m->state = AMLDIST__RZ_M_GONE;
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
