/*
 * The agent's connection to the host, once connected (connect.c): opened
 * into the thread's loop, and its frames read and handed to frames.c; an
 * endpoint that does not prove the job's secret is refused here.  Its end
 * is link.c's.
 */
#include <poll.h>
#include <stddef.h>
#include <stdio.h>

#include "net/loop.h"
#include "rdzv/tcp/tcp.h"

/* The endpoint did not prove the job's secret (an impostor that bound it
 * first, a replay of a recorded host, another job's host), or one side has
 * a secret and the other none: refused, never retried; nothing was sent
 * to it but a random nonce. */
static void not_proven(amldist__rz_tcp_t *t, const char *why)
{
    amldist__rz_sink_t *s = t->s;
    pthread_mutex_lock(&s->mu);
    int joining = s->state < C_RUNNING && !s->err;
    if (joining) {
        s->err = AMLDIST_EDENIED;
        if (t->cfg->secure)
            snprintf(s->errmsg, sizeof s->errmsg,
                     "rendezvous: the endpoint %.200s did not prove the "
                     "job's secret (the job token from %.150s): another "
                     "job, an impostor, or a node without the secret holds "
                     "it (%.80s)",
                     t->endpoint, t->cfg->secret_source, why);
        else
            snprintf(s->errmsg, sizeof s->errmsg,
                     "rendezvous: the endpoint %s speaks with a job token "
                     "secret and this node has none: set the same "
                     "AMLDIST_JOB_TOKEN on every node", t->endpoint);
        amldist__rz_set_over(s, AMLDIST_RDZV_STATUS_LOST, s->errmsg);
    }
    pthread_mutex_unlock(&s->mu);
    if (joining)
        amldist__rz_client_close(t);
    else
        amldist__rz_host_lost(t, why, 0);
}

/* amldist__conn_read() stops by itself once amldist__rz_on_frame() closed
 * t->c. */
static int client_frame(void *t, unsigned type, const unsigned char *p,
                        uint32_t len)
{
    ((amldist__rz_tcp_t *)t)->heard = 1;
    amldist__rz_on_frame(t, type, p, len);
    return 0;
}

/* What an endpoint that never sent a frame is, in words: another program
 * on the port (a web server, a stale service), not a network fault. */
void amldist__rz_not_a_host(const char *what, char *buf, size_t size)
{
    snprintf(buf, size, "the endpoint %.250s: it is not an amlrun "
             "rendezvous host (another program listens on that port?)", what);
}

static void client_io(amldist__rz_tcp_t *t, short revents)
{
    if ((revents & POLLOUT) && amldist__conn_flush(&t->c) < 0) {
        amldist__rz_host_lost(t, "the connection failed", 1);
        return;
    }
    if (!(revents & (POLLIN | POLLHUP | POLLERR)))
        return;
    const char *why;
    int rc = amldist__conn_read(&t->c, client_frame, t, &why);
    if (rc == AMLDIST__CONN_EAUTH && (t->heard || t->cfg->secure)) {
        not_proven(t, why);
    } else if (rc < 0 && !t->heard) {
        char what[250], text[400];
        snprintf(what, sizeof what, rc == AMLDIST__CONN_ECLOSED
                 ? "accepted the connection and closed it before any frame"
                 : "answered in another protocol (%.150s)", why);
        amldist__rz_not_a_host(what, text, sizeof text);
        amldist__rz_host_lost(t, text, rc == AMLDIST__CONN_ECLOSED);
    } else if (rc < 0) {
        amldist__rz_host_lost(t, why, rc == AMLDIST__CONN_ECLOSED);
    }
}

static void on_client(void *arg, int fd, short revents)
{
    (void)fd;
    client_io(arg, revents);
}

int amldist__rz_client_open(amldist__rz_tcp_t *t, int fd)
{
    if (amldist__rz_conn_open(&t->c, fd, t->cfg, 0) < 0)
        return -1;
    t->heard = 0;
    if (amldist__loop_watch(t->loop, fd, POLLIN, on_client, t) < 0) {
        amldist__conn_close(&t->c);
        return -1;
    }
    return 0;
}
