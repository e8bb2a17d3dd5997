/*
 * Issue 20's plane on this backend, the decider's side (etcd.h,
 * decider.h): while this agent decides, it listens on a TCP port of its
 * own and publishes the address as P/b/plane under its lease (the
 * address etcd saw it at, as its member key's), and every agent connects
 * there (plane.c).  A connection is the channel's when the job has a
 * secret, as a c10d host's (net/chan.h: the agent proves the secret
 * before a frame of its is read), and its first frame is the agent's
 * JOIN: its token and run must be the job's, and its agent id names the
 * member whose frames it carries.  Its VIEW, ASK, ANSWER and MARKS go to
 * the one machine as events (plane_frames.c decodes them, decider.c
 * steps them, never logged), a TIMEQ is answered on this clock, and the
 * machine's QUERY, RESULT and MARKS come back here to the member's
 * connection (a RESULT behind what the asker has not read yet).  A
 * connection is freed only here, between the loop's rounds.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/loop.h"
#include "rdzv/etcd/decider.h"
#include "rdzv/plane_frames.h"

/* The listener and the key tried again after this when they failed. */
#define RETRY_MS 200

struct pconn {
    amldist__rz_etcd_t *t;
    amldist__conn_t c;
    amldist__rz_outbox_t out; /* RESULTs behind the connection's queue */
    uint64_t agent;           /* from its JOIN; 0 before it */
    int joined, dead;
};

struct amldist__etcd_phost {
    int lfd;
    int published;
    long long next_try;
    struct pconn **pc;
    int npc, cap;
};

static void on_pconn(void *arg, int fd, short revents);
static void send_action(amldist__rz_etcd_t *t, struct emember *m,
                        const amldist__rz_action_t *a);

/* Dropped: freed at the next sweep (never inside a callback). */
static void kill_pconn(struct pconn *pc)
{
    pc->dead = 1;
}

/* The member of agent a, and its connection remembered there. */
static struct emember *member_of(struct pconn *pc)
{
    amldist__etcd_decider_t *d = pc->t->d;
    struct emember *m = d ? amldist__etcd_member(d, pc->agent, 0) : NULL;
    if (m)
        m->plane = pc;
    return m;
}

/* The first frame: the agent's JOIN, of this job. */
static void on_hello(struct pconn *pc, unsigned type, const unsigned char *p,
                     uint32_t len)
{
    amldist__rz_join_t j;
    const amldist__rz_cfg_t *cfg = pc->t->cfg;
    if (type != AMLDIST__RZ_JOIN || amldist__rz_get_join(p, len, &j) < 0 ||
        j.token != cfg->token || j.run != cfg->run) {
        unsigned char r[4 + 40];
        amldist__net_put_u32(r, AMLDIST__RZ_R_TOKEN);
        memcpy(r + 4, "not an agent of this job", 24);
        amldist__conn_send(&pc->c, AMLDIST__RZ_REFUSE, r, 4 + 24);
        kill_pconn(pc);
        return;
    }
    pc->agent = j.agent;
    pc->joined = 1;
    member_of(pc);
}

static int pframe(void *arg, unsigned type, const unsigned char *p,
                  uint32_t len)
{
    struct pconn *pc = arg;
    amldist__rz_etcd_t *t = pc->t;
    if (pc->dead)
        return 1;
    if (!pc->joined) {
        on_hello(pc, type, p, len);
        return 0;
    }
    if (type == AMLDIST__RZ_BEAT)
        return 0;
    if (type == AMLDIST__RZ_TIMEQ) {
        unsigned char a[24];
        amldist__rz_plane_timea((int64_t)amldist__rz_get_u64(p),
                                amldist__rz_clock_ns(), a);
        if (amldist__conn_send(&pc->c, AMLDIST__RZ_TIMEA, a, sizeof a) < 0)
            kill_pconn(pc);
        return 0;
    }
    amldist__rz_event_t ev = {0};
    amldist__rz_view_t *views;
    const char *why;
    int rc = amldist__rz_plane_decode(type, p, len, &ev, &views, &why);
    if (rc < 0 || (rc == 0 && type != AMLDIST__RZ_VIEW)) {
        kill_pconn(pc); /* malformed, or a frame out of turn */
        return 1;
    }
    struct emember *m = rc ? member_of(pc) : NULL;
    /* An agent the machine has not heard join yet (its member key's
     * event still on its way) is not heard on the plane either. */
    if (m && m->admitted && t->d) {
        ev.who = m;
        amldist__etcd_plane_feed(t, &ev);
    }
    free(views);
    return pc->dead;
}

