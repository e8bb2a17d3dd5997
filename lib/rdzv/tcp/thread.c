/*
 * The TCP backend's thread (see tcp.h): its loop, with its timers and
 * heartbeats, what the caller queued in the sink, and the connection's
 * output, until the handle closes (and a host this agent runs is
 * drained).  Connecting is connect.c's, the connection's reads client.c's,
 * its end link.c's, the host's frames frames.c's and plane.c's, whether to
 * host the endpoint hosting.c's, and the host itself host.c's.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net/loop.h"
#include "rdzv/tcp/tcp.h"

/* The least time between a host's loop passes (ms). */
#define HOST_PASS_MS 2

/* What the caller queued: a FAIL, a DONE. */
static void send_queued(amldist__rz_tcp_t *t)
{
    amldist__rz_sink_t *s = t->s;
    struct amldist__rz_fail *fail;
    unsigned char done[12];
    int have_done = 0;
    pthread_mutex_lock(&s->mu);
    if (t->c.fd < 0 && s->state == C_CONNECTING) {
        /* A node that fails before joining: its FAIL follows its JOIN. */
        pthread_mutex_unlock(&s->mu);
        return;
    }
    fail = s->fail;
    s->fail = NULL;
    if (s->done) {
        s->done = 0;
        have_done = 1;
        amldist__net_put_u32(done, (uint32_t)s->next.round);
        amldist__net_put_u32(done + 4, (uint32_t)s->done_status);
        amldist__net_put_u32(done + 8, (uint32_t)s->done_port);
    }
    pthread_mutex_unlock(&s->mu);
    if (t->c.fd < 0) {
        free(fail);
        return;
    }
    int bad = 0;
    if (fail) {
        unsigned char f[16 + AMLDIST__RZ_SUMMARY_MAX];
        amldist__net_put_u32(f, fail->round);
        amldist__net_put_u32(f + 4, fail->flags);
        amldist__net_put_u32(f + 8, fail->rank);
        amldist__net_put_u32(f + 12, fail->status);
        memcpy(f + 16, fail->text, fail->len);
        bad = amldist__conn_send(&t->c, AMLDIST__RZ_FAIL, f,
                                 16 + fail->len) < 0;
        free(fail);
    }
    if (!bad && have_done)
        bad = amldist__conn_send(&t->c, AMLDIST__RZ_DONE, done,
                                 sizeof done) < 0;
    if (bad)
        amldist__rz_host_lost(t, "cannot send to it", 1);
}

/* The host refuses at its own join deadline; this one is the bound when
 * the host itself never answers. */
static void join_timed_out(amldist__rz_tcp_t *t)
{
    amldist__rz_sink_t *s = t->s;
    pthread_mutex_lock(&s->mu);
    s->err = AMLDIST_ETIMEDOUT;
    snprintf(s->errmsg, sizeof s->errmsg, "rendezvous at %s: no round "
             "formed within %.0f s", t->endpoint,
             t->cfg->join_timeout_ms / 1000.0);
    amldist__rz_set_over(s, AMLDIST_RDZV_STATUS_LOST, s->errmsg);
    pthread_mutex_unlock(&s->mu);
    amldist__rz_client_close(t);
}

static void client_timers(amldist__rz_tcp_t *t)
{
    long long now = amldist__now_ms();
    if (t->c.fd < 0)
        return;
    if (now - t->c.last_rx > t->cfg->dead_ms) {
        char why[600], what[96];
        if (t->heard) {
            snprintf(why, sizeof why, "no heartbeat for %.1f s",
                     t->cfg->dead_ms / 1000.0);
        } else {
            snprintf(what, sizeof what, "accepted the connection and sent "
                     "nothing in %.1f s", t->cfg->dead_ms / 1000.0);
            amldist__rz_not_a_host(what, why, sizeof why);
        }
        amldist__rz_host_lost(t, why, 0);
        return;
    }
    pthread_mutex_lock(&t->s->mu);
    int joining = t->s->state == C_JOINING;
    pthread_mutex_unlock(&t->s->mu);
    if (joining && now > t->join_deadline + t->cfg->dead_ms) {
        join_timed_out(t);
        return;
    }
    if (now - t->last_beat >= t->cfg->keepalive_ms) {
        t->last_beat = now;
        if (amldist__conn_send(&t->c, AMLDIST__RZ_BEAT, NULL, 0) < 0)
            amldist__rz_host_lost(t, "it stopped reading", 0);
    }
}

