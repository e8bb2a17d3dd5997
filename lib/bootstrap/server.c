/*
 * Rank 0's side of the bootstrap: one poll loop (net/loop.h) over the
 * listening sockets and every open connection (net/conn.h), so that a slow
 * or garbage-sending peer holds one slot until its own deadline and never
 * delays the others.  The loop ends when every rank 1 .. world-1 is done
 * with (it received the whole blob, or, in barrier mode, it was told that a
 * rank failed), or at the overall deadline.  In barrier mode a rank that comes before every rank has checked
 * in is told to come back (no connection is held open meanwhile, so a world
 * of any size needs no more descriptors than a plain broadcast).
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "net/conn.h"
#include "net/loop.h"

/* A peer gets this long to send its HELLO and take its reply. */
#define CONN_MS 5000
#define MAX_LISTEN 8
#define MAX_CONNS 1024

/* What a client may send: its request, then its ACK.  Anything else is
 * dropped on its header, without reading further. */
static const amldist__frame_limit_t requests[] = {
    {AMLDIST__BS_HELLO, AMLDIST__BS_HELLO_LEN, AMLDIST__BS_HELLO_LEN},
    {AMLDIST__BS_FAIL, AMLDIST__BS_FAIL_LEN, AMLDIST__BS_FAIL_LEN},
    {AMLDIST__BS_ACK, 0, 0},
    {0, 0, 0},
};

typedef struct server server_t;

typedef struct {
    amldist__conn_t c; /* fd -1: a free slot */
    server_t *s;
    long long deadline;
    int answered; /* the reply is queued: no longer idle */
    int rank;     /* >0: the rank is done with once it ACKs the reply */
} conn_t;

struct server {
    const amldist__bs_params_t *p;
    amldist__loop_t *loop;
    unsigned char *reply; /* header + blob, shared by all BLOB replies */
    size_t reply_len;
    unsigned char *served; /* served[r]: rank r is done with */
    int nserved;
    unsigned char *checked; /* barrier: checked[r]: rank r has come */
    int nchecked;
    int failed; /* barrier: the first rank that failed, or -1 */
    unsigned char peer[AMLDIST__FRAME_HEADER_LEN + AMLDIST__BS_PEER_LEN];
    conn_t *conns;  /* max_conns slots, which never move */
    conn_t **spare; /* the free ones */
    int nspare, max_conns;
    unsigned char ready[MAX_LISTEN]; /* listener i has connections waiting */
    char bad[200]; /* the last peer whose frame failed authentication */
};

static void drop(server_t *s, conn_t *c)
{
    amldist__loop_unwatch(s->loop, c->c.fd);
    amldist__conn_close(&c->c);
    s->spare[s->nspare++] = c;
}

static int refuse(conn_t *c, uint32_t reason, uint32_t value)
{
    unsigned char b[AMLDIST__BS_REFUSE_LEN];
    amldist__net_put_u32(b, reason);
    amldist__net_put_u32(b + 4, value);
    return amldist__conn_send(&c->c, AMLDIST__BS_REFUSE, b, sizeof b);
}

/* The answer, once rank r has failed with `why`, to every later request. */
static void failed(server_t *s, int r, const unsigned char *why)
{
    amldist__frame_put_header(s->peer, AMLDIST__BS_PEER, AMLDIST__BS_PEER_LEN);
    amldist__net_put_u32(s->peer + AMLDIST__FRAME_HEADER_LEN, (uint32_t)r);
    memcpy(s->peer + AMLDIST__FRAME_HEADER_LEN + 4, why, AMLDIST__BS_WHY_LEN);
    s->peer[sizeof s->peer - 1] = '\0';
    s->failed = r;
}

/* A valid request of rank r: the blob, or in barrier mode "come back" until
 * every rank has come, and "rank k failed" once one has.  The shared
 * replies go out by reference: they never change once a reply uses them. */
static int admit(server_t *s, conn_t *c, unsigned type,
                 const unsigned char *req, int r)
{
    if (type == AMLDIST__BS_FAIL && s->failed < 0)
        failed(s, r, req + AMLDIST__BS_HELLO_LEN);
    if (s->checked && !s->checked[r]) {
        s->checked[r] = 1;
        s->nchecked++;
    }
    if (type == AMLDIST__BS_FAIL || (s->failed >= 0 && s->checked)) {
        c->rank = r;
        return amldist__conn_send_ref(&c->c, s->peer, sizeof s->peer);
    }
    if (s->checked && s->nchecked < s->p->world - 1)
        return refuse(c, AMLDIST__BS_R_WAIT, (uint32_t)s->nchecked);
    c->rank = r;
    return amldist__conn_send_ref(&c->c, s->reply, s->reply_len);
}

