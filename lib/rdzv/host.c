/*
 * The rendezvous host's I/O: it accepts the agents' connections, reads
 * their frames, keeps the heartbeats, and hands what happens to the host's
 * state machine (host_sm.c, where every decision about the job is made),
 * then carries out the actions it answers with.  Runs on the handle's
 * thread, its sockets watched by the thread's poll loop (net/loop.h), never
 * blocking: every socket is non-blocking and every wait is a deadline that
 * amldist__rz_host_next_wake() reports.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/loop.h"
#include "rdzv/host_sm.h"

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
    long long since;
    amldist__rz_outbox_t out; /* RESULTs behind the connection's queue */
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
};


static void on_listener(void *arg, int fd, short revents);

amldist__rz_host_t *amldist__rz_host_new(const amldist__rz_cfg_t *cfg,
                                         amldist__loop_t *loop,
                                         const int *lfds, int nlfds)
{
    amldist__rz_host_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->m = calloc(MAX_CONNS, sizeof *h->m);
    h->last_beat = amldist__now_ms();
    /* The state machine decides without the keys. */
    amldist__rz_cfg_t sm_cfg = *cfg;
    amldist__chan_keys_clear(&sm_cfg.keys);
    h->sm = amldist__rz_sm_new(&sm_cfg, h->last_beat);
    if (!h->m || !h->sm) {
        free(h->m);
        amldist__rz_sm_free(h->sm);
        free(h);
        return NULL;
    }
    h->cfg = *cfg;
    h->loop = loop;
    h->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    for (int i = 0; i < nlfds && i < 8; i++)
        h->lfd[h->nlfd++] = lfds[i];
    for (int i = 0; i < h->nlfd; i++)
        if (amldist__loop_watch(loop, h->lfd[i], POLLIN, on_listener, h) < 0) {
            for (int k = 0; k < h->nlfd; k++)
                amldist__loop_unwatch(loop, h->lfd[k]);
            h->nlfd = 0; /* not ours: the caller closes them */
            amldist__rz_host_free(h);
            return NULL;
        }
    return h;
}

/* Every connection closes through here: its descriptor leaves the loop
 * first, since the next accept may reuse its number. */
static void close_member(amldist__rz_host_t *h, struct member *m)
{
    if (m->c.fd >= 0)
        amldist__loop_unwatch(h->loop, m->c.fd);
    amldist__conn_close(&m->c);
    amldist__rz_outbox_clear(&m->out);
}

void amldist__rz_host_free(amldist__rz_host_t *h)
{
    if (!h)
        return;
    for (int i = 0; i < h->nlfd; i++) {
        amldist__loop_unwatch(h->loop, h->lfd[i]);
        close(h->lfd[i]);
    }
    if (h->spare >= 0)
        close(h->spare);
    for (int i = 0; i < h->nm; i++) {
        close_member(h, h->m[i]);
        free(h->m[i]);
    }
    free(h->m);
    amldist__rz_sm_free(h->sm);
    amldist__chan_keys_clear(&h->cfg.keys);
    free(h);
}

/* A peer whose queue is full is stuck: it is dropped like a lost one, on the
 * next sweep (send() only marks it). */
static void send_to(struct member *m, unsigned type, const void *p,
                    size_t len)
{
    if (m->c.fd >= 0 && amldist__conn_send(&m->c, type, p, len) < 0)
        m->c.last_rx = 0; /* silent since forever: lost at the next tick */
}

/* A frame of a u32 and a text (REFUSE, STOP, FINISH), cut to its type's
 * bound. */
static void send_text(struct member *m, unsigned type, uint32_t head,
                      const char *text)
{
    unsigned char buf[AMLDIST__RZ_FINISH_MAX];
    size_t n = strlen(text), max = amldist__rz_max_payload(type) - 4;
    if (n > max)
        n = max;
    amldist__net_put_u32(buf, head);
    memcpy(buf + 4, text, n);
    send_to(m, type, buf, 4 + n);
}

static void refuse(struct member *m, uint32_t reason, const char *text)
{
    send_text(m, AMLDIST__RZ_REFUSE, reason, text);
    /* Half-close: the REFUSE is delivered before the end of the stream
     * (a close() with unread input would reset the connection first). */
    shutdown(m->c.fd, SHUT_WR);
    m->state = M_CLOSING;
    m->since = amldist__now_ms();
}

