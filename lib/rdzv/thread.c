/*
 * The network thread of an agent's handle (see handle.h): its connection
 * to the host (connect, JOIN, heartbeats, the host's frames turned into
 * the state the caller reads), and, when this process hosts the endpoint,
 * the host's service (host.c) on the same poll loop, so that heartbeats and
 * the host's duties go on while the caller starts and supervises workers.
 *
 * This file is the thread's loop: its timers and heartbeats, what the
 * caller queued, and the connection's I/O until the host is lost.
 * Connecting is thread_connect.c's, the host's frames thread_frames.c's,
 * and whether to host the endpoint hosting.c's.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/loop.h"
#include "rdzv/handle.h"

/* Something for the caller: a stop, a new round, the end (under mu). */
void amldist__rz_signal_caller(amldist_rdzv_t *r)
{
    uint64_t one = 1;
    while (write(r->efd, &one, sizeof one) < 0 && errno == EINTR) {
    }
    pthread_cond_broadcast(&r->cv);
}

static void on_client(void *arg, int fd, short revents);

/* The connection to the host opens and closes through these two: its
 * descriptor is in the loop exactly while it is open. */
int amldist__rz_client_open(amldist_rdzv_t *r, int fd)
{
    if (amldist__rz_conn_open(&r->c, fd, &r->cfg, 0) < 0)
        return -1;
    if (amldist__loop_watch(r->loop, fd, POLLIN, on_client, r) < 0) {
        amldist__conn_close(&r->c);
        return -1;
    }
    return 0;
}

static void client_close(amldist_rdzv_t *r)
{
    if (r->c.fd >= 0)
        amldist__loop_unwatch(r->loop, r->c.fd);
    amldist__conn_close(&r->c);
}

/* The job is over for this agent (FINISH, a refusal, or the host lost). */
void amldist__rz_set_over(amldist_rdzv_t *r, int status, const char *failure)
{
    int was = r->sh.state;
    r->sh.state = C_OVER;
    r->sh.status = status;
    free(r->sh.failure);
    r->sh.failure = strdup(failure ? failure : "");
    if (was == C_RUNNING)
        amldist__strlcpy(r->sh.stop_why, r->sh.failure, sizeof r->sh.stop_why);
    amldist__rz_signal_caller(r);
}

/* The connection to the host is gone: after the first round the job is
 * over on this node.  Before it, a connection that merely closed is tried
 * again until the join deadline (a host that was out of descriptors, or
 * one that died while the round formed: an agent on its machine then
 * takes over); anything else is a join error. */
void amldist__rz_host_lost(amldist_rdzv_t *r, const char *why, int closed)
{
    client_close(r);
    pthread_mutex_lock(&r->mu);
    if (r->sh.state < C_RUNNING && !r->sh.err && closed &&
        amldist__now_ms() < r->join_deadline) {
        r->sh.state = C_CONNECTING;
        r->next_try = amldist__now_ms() + r->backoff_ms;
    } else if (r->sh.state < C_RUNNING && !r->sh.err) {
        r->sh.err = AMLDIST_ESYS;
        snprintf(r->sh.errmsg, sizeof r->sh.errmsg, "rendezvous at %s: %s",
                 r->endpoint, why);
        amldist__rz_set_over(r, AMLDIST_RDZV_STATUS_LOST, r->sh.errmsg);
    } else if (r->sh.state != C_OVER) {
        char text[700];
        snprintf(text, sizeof text, "the rendezvous host at %s was lost: %s",
                 r->endpoint, why);
        amldist__rz_set_over(r, AMLDIST_RDZV_STATUS_LOST, text);
    }
    pthread_mutex_unlock(&r->mu);
}

/* The endpoint did not prove the job's secret (an impostor that bound it
 * first, a replay of a recorded host, another job's host), or one side has
 * a secret and the other none: refused, never retried; nothing was sent
 * to it but a random nonce. */
