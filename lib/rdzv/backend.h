/*
 * A rendezvous backend: how this agent's events reach the decider (the
 * pure state machine of host_sm.h, the same for every backend) and the
 * decider's actions reach this agent.  The split is torchelastic's: the
 * handler (api.c, api_plane.c: the public amldist_rdzv_*() calls, the
 * round as the caller sees it) above, a backend (this table) below, and
 * between them only the agent's sink (agent_state.h), where the caller
 * queues what the decider is to hear and the backend sets what the caller
 * reads.  A backend is chosen by the endpoint's scheme in the registry
 * (backends.h); tcp/ is the first.
 */
#ifndef AMLDIST_RDZV_BACKEND_H
#define AMLDIST_RDZV_BACKEND_H

#include "rdzv/agent_state.h"
#include "rdzv/rdzv_internal.h"

struct amldist__rz_backend_ops {
    const char *scheme; /* the backend's own name: "tcp" */
    /* The endpoint's form, before anything is made (its scheme taken
     * off); max_nodes: the job's.  0, or an AMLDIST_E* (message set). */
    int (*check)(const char *endpoint, int max_nodes);
    /* Join the job that cfg describes (both stay the caller's until
     * close), me this agent's JOIN (its master port candidate the
     * backend's to add): from now on the backend sets the state in s, and
     * the caller waits there for the first round.  0 with *be, or an
     * AMLDIST_E* (message set, nothing left to close). */
    int (*open)(const char *endpoint, const amldist__rz_cfg_t *cfg,
                const amldist__rz_join_t *me, amldist__rz_sink_t *s,
                void **be);
    /* The caller queued something in s (a FAIL, a DONE, issue 20's asks,
     * answers, view or marks): the backend takes it; never blocks. */
    void (*send)(void *be);
    /* Whether this agent runs the decider (amldist_rdzv_is_host(): its
     * clock is the job's). */
    int (*hosts)(const void *be);
    /* Leave the job: nothing is written to s after; be freed. */
    void (*close)(void *be);
};

/* The backend of `endpoint` (backends.c): "NAME://REST" picks the
 * registry's row NAME (but its first's), and *rest is REST; anything else
 * is the first row's (tcp: "HOST:PORT", as it always was), all of it. */
const struct amldist__rz_backend_ops *
amldist__rz_backend_pick(const char *endpoint, const char **rest);

#endif /* AMLDIST_RDZV_BACKEND_H */
