/*
 * The rendezvous host's I/O: it accepts the agents' connections, reads
 * their frames, keeps the heartbeats, and hands what happens to the host's
 * state machine (host_sm.h, where every decision about the job is made)
 * through host_frames.c, which carries out the actions it answers with.
 * Runs on the backend's thread, its sockets watched by the thread's poll
 * loop (net/loop.h), never blocking: every socket is non-blocking and
 * every wait is a deadline that amldist__rz_host_next_wake() reports.
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
#include "rdzv/tcp/host_io.h"

static void on_listener(void *arg, int fd, short revents);

amldist__rz_host_t *amldist__rz_host_new(const amldist__rz_cfg_t *cfg,
                                         amldist__loop_t *loop,
                                         const int *lfds, int nlfds)
{
    amldist__rz_host_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->m = calloc(MAX_CONNS, sizeof *h->m);
    h->dirty = calloc(MAX_CONNS, sizeof *h->dirty);
    h->last_beat = amldist__now_ms();
    /* The state machine decides without the keys. */
    amldist__rz_cfg_t sm_cfg = *cfg;
    amldist__chan_keys_clear(&sm_cfg.keys);
    h->sm = amldist__rz_sm_new(&sm_cfg, h->last_beat);
    if (!h->m || !h->dirty || !h->sm) {
        free(h->m);
        free(h->dirty);
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
    free(h->dirty);
    amldist__rz_sm_free(h->sm);
    amldist__chan_keys_clear(&h->cfg.keys);
    free(h);
}

/* An address in words ("" when not IPv4 or IPv6). */
static void addr_text(const struct sockaddr_storage *ss, char *out,
                      size_t size)
{
    out[0] = '\0';
    if (ss->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, out,
                  (socklen_t)size);
    else if (ss->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr,
                  out, (socklen_t)size);
}

/* The peer's address in words, whether it is the own agent, and the
 * host's own address as the peer reached it: the one a node that is not
 * on the host's machine can reach it at (a master address, host_sm_form.c,
 * when node 0's agent came over loopback). */
