/*
 * Rank 0's side of the bootstrap: one poll loop over the listening sockets
 * and every open connection, so that a slow or garbage-sending peer holds one
 * slot until its own deadline and never delays the others.  The loop ends
 * when every rank 1 .. world-1 is done with (it received the whole blob, or,
 * in barrier mode, it was told that a rank failed), or at the overall
 * deadline.  In barrier mode a rank that comes before every rank has checked
 * in is told to come back (no connection is held open meanwhile, so a world
 * of any size needs no more descriptors than a plain broadcast).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"

/* A peer gets this long to send its HELLO and take its reply. */
#define CONN_MS 5000
#define MAX_LISTEN 8
#define MAX_CONNS 1024

typedef struct {
    int fd;
    long long deadline;
    unsigned char in[AMLDIST__FRAME_HEADER_LEN + AMLDIST__BS_FAIL_LEN];
    size_t got, need;
    const unsigned char *out; /* the reply, once the HELLO is complete */
    size_t out_len, sent;
    unsigned char refuse[AMLDIST__FRAME_HEADER_LEN + AMLDIST__BS_REFUSE_LEN];
    unsigned type; /* of the request */
    int rank; /* >0: the rank is done with once the reply is sent */
} conn_t;

typedef struct {
    const amldist__bs_params_t *p;
    unsigned char *reply; /* header + blob, shared by all BLOB replies */
    size_t reply_len;
    unsigned char *served; /* served[r]: rank r is done with */
    int nserved;
    unsigned char *checked; /* barrier: checked[r]: rank r has come */
    int nchecked;
    int failed; /* barrier: the first rank that failed, or -1 */
    unsigned char peer[AMLDIST__FRAME_HEADER_LEN + AMLDIST__BS_PEER_LEN];
    conn_t *conns;
    int nconns, max_conns;
} server_t;

static void drop(server_t *s, int i)
{
    close(s->conns[i].fd);
    s->conns[i] = s->conns[--s->nconns];
}

static void refuse(conn_t *c, uint32_t reason, uint32_t value)
{
    amldist__frame_put_header(c->refuse, AMLDIST__BS_REFUSE,
                           AMLDIST__BS_REFUSE_LEN);
    amldist__net_put_u32(c->refuse + AMLDIST__FRAME_HEADER_LEN, reason);
    amldist__net_put_u32(c->refuse + AMLDIST__FRAME_HEADER_LEN + 4, value);
    c->out = c->refuse;
    c->out_len = sizeof c->refuse;
}

/* A valid request of rank r: the blob, or in barrier mode "come back" until
 * every rank has come, and "rank k failed" once one has. */
/* The answer, once rank r has failed with `why`, to every later request. */
static void failed(server_t *s, int r, const unsigned char *why)
{
    amldist__frame_put_header(s->peer, AMLDIST__BS_PEER, AMLDIST__BS_PEER_LEN);
    amldist__net_put_u32(s->peer + AMLDIST__FRAME_HEADER_LEN, (uint32_t)r);
    memcpy(s->peer + AMLDIST__FRAME_HEADER_LEN + 4, why, AMLDIST__BS_WHY_LEN);
    s->peer[sizeof s->peer - 1] = '\0';
    s->failed = r;
}

static void admit(server_t *s, conn_t *c, int r)
{
    if (c->type == AMLDIST__BS_FAIL && s->failed < 0)
        failed(s, r, c->in + AMLDIST__FRAME_HEADER_LEN + AMLDIST__BS_HELLO_LEN);
    if (s->checked && !s->checked[r]) {
        s->checked[r] = 1;
        s->nchecked++;
    }
    if (c->type == AMLDIST__BS_FAIL || (s->failed >= 0 && s->checked)) {
        c->out = s->peer;
        c->out_len = sizeof s->peer;
        c->rank = r;
    } else if (s->checked && s->nchecked < s->p->world - 1) {
        refuse(c, AMLDIST__BS_R_WAIT, (uint32_t)s->nchecked);
    } else {
        c->out = s->reply;
        c->out_len = s->reply_len;
        c->rank = r;
    }
}

/* A whole HELLO arrived: choose the reply.  The token is checked first so a
 * foreign peer learns nothing about this job. */