static void not_proven(amldist_rdzv_t *r, const char *why)
{
    pthread_mutex_lock(&r->mu);
    int joining = r->sh.state < C_RUNNING && !r->sh.err;
    if (joining) {
        r->sh.err = AMLDIST_EDENIED;
        if (r->cfg.secure)
            snprintf(r->sh.errmsg, sizeof r->sh.errmsg,
                     "rendezvous: the endpoint %.200s did not prove the "
                     "job's secret (the job token from %.150s): another "
                     "job, an impostor, or a node without the secret holds "
                     "it (%.80s)",
                     r->endpoint, r->cfg.secret_source, why);
        else
            snprintf(r->sh.errmsg, sizeof r->sh.errmsg,
                     "rendezvous: the endpoint %s speaks with a job token "
                     "secret and this node has none: set the same "
                     "AMLDIST_JOB_TOKEN on every node", r->endpoint);
        amldist__rz_set_over(r, AMLDIST_RDZV_STATUS_LOST, r->sh.errmsg);
    }
    pthread_mutex_unlock(&r->mu);
    if (joining)
        client_close(r);
    else
        amldist__rz_host_lost(r, why, 0);
}

/* What the caller queued: a FAIL, a DONE. */
static void send_queued(amldist_rdzv_t *r)
{
    unsigned char *fail = NULL, done[12];
    size_t fail_len = 0;
    int have_done = 0;
    pthread_mutex_lock(&r->mu);
    if (r->sh.fail) {
        fail = r->sh.fail;
        fail_len = r->sh.fail_len;
        r->sh.fail = NULL;
    }
    if (r->sh.done) {
        r->sh.done = 0;
        have_done = 1;
        amldist__net_put_u32(done, (uint32_t)r->sh.next.round);
        amldist__net_put_u32(done + 4, (uint32_t)r->sh.done_status);
        amldist__net_put_u32(done + 8, (uint32_t)r->sh.done_port);
    }
    pthread_mutex_unlock(&r->mu);
    if (r->c.fd < 0) {
        free(fail);
        return;
    }
    int bad = fail && amldist__conn_send(&r->c, AMLDIST__RZ_FAIL, fail,
                                       fail_len) < 0;
    free(fail);
    if (!bad && have_done)
        bad = amldist__conn_send(&r->c, AMLDIST__RZ_DONE, done, sizeof done) < 0;
    if (bad)
        amldist__rz_host_lost(r, "cannot send to it", 1);
}

/* amldist__conn_read() stops by itself once amldist__rz_on_frame() closed
 * r->c. */
static int client_frame(void *r, unsigned type, const unsigned char *p,
                        uint32_t len)
{
    amldist__rz_on_frame(r, type, p, len);
    return 0;
}

static void client_io(amldist_rdzv_t *r, short revents)
{
    if ((revents & POLLOUT) && amldist__conn_flush(&r->c) < 0) {
        amldist__rz_host_lost(r, "the connection failed", 1);
        return;
    }
    if (!(revents & (POLLIN | POLLHUP | POLLERR)))
        return;
    const char *why;
    int rc = amldist__conn_read(&r->c, client_frame, r, &why);
    if (rc == AMLDIST__CONN_EAUTH)
        not_proven(r, why);
    else if (rc < 0)
        amldist__rz_host_lost(r, why, rc == AMLDIST__CONN_ECLOSED);
}

static void client_timers(amldist_rdzv_t *r)
{
    long long now = amldist__now_ms();
    if (r->c.fd < 0)
        return;
    if (now - r->c.last_rx > r->cfg.dead_ms) {
        char why[96];
        snprintf(why, sizeof why, "no heartbeat for %.1f s",
                 r->cfg.dead_ms / 1000.0);
        amldist__rz_host_lost(r, why, 0);
        return;
    }
    pthread_mutex_lock(&r->mu);
    int joining = r->sh.state == C_JOINING;
    pthread_mutex_unlock(&r->mu);
    /* The host refuses at its own join deadline; this one is the bound
     * when the host itself never answers. */
    if (joining && now > r->join_deadline + r->cfg.dead_ms) {
        pthread_mutex_lock(&r->mu);
        r->sh.err = AMLDIST_ETIMEDOUT;
        snprintf(r->sh.errmsg, sizeof r->sh.errmsg, "rendezvous at %s: no "
                 "round formed within %.0f s", r->endpoint,
                 r->cfg.join_timeout_ms / 1000.0);
        amldist__rz_set_over(r, AMLDIST_RDZV_STATUS_LOST, r->sh.errmsg);
        pthread_mutex_unlock(&r->mu);
        client_close(r);
        return;
    }
    if (now - r->last_beat >= r->cfg.keepalive_ms) {
        r->last_beat = now;
        if (amldist__conn_send(&r->c, AMLDIST__RZ_BEAT, NULL, 0) < 0)
            amldist__rz_host_lost(r, "it stopped reading", 0);
    }
}

