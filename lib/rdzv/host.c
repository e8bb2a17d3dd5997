/*
 * The rendezvous host: the one place that decides what the job does.  Each
 * agent holds one connection; the host forms rounds from the agents that
 * joined, hands each its node rank, turns the first failure of a round into
 * a stop of every node, and once every node's workers are down either forms
 * the next round (a restart, or an elastic job re-forming) or ends the job
 * with the first failure's status.  Runs on the handle's thread, never
 * blocking: every socket is non-blocking and every wait is a deadline that
 * amldist__rz_host_next_wake() reports.
 *
 * Phases:  FORMING -> RUNNING -> STOPPING -> RUNNING (next round) ... -> OVER
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdzv/rdzv_internal.h"

enum { P_FORMING, P_RUNNING, P_STOPPING, P_OVER };

enum {
    M_PENDING, /* connected, no JOIN yet */
    M_CLOSING, /* refused: the REFUSE drains, then the connection closes */
    M_JOINED,  /* waits for a round to form */
    M_RUNNING, /* in the round, its workers may run */
    M_DONE,    /* in the round, its workers are down */
    M_GONE     /* to be freed */
};

/* Most connections held at once; beyond, the oldest unjoined one goes. */
#define MAX_CONNS (AMLDIST_RDZV_MAX_NODES + 1024)
/* How long a refused peer has to read its REFUSE. */
#define CLOSING_MS 1000
/* Agent ids declared dead, remembered to refuse them if they come back. */
#define LOST_MAX 1024

struct member {
    amldist__conn_t c;
    int state;
    uint64_t agent;
    int order;     /* -1: none */
    int nproc, port, seq;
    int node;      /* in the current round */
    int prev_node; /* in the last round it ran in, -1 */
    int status;    /* its DONE's */
    char addr[INET6_ADDRSTRLEN];
    long long since;
};

struct amldist__rz_host {
    amldist__rz_cfg_t cfg;
    int lfd[8], nlfd;
    struct member **m;
    int nm;
    int phase, round, restarts, nodes, seq;
    long long started, min_at, last_beat, over_at;
    /* The round's stop: its first failure (failed), whether the job then
     * restarts, and whether that restart counts against max_restarts. */
    int failed, restart_wanted, counted, status;
    char failure[AMLDIST__RZ_FINISH_MAX];
    uint64_t lost[LOST_MAX];
    int nlost;
    int spare; /* a descriptor held back for make_room() */
};

static long long now_ms(void) { return amldist__loop_now_ms(); }

amldist__rz_host_t *amldist__rz_host_new(const amldist__rz_cfg_t *cfg,
                                         const int *lfds, int nlfds)
{
    amldist__rz_host_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->m = calloc(MAX_CONNS, sizeof *h->m);
    if (!h->m) {
        free(h);
        return NULL;
    }
    h->cfg = *cfg;
    for (int i = 0; i < nlfds && i < 8; i++)
        h->lfd[h->nlfd++] = lfds[i];
    h->started = h->last_beat = now_ms();
    h->phase = P_FORMING;
    h->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return h;
}

void amldist__rz_host_free(amldist__rz_host_t *h)
{
    if (!h)
        return;
    for (int i = 0; i < h->nlfd; i++)
        close(h->lfd[i]);
    if (h->spare >= 0)
        close(h->spare);
    for (int i = 0; i < h->nm; i++) {
        amldist__conn_close(&h->m[i]->c);
        free(h->m[i]);
    }
    free(h->m);
    free(h);
}

static int in_job(const struct member *m)
{
    return m->state == M_JOINED || m->state == M_RUNNING ||
           m->state == M_DONE;
}

static int count_state(const amldist__rz_host_t *h, int state)
{
    int n = 0;
    for (int i = 0; i < h->nm; i++)
        n += h->m[i]->state == state;
    return n;
}

static int count_in_job(const amldist__rz_host_t *h)
{
    int n = 0;
    for (int i = 0; i < h->nm; i++)
        n += in_job(h->m[i]);
    return n;
}

/* A peer whose queue is full is stuck: it is dropped like a lost one, on the
 * next sweep (send() only marks it). */
static void send_to(struct member *m, unsigned type, const void *p,
                    size_t len)
{
    if (m->c.fd >= 0 && amldist__conn_send(&m->c, type, p, len) < 0)
        m->c.last_rx = 0; /* silent since forever: lost at the next tick */
}