/* A whole HELLO (or FAIL) arrived: queue the reply.  The token is checked
 * first so a foreign peer learns nothing about this job. */
static int answer(server_t *s, conn_t *c, unsigned type,
                  const unsigned char *req)
{
    const amldist__bs_params_t *p = s->p;
    amldist__bs_hello_t h;
    amldist__bs_get_hello(req, &h);
    c->answered = 1;
    if (h.token != p->token)
        return refuse(c, AMLDIST__BS_R_TOKEN, 0);
    /* The call number before the rest: a rank already at its next call may
     * rightly send another length. */
    if (h.round > p->round)
        return refuse(c, AMLDIST__BS_R_AHEAD, p->round);
    if (h.round < p->round)
        return refuse(c, AMLDIST__BS_R_BEHIND, p->round);
    if (h.world != (uint32_t)p->world)
        return refuse(c, AMLDIST__BS_R_WORLD, (uint32_t)p->world);
    if (h.rank == 0 || h.rank >= (uint32_t)p->world)
        return refuse(c, AMLDIST__BS_R_RANK, (uint32_t)p->world);
    if (h.length != s->reply_len - AMLDIST__FRAME_HEADER_LEN)
        return refuse(c, AMLDIST__BS_R_LENGTH,
                      (uint32_t)(s->reply_len - AMLDIST__FRAME_HEADER_LEN));
    return admit(s, c, type, req, (int)h.rank);
}

/* A peer's frame failed authentication: noted, with who it was, for the
 * message should the exchange time out. */
static void note_bad(server_t *s, conn_t *c, const char *why)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[128] = "?", port[16] = "?";
    if (getpeername(c->c.fd, (struct sockaddr *)&ss, &sl) == 0)
        getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, port,
                    sizeof port, NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(s->bad, sizeof s->bad, "%s from %s port %s", why, host, port);
}

/* Progress on one connection; returns 1 when it is finished or broken. */
static int step(server_t *s, conn_t *c)
{
    for (;;) {
        if (amldist__conn_pending(&c->c)) {
            if (amldist__conn_flush(&c->c) < 0)
                return 1;
            if (amldist__conn_pending(&c->c))
                return 0;
            if (c->answered && c->rank <= 0)
                return 1; /* a refusal: nothing more to hear */
            /* The answer is out; the rank is done once it says it has it. */
        }
        unsigned type;
        const unsigned char *req;
        uint32_t len;
        const char *why;
        int rc = amldist__conn_recv(&c->c, &type, &req, &len, &why);
        if (rc == 0)
            return 0;
        /* A peer that did not prove the job's secret, or has one where the
         * job has none: told only that, plain. */
        if (rc == AMLDIST__CONN_EAUTH && !c->answered) {
            note_bad(s, c, why);
            c->answered = 1;
            if (refuse(c, AMLDIST__BS_R_TOKEN, 0) < 0)
                return 1;
            continue;
        }
        if (rc == AMLDIST__CONN_EINTEGRITY)
            note_bad(s, c, why);
        /* Garbage, a foreign protocol or an oversized length, or closed
         * before a whole HELLO or without an ACK. */
        if (rc < 0)
            return 1;
        if (c->answered) {
            /* Only an ACK makes the rank done. */
            if (type == AMLDIST__BS_ACK && !s->served[c->rank]) {
                s->served[c->rank] = 1;
                s->nserved++;
            }
            return 1;
        }
        if (type == AMLDIST__BS_ACK || answer(s, c, type, req) < 0)
            return 1;
    }
}

static void on_conn(void *arg, int fd, short revents)
{
    conn_t *c = arg;
    (void)revents;
    if (step(c->s, c))
        drop(c->s, c);
    else
        amldist__loop_events(c->s->loop, fd,
                             amldist__conn_pending(&c->c) ? POLLOUT : POLLIN);
}

/* Accepting waits for the end of the round (serve_loop), after the
 * connections' own callbacks: a connection that finished this round frees
 * its slot first, and one whose request came is not taken for idle. */
static void on_listener(void *arg, int fd, short revents)
{
    (void)fd;
    *(unsigned char *)arg = (revents & POLLIN) != 0;
}

