/*
 * The rendezvous host's decisions, without sockets, threads or clocks: a
 * state machine fed one event at a time (a member's JOIN, FAIL or DONE as
 * decoded, a member lost, time passing) that answers with the actions a
 * backend's I/O then carries out (tcp/host_frames.c): what to send to
 * whom, who joined, who is refused.  It forms rounds from the agents that
 * joined, numbers the nodes, turns the first failure of a round into a
 * stop of every node, and once every node's workers are down either forms
 * the next round (a restart, or an elastic job re-forming) or ends the job
 * with the first failure's status.
 *
 * Phases:  FORMING -> RUNNING -> STOPPING -> RUNNING (next round) ... -> OVER
 *
 * Members are named by `who`, the I/O's own pointer for the connection,
 * which the machine never reads.  A member is known to the machine from
 * the ADMIT that answers its JOIN until it is refused or lost.
 */
#ifndef AMLDIST_RDZV_HOST_SM_H
#define AMLDIST_RDZV_HOST_SM_H

#include <netinet/in.h> /* INET6_ADDRSTRLEN */
#include <stddef.h>
#include <stdint.h>

#include "rdzv/rdzv_internal.h"

enum {
    AMLDIST__RZ_P_FORMING,  /* waiting for min (then last call) or max */
    AMLDIST__RZ_P_RUNNING,  /* a round runs */
    AMLDIST__RZ_P_STOPPING, /* its nodes were told to stop */
    AMLDIST__RZ_P_OVER      /* the job ended (or never formed) */
};

enum {
    AMLDIST__RZ_EV_JOIN, /* who's first frame: join, addr */
    AMLDIST__RZ_EV_FAIL, /* round, flags, rank, status, text/text_len */
    AMLDIST__RZ_EV_DONE, /* round, status, port */
    AMLDIST__RZ_EV_LOST, /* who's connection closed, went silent or broke
                            the protocol: why */
    /* Time passed: the round forms when max nodes joined, or min did and
     * the last call is over; the job ends when the join timeout passed
     * first; a gather's time is up; the job is found hung.  The I/O sends
     * one after every batch of other events. */
    AMLDIST__RZ_EV_TICK,
    /* host_sm_watch.c's: */
    AMLDIST__RZ_EV_VIEW,   /* round, timeout_ms, views/nviews */
    AMLDIST__RZ_EV_ASK,    /* tag, topic, timeout_ms, text: the arg */
    AMLDIST__RZ_EV_ANSWER, /* id, flags, text: a chunk */
    AMLDIST__RZ_EV_MARKS,  /* rank: count, text: the marks */
    /* Round `round` was found hung and stopped by the host itself (the
     * hang rule's last resort, its STOP's text in text): a backend that
     * logs its events replays this one, not the views it came from. */
    AMLDIST__RZ_EV_HUNG
};

typedef struct {
    int type;                 /* AMLDIST__RZ_EV_* */
    long long now;            /* ms on a monotonic clock, > 0 */
    void *who;                /* the member (not for TICK) */
    amldist__rz_join_t join;  /* JOIN */
    const char *addr;         /* JOIN: the peer's address */
    const char *local;        /* JOIN: the host's own address as the peer
                                 reached it (NULL or "": not known) */
    uint32_t round, flags, rank, status, port; /* FAIL, DONE */
    const unsigned char *text; /* FAIL: the summary, text_len bytes */
    size_t text_len;
    const char *why;          /* LOST */
    int64_t now_ns;           /* the host's clock (views' times), ns */
    uint32_t timeout_ms, tag, topic, id; /* VIEW, ASK, ANSWER */
    const amldist__rz_view_t *views; /* VIEW */
    size_t nviews;
} amldist__rz_event_t;

enum {
    AMLDIST__RZ_A_ADMIT,  /* who is in the job (heartbeats, drain) */
    AMLDIST__RZ_A_REFUSE, /* REFUSE(value: reason, text), then close who */
    AMLDIST__RZ_A_ASSIGN, /* ASSIGN of amldist__rz_sm_round() with node
                             rank `value` */
    AMLDIST__RZ_A_STOP,   /* STOP(value: round, text) */
    AMLDIST__RZ_A_FINISH, /* FINISH(value: status, text) */
    AMLDIST__RZ_A_WAIT,   /* WAIT(text): the round is forming */
    AMLDIST__RZ_A_QUERY,  /* QUERY(value: id, topic, node: the asker's,
                             data: the arg) */
    AMLDIST__RZ_A_RESULT, /* RESULT(tag, topic, index, node, flags, data) */
    AMLDIST__RZ_A_MARKS   /* MARKS(node: the sender's, value: count, data:
                             the marks) to the host's own agent */
};

typedef struct {
    int type;          /* AMLDIST__RZ_A_* */
    void *who;
    uint32_t value;
    const char *text;  /* REFUSE, STOP, FINISH; valid until the next step */
    uint32_t tag, topic, index, node, flags;   /* QUERY, RESULT, MARKS */
    const unsigned char *data; /* valid until the next step */
    size_t len;
} amldist__rz_action_t;

typedef struct amldist__rz_sm amldist__rz_sm_t;

/* A host for the job `cfg` describes, started at `now`; NULL when out of
 * memory. */
amldist__rz_sm_t *amldist__rz_sm_new(const amldist__rz_cfg_t *cfg,
                                     long long now);
void amldist__rz_sm_free(amldist__rz_sm_t *sm);

/* Feed one event: the number of actions, in *acts (valid until the next
 * step), to carry out in their order. */
int amldist__rz_sm_step(amldist__rz_sm_t *sm, const amldist__rz_event_t *ev,
                        const amldist__rz_action_t **acts);

/* The round that ASSIGN actions describe (node: of the last one). */
const amldist__rz_round_t *amldist__rz_sm_round(const amldist__rz_sm_t *sm);
int amldist__rz_sm_phase(const amldist__rz_sm_t *sm);
/* The agent that gets the host's own gather (a hang) and every node's
 * marks (its node reports them): the host's own (cfg's self_agent) until
 * set; a backend whose decider moves to another agent names that one. */
void amldist__rz_sm_set_plane_agent(amldist__rz_sm_t *sm, uint64_t agent);
/* When a TICK next has something to decide (a deadline), or -1: the
 * forming round's, a gather's, the hang rule's. */
long long amldist__rz_sm_next_deadline(const amldist__rz_sm_t *sm);
/* The job is over and every agent but the host's own has left, or the
 * end is older than the dead time, or the job did not end here (its
 * agents see the host's connections close). */
int amldist__rz_sm_drained(const amldist__rz_sm_t *sm, long long now);

#endif /* AMLDIST_RDZV_HOST_SM_H */
