/*
 * An agent's handle on the control plane (amldist_rdzv_t), shared by its
 * two sides: the caller's (api.c: the public amldist_rdzv_*() calls) and
 * the network thread's (thread*.c: the connection to the host, heartbeats
 * and, when this process hosts the endpoint (hosting.c), the host
 * itself).  The two share only `sh` (under `mu`); the thread owns every
 * socket, the caller owns `cur` and `why`.
 */
#ifndef AMLDIST_RDZV_HANDLE_H
#define AMLDIST_RDZV_HANDLE_H

#include <pthread.h>
#include <stdint.h>

#include "rdzv/rdzv_internal.h"

struct addrinfo;

/* What the caller hands the thread, or the thread the caller, beyond the
 * round (thread_plane.c, api_plane.c), under mu. */
struct amldist__rz_ask;
struct amldist__rz_answer;
struct amldist__rz_req;
struct amldist__rz_got;
struct amldist__rz_plane_shared {
    int clk_have;
    int64_t clk_offset, clk_error;
    int watch_ms;                  /* > 0: send views */
    amldist_rdzv_view_t *views;    /* the caller's latest, local times */
    int nviews;
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

struct amldist__rz_gathering; /* a gather whose answers come in */
struct amldist__rz_plane_thread {
    amldist__rz_clock_t clk;
    long long next_timeq, next_view, next_marks;
    amldist__rz_outbox_t out;      /* ANSWER chunks */
    struct amldist__rz_gathering *g;
};

/* The agent's state, as the thread sets it and the caller reads it. */
enum { C_CONNECTING, C_JOINING, C_RUNNING, C_STOP, C_WAITING, C_OVER };

struct amldist_rdzv {
    amldist__rz_cfg_t cfg;
    char endpoint[300]; /* as given, for messages */
    char ep_host[AMLDIST__HOST_MAX];
    int ep_port;
    uint64_t agent;
    int nproc, order;
    amldist__rz_round_t cur; /* the caller's view of the round */
    /* The caller's copy of the stop's reason, which the thread rewrites in
     * sh at every ASSIGN, STOP and FINISH. */
    char why[AMLDIST__RZ_TEXT_MAX + 1];
    /* What this agent asked for (share.c), for its JOIN and for
     * amldist_rdzv_warnings() (the caller's, rewritten at every round). */
    char local_addr[AMLDIST__RZ_ADDR_MAX + 1];
    uint64_t machine;
    int asked_master_port, asked_last_call_ms, asked_join_timeout_ms;
    char asked_master_addr[AMLDIST__RZ_ADDR_MAX + 1];
    char *warnings;
    /* While the round forms: the host's WAIT lines go here (thread). */
    int note_fd;
    char note_prefix[64];

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int wake[2]; /* caller -> thread */
    int efd;     /* thread -> caller: stop now */

    /* Thread-owned (the loop made by the caller before the thread). */
    struct amldist__loop *loop;
    amldist__rz_host_t *host;
    amldist__conn_t c;
    struct addrinfo *ai;
    long long join_deadline, next_try, last_beat;
    int backoff_ms;
    /* The connect in progress (try_fd >= 0): to try_ai, until
     * try_deadline; try_err: why the last address failed. */
    int try_fd, try_err;
    const struct addrinfo *try_ai;
    long long try_deadline;

    /* Shared, under mu. */
    struct {
        int state;
        int err;               /* join's error, 0 */
        char errmsg[600];
        amldist__rz_round_t next; /* the last ASSIGN */
        int have_next;
        int status;            /* the job's, once C_OVER */
        char *failure;         /* its first failure, once C_OVER */
        char stop_why[AMLDIST__RZ_TEXT_MAX + 1]; /* the last STOP's */
        unsigned char *fail;   /* a FAIL frame to send */
        size_t fail_len;
        int done, done_status, done_port;
        int closing;
        struct amldist__rz_plane_shared pl; /* issue 20's (thread_plane.c) */
    } sh;
    /* Issue 20's, the thread's own (thread_plane.c). */
    struct amldist__rz_plane_thread pt;
    int gfd; /* thread -> caller: a request or a gather waits */
};

/* The thread's body (pthread_create's start routine) (thread.c). */
void *amldist__rz_thread_main(void *arg);
/* Host the endpoint when this process can: at join, and again when the
 * host went before the round formed.  0, or an error (out of memory)
 * (hosting.c). */
int amldist__rz_maybe_host(amldist_rdzv_t *r);
/* A port nobody listens on now (the kernel's pick); 0 when none
 * (hosting.c). */
int amldist__rz_free_port(void);

/* Among the thread's files only (thread*.c), on the thread. */
/* thread.c: something for the caller: a stop, a new round, the end (under
 * mu). */
void amldist__rz_signal_caller(amldist_rdzv_t *r);
/* thread.c: the connection to the host opens on fd (watched by the loop
 * while it is open); 0, or -1 (fd closed). */
int amldist__rz_client_open(amldist_rdzv_t *r, int fd);
/* thread.c: the job is over for this agent (FINISH, a refusal, or the
 * host lost), under mu. */
void amldist__rz_set_over(amldist_rdzv_t *r, int status, const char *failure);
/* thread.c: the connection to the host is gone (closed: it merely closed,
 * which before the first round is tried again). */
void amldist__rz_host_lost(amldist_rdzv_t *r, const char *why, int closed);
/* thread_frames.c: one frame from the host. */
void amldist__rz_on_frame(amldist_rdzv_t *r, unsigned type,
                          const unsigned char *p, uint32_t len);
/* thread_connect.c: connect when it is time to (C_CONNECTING), and give
 * up the connect in progress when the handle closes. */
void amldist__rz_try_connect(amldist_rdzv_t *r);
void amldist__rz_connect_abort(amldist_rdzv_t *r);
/* share.c: keep what the options ask for beyond the job's shared values
 * (local address, machine, note descriptor), at join; compare the round
 * the caller now has with it (amldist_rdzv_warnings()). */
void amldist__rz_note_options(amldist_rdzv_t *r,
                              const amldist_rdzv_options_t *o);
void amldist__rz_note_round(amldist_rdzv_t *r);
/* api.c: the thread has something of the caller's to do. */
void amldist__rz_wake(amldist_rdzv_t *r);
/* thread_plane.c: issue 20's frames from the host (TIMEA, QUERY, RESULT,
 * MARKS); what is due to send, each loop round (0, or -1: the host is
 * lost, said); when that is next; everything freed (closing). */
void amldist__rz_plane_frame(amldist_rdzv_t *r, unsigned type,
                             const unsigned char *p, uint32_t len);
int amldist__rz_plane_io(amldist_rdzv_t *r);
long long amldist__rz_plane_wake(const amldist_rdzv_t *r);
void amldist__rz_plane_free(amldist_rdzv_t *r);
/* api_plane.c: under mu, the caller's events descriptor emptied when
 * nothing waits for it. */
void amldist__rz_plane_signal(amldist_rdzv_t *r);
/* The host's WAIT line, written to the note descriptor (thread). */
void amldist__rz_note_wait(const amldist_rdzv_t *r, const unsigned char *p,
                           uint32_t len);

#endif /* AMLDIST_RDZV_HANDLE_H */