/* QUERY, RESULT and MARKS: a head of u32s and the action's data; a
 * RESULT waits its turn behind what the asker has not read yet. */
static void send_watch(struct member *m, const amldist__rz_action_t *a)
{
    unsigned char head[AMLDIST__RZ_RESULT_HEAD];
    uint32_t v[5];
    size_t nv = 0;
    unsigned type = a->type == AMLDIST__RZ_A_QUERY    ? AMLDIST__RZ_QUERY
                    : a->type == AMLDIST__RZ_A_RESULT ? AMLDIST__RZ_RESULT
                                                      : AMLDIST__RZ_MARKS;
    if (type == AMLDIST__RZ_QUERY) {
        v[nv++] = a->value;
        v[nv++] = a->topic;
        v[nv++] = a->node;
    } else if (type == AMLDIST__RZ_RESULT) {
        v[nv++] = a->tag;
        v[nv++] = a->topic;
        v[nv++] = a->index;
        v[nv++] = a->node;
        v[nv++] = a->flags;
    } else {
        v[nv++] = a->node;
        v[nv++] = a->value;
    }
    for (size_t i = 0; i < nv; i++)
        amldist__net_put_u32(head + 4 * i, v[i]);
    if (m->c.fd < 0)
        return;
    if (type == AMLDIST__RZ_RESULT) {
        if (amldist__rz_outbox_push(&m->out, type, head, 4 * nv, a->data,
                                    a->len) < 0 ||
            amldist__rz_outbox_pump(&m->out, &m->c) < 0)
            m->c.last_rx = 0; /* stuck: lost at the next tick */
        return;
    }
    unsigned char buf[8 + AMLDIST__RZ_MARK_LEN * AMLDIST__RZ_MARKS_MAX];
    size_t len = a->len < sizeof buf - 4 * nv ? a->len : sizeof buf - 4 * nv;
    memcpy(buf, head, 4 * nv);
    if (len)
        memcpy(buf + 4 * nv, a->data, len);
    send_to(m, type, buf, 4 * nv + len);
}

/* Carry out the state machine's answer to one event. */
static void apply(amldist__rz_host_t *h, const amldist__rz_action_t *a, int n)
{
    unsigned char assign[AMLDIST__RZ_ASSIGN_MAX];
    size_t assign_len = 0;
    for (int i = 0; i < n; i++) {
        struct member *m = a[i].who;
        switch (a[i].type) {
        case AMLDIST__RZ_A_ADMIT:
            m->state = M_JOINED;
            break;
        case AMLDIST__RZ_A_REFUSE:
            refuse(m, a[i].value, a[i].text);
            break;
        case AMLDIST__RZ_A_ASSIGN:
            /* One round per step: encoded once, each node its rank. */
            if (!assign_len)
                assign_len = amldist__rz_put_assign(amldist__rz_sm_round(h->sm),
                                                    assign);
            amldist__net_put_u32(assign + 8, a[i].value);
            send_to(m, AMLDIST__RZ_ASSIGN, assign, assign_len);
            break;
        case AMLDIST__RZ_A_WAIT:
            send_to(m, AMLDIST__RZ_WAIT, a[i].text, strlen(a[i].text));
            break;
        case AMLDIST__RZ_A_QUERY:
        case AMLDIST__RZ_A_RESULT:
        case AMLDIST__RZ_A_MARKS:
            send_watch(m, &a[i]);
            break;
        case AMLDIST__RZ_A_STOP:
        case AMLDIST__RZ_A_FINISH:
            send_text(m, a[i].type == AMLDIST__RZ_A_STOP ? AMLDIST__RZ_STOP
                                                         : AMLDIST__RZ_FINISH,
                      a[i].value, a[i].text);
            break;
        }
    }
}

static void step(amldist__rz_host_t *h, amldist__rz_event_t *ev)
{
    const amldist__rz_action_t *acts;
    ev->now = amldist__now_ms();
    ev->now_ns = amldist__rz_clock_ns();
    int n = amldist__rz_sm_step(h->sm, ev, &acts);
    apply(h, acts, n);
}

static void lose(amldist__rz_host_t *h, struct member *m, const char *why)
{
    int was = m->state;
    m->state = M_GONE;
    if (was == M_JOINED)
        step(h, &(amldist__rz_event_t){.type = AMLDIST__RZ_EV_LOST, .who = m,
                                       .why = why});
}