static void peer_addr(amldist__rz_host_t *h, struct member *m)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    m->addr[0] = m->local[0] = '\0';
    if (getsockname(m->c.fd, (struct sockaddr *)&ss, &sl) == 0)
        addr_text(&ss, m->local, sizeof m->local);
    sl = sizeof ss;
    if (getpeername(m->c.fd, (struct sockaddr *)&ss, &sl) < 0)
        return;
    m->own = h->own_len && sl == h->own_len && !memcmp(&ss, &h->own, sl);
    addr_text(&ss, m->addr, sizeof m->addr);
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
        h->gone = 1;
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
    int dirty = m->dirty; /* a slot reused may be in the list to arm */
    *m = (struct member){.h = h, .state = M_PENDING, .dirty = dirty,
                         .since = amldist__now_ms()};
    if (h->scan_at > m->since + h->cfg.dead_ms)
        h->scan_at = m->since + h->cfg.dead_ms;
    if (amldist__rz_conn_open(&m->c, fd, &h->cfg, 1) < 0) {
        m->state = M_GONE;
        h->gone = 1;
        return -1;
    }
    peer_addr(h, m);
    if (amldist__loop_watch(h->loop, fd, POLLIN, on_member, m) < 0) {
        amldist__conn_close(&m->c);
        m->state = M_GONE;
        h->gone = 1;
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
        struct member *m = calloc(1, sizeof *m);
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

/* Only the members that sent or drained since: their outbox pumped, their
 * events set (POLLOUT while their queue waits). */
void amldist__rz_host_arm(amldist__rz_host_t *h)
{
    int n = h->ndirty;
    h->ndirty = 0;
    for (int i = 0; i < n; i++) {
        struct member *m = h->dirty[i];
        m->dirty = 0;
        if (m->c.fd >= 0 && amldist__rz_outbox_pump(&m->out, &m->c) < 0) {
            m->c.last_rx = 0; /* stuck: lost at the next tick */
            h->scan_at = 0;
        }
        if (m->c.fd >= 0)
            amldist__loop_events(h->loop, m->c.fd, (short)(POLLIN |
                                 (amldist__conn_pending(&m->c) ? POLLOUT : 0)));
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
    amldist__rz_member_frame(rd->h, rd->m, type, p, len);
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
        amldist__rz_member_refuse(
            m, AMLDIST__RZ_R_TOKEN,
            h->cfg.secure ? "the job has a secret, and this node did not "
                            "prove it"
                          : "the job has no secret, and this node has one");
    else if (rc < 0)
        amldist__rz_member_lose(h, m, why);
}

/* The members' deadlines, walked only when the first of them or the next
 * heartbeat is due: a connection that never said who it is, a refused one
 * whose REFUSE had its time, a member silent for the dead time. */
static void scan(amldist__rz_host_t *h, long long now)
{
    int beat = now - h->last_beat >= h->cfg.keepalive_ms;
    long long prev_beat = h->last_beat;
    if (beat)
        h->last_beat = now;
    long long next = h->last_beat + h->cfg.keepalive_ms;
    int quiet_ok = h->cfg.dead_ms >= 3LL * h->cfg.keepalive_ms;
    for (int i = 0; i < h->nm; i++) {
        struct member *m = h->m[i];
        if (m->state == M_GONE)
            continue;
        if (m->state == M_CLOSING && now - m->since > CLOSING_MS) {
            m->state = M_GONE;
            h->gone = 1;
            continue;
        }
        if (m->state == M_PENDING && now - m->since > h->cfg.dead_ms) {
            m->state = M_GONE; /* a peer that never said who it is */
            h->gone = 1;
            continue;
        }
        if (m->state == M_JOINED && now - m->c.last_rx > h->cfg.dead_ms) {
            char why[96];
            snprintf(why, sizeof why, "%s for %.1f s", m->c.last_rx
                     ? "no heartbeat" : "it stopped reading",
                     h->cfg.dead_ms / 1000.0);
            amldist__rz_member_lose(h, m, why);
            continue;
        }
        long long at = m->state == M_CLOSING  ? m->since + CLOSING_MS + 1
                       : m->state == M_PENDING ? m->since + h->cfg.dead_ms + 1
                                               : m->c.last_rx + h->cfg.dead_ms + 1;
        if (at < next)
            next = at;
        /* A joining agent's dead time runs from its connect: while its
         * JOIN waits unread behind a flood of others, it hears the host's
         * beats too, else it would give the host up before it is
         * admitted.  A member's TIMEQ waiting is answered now, its TIMEA
         * this beat; one sent a frame at the last beat or since
         * (prev_beat: a keepalive ago) has heard the host: nothing, so
         * that the gap between its frames stays within two keepalives
         * and the host's frames to an idle agent
         * are AMLDIST__RZ_BEAT_MS apart (two keepalives where its dead
         * time is four or more), not one a keepalive (issue 40). */
        if (beat && m->state == M_JOINED && m->timeq_due)
            amldist__rz_member_timea(m);
        else if (beat && (m->state == M_JOINED || m->state == M_PENDING) &&
                 (!quiet_ok || m->sent_at < prev_beat))
            amldist__rz_member_send(m, AMLDIST__RZ_BEAT, NULL, 0);
    }
    /* A send in the walk that found a member stuck asks for another. */
    if (h->scan_at != 0)
        h->scan_at = next;
}

static void tick(amldist__rz_host_t *h)
{
    long long now = amldist__now_ms();
    int walked = 0;
    if (now >= h->scan_at || now - h->last_beat >= h->cfg.keepalive_ms) {
        h->scan_at = 1; /* a stuck member's send in the walk sets it 0 */
        scan(h, now);
        walked = 1;
    }
    /* The decider's TICK: after an event (a JOIN may complete the round),
     * at its own deadline, and with each walk. */
    long long d = amldist__rz_sm_next_deadline(h->sm);
    if (h->stepped || walked || (d >= 0 && now >= d)) {
        h->stepped = 0;
        amldist__rz_host_step(h, &(amldist__rz_event_t){
                                     .type = AMLDIST__RZ_EV_TICK});
    }
}

/* The members gone are freed (none left in the list to arm). */
static void sweep(amldist__rz_host_t *h)
{
    if (!h->gone)
        return;
    h->gone = 0;
    int k = 0;
    for (int i = 0; i < h->ndirty; i++) {
        if (h->dirty[i]->state == M_GONE)
            h->dirty[i]->dirty = 0;
        else
            h->dirty[k++] = h->dirty[i];
    }
    h->ndirty = k;
    k = 0;
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
        amldist__rz_member_lose(m->h, m, "the connection failed");
        return;
    }
    if (revents & POLLOUT) /* drained: its events and outbox again */
        amldist__rz_member_dirty(m);
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
    if (h->scan_at < t)
        t = h->scan_at;
    return d >= 0 && d < t ? d : t;
}

int amldist__rz_host_drained(const amldist__rz_host_t *h)
{
    return amldist__rz_sm_drained(h->sm, amldist__now_ms());
}
