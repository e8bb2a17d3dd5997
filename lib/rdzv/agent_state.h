/*
 * What an agent's two sides hand each other (agent_state.c): the caller's
 * (api.c, api_plane.c: the public amldist_rdzv_*() calls, the handler)
 * and its rendezvous backend's (backend.h: the transport, tcp/ today, on a
 * thread of its own).  The caller queues here what the decider is to hear
 * (a FAIL, a DONE; issue 20's asks, answers, view and marks) and tells the
 * backend (its send()); the backend sets here what the caller reads (the
 * state, the last ASSIGN, a stop, the end; requests, complete gathers,
 * marks, the clock) and signals the caller's descriptors.  Everything
 * below "under mu" is read and written under mu only.
 */
#ifndef AMLDIST_RDZV_AGENT_STATE_H
#define AMLDIST_RDZV_AGENT_STATE_H

#include <pthread.h>
#include <stdint.h>

#include "rdzv/rdzv_internal.h"

/* The agent's state, as the backend sets it and the caller reads it:
 * before the first round (no connection to the decider yet, or joined
 * and waiting), in a round (running, told to stop, its workers done) and
 * the end. */
enum { C_CONNECTING, C_JOINING, C_RUNNING, C_STOP, C_WAITING, C_OVER };

/* A FAIL the caller queued (amldist_rdzv_fail()): the decider hears one
 * a round. */
struct amldist__rz_fail {
    uint32_t round, flags, rank, status;
    size_t len;
    char text[]; /* the summary, len bytes, no NUL */
};

/* Issue 20's, under mu: what the caller queues (asks, answers, its view,
 * marks) and what the backend hands it (the clock offset, requests,
 * complete gathers, other nodes' marks). */
struct amldist__rz_plane_shared {
    int clk_have;
    int64_t clk_offset, clk_error;
    int watch_ms;                  /* > 0: send views */
    amldist_rdzv_view_t *views;    /* the caller's latest, local times */
    int nviews;
    int view_fresh;                /* set since the last one sent */
    struct amldist__rz_ask *asks;  /* to send */
    struct amldist__rz_answer *answers; /* to send */
    struct amldist__rz_req *reqs;  /* for the caller (requests) */
    int nreqs;
    struct amldist__rz_got *got;   /* for the caller (complete gathers) */
    unsigned next_tag;
    amldist_rdzv_mark_t *marks_out; /* AMLDIST__RZ_MARKS_MAX, host times */
    int nmarks_out;
    unsigned long long stride;     /* marks of steps that are multiples */
    amldist_rdzv_mark_t *marks_in; /* a ring of AMLDIST__RZ_MARKS_IN */
    size_t in_first, in_n;
};
#define AMLDIST__RZ_MARKS_IN 65536
#define AMLDIST__RZ_REQS_MAX 64

typedef struct amldist__rz_sink {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC: the caller's waits */
    int efd; /* backend -> caller: a stop, a new round, the end */
    int gfd; /* backend -> caller: a request or a gather waits */
    /* While the round forms: the decider's WAIT lines go here. */
    int note_fd;
    char note_prefix[64];

    /* Under mu. */
    int state;
    int err;                  /* join's error, 0 */
    char errmsg[600];
    amldist__rz_round_t next; /* the last ASSIGN */
    int have_next;
    int status;               /* the job's, once C_OVER */
    int finished;             /* C_OVER by the host's FINISH */
    char *failure;            /* its first failure, once C_OVER */
    char stop_why[AMLDIST__RZ_TEXT_MAX + 1]; /* the last STOP's */
    struct amldist__rz_fail *fail; /* to send */
    int done, done_status, done_port;
    struct amldist__rz_plane_shared pl;
} amldist__rz_sink_t;

/* The public structs of requests and gathers are the first member of
 * private ones that own their memory. */
struct amldist__rz_ask {
    struct amldist__rz_ask *next;
    uint32_t tag, topic, timeout_ms;
    size_t arg_len;
    unsigned char arg[];
};

struct amldist__rz_answer {
    struct amldist__rz_answer *next;
    uint32_t id;
    size_t len;
    unsigned char blob[];
};

struct amldist__rz_req {
    amldist_rdzv_request_t pub;
    struct amldist__rz_req *next;
    int stalled[(AMLDIST__RZ_ARG_MAX - 8) / 4];
    unsigned char arg[AMLDIST__RZ_ARG_MAX];
};

struct amldist__rz_got {
    amldist_rdzv_gather_t pub;
    struct amldist__rz_got *next;
    int stalled[(AMLDIST__RZ_ARG_MAX - 8) / 4];
    unsigned char arg[AMLDIST__RZ_ARG_MAX];
};

/* The sink made (no descriptors yet: -1) and its descriptors opened (0,
 * or -1 with errno); everything freed, the descriptors closed. */
void amldist__rz_sink_init(amldist__rz_sink_t *s);
int amldist__rz_sink_open(amldist__rz_sink_t *s);
void amldist__rz_sink_free(amldist__rz_sink_t *s);

/* The backend's side, under mu: something for the caller (a stop, a new
 * round, the end); the job is over for this agent (FINISH, a refusal, or
 * the decider lost); the caller's events descriptor readable while a
 * request or a gather waits, emptied when none does. */
void amldist__rz_signal_caller(amldist__rz_sink_t *s);
void amldist__rz_set_over(amldist__rz_sink_t *s, int status,
                          const char *failure);
void amldist__rz_plane_signal(amldist__rz_sink_t *s);
/* Under mu: the decider's side is gone for this agent (`what`: "host",
 * "store"): before the first round a join error ("rendezvous at EP:
 * why"), after it the end ("the rendezvous WHAT at EP was lost: why"). */
void amldist__rz_set_lost(amldist__rz_sink_t *s, const char *endpoint,
                          const char *what, const char *why);
/* The decider's WAIT line, written to the note descriptor (not under
 * mu: one write). */
void amldist__rz_note_wait(const amldist__rz_sink_t *s,
                           const unsigned char *p, uint32_t len);

/* agent_frames.c, the backend's side, under mu: one of the decider's
 * actions for this agent, as its frame (ASSIGN, STOP, FINISH, REFUSE; the
 * payload's length at least its type's least, rdzv_internal.h), turned
 * into the state the caller reads; endpoint and token_source for the
 * messages, reached: the decider's address as this agent reached it (an
 * ASSIGN's MASTER_ADDR checked against it, master.c; "" or NULL: not
 * known).  0, or -1 with *why: a malformed ASSIGN, or a frame only agents
 * send. */
int amldist__rz_agent_action(amldist__rz_sink_t *s, const char *endpoint,
                             const char *token_source, const char *reached,
                             unsigned type, const unsigned char *p,
                             uint32_t len, const char **why);

/* A request as the decider's QUERY gives it (asker: NONE for the host);
 * NULL when out of memory. */
struct amldist__rz_req *amldist__rz_req_new(uint32_t id, uint32_t topic,
                                            uint32_t asker,
                                            const unsigned char *arg,
                                            size_t arg_len);
/* A complete gather, with no answers yet. */
struct amldist__rz_got *amldist__rz_got_new(uint32_t tag, uint32_t topic,
                                            const unsigned char *arg,
                                            size_t arg_len);
void amldist__rz_asks_free(struct amldist__rz_ask *a);
void amldist__rz_answers_free(struct amldist__rz_answer *a);

#endif /* AMLDIST_RDZV_AGENT_STATE_H */