/* A VIEW: its ranks decoded for the state machine. */
static void on_view(amldist__rz_host_t *h, struct member *m,
                    const unsigned char *p, uint32_t len)
{
    uint32_t n = amldist__net_get_u32(p + 8);
    if ((uint64_t)n * AMLDIST__RZ_VIEW_RANK + AMLDIST__RZ_VIEW_HEAD != len) {
        lose(h, m, "a malformed VIEW (its count)");
        return;
    }
    amldist__rz_view_t *v = n ? malloc(n * sizeof *v) : NULL;
    if (n && !v)
        return;
    for (uint32_t i = 0; i < n; i++) {
        const unsigned char *q = p + AMLDIST__RZ_VIEW_HEAD +
                                 (size_t)i * AMLDIST__RZ_VIEW_RANK;
        v[i].rank = amldist__net_get_u32(q);
        v[i].flags = amldist__net_get_u32(q + 4);
        v[i].start_ns = (int64_t)amldist__rz_get_u64(q + 8);
        v[i].progress_ns = (int64_t)amldist__rz_get_u64(q + 16);
        v[i].line_ns = (int64_t)amldist__rz_get_u64(q + 24);
        v[i].end_ns = (int64_t)amldist__rz_get_u64(q + 32);
    }
    step(h, &(amldist__rz_event_t){.type = AMLDIST__RZ_EV_VIEW, .who = m,
                                   .round = amldist__net_get_u32(p),
                                   .timeout_ms = amldist__net_get_u32(p + 4),
                                   .views = v, .nviews = n});
    free(v);
}

static void on_frame(amldist__rz_host_t *h, struct member *m, unsigned type,
                     const unsigned char *p, uint32_t len)
{
    amldist__rz_event_t ev = {.who = m};
    if (m->state == M_CLOSING)
        return;
    if (m->state == M_PENDING) {
        if (type != AMLDIST__RZ_JOIN) {
            refuse(m, AMLDIST__RZ_R_PROTO, "the first frame must be a JOIN");
            return;
        }
        ev.type = AMLDIST__RZ_EV_JOIN;
        if (amldist__rz_get_join(p, len, &ev.join) < 0) {
            refuse(m, AMLDIST__RZ_R_PROTO, "a malformed JOIN (its local "
                   "address)");
            return;
        }
        ev.addr = m->addr;
        step(h, &ev);
        return;
    }
    switch (type) {
    case AMLDIST__RZ_BEAT:
        return;
    case AMLDIST__RZ_TIMEQ: {
        /* Not a decision: the host's clock, read as near the wire as the
         * loop allows (its time between t2 and t3 is the agent's to
         * subtract). */
        unsigned char a[24];
        memcpy(a, p, 8);
        amldist__rz_put_u64(a + 8, (uint64_t)amldist__rz_clock_ns());
        amldist__rz_put_u64(a + 16, (uint64_t)amldist__rz_clock_ns());
        send_to(m, AMLDIST__RZ_TIMEA, a, sizeof a);
        return;
    }
    case AMLDIST__RZ_VIEW:
        on_view(h, m, p, len);
        return;
    case AMLDIST__RZ_ASK:
        ev.type = AMLDIST__RZ_EV_ASK;
        ev.tag = amldist__net_get_u32(p);
        ev.topic = amldist__net_get_u32(p + 4);
        ev.timeout_ms = amldist__net_get_u32(p + 8);
        ev.text = p + 12;
        ev.text_len = len - 12;
        break;
    case AMLDIST__RZ_ANSWER:
        ev.type = AMLDIST__RZ_EV_ANSWER;
        ev.id = amldist__net_get_u32(p);
        ev.flags = amldist__net_get_u32(p + 4);
        ev.text = p + 8;
        ev.text_len = len - 8;
        break;
    case AMLDIST__RZ_MARKS:
        ev.type = AMLDIST__RZ_EV_MARKS;
        ev.rank = amldist__net_get_u32(p + 4);
        ev.text = p + 8;
        ev.text_len = len - 8;
        if ((uint64_t)ev.rank * AMLDIST__RZ_MARK_LEN != ev.text_len) {
            lose(h, m, "a malformed MARKS (its count)");
            return;
        }
        break;
    case AMLDIST__RZ_FAIL:
        ev.type = AMLDIST__RZ_EV_FAIL;
        ev.round = amldist__net_get_u32(p);
        ev.flags = amldist__net_get_u32(p + 4);
        ev.rank = amldist__net_get_u32(p + 8);
        ev.status = amldist__net_get_u32(p + 12);
        ev.text = p + 16;
        ev.text_len = len - 16;
        break;
    case AMLDIST__RZ_DONE:
        ev.type = AMLDIST__RZ_EV_DONE;
        ev.round = amldist__net_get_u32(p);
        ev.status = amldist__net_get_u32(p + 4);
        ev.port = amldist__net_get_u32(p + 8);
        break;
    default:
        lose(h, m, "it sent a frame out of turn");
        return;
    }
    step(h, &ev);
}