static int poll_timeout(const amldist__rz_tcp_t *t, int connecting)
{
    long long now = amldist__now_ms();
    /* Heartbeats are due only on a connection: without one, their time
     * long past would make every poll return at once. */
    long long w = t->c.fd >= 0 ? t->last_beat + t->cfg->keepalive_ms
                               : now + 60000;
    if (connecting && t->try_fd < 0 && t->next_try < w)
        w = t->next_try;
    if (t->try_fd >= 0 && t->try_deadline < w)
        w = t->try_deadline;
    if (t->host) {
        long long h = amldist__rz_host_next_wake(t->host);
        if (h < w)
            w = h;
    }
    long long p = amldist__rz_plane_wake(t);
    if (p >= 0 && p < w)
        w = p;
    if (w <= now)
        return 0;
    return w - now > 60000 ? 60000 : (int)(w - now);
}

static void on_wake(void *arg, int fd, short revents)
{
    char b[64];
    (void)arg;
    (void)revents;
    while (read(fd, b, sizeof b) > 0) {
    }
}

/* What one round of the loop does before it polls: 0, or -1 when the
 * handle closes and nothing is left to serve. */
static int before_poll(amldist__rz_tcp_t *t)
{
    pthread_mutex_lock(&t->s->mu);
    int state = t->s->state, closing = t->closing;
    pthread_mutex_unlock(&t->s->mu);
    if (closing) {
        amldist__rz_connect_abort(t);
        amldist__rz_client_close(t);
        if (!t->host || amldist__rz_host_drained(t->host))
            return -1;
    }
    if (state == C_CONNECTING && !closing)
        amldist__rz_try_connect(t);
    /* Issue 20's frames first: the marks a node had go before its DONE,
     * which may end the job. */
    if (t->c.fd >= 0)
        amldist__rz_plane_io(t);
    send_queued(t);
    if (t->c.fd >= 0)
        amldist__loop_events(t->loop, t->c.fd, (short)(POLLIN |
                             (amldist__conn_pending(&t->c) ? POLLOUT : 0)));
    if (t->host)
        amldist__rz_host_arm(t->host);
    return 0;
}

void *amldist__rz_thread_main(void *arg)
{
    amldist__rz_tcp_t *t = arg;
    if (amldist__loop_watch(t->loop, t->wake[0], POLLIN, on_wake, t) < 0) {
        amldist__rz_host_lost(t, "out of memory", 0);
        return NULL;
    }
    long long pass_at = 0;
    while (before_poll(t) == 0) {
        pthread_mutex_lock(&t->s->mu);
        int connecting = t->s->state == C_CONNECTING;
        pthread_mutex_unlock(&t->s->mu);
        /* A host's passes HOST_PASS_MS apart at the closest: the frames
         * of thousands of agents (a beat, a clock query, a view each)
         * are read a batch a pass, not one a wake-up (issue 40). */
        if (t->host) {
            long long now = amldist__now_ms();
            if (now - pass_at < HOST_PASS_MS) {
                struct timespec ts = {0, (HOST_PASS_MS - (now - pass_at)) *
                                             1000000L};
                nanosleep(&ts, NULL);
            }
            pass_at = amldist__now_ms();
        }
        if (amldist__loop_once(t->loop, poll_timeout(t, connecting)) < 0) {
            /* The loop backed off between its tries: a wait (epoll_wait)
             * that keeps failing ends this agent's part, said as such,
             * rather than spinning with no heartbeat. */
            char why[200];
            snprintf(why, sizeof why, "this agent's thread stopped: its wait "
                     "for events (epoll_wait) failed %d times in a row: %s",
                     AMLDIST__LOOP_MAX_FAILS, strerror(errno));
            amldist__rz_host_lost(t, why, 0);
            break;
        }
        if (amldist__loop_failed(t->loop))
            continue;
        client_timers(t);
        if (t->host)
            amldist__rz_host_tick(t->host);
    }
    return NULL;
}