static void on_pconn(void *arg, int fd, short revents)
{
    struct pconn *pc = arg;
    const char *why;
    (void)fd;
    if (pc->dead)
        return;
    if ((revents & POLLOUT) && amldist__conn_flush(&pc->c) < 0) {
        kill_pconn(pc);
        return;
    }
    if ((revents & (POLLIN | POLLHUP | POLLERR)) &&
        amldist__conn_read(&pc->c, pframe, pc, &why) < 0)
        kill_pconn(pc);
}

static void on_accept(void *arg, int fd, short revents)
{
    amldist__rz_etcd_t *t = arg;
    amldist__etcd_phost_t *h = t->ph;
    (void)revents;
    for (;;) {
        int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0)
            return; /* EAGAIN; or out of descriptors: tried at the next */
        if (h->npc == h->cap) {
            int cap = h->cap ? 2 * h->cap : 64;
            struct pconn **a = realloc(h->pc, (size_t)cap * sizeof *a);
            if (!a) {
                close(c);
                return;
            }
            h->pc = a;
            h->cap = cap;
        }
        struct pconn *pc = calloc(1, sizeof *pc);
        if (!pc) {
            close(c);
            return;
        }
        pc->t = t;
        if (amldist__rz_conn_open(&pc->c, c, t->cfg, 1) < 0) {
            free(pc);
            continue;
        }
        if (amldist__loop_watch(t->pl.loop, c, POLLIN, on_pconn, pc) < 0) {
            amldist__conn_close(&pc->c);
            free(pc);
            continue;
        }
        h->pc[h->npc++] = pc;
    }
}

/* A listener on a port of the kernel's, on every address of the family
 * of the one etcd saw this agent at: -1 with errno. */