/* The peer's address in words, and whether it is the own agent. */
static void peer_addr(amldist__rz_host_t *h, struct member *m)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    m->addr[0] = '\0';
    if (getpeername(m->c.fd, (struct sockaddr *)&ss, &sl) < 0)
        return;
    m->own = h->own_len && sl == h->own_len && !memcmp(&ss, &h->own, sl);
    if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, m->addr,
                  sizeof m->addr);
    else if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr,
                  m->addr, sizeof m->addr);
}

void amldist__rz_host_own(amldist__rz_host_t *h, const struct sockaddr *local,
                          unsigned len)
{
    h->own_len = len <= sizeof h->own ? len : 0;
    memset(&h->own, 0, sizeof h->own);
    if (h->own_len)
        memcpy(&h->own, local, len);
}

/* The connection to drop for room: one that has not joined, the oldest
 * that has sent nothing yet before any other (an agent's JOIN may wait
 * unread in its socket while the host accepts a flood of idle peers), and
 * never the own agent's (accepted in the round that connects it, before
 * its JOIN is sent). */
static struct member *oldest_pending(amldist__rz_host_t *h)
{
    struct member *o = NULL;
    int o_quiet = 0;
    for (int i = 0; i < h->nm; i++) {
        struct member *m = h->m[i];
        if ((m->state != M_PENDING && m->state != M_CLOSING) ||
            (m->state == M_PENDING && m->own))
            continue;
        int waiting = 0;
        int quiet = m->state == M_CLOSING ||
                    (m->c.in_len == 0 &&
                     ioctl(m->c.fd, FIONREAD, &waiting) == 0 && waiting == 0);
        if (!o || quiet > o_quiet ||
            (quiet == o_quiet && m->since < o->since)) {
            o = m;
            o_quiet = quiet;
        }
    }
    return o;
}

/* Out of descriptors: a connection waiting in the backlog would keep the
 * listener readable, and poll() would spin.  The oldest connection that
 * has not joined makes room; without one, the spare descriptor does, for
 * accepting the newcomer only to close it. */
static int make_room(amldist__rz_host_t *h, int lfd)
{
    struct member *o = oldest_pending(h);
    if (o) {
        close_member(h, o);
        o->state = M_GONE;
        return 0;
    }
    if (h->spare < 0)
        return -1;
    close(h->spare);
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        close(fd);
    h->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd >= 0 ? 0 : -1;
}

static void on_member(void *arg, int fd, short revents);

/* A new connection in *m, watched; -1 (fd closed) when the loop has no
 * room for it. */
static int open_member(amldist__rz_host_t *h, struct member *m, int fd)
{
    *m = (struct member){.h = h, .state = M_PENDING, .since = amldist__now_ms()};
    if (amldist__rz_conn_open(&m->c, fd, &h->cfg, 1) < 0) {
        m->state = M_GONE;
        return -1;
    }
    peer_addr(h, m);
    if (amldist__loop_watch(h->loop, fd, POLLIN, on_member, m) < 0) {
        amldist__conn_close(&m->c);
        m->state = M_GONE;
        return -1;
    }
    return 0;
}

static void accept_all(amldist__rz_host_t *h, int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE ||
                       errno == ENOBUFS || errno == ENOMEM)) {
            if (make_room(h, lfd) < 0)
                return;
            continue;
        }
        if (fd < 0)
            return;
        if (h->nm == MAX_CONNS) {
            struct member *o = oldest_pending(h);
            if (!o) {
                close(fd);
                continue;
            }
            close_member(h, o);
            open_member(h, o, fd);
            continue;
        }
        struct member *m = malloc(sizeof *m);
        if (!m) {
            close(fd);
            return;
        }
        h->m[h->nm++] = m;
        if (open_member(h, m, fd) < 0)
            return;
    }
}