static void send_text(struct member *m, unsigned type, uint32_t head,
                      const char *text)
{
    unsigned char buf[4 + AMLDIST__RZ_TEXT_MAX];
    size_t n = strlen(text);
    if (n > AMLDIST__RZ_TEXT_MAX)
        n = AMLDIST__RZ_TEXT_MAX;
    amldist__net_put_u32(buf, head);
    memcpy(buf + 4, text, n);
    send_to(m, type, buf, 4 + n);
}

static void refuse(struct member *m, uint32_t reason, const char *fmt, ...)
    AMLDIST__PRINTF(3, 4);
static void refuse(struct member *m, uint32_t reason, const char *fmt, ...)
{
    char text[AMLDIST__RZ_TEXT_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    send_text(m, AMLDIST__RZ_REFUSE, reason, text);
    /* Half-close: the REFUSE is delivered before the end of the stream
     * (a close() with unread input would reset the connection first). */
    shutdown(m->c.fd, SHUT_WR);
    m->state = M_CLOSING;
    m->since = now_ms();
}

static void stop_all(amldist__rz_host_t *h, const char *fmt, ...)
    AMLDIST__PRINTF(2, 3);
static void stop_all(amldist__rz_host_t *h, const char *fmt, ...)
{
    char why[AMLDIST__RZ_TEXT_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    h->phase = P_STOPPING;
    for (int i = 0; i < h->nm; i++)
        if (h->m[i]->state == M_RUNNING)
            send_text(h->m[i], AMLDIST__RZ_STOP, (uint32_t)h->round, why);
}

static void end_job(amldist__rz_host_t *h, int status)
{
    size_t n = strlen(h->failure);
    unsigned char *buf = malloc(4 + n);
    h->phase = P_OVER;
    h->status = status;
    h->over_at = now_ms();
    if (!buf) /* the agents then see the connection close: the host lost */
        return;
    amldist__net_put_u32(buf, (uint32_t)status);
    memcpy(buf + 4, h->failure, n);
    for (int i = 0; i < h->nm; i++)
        if (in_job(h->m[i]))
            send_to(h->m[i], AMLDIST__RZ_FINISH, buf, 4 + n);
    free(buf);
}

/* Nodes: with orders, by order; else the host's own agent first, then the
 * ones that ran before in their old order, then newcomers by arrival. */
static uint64_t sort_key(const amldist__rz_host_t *h, const struct member *m)
{
    if (m->order >= 0)
        return (uint64_t)m->order;
    if (m->agent == h->cfg.self_agent)
        return 0;
    if (m->prev_node >= 0)
        return 1 + (uint64_t)m->prev_node;
    return (1ull << 32) + (uint64_t)m->seq;
}

static int by_key(const void *a, const void *b, void *h)
{
    uint64_t ka = sort_key(h, *(struct member *const *)a);
    uint64_t kb = sort_key(h, *(struct member *const *)b);
    return ka < kb ? -1 : ka > kb;
}

/* Close the round: every JOINED or DONE member gets a node rank. */
static void form_round(amldist__rz_host_t *h)
{
    struct member *nodes[AMLDIST_RDZV_MAX_NODES];
    int n = 0;
    for (int i = 0; i < h->nm; i++) {
        struct member *m = h->m[i];
        if (m->state != M_JOINED && m->state != M_DONE)
            continue;
        if (n == h->cfg.max || n == AMLDIST_RDZV_MAX_NODES)
            refuse(m, AMLDIST__RZ_R_FULL, "the job has its %d nodes",
                   h->cfg.max);
        else
            nodes[n++] = m;
    }
    qsort_r(nodes, (size_t)n, sizeof *nodes, by_key, h);
    if (h->phase != P_FORMING) {
        h->round++;
        h->restarts += h->counted;
    }
    size_t alen = 0;
    const char *addr = h->cfg.master_addr[0] ? h->cfg.master_addr
                                             : nodes[0]->addr;
    alen = strlen(addr);
    int port = h->cfg.master_port > 0 ? h->cfg.master_port : nodes[0]->port;
    if (port <= 0 || port > 65535)
        port = 29500;
    size_t len = 24 + alen + 4 * (size_t)n;
    unsigned char *buf = malloc(len);
    if (!buf) {
        end_job(h, AMLDIST_RDZV_STATUS_LOST);
        return;
    }
    amldist__net_put_u32(buf, (uint32_t)h->round);
    amldist__net_put_u32(buf + 4, (uint32_t)h->restarts);
    amldist__net_put_u32(buf + 12, (uint32_t)n);
    amldist__net_put_u32(buf + 16, (uint32_t)port);
    amldist__net_put_u32(buf + 20, (uint32_t)alen);
    memcpy(buf + 24, addr, alen);
    for (int i = 0; i < n; i++)
        amldist__net_put_u32(buf + 24 + alen + 4 * (size_t)i,
                            (uint32_t)nodes[i]->nproc);
    for (int i = 0; i < n; i++) {
        amldist__net_put_u32(buf + 8, (uint32_t)i);
        nodes[i]->node = nodes[i]->prev_node = i;
        nodes[i]->state = M_RUNNING;
        nodes[i]->status = 0;
        send_to(nodes[i], AMLDIST__RZ_ASSIGN, buf, len);
    }
    free(buf);
    h->nodes = n;
    h->phase = P_RUNNING;
    h->failed = h->restart_wanted = h->counted = 0;
    h->failure[0] = '\0';
}

/* The round's first failure: what every node is told, and what follows. */
static void first_failure(amldist__rz_host_t *h, int status, int final,
                          int counts, const char *text)
{
    h->failed = 1;
    h->status = status;
    amldist__strlcpy(h->failure, text, sizeof h->failure);
    h->counted = counts;
    h->restart_wanted = !final && (!counts || h->restarts < h->cfg.max_restarts);
}

/* Every node's workers are down (or its agent gone): what comes next. */
static void round_settled(amldist__rz_host_t *h)
{
    if ((h->phase != P_RUNNING && h->phase != P_STOPPING) ||
        count_state(h, M_RUNNING) > 0)
        return;
    if (h->phase == P_RUNNING) { /* every node succeeded */
        end_job(h, 0);
        return;
    }
    int left = count_state(h, M_DONE) + count_state(h, M_JOINED);
    if (h->restart_wanted && left >= h->cfg.min)
        form_round(h);
    else if (h->failed)
        end_job(h, h->status);
    else
        end_job(h, AMLDIST_RDZV_STATUS_LOST);
}

static void remember_lost(amldist__rz_host_t *h, uint64_t agent)
{
    h->lost[h->nlost++ % LOST_MAX] = agent;
}

static void lose(amldist__rz_host_t *h, struct member *m, const char *why)
{
    int was = m->state;
    m->state = M_GONE;
    if (was == M_PENDING || was == M_CLOSING || was == M_JOINED) {
        if (h->phase == P_FORMING && count_in_job(h) < h->cfg.min)
            h->min_at = 0;
        return;
    }
    if (was != M_RUNNING && was != M_DONE)
        return;
    remember_lost(h, m->agent);
    if (h->phase == P_OVER)
        return;
    int left = count_in_job(h);
    if (!h->failed) {
        char text[600];
        snprintf(text, sizeof text, "node %d (%s) was lost: %s", m->node,
                 m->addr, why);
        /* An elastic job goes on with the nodes left, without counting it
         * as a restart; a fixed-size one cannot. */
        int elastic = h->cfg.min < h->cfg.max && left >= h->cfg.min;
        first_failure(h, AMLDIST_RDZV_STATUS_LOST, !elastic, 0, text);
        if (h->phase == P_RUNNING)
            stop_all(h, "%s", text);
    } else if (left < h->cfg.min) {
        h->restart_wanted = 0;
    }
    round_settled(h);
}

static int taken_order(const amldist__rz_host_t *h, const struct member *self,
                       int order, const char **by)
{
    for (int i = 0; i < h->nm; i++)
        if (h->m[i] != self && in_job(h->m[i]) && h->m[i]->order == order) {
            *by = h->m[i]->addr;
            return 1;
        }
    return 0;
}

static int mixed_order(const amldist__rz_host_t *h, int order)
{
    for (int i = 0; i < h->nm; i++)
        if (in_job(h->m[i]) && (h->m[i]->order < 0) != (order < 0))
            return 1;
    return 0;
}

/* 1: a live member has this agent id (a replay); 2: a lost one had it. */
static int known_agent(const amldist__rz_host_t *h, const struct member *self,
                       uint64_t agent)
{
    for (int i = 0; i < h->nm; i++)
        if (h->m[i] != self && in_job(h->m[i]) && h->m[i]->agent == agent)
            return 1;
    for (int i = 0; i < h->nlost && i < LOST_MAX; i++)
        if (h->lost[i] == agent)
            return 2;
    return 0;
}

static void on_join(amldist__rz_host_t *h, struct member *m,
                    const unsigned char *p)
{
    amldist__rz_join_t j;
    amldist__rz_get_join(p, &j);
    int order = j.order == AMLDIST__RZ_NONE ? -1 : (int)j.order;
    const char *by = NULL;
    if (j.token != h->cfg.token) {
        refuse(m, AMLDIST__RZ_R_TOKEN, "another job's token (this job's "
               "comes from %s)", h->cfg.token_source);
    } else if (j.run != h->cfg.run) {
        refuse(m, AMLDIST__RZ_R_RUN, "another run id (--rdzv-id)");
    } else if ((int)j.min != h->cfg.min || (int)j.max != h->cfg.max ||
               (int)j.max_restarts != h->cfg.max_restarts) {
        refuse(m, AMLDIST__RZ_R_OPTIONS, "--nnodes %u:%u and --max-restarts "
               "%u differ from the job's %d:%d and %d", j.min, j.max,
               j.max_restarts, h->cfg.min, h->cfg.max, h->cfg.max_restarts);
    } else if (j.nproc < 1 || j.nproc > (1u << 20) ||
               (order >= 0 && j.order > (1u << 30))) {
        refuse(m, AMLDIST__RZ_R_PROTO, "worker count %u or order %u out of "
               "range", j.nproc, j.order);
    } else if (h->phase == P_OVER) {
        refuse(m, AMLDIST__RZ_R_OVER, "the job is over");
    } else if (j.round != 0) {
        refuse(m, AMLDIST__RZ_R_STALE, "a stale agent (it asks for round "
               "%u)", j.round);
    } else if (known_agent(h, m, j.agent) == 1) {
        refuse(m, AMLDIST__RZ_R_STALE, "an agent with this id has joined "
               "already (a replayed JOIN)");
    } else if (known_agent(h, m, j.agent) == 2) {
        refuse(m, AMLDIST__RZ_R_STALE, "a stale agent: this job declared it "
               "lost");
    } else if (mixed_order(h, order)) {
        refuse(m, AMLDIST__RZ_R_ORDER, "%s", order < 0
               ? "the other nodes' ranks come from a launcher or "
                 "--node-rank, this one's do not"
               : "this node's rank comes from a launcher or --node-rank, "
                 "the other nodes' do not");
    } else if (order >= 0 && taken_order(h, m, order, &by)) {
        refuse(m, AMLDIST__RZ_R_ORDER, "node rank %d is already %s's", order,
               by);
    } else {
        int room = count_in_job(h) < h->cfg.max;
        if (!room || (h->phase != P_FORMING && h->cfg.min == h->cfg.max)) {
            refuse(m, AMLDIST__RZ_R_FULL, "the job has its %d node%s "
                   "(round %d)", h->cfg.max, h->cfg.max == 1 ? "" : "s",
                   h->round);
            return;
        }
        m->state = M_JOINED;
        m->agent = j.agent;
        m->order = order;
        m->nproc = (int)j.nproc;
        m->port = (int)j.port;
        m->seq = h->seq++;
        m->prev_node = -1;
        if (h->phase == P_FORMING && h->min_at == 0 &&
            count_in_job(h) >= h->cfg.min)
            h->min_at = now_ms();
        if (h->phase == P_RUNNING) {
            /* torchrun's behaviour: a new node restarts every node's
             * workers in a round with it; not counted as a restart. */
            h->restart_wanted = 1;
            h->counted = 0;
            stop_all(h, "a node (%s) joined: the job re-forms with %d nodes",
                     m->addr, count_in_job(h));
        }
    }
}

static void on_fail(amldist__rz_host_t *h, struct member *m,
                    const unsigned char *p, uint32_t len)
{
    uint32_t round = amldist__net_get_u32(p);
    uint32_t flags = amldist__net_get_u32(p + 4);
    uint32_t rank = amldist__net_get_u32(p + 8);
    int status = (int)(amldist__net_get_u32(p + 12) & 0xff);
    if ((int)round != h->round || (m->state != M_RUNNING && m->state != M_DONE))
        return; /* a late word about an older round */
    int final = (flags & AMLDIST_RDZV_FINAL) != 0;
    if (h->phase == P_STOPPING && final)
        h->restart_wanted = 0; /* a stop request ends the job */
    if (h->failed || (h->phase != P_RUNNING && h->phase != P_STOPPING))
        return;
    char text[AMLDIST__RZ_FINISH_MAX];
    int n = snprintf(text, sizeof text, "node %d (%s)", m->node, m->addr);
    if (rank != AMLDIST__RZ_NONE)
        n += snprintf(text + n, sizeof text - (size_t)n, ", rank %u", rank);
    n += snprintf(text + n, sizeof text - (size_t)n, ": exit status %d%s",
                  status, len > 16 ? "\n" : "");
    size_t room = sizeof text - (size_t)n - 1, sl = len - 16;
    memcpy(text + n, p + 16, sl < room ? sl : room);
    text[n + (int)(sl < room ? sl : room)] = '\0';
    first_failure(h, status, final, 1, text);
    if (h->phase != P_RUNNING)
        return;
    if (rank != AMLDIST__RZ_NONE) {
        stop_all(h, "node %d (%s), a worker, failed with exit status %d",
                 m->node, m->addr, status);
        return;
    }
    /* Not a worker (a stop signal, a worker that could not start): the
     * summary's first line says what, without its "amlrun:" margin. */
    const unsigned char *s = p + 16, *end = p + len;
    if (end - s >= 7 && memcmp(s, "amlrun:", 7) == 0)
        s += 7;
    while (s < end && *s == ' ')
        s++;
    const unsigned char *nl = memchr(s, '\n', (size_t)(end - s));
    int n1 = (int)((nl ? nl : end) - s);
    if (n1 > 0)
        stop_all(h, "node %d (%s): %.*s", m->node, m->addr,
                 n1 > 300 ? 300 : n1, (const char *)s);
    else
        stop_all(h, "node %d (%s) stopped with exit status %d", m->node,
                 m->addr, status);
}

static void on_done(amldist__rz_host_t *h, struct member *m,
                    const unsigned char *p)
{
    uint32_t round = amldist__net_get_u32(p);
    if ((int)round != h->round || m->state != M_RUNNING)
        return;
    m->status = (int)(amldist__net_get_u32(p + 4) & 0xff);
    m->port = (int)amldist__net_get_u32(p + 8);
    m->state = M_DONE;
    /* Workers the host had stopped did not fail: only a status given while
     * the round still ran is one. */
    if (m->status != 0 && !h->failed && h->phase == P_RUNNING) {
        char text[128];
        snprintf(text, sizeof text, "node %d (%s): exit status %d", m->node,
                 m->addr, m->status);
        first_failure(h, m->status, 0, 1, text);
        if (h->phase == P_RUNNING)
            stop_all(h, "%s", text);
    }
    round_settled(h);
}

static void on_frame(amldist__rz_host_t *h, struct member *m, unsigned type,
                     const unsigned char *p, uint32_t len)
{
    if (m->state == M_CLOSING)
        return;
    if (m->state == M_PENDING) {
        if (type == AMLDIST__RZ_JOIN)
            on_join(h, m, p);
        else
            refuse(m, AMLDIST__RZ_R_PROTO, "the first frame must be a JOIN");
        return;
    }
    switch (type) {
    case AMLDIST__RZ_BEAT:
        break;
    case AMLDIST__RZ_FAIL:
        on_fail(h, m, p, len);
        break;
    case AMLDIST__RZ_DONE:
        on_done(h, m, p);
        break;
    default:
        lose(h, m, "it sent a frame out of turn");
    }
}

static void peer_addr(int fd, char *buf, size_t size)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    buf[0] = '\0';
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
        return;
    if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, buf,
                  (socklen_t)size);
    else if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, buf,
                  (socklen_t)size);
}

