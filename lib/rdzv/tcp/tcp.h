/*
 * The TCP backend (backend.h; the registry's "c10d"): the agents meet at a
 * host, the agent whose process can listen on the endpoint (hosting.c),
 * which runs the decider (host_sm.h) beside its own agent; every agent,
 * the host's own included, is a client of it on one long-lived connection
 * (rdzv_internal.h's frames).  Each handle has a thread of this backend's
 * (thread.c), on one poll loop (net/loop.h) for its connection and, when it
 * hosts, the host's sockets (host.c), so that heartbeats and the host's
 * duties go on while the caller starts and supervises workers.  The
 * thread owns every socket; it meets the caller only in the sink
 * (agent_state.h, under its mu) and through the wake-up pipe.
 */
#ifndef AMLDIST_RDZV_TCP_H
#define AMLDIST_RDZV_TCP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rdzv/agent_state.h"
#include "rdzv/backend.h"
#include "rdzv/plane_link.h"
#include "rdzv/rdzv_internal.h"

extern const struct amldist__rz_backend_ops amldist__rz_tcp_backend;

/* The host's side (host.c), run on the handle's thread beside the agent's
 * own connection, its sockets watched by the thread's loop.  It owns the
 * listening sockets it is given (unless it returns NULL). */
typedef struct amldist__rz_host amldist__rz_host_t;
struct amldist__loop;
amldist__rz_host_t *amldist__rz_host_new(const amldist__rz_cfg_t *cfg,
                                         struct amldist__loop *loop,
                                         const int *lfds, int nlfds);
/* The host's own agent connects from `local` (its end of the connection):
 * that connection is never the one dropped to make room. */
struct sockaddr;
void amldist__rz_host_own(amldist__rz_host_t *h, const struct sockaddr *local,
                          unsigned len);
/* Before each round of the loop: which connections have output queued. */
void amldist__rz_host_arm(amldist__rz_host_t *h);
/* After each round of the loop: the timers, and closed connections freed. */
void amldist__rz_host_tick(amldist__rz_host_t *h);
/* When the host next needs to run without a descriptor event (ms). */
long long amldist__rz_host_next_wake(const amldist__rz_host_t *h);
/* The job is over and every agent has left (or the deadline passed). */
int amldist__rz_host_drained(const amldist__rz_host_t *h);
void amldist__rz_host_free(amldist__rz_host_t *h);

struct addrinfo;

/* A handle's backend state (its `be`): the thread's, but what open()
 * sets before the thread starts and close() reads after it ended. */
typedef struct amldist__rz_tcp {
    const amldist__rz_cfg_t *cfg; /* the handle's */
    amldist__rz_join_t me;        /* the JOIN, but its port */
    amldist__rz_sink_t *s;        /* the handle's */
    char endpoint[300]; /* as given (port 0: as picked), for messages */
    char ep_host[AMLDIST__HOST_MAX];
    int ep_port;

    pthread_t thread;
    int wake[2];  /* caller -> thread */
    int closing;  /* under s->mu: the caller closes the handle */

    struct amldist__loop *loop;
    amldist__rz_host_t *host;
    amldist__conn_t c;
    int heard; /* a frame came on c: the endpoint is a rendezvous host */
    struct addrinfo *ai;
    long long join_deadline, next_try, last_beat;
    long long said_at; /* the last "waiting for the host" line (ms), 0 */
    int backoff_ms;
    /* The connect in progress (try_fd >= 0): to try_ai, until
     * try_deadline; try_err: why the last address failed. */
    int try_fd, try_err;
    const struct addrinfo *try_ai;
    long long try_deadline;

    amldist__rz_link_t pt; /* issue 20's plane on c (plane_link.h) */
} amldist__rz_tcp_t;

/* thread.c: the thread's body (pthread_create's start routine). */
void *amldist__rz_thread_main(void *arg);
/* hosting.c: host the endpoint when this process can: at join, and again
 * when the host went before the round formed.  0, or an error (out of
 * memory). */
int amldist__rz_maybe_host(amldist__rz_tcp_t *t);
/* hosting.c: "HOST:PORT", where PORT may be 0 (a free port, picked
 * here); 0 or -1. */
int amldist__rz_endpoint_parse(const char *ep, char *host, size_t size,
                               int *port);
/* connect.c: connect when it is time to (C_CONNECTING), and give up the
 * connect in progress when the handle closes. */
void amldist__rz_try_connect(amldist__rz_tcp_t *t);
void amldist__rz_connect_abort(amldist__rz_tcp_t *t);
/* client.c: the connection to the host opens on fd (watched by the loop
 * while it is open, its frames read); 0, or -1 (fd closed). */
int amldist__rz_client_open(amldist__rz_tcp_t *t, int fd);
/* client.c: "the endpoint <what>: it is not an amlrun rendezvous host
 * ..." into buf, for an endpoint that never sent a frame. */
void amldist__rz_not_a_host(const char *what, char *buf, size_t size);
/* link.c: the connection to the host closes; or it is gone (closed: it
 * merely closed, which before the first round is tried again). */
void amldist__rz_client_close(amldist__rz_tcp_t *t);
void amldist__rz_host_lost(amldist__rz_tcp_t *t, const char *why, int closed);
/* frames.c: one frame from the host. */
void amldist__rz_on_frame(amldist__rz_tcp_t *t, unsigned type,
                          const unsigned char *p, uint32_t len);
/* plane.c: issue 20's frames from the host (TIMEA, QUERY, RESULT,
 * MARKS); what is due to send, each loop round (0, or -1: the host is
 * lost, said); when that is next; the thread's part freed (closing). */
void amldist__rz_plane_frame(amldist__rz_tcp_t *t, unsigned type,
                             const unsigned char *p, uint32_t len);
int amldist__rz_plane_io(amldist__rz_tcp_t *t);
long long amldist__rz_plane_wake(const amldist__rz_tcp_t *t);
void amldist__rz_plane_free(amldist__rz_tcp_t *t);

#endif /* AMLDIST_RDZV_TCP_H */