static int poll_timeout(const amldist_rdzv_t *r, int connecting)
{
    long long now = amldist__now_ms();
    /* Heartbeats are due only on a connection: without one, their time
     * long past would make every poll return at once. */
    long long t = r->c.fd >= 0 ? r->last_beat + r->cfg.keepalive_ms
                               : now + 60000;
    if (connecting && r->try_fd < 0 && r->next_try < t)
        t = r->next_try;
    if (r->try_fd >= 0 && r->try_deadline < t)
        t = r->try_deadline;
    if (r->host) {
        long long h = amldist__rz_host_next_wake(r->host);
        if (h < t)
            t = h;
    }
    long long p = amldist__rz_plane_wake(r);
    if (p >= 0 && p < t)
        t = p;
    if (t <= now)
        return 0;
    return t - now > 60000 ? 60000 : (int)(t - now);
}

static void on_client(void *arg, int fd, short revents)
{
    (void)fd;
    client_io(arg, revents);
}

static void on_wake(void *arg, int fd, short revents)
{
    char b[64];
    (void)arg;
    (void)revents;
    while (read(fd, b, sizeof b) > 0) {
    }
}

/* Whether the loop's last poll() failed (EINTR aside): the round it ends
 * is no round, and the timers wait for one that polled. */
static __thread int poll_failed;

static int noting_poll(struct pollfd *pfd, unsigned long n, int timeout_ms)
{
    int rc = poll(pfd, (nfds_t)n, timeout_ms);
    poll_failed = rc < 0 && errno != EINTR;
    return rc;
}

void *amldist__rz_thread_main(void *arg)
{
    amldist_rdzv_t *r = arg;
    amldist__loop_set_poll(r->loop, noting_poll);
    if (amldist__loop_watch(r->loop, r->wake[0], POLLIN, on_wake, r) < 0) {
        amldist__rz_host_lost(r, "out of memory", 0);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&r->mu);
        int state = r->sh.state, closing = r->sh.closing;
        pthread_mutex_unlock(&r->mu);
        if (closing) {
            amldist__rz_connect_abort(r);
            client_close(r);
            if (!r->host || amldist__rz_host_drained(r->host))
                break;
        }
        if (state == C_CONNECTING && !closing)
            amldist__rz_try_connect(r);
        /* Issue 20's frames first: the marks a node had go before its
         * DONE, which may end the job. */
        if (r->c.fd >= 0)
            amldist__rz_plane_io(r);
        send_queued(r);
        if (r->c.fd >= 0)
            amldist__loop_events(r->loop, r->c.fd, (short)(POLLIN |
                                 (r->c.out_off < r->c.out_len ? POLLOUT : 0)));
        if (r->host)
            amldist__rz_host_arm(r->host);
        pthread_mutex_lock(&r->mu);
        int connecting = r->sh.state == C_CONNECTING;
        pthread_mutex_unlock(&r->mu);
        if (amldist__loop_once(r->loop, poll_timeout(r, connecting)) < 0) {
            /* The loop backed off between its tries: a poll() that keeps
             * failing ends this agent's part, said as such, rather than
             * spinning with no heartbeat. */
            char why[200];
            snprintf(why, sizeof why, "this agent's thread stopped: poll() "
                     "failed %d times in a row: %s", AMLDIST__LOOP_MAX_FAILS,
                     strerror(errno));
            amldist__rz_host_lost(r, why, 0);
            break;
        }
        if (poll_failed)
            continue;
        client_timers(r);
        if (r->host)
            amldist__rz_host_tick(r->host);
    }
    return NULL;
}