static void answer(server_t *s, conn_t *c)
{
    const amldist__bs_params_t *p = s->p;
    amldist__bs_hello_t h;
    amldist__bs_get_hello(c->in + AMLDIST__FRAME_HEADER_LEN, &h);
    if (h.token != p->token)
        refuse(c, AMLDIST__BS_R_TOKEN, 0);
    /* The call number before the rest: a rank already at its next call may
     * rightly send another length. */
    else if (h.round > p->round)
        refuse(c, AMLDIST__BS_R_AHEAD, p->round);
    else if (h.round < p->round)
        refuse(c, AMLDIST__BS_R_BEHIND, p->round);
    else if (h.world != (uint32_t)p->world)
        refuse(c, AMLDIST__BS_R_WORLD, (uint32_t)p->world);
    else if (h.rank == 0 || h.rank >= (uint32_t)p->world)
        refuse(c, AMLDIST__BS_R_RANK, (uint32_t)p->world);
    else if (h.length != s->reply_len - AMLDIST__FRAME_HEADER_LEN)
        refuse(c, AMLDIST__BS_R_LENGTH,
               (uint32_t)(s->reply_len - AMLDIST__FRAME_HEADER_LEN));
    else
        admit(s, c, (int)h.rank);
}

static int sending(const conn_t *c)
{
    return c->out != NULL && c->sent < c->out_len;
}

/* The client's ACK arrived (or garbage): only an ACK makes the rank done. */
static void acked(server_t *s, conn_t *c)
{
    unsigned type;
    uint32_t len;
    const char *why;
    if (amldist__bs_get_header(c->in, &type, &len, &why) == 0 &&
        type == AMLDIST__BS_ACK && !s->served[c->rank]) {
        s->served[c->rank] = 1;
        s->nserved++;
    }
}

/* Progress on one connection; returns 1 when it is finished or broken. */
static int step(server_t *s, conn_t *c)
{
    for (;;) {
        ssize_t n;
        if (sending(c))
            n = send(c->fd, c->out + c->sent, c->out_len - c->sent,
                     MSG_NOSIGNAL);
        else
            n = recv(c->fd, c->in + c->got, c->need - c->got, 0);
        if (n < 0)
            return !(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                       ? 1
                       : 0;
        if (n == 0 && !sending(c))
            return 1; /* closed before a whole HELLO, or without an ACK */
        if (sending(c)) {
            c->sent += (size_t)n;
            if (c->sent < c->out_len)
                continue;
            if (c->rank <= 0)
                return 1; /* a refusal: nothing more to hear */
            /* The answer is out; the rank is done once it says it has it. */
            c->got = 0;
            c->need = AMLDIST__FRAME_HEADER_LEN;
            continue;
        }
        c->got += (size_t)n;
        if (c->got < c->need)
            continue;
        if (c->out) {
            acked(s, c);
            return 1;
        }
        if (c->need == AMLDIST__FRAME_HEADER_LEN) {
            unsigned type;
            uint32_t len;
            const char *why;
            /* Garbage, a foreign protocol or an oversized length: drop it
             * without reading further. */
            if (amldist__bs_get_header(c->in, &type, &len, &why) < 0 ||
                (type != AMLDIST__BS_HELLO && type != AMLDIST__BS_FAIL))
                return 1;
            c->type = type;
            c->need += len;
            continue;
        }
        answer(s, c);
    }
}

/* The connection that has waited longest without a whole request, or -1:
 * with every slot taken it makes room for a newcomer, so that idle or slow
 * peers can never keep the real ranks waiting in the backlog. */
static int idlest(const server_t *s)
{
    int best = -1;
    for (int i = 0; i < s->nconns; i++)
        if (!s->conns[i].out &&
            (best < 0 || s->conns[i].deadline < s->conns[best].deadline))
            best = i;
    return best;
}

static void accept_all(server_t *s, int lfd, long long now)
{
    for (;;) {
        int victim = s->nconns < s->max_conns ? -1 : idlest(s);
        if (s->nconns >= s->max_conns && victim < 0)
            return; /* every slot is busy answering: the backlog waits */
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE) &&
            (victim = idlest(s)) >= 0) {
            drop(s, victim);
            victim = -1;
            fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        }
        if (fd < 0)
            return; /* EAGAIN, or out of descriptors with none idle */
        if (victim >= 0)
            drop(s, victim);
        conn_t *c = &s->conns[s->nconns++];
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->need = AMLDIST__FRAME_HEADER_LEN;
        c->deadline = now + CONN_MS;
    }
}

