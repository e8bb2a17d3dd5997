/*
 * The TCP backend's table (see tcp.h and backend.h): the endpoint's form,
 * joining (the endpoint resolved, the host made when this agent can host
 * it, the thread started), the caller's word to the thread (the wake-up
 * pipe), and leaving (the thread told, waited for, its state freed).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/loop.h"
#include "rdzv/tcp/tcp.h"

static int tcp_check(const char *endpoint, int max_nodes)
{
    char host[AMLDIST__HOST_MAX];
    int port;
    if (amldist__rz_endpoint_parse(endpoint, host, sizeof host, &port) < 0 ||
        port < 0)
        return amldist__fail(AMLDIST_EINVAL, "rendezvous endpoint '%s': want "
                             "HOST:PORT", endpoint);
    if (port == 0 && max_nodes > 1)
        /* torchrun 2.x's "pick a free port" (hosting.c): the other nodes
         * could never learn it. */
        return amldist__fail(AMLDIST_EINVAL, "rendezvous endpoint '%s': port "
                             "0 (a free port, picked here) is for one node "
                             "only, and up to %d may join: give the port the "
                             "nodes meet at", endpoint, max_nodes);
    return 0;
}

/* Everything but the thread, which has ended or never started. */
static void tcp_free(amldist__rz_tcp_t *t)
{
    if (t->wake[0] >= 0)
        close(t->wake[0]);
    if (t->wake[1] >= 0)
        close(t->wake[1]);
    amldist__rz_plane_free(t);
    if (t->try_fd >= 0)
        close(t->try_fd);
    amldist__conn_close(&t->c);
    amldist__rz_host_free(t->host);
    amldist__loop_free(t->loop);
    if (t->ai)
        freeaddrinfo(t->ai);
    free(t);
}

/* The endpoint resolved, the wake-up pipe, the loop, and the host when
 * this agent can host the endpoint: 0, or an error (message set). */
static int tcp_prepare(amldist__rz_tcp_t *t)
{
    char err[300];
    if (amldist__net_resolve(t->ep_host, t->ep_port, &t->ai, err,
                             sizeof err) < 0)
        return amldist__fail(AMLDIST_ESYS, "rendezvous endpoint %s: %s",
                             t->endpoint, err);
    if (pipe2(t->wake, O_CLOEXEC | O_NONBLOCK) < 0)
        return amldist__fail(AMLDIST_ESYS, "rendezvous: %s", strerror(errno));
    if (!(t->loop = amldist__loop_new_epoll()))
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    return amldist__rz_maybe_host(t);
}

static int tcp_open(const char *endpoint, const amldist__rz_cfg_t *cfg,
                    const amldist__rz_join_t *me, amldist__rz_sink_t *s,
                    void **be)
{
    amldist__rz_tcp_t *t = calloc(1, sizeof *t);
    if (!t)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    t->wake[0] = t->wake[1] = t->try_fd = t->c.fd = -1;
    t->cfg = cfg;
    t->me = *me;
    t->s = s;
    amldist__strlcpy(t->endpoint, endpoint, sizeof t->endpoint);
    amldist__rz_endpoint_parse(endpoint, t->ep_host, sizeof t->ep_host,
                               &t->ep_port); /* tcp_check()ed */
    int rc = tcp_prepare(t);
    if (rc < 0) {
        tcp_free(t);
        return rc;
    }
    t->join_deadline = amldist__now_ms() + cfg->join_timeout_ms;
    t->backoff_ms = 1;
    t->last_beat = amldist__now_ms();
    /* The thread takes no signal: the caller's signalfd must see them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&t->thread, NULL, amldist__rz_thread_main, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
        rc = amldist__fail(AMLDIST_ESYS, "rendezvous: thread: %s", strerror(e));
        tcp_free(t);
        return rc;
    }
    *be = t;
    return 0;
}

static void tcp_send(void *be)
{
    amldist__rz_tcp_t *t = be;
    char b = 1;
    while (write(t->wake[1], &b, 1) < 0 && errno == EINTR) {
    }
}

static int tcp_hosts(const void *be)
{
    const amldist__rz_tcp_t *t = be;
    return t->host != NULL;
}

static void tcp_close(void *be)
{
    amldist__rz_tcp_t *t = be;
    pthread_mutex_lock(&t->s->mu);
    t->closing = 1;
    pthread_mutex_unlock(&t->s->mu);
    tcp_send(t);
    pthread_join(t->thread, NULL);
    tcp_free(t);
}

const struct amldist__rz_backend_ops amldist__rz_tcp_backend = {
    .scheme = "tcp",
    .check = tcp_check,
    .open = tcp_open,
    .send = tcp_send,
    .hosts = tcp_hosts,
    .close = tcp_close,
};
