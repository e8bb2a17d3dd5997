/*
 * The host's own (host.c, host_frames.c): its connections (members) and
 * its state beside the decider's.
 */
#ifndef AMLDIST_RDZV_TCP_HOST_IO_H
#define AMLDIST_RDZV_TCP_HOST_IO_H

#include <netinet/in.h>
#include <sys/socket.h>

#include "net/loop.h"
#include "rdzv/host_sm.h"
#include "rdzv/tcp/tcp.h"

enum {
    M_PENDING, /* connected, no JOIN yet */
    M_CLOSING, /* refused: the REFUSE drains, then the connection closes */
    M_JOINED,  /* in the job (the state machine admitted it) */
    M_GONE     /* to be freed */
};

/* Most connections held at once; beyond, the oldest unjoined one goes. */
#define MAX_CONNS (AMLDIST_RDZV_MAX_NODES + 1024)
/* How long a refused peer has to read its REFUSE. */
#define CLOSING_MS 1000

struct member {
    amldist__conn_t c;
    amldist__rz_host_t *h;
    int state;
    int own; /* the host's own agent's connection */
    char addr[INET6_ADDRSTRLEN];
    char local[INET6_ADDRSTRLEN]; /* the host's end of it (getsockname) */
    long long since;
    long long sent_at; /* its last frame from the host (ms) */
    /* Its last TIMEQ, answered with the next beat: its t1, the host's t2
     * (when read), whether one waits, and how many came (the first
     * AMLDIST__RZ_TIMEQ_QUICK are answered at once). */
    int64_t timeq_t1, timeq_t2;
    int timeq_due;
    unsigned timeqs;
    amldist__rz_outbox_t out; /* RESULTs behind the connection's queue */
    int dirty; /* in the host's list of members to arm */
};

struct amldist__rz_host {
    amldist__rz_cfg_t cfg;
    int lfd[8], nlfd;
    struct member **m;
    int nm;
    amldist__rz_sm_t *sm;
    amldist__loop_t *loop;
    struct sockaddr_storage own; /* where the own agent connects from */
    socklen_t own_len;
    long long last_beat;
    int spare; /* a descriptor held back for make_room() */
    /* What a loop pass costs the members it touched, not all of them:
     * those that sent (their events and outbox, host_arm), the next
     * member's deadline (scan_at: no walk before it, 0: at once), whether
     * one is gone (the sweep), and whether the decider heard an event
     * since its last TICK. */
    struct member **dirty;
    int ndirty;
    long long scan_at;
    int gone, stepped;
};

/* Member m to arm before the next poll (it sent, or its socket drained);
 * the next walk of the members at once (one is stuck or gone).  Here, as
 * both files mark them. */
static inline void amldist__rz_member_dirty(struct member *m)
{
    if (m->dirty)
        return;
    m->dirty = 1;
    m->h->dirty[m->h->ndirty++] = m;
}

static inline void amldist__rz_host_soon(amldist__rz_host_t *h)
{
    h->scan_at = 0;
}

/* host_frames.c: one frame from member m (after it: whether m is gone);
 * a frame to m (a peer whose queue is full is stuck: dropped like a lost
 * one at the next tick); m refused (the REFUSE drains, then it closes);
 * m lost (the decider hears it when m had joined); an event for the
 * decider, its actions carried out. */
void amldist__rz_member_frame(amldist__rz_host_t *h, struct member *m,
                              unsigned type, const unsigned char *p,
                              uint32_t len);
void amldist__rz_member_send(struct member *m, unsigned type,
                             const void *p, size_t len);
void amldist__rz_member_refuse(struct member *m,
                               uint32_t reason, const char *text);
void amldist__rz_member_lose(amldist__rz_host_t *h, struct member *m,
                             const char *why);
void amldist__rz_host_step(amldist__rz_host_t *h, amldist__rz_event_t *ev);
/* m's TIMEQ waiting, answered now (its TIMEA). */
void amldist__rz_member_timea(struct member *m);

#endif /* AMLDIST_RDZV_TCP_HOST_IO_H */