/* The connection that has waited longest without a whole request, or NULL:
 * with every slot taken it makes room for a newcomer, so that idle or slow
 * peers can never keep the real ranks waiting in the backlog. */
static conn_t *idlest(const server_t *s)
{
    conn_t *best = NULL;
    for (int i = 0; i < s->max_conns; i++) {
        conn_t *c = &s->conns[i];
        if (c->c.fd >= 0 && !c->answered &&
            (!best || c->deadline < best->deadline))
            best = c;
    }
    return best;
}

static void accept_all(server_t *s, int lfd, long long now)
{
    for (;;) {
        conn_t *victim = s->nspare > 0 ? NULL : idlest(s);
        if (s->nspare == 0 && !victim)
            return; /* every slot is busy answering: the backlog waits */
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE) &&
            (victim = idlest(s)) != NULL) {
            drop(s, victim);
            victim = NULL;
            fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        }
        if (fd < 0)
            return; /* EAGAIN, or out of descriptors with none idle */
        if (victim)
            drop(s, victim);
        conn_t *c = s->spare[--s->nspare];
        amldist__conn_init(&c->c, fd, requests);
        if (s->p->secure && amldist__conn_secure(&c->c, &s->p->keys, 1) < 0) {
            drop(s, c);
            return;
        }
        c->s = s;
        c->deadline = now + CONN_MS;
        c->answered = 0;
        c->rank = 0;
        if (amldist__loop_watch(s->loop, fd, POLLIN, on_conn, c) < 0) {
            drop(s, c); /* out of memory: as if it never came */
            return;
        }
    }
}

static int timed_out(const server_t *s)
{
    char addr[300], missing[448];
    size_t used = 0;
    int shown = 0;
    missing[0] = '\0';
    for (int r = 1; r < s->p->world && used < sizeof missing - 16; r++) {
        if (s->served[r])
            continue;
        used += (size_t)snprintf(missing + used, sizeof missing - used,
                                 shown++ ? ", %d" : "%d", r);
    }
    if (s->p->world - 1 - s->nserved > shown)
        snprintf(missing + used, sizeof missing - used, ", ...");
    amldist__net_format_addr(s->p->host, s->p->port, addr, sizeof addr);
    if (s->bad[0])
        snprintf(missing + strlen(missing), sizeof missing - strlen(missing),
                 "; last refused: %.150s", s->bad);
    if (s->failed >= 0)
        return amldist__fail(AMLDIST_EPEER,
                             "rank 0: rank %d failed, and %d of %d ranks did "
                             "not come to %s within %g s to learn it "
                             "(missing: %s)",
                             s->failed, s->p->world - 1 - s->nserved,
                             s->p->world - 1, addr, s->p->timeout_ms / 1000.0,
                             missing);
    return amldist__fail(AMLDIST_ETIMEDOUT,
                         "rank 0: %d of %d ranks did not fetch the bootstrap "
                         "blob from %s within %g s (missing: %s)",
                         s->p->world - 1 - s->nserved, s->p->world - 1, addr,
                         s->p->timeout_ms / 1000.0, missing);
}

/* Drops the connections past their deadline; the earliest deadline left
 * (or `deadline`). */
static long long expire(server_t *s, long long now, long long deadline)
{
    long long wake = deadline;
    for (int i = 0; i < s->max_conns; i++) {
        conn_t *c = &s->conns[i];
        if (c->c.fd < 0)
            continue;
        if (c->deadline <= now)
            drop(s, c);
        else if (c->deadline < wake)
            wake = c->deadline;
    }
    return wake;
}

static int serve_loop(server_t *s, const int *lfds, int nl, long long deadline)
{
    for (int i = 0; i < nl; i++)
        if (amldist__loop_watch(s->loop, lfds[i], POLLIN, on_listener,
                                &s->ready[i]) < 0)
            return amldist__fail(AMLDIST_ENOMEM, "rank 0: bootstrap server: "
                                                 "out of memory");
    while (s->nserved < s->p->world - 1) {
        long long now = amldist__now_ms();
        if (now >= deadline)
            return timed_out(s);
        long long wake = expire(s, now, deadline);
        int listening = s->nspare > 0 || idlest(s) != NULL;
        for (int i = 0; i < nl; i++) {
            amldist__loop_events(s->loop, lfds[i], listening ? POLLIN : 0);
            s->ready[i] = 0;
        }
        /* With every slot taken, wake now and then so EMFILE or a full table
         * cannot stall the loop past a connection's deadline. */
        long long ms = wake - now;
        if (!listening && ms > 100)
            ms = 100;
        if (amldist__loop_once(s->loop, (int)ms) < 0)
            return amldist__fail(AMLDIST_ESYS, "rank 0: bootstrap server: "
                                               "poll: %s", strerror(errno));
        now = amldist__now_ms();
        for (int i = 0; i < nl; i++)
            if (s->ready[i])
                accept_all(s, lfds[i], now);
    }
    if (s->failed > 0)
        return amldist__fail(AMLDIST_EPEER, "rank 0: rank %d failed: %s",
                             s->failed,
                             (const char *)s->peer +
                                 AMLDIST__FRAME_HEADER_LEN + 4);
    return 0;
}