static int timed_out(const server_t *s)
{
    char addr[300], missing[256];
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

static int loop(server_t *s, const int *lfds, int nl, long long deadline)
{
    struct pollfd *pfds = calloc((size_t)(nl + s->max_conns), sizeof *pfds);
    if (!pfds)
        return amldist__fail(AMLDIST_ENOMEM, "rank 0: bootstrap server: out "
                                             "of memory");
    int rc = 0;
    while (s->nserved < s->p->world - 1) {
        long long now = amldist__loop_now_ms(), wake = deadline;
        if (now >= deadline) {
            rc = timed_out(s);
            break;
        }
        for (int i = 0; i < s->nconns;) {
            if (s->conns[i].deadline <= now) {
                drop(s, i);
                continue;
            }
            if (s->conns[i].deadline < wake)
                wake = s->conns[i].deadline;
            i++;
        }
        int n = 0,
            listening = s->nconns < s->max_conns || idlest(s) >= 0;
        for (int i = 0; listening && i < nl; i++)
            pfds[n++] = (struct pollfd){lfds[i], POLLIN, 0};
        for (int i = 0; i < s->nconns; i++)
            pfds[n++] = (struct pollfd){s->conns[i].fd,
                                        sending(&s->conns[i]) ? POLLOUT
                                                              : POLLIN,
                                        0};
        /* With every slot taken, wake now and then so EMFILE or a full table
         * cannot stall the loop past a connection's deadline. */
        long long ms = wake - now;
        if (!listening && ms > 100)
            ms = 100;
        if (poll(pfds, (nfds_t)n, (int)ms) < 0) {
            if (errno == EINTR)
                continue;
            rc = amldist__fail(AMLDIST_ESYS, "rank 0: bootstrap server: poll: "
                                             "%s", strerror(errno));
            break;
        }
        now = amldist__loop_now_ms();
        /* Connections first, from the end, so drop() never moves an entry
         * that is still to be visited; pfds[] after the listeners mirrors
         * conns[] as it was when poll() started. */
        int base = listening ? nl : 0, polled = s->nconns;
        for (int i = polled - 1; i >= 0; i--) {
            if (pfds[base + i].revents && step(s, &s->conns[i]))
                drop(s, i);
        }
        for (int i = 0; listening && i < nl; i++)
            if (pfds[i].revents & POLLIN)
                accept_all(s, lfds[i], now);
    }
    free(pfds);
    if (rc == 0 && s->failed > 0)
        rc = amldist__fail(AMLDIST_EPEER, "rank 0: rank %d failed: %s",
                           s->failed,
                           (const char *)s->peer + AMLDIST__FRAME_HEADER_LEN + 4);
    return rc;
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
    long long deadline = amldist__loop_now_ms() + p->timeout_ms;
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
    s.failed = -1;
    if (p->failed) {
        unsigned char why[AMLDIST__BS_WHY_LEN];
        memset(why, 0, sizeof why);
        memcpy(why, p->why, strnlen(p->why, sizeof why - 1));
        failed(&s, 0, why);
    }
    if (p->barrier)
        s.checked = calloc((size_t)p->world, 1);
    if (!s.reply || !s.served || !s.conns || (p->barrier && !s.checked)) {
        rc = amldist__fail(AMLDIST_ENOMEM, "rank 0: bootstrap server: out of "
                                           "memory for %d ranks", p->world);
        goto out;
    }
    amldist__frame_put_header(s.reply, AMLDIST__BS_BLOB, (uint32_t)len);
    memcpy(s.reply + AMLDIST__FRAME_HEADER_LEN, blob, len);
    if ((rc = listen_all(p, lfds, &nl)) < 0)
        goto out;
    rc = loop(&s, lfds, nl, deadline);
    /* Closed as soon as every rank is served: a later job, or the next call,
     * can bind the port again at once. */
    for (int i = 0; i < nl; i++)
        close(lfds[i]);
    while (s.nconns > 0)
        drop(&s, s.nconns - 1);
out:
    free(s.reply);
    free(s.served);
    free(s.checked);
    free(s.conns);
    return rc;
}
