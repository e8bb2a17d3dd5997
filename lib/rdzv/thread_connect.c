/*
 * The agent's connection to the host, opened without blocking the thread
 * (a host this thread also runs keeps serving meanwhile): each address in
 * turn, each for at most CONNECT_MS, again after a pause until the join
 * deadline; once connected, the JOIN.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/loop.h"
#include "rdzv/handle.h"

/* How long one address may take to accept a connection. */
#define CONNECT_MS 2000

static void send_join(amldist_rdzv_t *r)
{
    unsigned char buf[AMLDIST__RZ_JOIN_MAX];
    amldist__rz_join_t j = {
        .token = r->cfg.token, .agent = r->agent, .run = r->cfg.run,
        .round = 0, .nproc = (uint32_t)r->nproc,
        .order = r->order < 0 ? AMLDIST__RZ_NONE : (uint32_t)r->order,
        .min = (uint32_t)r->cfg.min, .max = (uint32_t)r->cfg.max,
        .max_restarts = (uint32_t)r->cfg.max_restarts,
        .port = (uint32_t)amldist__rz_free_port(),
        .keepalive_ms = (uint32_t)r->cfg.keepalive_ms,
        .keepalive_misses = (uint32_t)r->cfg.keepalive_misses,
        .last_call_ms = (uint32_t)r->cfg.last_call_ms,
        .join_timeout_ms = (uint32_t)r->cfg.join_timeout_ms,
        .machine = r->machine,
    };
    amldist__strlcpy(j.local_addr, r->local_addr, sizeof j.local_addr);
    size_t len = amldist__rz_put_join(buf, &j);
    if (amldist__conn_send(&r->c, AMLDIST__RZ_JOIN, buf, len) < 0)
        amldist__rz_host_lost(r, "cannot send", 1);
}

/* Connected to the host: the connection is the client's, JOIN first. */
static void connected(amldist_rdzv_t *r, int fd)
{
    if (amldist__rz_client_open(r, fd) < 0) { /* TCP_NODELAY: net/conn.c */
        amldist__rz_host_lost(r, "out of memory", 0);
        return;
    }
    pthread_mutex_lock(&r->mu);
    r->sh.state = C_JOINING;
    pthread_mutex_unlock(&r->mu);
    send_join(r);
}

/* No address answered: try again after a pause, until the join deadline. */
static void no_answer(amldist_rdzv_t *r)
{
    if (amldist__now_ms() >= r->join_deadline) {
        char why[200];
        snprintf(why, sizeof why, "no host answered within %.0f s (last: %s)",
                 r->cfg.join_timeout_ms / 1000.0, strerror(r->try_err));
        pthread_mutex_lock(&r->mu);
        r->sh.err = AMLDIST_ETIMEDOUT;
        snprintf(r->sh.errmsg, sizeof r->sh.errmsg, "rendezvous at %s: %s",
                 r->endpoint, why);
        amldist__rz_set_over(r, AMLDIST_RDZV_STATUS_LOST, r->sh.errmsg);
        pthread_mutex_unlock(&r->mu);
        return;
    }
    r->next_try = amldist__now_ms() + r->backoff_ms;
    if (r->backoff_ms < 200)
        r->backoff_ms *= 2;
}

static void on_connecting(void *arg, int fd, short revents);

/* Connect to `ai` or the addresses after it, without waiting: a connect in
 * progress is watched (POLLOUT) under its own deadline, so that the host
 * this thread may also run keeps serving meanwhile. */
static void connect_from(amldist_rdzv_t *r, const struct addrinfo *ai)
{
    for (; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
                                           SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            r->try_err = errno;
            continue;
        }
        int e = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
        if (r->host && (e == 0 || e == EINPROGRESS)) {
            /* Its own host may accept it before its JOIN is sent. */
            struct sockaddr_storage local;
            socklen_t len = sizeof local;
            if (getsockname(fd, (struct sockaddr *)&local, &len) == 0)
                amldist__rz_host_own(r->host, (struct sockaddr *)&local, len);
        }
        if (e == 0) {
            connected(r, fd);
            return;
        }
        if (e == EINPROGRESS &&
            amldist__loop_watch(r->loop, fd, POLLOUT, on_connecting, r) == 0) {
            long long dl = amldist__now_ms() + CONNECT_MS;
            r->try_fd = fd;
            r->try_ai = ai;
            r->try_deadline = dl < r->join_deadline ? dl : r->join_deadline;
            return;
        }
        r->try_err = e == EINPROGRESS ? errno : e;
        close(fd);
    }
    no_answer(r);
}

/* The address being tried failed (err): on to the next. */
static void connect_failed(amldist_rdzv_t *r, int err)
{
    amldist__loop_unwatch(r->loop, r->try_fd);
    close(r->try_fd);
    r->try_fd = -1;
    r->try_err = err;
    connect_from(r, r->try_ai->ai_next);
}

static void on_connecting(void *arg, int fd, short revents)
{
    amldist_rdzv_t *r = arg;
    int err = 0;
    socklen_t len = sizeof err;
    (void)revents;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err) {
        connect_failed(r, err);
        return;
    }
    amldist__loop_unwatch(r->loop, fd);
    r->try_fd = -1;
    connected(r, fd);
}

/* Connect (the host may not listen yet: retry with backoff until the join
 * deadline), each address in turn, each for at most CONNECT_MS: an agent
 * that hosts connects to itself at once. */
void amldist__rz_try_connect(amldist_rdzv_t *r)
{
    long long now = amldist__now_ms();
    if (r->try_fd >= 0) {
        if (now >= r->try_deadline)
            connect_failed(r, ETIMEDOUT);
        return;
    }
    if (now < r->next_try)
        return;
    /* The host may have gone before the round formed: the port is free
     * again, and an agent on the endpoint's machine takes it over. */
    if (!r->host)
        amldist__rz_maybe_host(r);
    r->try_err = ECONNREFUSED;
    connect_from(r, r->ai);
}

/* The connect in progress, if any, is given up (the handle closes). */
void amldist__rz_connect_abort(amldist_rdzv_t *r)
{
    if (r->try_fd < 0)
        return;
    amldist__loop_unwatch(r->loop, r->try_fd);
    close(r->try_fd);
    r->try_fd = -1;
}