/* Rank 0's listening sockets, with the bootstrap's words for a failure. */
static int listen_all(const amldist__bs_params_t *p, int *lfds, int *nl)
{
    char addr[300], why[256];
    int rc = amldist__net_listen(p->host, p->port, lfds, MAX_LISTEN, nl, why,
                                 sizeof why);
    if (rc == AMLDIST__NET_UNRESOLVED)
        return amldist__fail(AMLDIST_ESYS,
                             "rank 0: cannot resolve MASTER_ADDR=%s: %s",
                             p->host, why);
    if (rc < 0) {
        int e = errno;
        amldist__net_format_addr(p->host, p->port, addr, sizeof addr);
        return amldist__fail(AMLDIST_ESYS, "rank 0: cannot listen on %s: %s%s",
                             addr, strerror(e),
                             e == EADDRINUSE ? " (set AMLDIST_BOOTSTRAP_PORT "
                                               "to a free port)"
                                             : "");
    }
    return 0;
}

int amldist__bs_serve(const amldist__bs_params_t *p, const void *blob,
                      size_t len)
{
    long long deadline = amldist__now_ms() + p->timeout_ms;
    int lfds[MAX_LISTEN], nl, rc;
    server_t s;
    memset(&s, 0, sizeof s);
    s.p = p;
    if (p->world <= 1)
        return 0;
    if (len == 0 || len > AMLDIST_BOOTSTRAP_MAX_LEN)
        return amldist__fail(AMLDIST_EINVAL, "bootstrap blob of %zu bytes: "
                             "must be 1 .. %d", len, AMLDIST_BOOTSTRAP_MAX_LEN);
    s.reply_len = AMLDIST__FRAME_HEADER_LEN + len;
    s.max_conns = p->world + 64 < MAX_CONNS ? p->world + 64 : MAX_CONNS;
    s.reply = malloc(s.reply_len);
    s.served = calloc((size_t)p->world, 1);
    s.conns = calloc((size_t)s.max_conns, sizeof *s.conns);
    s.spare = calloc((size_t)s.max_conns, sizeof *s.spare);
    s.loop = amldist__loop_new();
    s.failed = -1;
    if (p->failed) {
        unsigned char why[AMLDIST__BS_WHY_LEN];
        memset(why, 0, sizeof why);
        memcpy(why, p->why, strnlen(p->why, sizeof why - 1));
        failed(&s, 0, why);
    }
    if (p->barrier)
        s.checked = calloc((size_t)p->world, 1);
    if (!s.reply || !s.served || !s.conns || !s.spare || !s.loop ||
        (p->barrier && !s.checked)) {
        rc = amldist__fail(AMLDIST_ENOMEM, "rank 0: bootstrap server: out of "
                                           "memory for %d ranks", p->world);
        goto out;
    }
    for (int i = s.max_conns - 1; i >= 0; i--) {
        s.conns[i].c.fd = -1;
        s.spare[s.nspare++] = &s.conns[i];
    }
    amldist__frame_put_header(s.reply, AMLDIST__BS_BLOB, (uint32_t)len);
    memcpy(s.reply + AMLDIST__FRAME_HEADER_LEN, blob, len);
    if ((rc = listen_all(p, lfds, &nl)) < 0)
        goto out;
    rc = serve_loop(&s, lfds, nl, deadline);
    /* Closed as soon as every rank is served: a later job, or the next call,
     * can bind the port again at once. */
    for (int i = 0; i < nl; i++)
        close(lfds[i]);
    for (int i = 0; i < s.max_conns; i++)
        if (s.conns[i].c.fd >= 0)
            drop(&s, &s.conns[i]);
out:
    amldist__loop_free(s.loop);
    free(s.reply);
    free(s.served);
    free(s.checked);
    free(s.conns);
    free(s.spare);
    return rc;
}
