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
#include "rdzv/tcp/tcp.h"

/* How long one address may take to accept a connection. */
#define CONNECT_MS 2000

/* The caller's JOIN, with a master port candidate of this moment. */
static void send_join(amldist__rz_tcp_t *t)
{
    unsigned char buf[AMLDIST__RZ_JOIN_MAX];
    amldist__rz_join_t j = t->me;
    j.port = (uint32_t)amldist__rz_free_port();
    size_t len = amldist__rz_put_join(buf, &j);
    if (amldist__conn_send(&t->c, AMLDIST__RZ_JOIN, buf, len) < 0)
        amldist__rz_host_lost(t, "cannot send", 1);
}

/* Connected to the host: the connection is the client's, JOIN first. */
static void connected(amldist__rz_tcp_t *t, int fd)
{
    if (amldist__rz_client_open(t, fd) < 0) { /* TCP_NODELAY: net/conn.c */
        amldist__rz_host_lost(t, "out of memory", 0);
        return;
    }
    pthread_mutex_lock(&t->s->mu);
    t->s->state = C_JOINING;
    pthread_mutex_unlock(&t->s->mu);
    send_join(t);
}

/* No address answered: try again after a pause, until the join deadline. */
static void no_answer(amldist__rz_tcp_t *t)
{
    if (amldist__now_ms() >= t->join_deadline) {
        char why[200];
        snprintf(why, sizeof why, "no host answered within %.0f s (last: %s)",
                 t->cfg->join_timeout_ms / 1000.0, strerror(t->try_err));
        pthread_mutex_lock(&t->s->mu);
        t->s->err = AMLDIST_ETIMEDOUT;
        snprintf(t->s->errmsg, sizeof t->s->errmsg, "rendezvous at %s: %s",
                 t->endpoint, why);
        amldist__rz_set_over(t->s, AMLDIST_RDZV_STATUS_LOST, t->s->errmsg);
        pthread_mutex_unlock(&t->s->mu);
        return;
    }
    t->next_try = amldist__now_ms() + t->backoff_ms;
    if (t->backoff_ms < 200)
        t->backoff_ms *= 2;
}

static void on_connecting(void *arg, int fd, short revents);

/* Connect to `ai` or the addresses after it, without waiting: a connect in
 * progress is watched (POLLOUT) under its own deadline, so that the host
 * this thread may also run keeps serving meanwhile. */
static void connect_from(amldist__rz_tcp_t *t, const struct addrinfo *ai)
{
    for (; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
                                           SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            t->try_err = errno;
            continue;
        }
        int e = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
        if (t->host && (e == 0 || e == EINPROGRESS)) {
            /* Its own host may accept it before its JOIN is sent. */
            struct sockaddr_storage local;
            socklen_t len = sizeof local;
            if (getsockname(fd, (struct sockaddr *)&local, &len) == 0)
                amldist__rz_host_own(t->host, (struct sockaddr *)&local, len);
        }
        if (e == 0) {
            connected(t, fd);
            return;
        }
        if (e == EINPROGRESS &&
            amldist__loop_watch(t->loop, fd, POLLOUT, on_connecting, t) == 0) {
            long long dl = amldist__now_ms() + CONNECT_MS;
            t->try_fd = fd;
            t->try_ai = ai;
            t->try_deadline = dl < t->join_deadline ? dl : t->join_deadline;
            return;
        }
        t->try_err = e == EINPROGRESS ? errno : e;
        close(fd);
    }
    no_answer(t);
}

/* The address being tried failed (err): on to the next. */
static void connect_failed(amldist__rz_tcp_t *t, int err)
{
    amldist__loop_unwatch(t->loop, t->try_fd);
    close(t->try_fd);
    t->try_fd = -1;
    t->try_err = err;
    connect_from(t, t->try_ai->ai_next);
}

static void on_connecting(void *arg, int fd, short revents)
{
    amldist__rz_tcp_t *t = arg;
    int err = 0;
    socklen_t len = sizeof err;
    (void)revents;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err) {
        connect_failed(t, err);
        return;
    }
    amldist__loop_unwatch(t->loop, fd);
    t->try_fd = -1;
    connected(t, fd);
}

/* No host answers yet: a line every AMLDIST__RZ_SAY_MS, so that a node
 * that came first does not wait in silence (the host says the rest once
 * this agent is in: host_sm_form.c). */
static void say_no_host(amldist__rz_tcp_t *t, long long now)
{
    long long start = t->join_deadline - t->cfg->join_timeout_ms;
    long long last = t->said_at ? t->said_at : start;
    if (now - last < AMLDIST__RZ_SAY_MS)
        return;
    t->said_at = now;
    char line[600];
    int n = snprintf(line, sizeof line, "waiting for the rendezvous host at "
                     "%s (%s), %lld s of %.0f s (join timeout)", t->endpoint,
                     strerror(t->try_err ? t->try_err : ECONNREFUSED),
                     (now - start) / 1000, t->cfg->join_timeout_ms / 1000.0);
    if (n > 0)
        amldist__rz_note_wait(t->s, (const unsigned char *)line,
                              (uint32_t)((size_t)n < sizeof line
                                             ? (size_t)n : sizeof line - 1));
}

/* Connect (the host may not listen yet: retry with backoff until the join
 * deadline), each address in turn, each for at most CONNECT_MS: an agent
 * that hosts connects to itself at once. */
void amldist__rz_try_connect(amldist__rz_tcp_t *t)
{
    long long now = amldist__now_ms();
    say_no_host(t, now);
    if (t->try_fd >= 0) {
        if (now >= t->try_deadline)
            connect_failed(t, ETIMEDOUT);
        return;
    }
    if (now < t->next_try)
        return;
    /* The host may have gone before the round formed: the port is free
     * again, and an agent on the endpoint's machine takes it over. */
    if (!t->host)
        amldist__rz_maybe_host(t);
    t->try_err = ECONNREFUSED;
    connect_from(t, t->ai);
}

/* The connect in progress, if any, is given up (the handle closes). */
void amldist__rz_connect_abort(amldist__rz_tcp_t *t)
{
    if (t->try_fd < 0)
        return;
    amldist__loop_unwatch(t->loop, t->try_fd);
    close(t->try_fd);
    t->try_fd = -1;
}
