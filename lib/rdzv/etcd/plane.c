/*
 * Issue 20's plane on this backend, every agent's side (etcd.h): the
 * plane stays TCP to the decider (a gather reaches 64 MiB, past etcd's
 * request limit of 1.5 MiB), whose agent publishes its plane's address as
 * P/b/plane under its lease (plane_host.c).  This agent connects there
 * (without blocking its thread: the lease and the watches go on), proves
 * the job's secret as a c10d connection does (net/chan.h: the channel,
 * when the job has one), says which agent it is (its JOIN, the decider
 * checks its token and run), and then speaks the frames of
 * rdzv_internal.h through plane_link.c, every backend's agent side: the
 * view, asks, answers and marks out, the decider's TIMEA, QUERY, RESULT
 * and MARKS in.  The decider moved (P/b/plane gone or put anew): the
 * connection closes, a gather in flight ends refused with the answers it
 * had, asks made meanwhile are refused at once, and the next decider's
 * address is connected to as soon as it is published.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/loop.h"
#include "rdzv/etcd/etcd.h"

/* A connection that failed or closed is tried again after this, while
 * its address is published. */
#define RETRY_MS 500
/* How long a connect may take. */
#define CONNECT_MS 2000

static void on_link(void *arg, int fd, short revents);

int amldist__etcd_plane_init(amldist__rz_etcd_t *t)
{
    struct amldist__etcd_plane *p = &t->pl;
    p->c.fd = -1;
    p->link.s = t->s;
    p->link.cfg = t->cfg;
    p->link.c = &p->c;
    return (p->loop = amldist__loop_new_epoll()) ? 0 : -1;
}

/* The connection (or the connect in progress) closes: the gathers in
 * flight end refused (plane_link.c), tried again later. */
static void close_link(amldist__rz_etcd_t *t, const char *why)
{
    struct amldist__etcd_plane *p = &t->pl;
    if (p->connecting) {
        amldist__loop_unwatch(p->loop, p->connecting);
        close(p->connecting);
        p->connecting = 0;
    }
    if (p->c.fd >= 0)
        amldist__loop_unwatch(p->loop, p->c.fd);
    amldist__conn_close(&p->c);
    amldist__rz_link_drop(&p->link);
    p->next_try = amldist__now_ms() + RETRY_MS;
    if (why)
        snprintf(p->why, sizeof p->why, "%s", why);
}

void amldist__etcd_plane_key(amldist__rz_etcd_t *t, int del,
                             const unsigned char *v, size_t n,
                             long long mod_rev)
{
    struct amldist__etcd_plane *p = &t->pl;
    char addr[sizeof p->addr] = "";
    int port = 0;
    long long rev = 0;
    /* port u32 | the decider key's create revision u64 | address */
    if (!del && n > 12 && n - 12 < sizeof addr) {
        port = (int)amldist__net_get_u32(v);
        rev = (long long)amldist__rz_get_u64(v + 4);
        memcpy(addr, v + 12, n - 12);
        addr[n - 12] = '\0';
    }
    (void)mod_rev;
    if (port == p->port && rev == p->rev && strcmp(addr, p->addr) == 0)
        return;
    if (p->c.fd >= 0 || p->connecting)
        close_link(t, del ? "the decider went" : "the decider moved");
    snprintf(p->addr, sizeof p->addr, "%s", addr);
    p->port = port;
    p->rev = rev;
    p->next_try = 0; /* at once */
}

/* A frame of the decider's plane. */
static int link_frame(void *arg, unsigned type, const unsigned char *b,
                      uint32_t len)
{
    amldist__rz_etcd_t *t = arg;
    switch (type) {
    case AMLDIST__RZ_TIMEA:
    case AMLDIST__RZ_QUERY:
    case AMLDIST__RZ_RESULT:
    case AMLDIST__RZ_MARKS:
        amldist__rz_link_frame(&t->pl.link, type, b, len);
        return 0;
    case AMLDIST__RZ_REFUSE:
        close_link(t, "the decider's plane refused this agent");
        return 1;
    }
    return 0; /* BEAT, and what the plane does not use */
}

/* Connected: the channel (with the job's secret), then this agent's
 * JOIN: which agent it is, its token and run checked there. */