/* The oldest connection that has not joined, to make room. */
/* The connection to drop for room: one that has not joined, the oldest
 * that has sent nothing yet before any other (an agent's JOIN may wait
 * unread in its socket while the host accepts a flood of idle peers). */
static struct member *oldest_pending(amldist__rz_host_t *h)
{
    struct member *o = NULL;
    int o_quiet = 0;
    for (int i = 0; i < h->nm; i++) {
        struct member *m = h->m[i];
        if (m->state != M_PENDING && m->state != M_CLOSING)
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
        amldist__conn_close(&o->c);
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
            amldist__conn_close(&o->c);
            *o = (struct member){0};
            o->c.fd = fd;
            amldist__rz_conn_init(&o->c, fd);
            o->since = now_ms();
            o->order = o->prev_node = -1;
            peer_addr(fd, o->addr, sizeof o->addr);
            continue;
        }
        struct member *m = calloc(1, sizeof *m);
        if (!m) {
            close(fd);
            return;
        }
        amldist__rz_conn_init(&m->c, fd);
        m->state = M_PENDING;
        m->since = now_ms();
        m->order = m->prev_node = -1;
        peer_addr(fd, m->addr, sizeof m->addr);
        h->m[h->nm++] = m;
    }
}

void amldist__rz_host_fds(amldist__rz_host_t *h, struct pollfd *pfd, int *n,
                          int max)
{
    for (int i = 0; i < h->nlfd && *n < max; i++)
        pfd[(*n)++] = (struct pollfd){h->lfd[i], POLLIN, 0};
    for (int i = 0; i < h->nm && *n < max; i++) {
        struct member *m = h->m[i];
        short ev = POLLIN;
        if (m->c.out_off < m->c.out_len)
            ev |= POLLOUT;
        pfd[(*n)++] = (struct pollfd){m->c.fd, ev, 0};
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
    if (amldist__conn_read(&m->c, member_frame, &rd, &why) < 0)
        lose(h, m, why);
}

static void tick(amldist__rz_host_t *h)
{
    long long now = now_ms();
    for (int i = 0; i < h->nm; i++) {
        struct member *m = h->m[i];
        if (m->state == M_GONE)
            continue;
        if (m->state == M_CLOSING && now - m->since > CLOSING_MS)
            m->state = M_GONE;
        else if (m->state == M_PENDING && now - m->since > h->cfg.dead_ms)
            m->state = M_GONE; /* a peer that never said who it is */
        else if (in_job(m) && now - m->c.last_rx > h->cfg.dead_ms) {
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
            if (in_job(h->m[i]))
                send_to(h->m[i], AMLDIST__RZ_BEAT, NULL, 0);
    }
    if (h->phase != P_FORMING)
        return;
    int n = count_in_job(h);
    if (n >= h->cfg.max ||
        (n >= h->cfg.min && h->min_at && now - h->min_at >= h->cfg.last_call_ms))
        form_round(h);
    else if (now - h->started >= h->cfg.join_timeout_ms) {
        for (int i = 0; i < h->nm; i++)
            if (in_job(h->m[i]))
                refuse(h->m[i], AMLDIST__RZ_R_TIMEOUT, "only %d of the %d "
                       "nodes needed joined within %.0f s", n, h->cfg.min,
                       h->cfg.join_timeout_ms / 1000.0);
        h->phase = P_OVER;
        h->over_at = now;
    }
}

static void sweep(amldist__rz_host_t *h)
{
    int k = 0;
    for (int i = 0; i < h->nm; i++) {
        if (h->m[i]->state == M_GONE) {
            amldist__conn_close(&h->m[i]->c);
            free(h->m[i]);
        } else {
            h->m[k++] = h->m[i];
        }
    }
    h->nm = k;
}

void amldist__rz_host_serve(amldist__rz_host_t *h, const struct pollfd *pfd,
                            int n)
{
    int i = 0;
    int nm = h->nm; /* accept_all appends: those were not polled */
    for (; i < h->nlfd && i < n; i++)
        if (pfd[i].revents & POLLIN)
            accept_all(h, pfd[i].fd);
    for (int k = 0; k < nm && i < n; k++, i++) {
        struct member *m = h->m[k];
        if (m->state == M_GONE || m->c.fd != pfd[i].fd || !pfd[i].revents)
            continue;
        if ((pfd[i].revents & POLLOUT) && amldist__conn_flush(&m->c) < 0) {
            lose(h, m, "the connection failed");
            continue;
        }
        if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
            read_member(h, m);
    }
    tick(h);
    sweep(h);
}

long long amldist__rz_host_next_wake(const amldist__rz_host_t *h)
{
    long long t = h->last_beat + h->cfg.keepalive_ms;
    if (h->phase == P_FORMING) {
        if (h->min_at && h->min_at + h->cfg.last_call_ms < t)
            t = h->min_at + h->cfg.last_call_ms;
        if (h->started + h->cfg.join_timeout_ms < t)
            t = h->started + h->cfg.join_timeout_ms;
    }
    return t;
}

int amldist__rz_host_drained(const amldist__rz_host_t *h)
{
    /* A job that did not end here has no one to wait for: the agents see
     * the host's connection close. */
    if (h->phase != P_OVER)
        return 1;
    if (now_ms() - h->over_at > h->cfg.dead_ms)
        return 1;
    /* Strangers that never joined are not waited for. */
    for (int i = 0; i < h->nm; i++)
        if (in_job(h->m[i]) && h->m[i]->agent != h->cfg.self_agent)
            return 0;
    return 1;
}
