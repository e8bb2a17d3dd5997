/*
 * An agent's handle on the control plane (amldist_rdzv_t): the handler's
 * state, the caller's own (api.c, api_plane.c, share.c: the public
 * amldist_rdzv_*() calls, run on the caller's thread), the sink it shares
 * with its backend (agent_state.h: `sk`, under its mu), and the backend
 * (backend.h: its table and its own state, which only it reads: the
 * thread, the sockets and, when this agent hosts, the decider's I/O).
 */
#ifndef AMLDIST_RDZV_HANDLE_H
#define AMLDIST_RDZV_HANDLE_H

#include <stdint.h>

#include "rdzv/agent_state.h"
#include "rdzv/backend.h"
#include "rdzv/rdzv_internal.h"

struct amldist_rdzv {
    amldist__rz_cfg_t cfg;
    amldist__rz_join_t me;   /* this agent's JOIN (its port: the backend's) */
    amldist__rz_round_t cur; /* the caller's view of the round */
    /* The caller's copy of the stop's reason, which the backend rewrites
     * in sk at every ASSIGN, STOP and FINISH. */
    char why[AMLDIST__RZ_TEXT_MAX + 1];
    /* What this agent asked for (share.c), for amldist_rdzv_warnings()
     * (the caller's, rewritten at every round); its local address and
     * machine are in me. */
    int asked_master_port, asked_last_call_ms, asked_join_timeout_ms;
    char asked_master_addr[AMLDIST__RZ_ADDR_MAX + 1];
    char *warnings;

    amldist__rz_sink_t sk;
    const struct amldist__rz_backend_ops *ops;
    void *be; /* the backend's, opaque */
};

/* share.c: keep what the options ask for beyond the job's shared values
 * (local address, machine, note descriptor), at join; compare the round
 * the caller now has with it (amldist_rdzv_warnings()). */
void amldist__rz_note_options(amldist_rdzv_t *r,
                              const amldist_rdzv_options_t *o);
void amldist__rz_note_round(amldist_rdzv_t *r);
/* agent_state.c: the backend has something of the caller's to take (its
 * send()). */
void amldist__rz_wake(amldist_rdzv_t *r);

#endif /* AMLDIST_RDZV_HANDLE_H */