static void connected(amldist__rz_etcd_t *t, int fd)
{
    struct amldist__etcd_plane *p = &t->pl;
    unsigned char buf[AMLDIST__RZ_JOIN_MAX];
    p->connecting = 0;
    amldist__loop_unwatch(p->loop, fd);
    if (amldist__rz_conn_open(&p->c, fd, t->cfg, 0) < 0) {
        close_link(t, "out of memory");
        return;
    }
    size_t len = amldist__rz_put_join(buf, &t->me);
    if (amldist__conn_send(&p->c, AMLDIST__RZ_JOIN, buf, len) < 0 ||
        amldist__loop_watch(p->loop, p->c.fd, POLLIN, on_link, t) < 0) {
        close_link(t, "it stopped reading");
        return;
    }
    p->why[0] = '\0';
}

static void on_connect(void *arg, int fd, short revents)
{
    amldist__rz_etcd_t *t = arg;
    int err = 0;
    socklen_t sl = sizeof err;
    (void)revents;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
        err = errno;
    if (err) {
        char why[200];
        snprintf(why, sizeof why, "%s:%d: %s", t->pl.addr, t->pl.port,
                 strerror(err));
        close_link(t, why);
        return;
    }
    connected(t, fd);
}

static void on_link(void *arg, int fd, short revents)
{
    amldist__rz_etcd_t *t = arg;
    struct amldist__etcd_plane *p = &t->pl;
    const char *why = "the connection failed";
    (void)fd;
    if ((revents & POLLOUT) && amldist__conn_flush(&p->c) < 0) {
        close_link(t, why);
        return;
    }
    if (!(revents & (POLLIN | POLLHUP | POLLERR)))
        return;
    int rc = amldist__conn_read(&p->c, link_frame, t, &why);
    if (rc == AMLDIST__CONN_EAUTH)
        close_link(t, "the decider's plane did not prove the job's secret");
    else if (rc < 0)
        close_link(t, why);
}

/* A connect without blocking to the published address. */
static void try_connect(amldist__rz_etcd_t *t)
{
    struct amldist__etcd_plane *p = &t->pl;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV},
                    *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", p->port);
    p->next_try = amldist__now_ms() + CONNECT_MS;
    if (getaddrinfo(p->addr, port, &hints, &ai) != 0 || !ai) {
        snprintf(p->why, sizeof p->why, "%s: not an address", p->addr);
        return;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
    if (fd < 0) {
        freeaddrinfo(ai);
        return;
    }
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc < 0 && errno != EINPROGRESS) {
        snprintf(p->why, sizeof p->why, "%s:%d: %s", p->addr, p->port,
                 strerror(errno));
        close(fd);
        p->next_try = amldist__now_ms() + RETRY_MS;
        return;
    }
    /* c.fd stays -1 until connected: the plane has no link yet
     * (connecting: the socket, 0 none). */
    if (amldist__loop_watch(p->loop, fd, POLLOUT, on_connect, t) < 0) {
        close(fd);
        return;
    }
    p->connecting = fd;
}

void amldist__etcd_plane_run(amldist__rz_etcd_t *t)
{
    struct amldist__etcd_plane *p = &t->pl;
    long long now = amldist__now_ms();
    /* This agent's own decider: the same clock, the hang's gather. */
    p->link.own = t->d != NULL;
    amldist__loop_once(p->loop, 0); /* what the thread's wait saw ready */
    if (p->connecting && now >= p->next_try) {
        char why[200];
        snprintf(why, sizeof why, "%s:%d: no answer within %d ms", p->addr,
                 p->port, CONNECT_MS);
        close_link(t, why);
    }
    if (p->c.fd < 0 && !p->connecting && p->addr[0] && now >= p->next_try)
        try_connect(t);
    if (amldist__rz_link_io(&p->link) < 0)
        close_link(t, "it stopped reading");
    if (p->c.fd >= 0)
        amldist__loop_events(p->loop, p->c.fd, (short)(POLLIN |
                             (amldist__conn_pending(&p->c) ? POLLOUT : 0)));
}

int amldist__etcd_plane_fd(const amldist__rz_etcd_t *t)
{
    return amldist__loop_fd(t->pl.loop);
}

long long amldist__etcd_plane_wake(const amldist__rz_etcd_t *t)
{
    const struct amldist__etcd_plane *p = &t->pl;
    long long w = amldist__rz_link_wake(&p->link);
    if (p->addr[0] && p->c.fd < 0 && (w < 0 || p->next_try < w))
        w = p->next_try;
    return w;
}

void amldist__etcd_plane_free(amldist__rz_etcd_t *t)
{
    struct amldist__etcd_plane *p = &t->pl;
    if (p->connecting)
        close(p->connecting);
    amldist__conn_close(&p->c);
    amldist__rz_link_free(&p->link);
    amldist__loop_free(p->loop);
    p->loop = NULL;
}
