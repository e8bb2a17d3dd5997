/*
 * Issue 20's plane on the agent's side, every backend's (plane_link.c):
 * this agent's one connection to the decider's plane, on which it sends
 * the caller's view, asks, answers and marks (rdzv_internal.h's frames)
 * and receives the decider's TIMEA, QUERY, RESULT and MARKS.  The TCP
 * backend's connection is its rendezvous connection itself (tcp/plane.c);
 * the etcd backend's is one of its own, to the address the decider
 * publishes (etcd/plane.c).  The backend owns the connection and its
 * descriptor; this file reads and writes the sink (agent_state.h) under
 * its mu and never blocks.  Below it, outbox.c: frames that wait their
 * turn behind a connection's queue, the decider's side's too.
 */
#ifndef AMLDIST_RDZV_PLANE_LINK_H
#define AMLDIST_RDZV_PLANE_LINK_H

#include <stddef.h>

#include "rdzv/agent_state.h"
#include "rdzv/rdzv_internal.h"

/* Frames waiting behind a connection's queue (outbox.c): pushed whole
 * (a head and a payload, copied), moved into the connection while its
 * queue holds less than AMLDIST__RZ_OUTBOX_LOW. */
#define AMLDIST__RZ_OUTBOX_LOW (256u << 10)
#define AMLDIST__RZ_OUTBOX_MAX (128u << 20)
struct amldist__rz_out;
typedef struct {
    struct amldist__rz_out *head, *tail;
    size_t bytes;
} amldist__rz_outbox_t;
/* 0, or -1 when out of memory or past AMLDIST__RZ_OUTBOX_MAX. */
int amldist__rz_outbox_push(amldist__rz_outbox_t *o, unsigned type,
                            const void *head, size_t hlen, const void *p,
                            size_t len);
/* 0, or -1 when the connection refused a frame (stuck, or broken). */
int amldist__rz_outbox_pump(amldist__rz_outbox_t *o, amldist__conn_t *c);
void amldist__rz_outbox_clear(amldist__rz_outbox_t *o);

struct amldist__rz_gathering; /* a gather whose answers come in */
typedef struct {
    amldist__rz_sink_t *s;          /* the handle's */
    const amldist__rz_cfg_t *cfg;   /* the handle's */
    amldist__conn_t *c;             /* to the decider; fd < 0: none now */
    /* This agent runs the decider: it shares the decider's clock (no
     * TIMEQ), and the decider's own gather (a hang) comes to it
     * unasked.  The backend sets it before each call. */
    int own;
    long long *last_beat; /* a TIMEQ is this keepalive's BEAT (NULL) */
    amldist__rz_clock_t clk;
    long long next_timeq, next_view, next_marks;
    amldist__rz_outbox_t out;       /* ANSWER chunks */
    struct amldist__rz_gathering *g;
} amldist__rz_link_t;

/* One of the decider's plane frames (TIMEA, QUERY, RESULT, MARKS). */
void amldist__rz_link_frame(amldist__rz_link_t *l, unsigned type,
                            const unsigned char *p, uint32_t len);
/* What is due to send, each round of the backend's loop: 0, or -1 when
 * the connection refused a frame (the backend then drops it). */
int amldist__rz_link_io(amldist__rz_link_t *l);
/* When io next has something to send (ms), or -1. */
long long amldist__rz_link_wake(const amldist__rz_link_t *l);
/* The connection to the decider is gone and another may follow (the
 * decider moved): each gather in flight handed to the caller as it
 * stands, refused (its answers so far kept), never left to wait, and
 * the ANSWER chunks not sent dropped (the decider that asked is gone). */
void amldist__rz_link_drop(amldist__rz_link_t *l);
/* Everything freed (the handle closes). */
void amldist__rz_link_free(amldist__rz_link_t *l);

#endif /* AMLDIST_RDZV_PLANE_LINK_H */