static void on_listener(void *arg, int fd, short revents)
{
    if (revents & POLLIN)
        accept_all(arg, fd);
}

void amldist__rz_host_arm(amldist__rz_host_t *h)
{
    for (int i = 0; i < h->nm; i++) {
        struct member *m = h->m[i];
        if (m->c.fd >= 0 && amldist__rz_outbox_pump(&m->out, &m->c) < 0)
            m->c.last_rx = 0; /* stuck: lost at the next tick */
        if (m->c.fd >= 0)
            amldist__loop_events(h->loop, m->c.fd, (short)(POLLIN |
                                 (m->c.out_off < m->c.out_len ? POLLOUT : 0)));
    }
}

struct reading {
    amldist__rz_host_t *h;
    struct member *m;
};

static int member_frame(void *arg, unsigned type, const unsigned char *p,
                        uint32_t len)
{
    struct reading *rd = arg;
    on_frame(rd->h, rd->m, type, p, len);
    return rd->m->state == M_GONE;
}

static void read_member(amldist__rz_host_t *h, struct member *m)
{
    struct reading rd = {h, m};
    const char *why;
    int rc = amldist__conn_read(&m->c, member_frame, &rd, &why);
    /* A peer that did not prove the job's secret (or has one where the job
     * has none) is told only that, plain; it never joined. */
    if (rc == AMLDIST__CONN_EAUTH && m->state == M_PENDING)
        refuse(m, AMLDIST__RZ_R_TOKEN,
               h->cfg.secure ? "the job has a secret, and this node did not "
                               "prove it"
                             : "the job has no secret, and this node has one");
    else if (rc < 0)
        lose(h, m, why);
}

static void tick(amldist__rz_host_t *h)
{
    long long now = amldist__now_ms();
    for (int i = 0; i < h->nm; i++) {
        struct member *m = h->m[i];
        if (m->state == M_GONE)
            continue;
        if (m->state == M_CLOSING && now - m->since > CLOSING_MS)
            m->state = M_GONE;
        else if (m->state == M_PENDING && now - m->since > h->cfg.dead_ms)
            m->state = M_GONE; /* a peer that never said who it is */
        else if (m->state == M_JOINED && now - m->c.last_rx > h->cfg.dead_ms) {
            char why[96];
            snprintf(why, sizeof why, "%s for %.1f s", m->c.last_rx
                     ? "no heartbeat" : "it stopped reading",
                     h->cfg.dead_ms / 1000.0);
            lose(h, m, why);
        }
    }
    if (now - h->last_beat >= h->cfg.keepalive_ms) {
        h->last_beat = now;
        for (int i = 0; i < h->nm; i++)
            if (h->m[i]->state == M_JOINED)
                send_to(h->m[i], AMLDIST__RZ_BEAT, NULL, 0);
    }
    step(h, &(amldist__rz_event_t){.type = AMLDIST__RZ_EV_TICK});
}

static void sweep(amldist__rz_host_t *h)
{
    int k = 0;
    for (int i = 0; i < h->nm; i++) {
        if (h->m[i]->state == M_GONE) {
            close_member(h, h->m[i]);
            free(h->m[i]);
        } else {
            h->m[k++] = h->m[i];
        }
    }
    h->nm = k;
}

static void on_member(void *arg, int fd, short revents)
{
    struct member *m = arg;
    (void)fd;
    if (m->state == M_GONE)
        return;
    if ((revents & POLLOUT) && amldist__conn_flush(&m->c) < 0) {
        lose(m->h, m, "the connection failed");
        return;
    }
    if (revents & (POLLIN | POLLHUP | POLLERR))
        read_member(m->h, m);
}

void amldist__rz_host_tick(amldist__rz_host_t *h)
{
    tick(h);
    sweep(h);
}

long long amldist__rz_host_next_wake(const amldist__rz_host_t *h)
{
    long long t = h->last_beat + h->cfg.keepalive_ms;
    long long d = amldist__rz_sm_next_deadline(h->sm);
    return d >= 0 && d < t ? d : t;
}

int amldist__rz_host_drained(const amldist__rz_host_t *h)
{
    return amldist__rz_sm_drained(h->sm, amldist__now_ms());
}