static int listen_any(const char *ip)
{
    int v6 = strchr(ip, ':') != NULL;
    int fd = socket(v6 ? AF_INET6 : AF_INET,
                    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    int rc = v6 ? bind(fd, (struct sockaddr *)&a6, sizeof a6)
                : bind(fd, (struct sockaddr *)&a4, sizeof a4);
    if (rc < 0 || listen(fd, 1024) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int port_of(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET6
                     ? ((struct sockaddr_in6 *)&ss)->sin6_port
                     : ((struct sockaddr_in *)&ss)->sin_port);
}

/* P/b/plane: port u32 | the decider key's create revision u64 | the
 * address etcd saw this agent at; under the lease, sealed. */
static int publish(amldist__rz_etcd_t *t, int port)
{
    unsigned char b[12 + 64], *v;
    size_t ipl = strnlen(t->c.local_ip, 63), vn;
    char key[AMLDIST__ETCD_KEY_MAX];
    amldist__net_put_u32(b, (uint32_t)port);
    amldist__rz_put_u64(b + 4, (uint64_t)t->lead_rev);
    memcpy(b + 12, t->c.local_ip, ipl);
    snprintf(key, sizeof key, "%s/b/plane", t->prefix);
    if (amldist__etcd_value(t, key, b, 12 + ipl, &v, &vn) < 0)
        return -1;
    int rc = amldist__etcd_put(&t->c, key, v, vn, t->lease, NULL);
    free(v);
    return rc;
}

/* The connections dropped are freed, the others' queues moved on. */
static void sweep(amldist__rz_etcd_t *t)
{
    amldist__etcd_phost_t *h = t->ph;
    int k = 0;
    for (int i = 0; i < h->npc; i++) {
        struct pconn *pc = h->pc[i];
        if (!pc->dead && amldist__rz_outbox_pump(&pc->out, &pc->c) < 0)
            pc->dead = 1; /* stuck: its agent connects again */
        if (pc->dead) {
            struct emember *m =
                t->d ? amldist__etcd_member(t->d, pc->agent, 0) : NULL;
            if (m && m->plane == pc)
                m->plane = NULL;
            if (pc->c.fd >= 0)
                amldist__loop_unwatch(t->pl.loop, pc->c.fd);
            amldist__conn_close(&pc->c);
            amldist__rz_outbox_clear(&pc->out);
            free(pc);
            continue;
        }
        amldist__loop_events(t->pl.loop, pc->c.fd, (short)(POLLIN |
                             (amldist__conn_pending(&pc->c) ? POLLOUT : 0)));
        h->pc[k++] = pc;
    }
    h->npc = k;
}

void amldist__etcd_phost_run(amldist__rz_etcd_t *t)
{
    long long now = amldist__now_ms();
    if (!t->ph) {
        if (!(t->ph = calloc(1, sizeof *t->ph)))
            return;
        t->ph->lfd = -1;
        /* A decider that took over: the hang's stacks and the marks come
         * to this agent's node, not to the first decider's (gone). */
        amldist__rz_sm_set_plane_agent(t->d->sm, t->me.agent);
        t->d->plane_send = send_action;
    }
    amldist__etcd_phost_t *h = t->ph;
    if (h->lfd < 0 && now >= h->next_try) {
        h->next_try = now + RETRY_MS;
        h->lfd = listen_any(t->c.local_ip);
        if (h->lfd >= 0 &&
            amldist__loop_watch(t->pl.loop, h->lfd, POLLIN, on_accept, t) < 0) {
            close(h->lfd);
            h->lfd = -1;
        }
    }
    if (h->lfd >= 0 && !h->published && now >= h->next_try) {
        if (publish(t, port_of(h->lfd)) == 0)
            h->published = 1;
        else
            h->next_try = now + RETRY_MS;
    }
    sweep(t);
}

/* One of the machine's QUERY, RESULT or MARKS actions on m's connection
 * (decider.h's plane_send). */
static void send_action(amldist__rz_etcd_t *t, struct emember *m,
                        const amldist__rz_action_t *a)
{
    amldist__etcd_phost_t *h = t->ph;
    struct pconn *pc = m ? m->plane : NULL;
    for (int i = 0; h && !pc && m && i < h->npc; i++)
        if (h->pc[i]->joined && h->pc[i]->agent == m->agent)
            pc = m->plane = h->pc[i];
    if (!pc || pc->dead || pc->c.fd < 0)
        return; /* no connection: the gather names it missing */
    unsigned char head[AMLDIST__RZ_RESULT_HEAD];
    unsigned type;
    size_t hl = amldist__rz_plane_head(a, &type, head);
    if (type == AMLDIST__RZ_RESULT) {
        if (amldist__rz_outbox_push(&pc->out, type, head, hl, a->data,
                                    a->len) < 0 ||
            amldist__rz_outbox_pump(&pc->out, &pc->c) < 0)
            kill_pconn(pc);
        return;
    }
    unsigned char buf[12 + AMLDIST__RZ_ARG_MAX +
                      AMLDIST__RZ_MARK_LEN * AMLDIST__RZ_MARKS_MAX];
    size_t len = a->len < sizeof buf - hl ? a->len : sizeof buf - hl;
    memcpy(buf, head, hl);
    if (len)
        memcpy(buf + hl, a->data, len);
    if (amldist__conn_send(&pc->c, type, buf, hl + len) < 0)
        kill_pconn(pc);
}

void amldist__etcd_phost_stop(amldist__rz_etcd_t *t)
{
    amldist__etcd_phost_t *h = t->ph;
    if (!h)
        return;
    if (t->d)
        t->d->plane_send = NULL;
    for (int i = 0; i < h->npc; i++)
        h->pc[i]->dead = 1;
    sweep(t);
    if (h->lfd >= 0) {
        amldist__loop_unwatch(t->pl.loop, h->lfd);
        close(h->lfd);
    }
    free(h->pc);
    free(h);
    t->ph = NULL;
}
