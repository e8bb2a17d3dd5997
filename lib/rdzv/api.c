/*
 * The caller's side of an agent's handle (amldist_rdzv_*(); see handle.h):
 * joining, the round as the caller sees it, and what the caller tells the
 * thread (a failure, its workers done, closing).  Every call here runs on
 * the caller's thread; the network thread is reached only through `sh`
 * under `mu` and the wake-up pipe.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "net/loop.h"
#include "rdzv/handle.h"
#include "util/secret.h"


void amldist__rz_wake(amldist_rdzv_t *r)
{
    char b = 1;
    while (write(r->wake[1], &b, 1) < 0 && errno == EINTR) {
    }
}

static const size_t options_sizes[AMLDIST_RDZV_OPTIONS_VERSION + 1] = {
    [1] = offsetof(amldist_rdzv_options_t, local_addr),
    [2] = sizeof(amldist_rdzv_options_t),
};
static const amldist__opts_kind_t options_kind = {
    "amldist_rdzv_options_t", "AMLDIST_RDZV_OPTIONS_INIT",
    AMLDIST_RDZV_OPTIONS_VERSION, options_sizes};

static int check_options(const amldist_rdzv_options_t *o)
{
    if (!o->endpoint || !*o->endpoint)
        return amldist__fail(AMLDIST_EINVAL, "rendezvous: no endpoint");
    if (o->min_nodes < 1 || o->max_nodes < o->min_nodes ||
        o->max_nodes > AMLDIST_RDZV_MAX_NODES)
        return amldist__fail(AMLDIST_EINVAL, "rendezvous: nodes %d:%d (need "
                             "1 <= min <= max <= %d)", o->min_nodes,
                             o->max_nodes, AMLDIST_RDZV_MAX_NODES);
    if (o->nproc < 1 || o->nproc > (1 << 20))
        return amldist__fail(AMLDIST_EINVAL, "rendezvous: %d workers on this "
                             "node (need 1 .. %d)", o->nproc, 1 << 20);
    if (o->max_restarts < 0 || o->order > (1 << 30) ||
        o->master_port > 65535 || o->last_call_ms > 86400000)
        return amldist__fail(AMLDIST_EINVAL, "rendezvous: max_restarts %d, "
                             "order %d, master port %d or last call %d ms "
                             "out of range", o->max_restarts, o->order,
                             o->master_port, o->last_call_ms);
    if (o->master_addr && (strlen(o->master_addr) == 0 ||
                           strlen(o->master_addr) > AMLDIST__RZ_ADDR_MAX))
        return amldist__fail(AMLDIST_EINVAL, "rendezvous: master address "
                             "empty or too long");
    if (o->local_addr && (strlen(o->local_addr) == 0 ||
                          strlen(o->local_addr) > AMLDIST__RZ_ADDR_MAX))
        return amldist__fail(AMLDIST_EINVAL, "rendezvous: local address "
                             "empty or longer than %d bytes",
                             AMLDIST__RZ_ADDR_MAX);
    return 0;
}

static int fill_cfg(amldist_rdzv_t *r, const amldist_rdzv_options_t *o)
{
    amldist__rz_cfg_t *c = &r->cfg;
    const char *run = o->run_id ? o->run_id : "none";
    int rc = amldist__bs_timeout(o->join_timeout_ms, &c->join_timeout_ms);
    if (rc < 0)
        return rc;
    c->min = o->min_nodes;
    c->max = o->max_nodes;
    c->max_restarts = o->max_restarts;
    c->last_call_ms = o->last_call_ms >= 0 ? o->last_call_ms
                                           : AMLDIST_RDZV_LAST_CALL_MS;
    c->keepalive_ms = o->keepalive_ms > 0 ? o->keepalive_ms
                                          : AMLDIST_RDZV_KEEPALIVE_MS;
    int misses = o->keepalive_misses > 0 ? o->keepalive_misses
                                         : AMLDIST_RDZV_KEEPALIVE_MISSES;
    c->keepalive_misses = misses;
    c->dead_ms = (long long)c->keepalive_ms * misses > 3600000
                     ? 3600000 : c->keepalive_ms * misses;
    c->master_port = o->master_port > 0 ? o->master_port : 0;
    if (o->master_addr)
        amldist__strlcpy(c->master_addr, o->master_addr,
                         sizeof c->master_addr);
    amldist__secret_t secret;
    char why[400];
    int have = amldist__secret_load(&secret, why, sizeof why);
    if (have < 0)
        return amldist__fail(AMLDIST_EINVAL, "rendezvous: %s", why);
    if (have > 0) {
        rc = amldist__chan_keys(&c->keys, "rdzv", secret.bytes, secret.len);
        amldist__strlcpy(c->secret_source, secret.source,
                         sizeof c->secret_source);
        amldist__secret_clear(&secret);
        if (rc < 0)
            return amldist__fail(AMLDIST_ESYS, "rendezvous: the job has a "
                                 "secret, and OpenSSL 3's libcrypto.so.3 "
                                 "cannot be loaded or failed (install "
                                 "libssl3)");
        c->secure = 1;
    }
    if ((rc = amldist__rz_token(o->token, o->endpoint, c->secure, &c->token,
                                c->token_source, sizeof c->token_source)) < 0)
        return rc;
    c->run = amldist__bs_hash(run, AMLDIST__BS_HASH_START);
    if (getrandom(&r->agent, sizeof r->agent, GRND_NONBLOCK) !=
        (ssize_t)sizeof r->agent)
        r->agent = (uint64_t)getpid() << 32 ^ (uint64_t)amldist__now_ms();
    c->self_agent = r->agent;
    return 0;
}

static void free_handle(amldist_rdzv_t *r)
{
    amldist__chan_keys_clear(&r->cfg.keys);
    if (r->wake[0] >= 0)
        close(r->wake[0]);
    if (r->wake[1] >= 0)
        close(r->wake[1]);
    if (r->efd >= 0)
        close(r->efd);
    if (r->gfd >= 0)
        close(r->gfd);
    amldist__rz_plane_free(r);
    if (r->try_fd >= 0)
        close(r->try_fd);
    amldist__conn_close(&r->c);
    amldist__rz_host_free(r->host);
    amldist__loop_free(r->loop);
    if (r->ai)
        freeaddrinfo(r->ai);
    free(r->cur.nproc);
    free(r->sh.next.nproc);
    free(r->warnings);
    free(r->sh.failure);
    free(r->sh.fail);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* Under mu: empty the caller's descriptor of what the caller has now seen
 * in the state, unless it is a stop (readable until the next round). */
static void take_wakeups(amldist_rdzv_t *r)
{
    uint64_t v;
    if (r->sh.state != C_STOP)
        while (read(r->efd, &v, sizeof v) > 0) {
        }
}

/* Wait (up to timeout_ms, < 0: for ever) until the thread has a round
 * later than `after` for the caller (1) or the job is over (0); the round
 * becomes the caller's.  AMLDIST_ETIMEDOUT when neither came in time. */
static int wait_round(amldist_rdzv_t *r, int after, int timeout_ms)
{
    /* On the clock the condition variable waits on (amldist_rdzv_join()):
     * a duration, which no step of the wall clock moves. */
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (timeout_ms > 0) {
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
    }
    pthread_mutex_lock(&r->mu);
    /* A new round counts even when its STOP came right behind it: the
     * caller then starts the round and sees the stop at once. */
#define NEW_ROUND                                                              \
    (r->sh.have_next && r->sh.next.round > after &&                           \
     (r->sh.state == C_RUNNING || r->sh.state == C_STOP))
    while (r->sh.state != C_OVER && !NEW_ROUND) {
        if (timeout_ms == 0 ||
            (timeout_ms > 0 &&
             pthread_cond_timedwait(&r->cv, &r->mu, &until) == ETIMEDOUT)) {
            take_wakeups(r);
            pthread_mutex_unlock(&r->mu);
            return AMLDIST_ETIMEDOUT;
        }
        if (timeout_ms < 0)
            pthread_cond_wait(&r->cv, &r->mu);
    }
    int got = NEW_ROUND;
#undef NEW_ROUND
    take_wakeups(r);
    if (got) {
        amldist__rz_round_t n = r->sh.next;
        amldist__rz_round_t copy = {0};
        if (amldist__rz_round_alloc(&copy, n.nnodes) < 0) {
            pthread_mutex_unlock(&r->mu);
            return AMLDIST_ENOMEM;
        }
        memcpy(copy.nproc, n.nproc, 3 * (size_t)n.nnodes * sizeof *n.nproc);
        free(r->cur.nproc);
        r->cur = n;
        r->cur.nproc = copy.nproc;
        r->cur.gpu_first = copy.gpu_first;
        r->cur.machine_ranks = copy.machine_ranks;
    }
    pthread_mutex_unlock(&r->mu);
    if (got)
        amldist__rz_note_round(r);
    return got;
}

/* HOST:PORT where PORT may also be 0 (torchrun 2.x's "a free port",
 * hosting.c), which util's parser, made for real ports, refuses: "host:0"
 * and "[v6]:0" only, never a bare IPv6 address ending in ":0". */
static int endpoint_parse(const char *ep, char *host, size_t size, int *port)
{
    size_t n = strlen(ep);
    char buf[AMLDIST__HOST_MAX + 2];
    if (n > 2 && n - 2 < sizeof buf && strcmp(ep + n - 2, ":0") == 0) {
        memcpy(buf, ep, n - 2);
        buf[n - 2] = '\0';
        int bracketed = buf[0] == '[' && buf[n - 3] == ']';
        if ((bracketed || !strchr(buf, ':')) &&
            amldist__parse_hostport(buf, host, size, port) == 0) {
            *port = 0;
            return 0;
        }
    }
    return amldist__parse_hostport(ep, host, size, port);
}

int amldist_rdzv_join(const amldist_rdzv_options_t *opts, amldist_rdzv_t **out)
{
    amldist__clear_error();
    if (!out)
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_join: out is NULL");
    *out = NULL;
    amldist_rdzv_options_t o = AMLDIST_RDZV_OPTIONS_INIT;
    int rc;
    if (!opts)
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_join: no options");
    if ((rc = amldist__opts_copy(&options_kind, "amldist_rdzv_join", &o,
                                 opts)) < 0 ||
        (rc = check_options(&o)) < 0)
        return rc;
    amldist_rdzv_t *r = calloc(1, sizeof *r);
    if (!r)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    amldist__rz_clock_reload();
    r->wake[0] = r->wake[1] = r->efd = r->gfd = r->try_fd = -1;
    r->c.fd = -1;
    r->cur.round = -1;
    r->sh.next.round = -1;
    pthread_mutex_init(&r->mu, NULL);
    /* The caller's waits are durations: on the monotonic clock, as
     * libuv's uv_cond_timedwait() waits. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    amldist__strlcpy(r->endpoint, o.endpoint, sizeof r->endpoint);
    r->nproc = o.nproc;
    r->order = o.order;
    amldist__rz_note_options(r, &o);
    char err[300];
    if (endpoint_parse(o.endpoint, r->ep_host, sizeof r->ep_host,
                       &r->ep_port) < 0 || r->ep_port < 0) {
        rc = amldist__fail(AMLDIST_EINVAL, "rendezvous endpoint '%s': want "
                           "HOST:PORT", o.endpoint);
    } else if (r->ep_port == 0 && o.max_nodes > 1) {
        /* torchrun 2.x's "pick a free port" (hosting.c): the other nodes
         * could never learn it. */
        rc = amldist__fail(AMLDIST_EINVAL, "rendezvous endpoint '%s': port 0 "
                           "(a free port, picked here) is for one node only, "
                           "and up to %d may join: give the port the nodes "
                           "meet at", o.endpoint, o.max_nodes);
    } else if ((rc = fill_cfg(r, &o)) < 0) {
        /* message set */
    } else if (amldist__net_resolve(r->ep_host, r->ep_port, &r->ai, err,
                                   sizeof err) < 0) {
        rc = amldist__fail(AMLDIST_ESYS, "rendezvous endpoint %s: %s",
                           o.endpoint, err);
    } else if (pipe2(r->wake, O_CLOEXEC | O_NONBLOCK) < 0 ||
               (r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
               (r->gfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        rc = amldist__fail(AMLDIST_ESYS, "rendezvous: %s", strerror(errno));
    } else if (!(r->loop = amldist__loop_new())) {
        rc = amldist__fail(AMLDIST_ENOMEM, "out of memory");
    } else {
        rc = amldist__rz_maybe_host(r);
    }
    if (rc < 0) {
        free_handle(r);
        return rc;
    }
    r->join_deadline = amldist__now_ms() + r->cfg.join_timeout_ms;
    r->backoff_ms = 1;
    r->last_beat = amldist__now_ms();
    /* The thread takes no signal: the caller's signalfd must see them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&r->thread, NULL, amldist__rz_thread_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
        rc = amldist__fail(AMLDIST_ESYS, "rendezvous: thread: %s", strerror(e));
        free_handle(r);
        return rc;
    }
    rc = wait_round(r, -1, -1);
    if (rc == 1) {
        *out = r;
        return 0;
    }
    pthread_mutex_lock(&r->mu);
    int code = r->sh.err ? r->sh.err : AMLDIST_ESYS;
    char msg[sizeof r->sh.errmsg];
    amldist__strlcpy(msg, r->sh.err ? r->sh.errmsg : r->sh.failure
                                                         ? r->sh.failure : "",
                     sizeof msg);
    pthread_mutex_unlock(&r->mu);
    amldist_rdzv_close(r);
    return amldist__fail(rc < 0 ? rc : code, "%s", msg);
}

int amldist_rdzv_round(const amldist_rdzv_t *r)
{
    return r ? r->cur.round : AMLDIST_EINVAL;
}

int amldist_rdzv_restart_count(const amldist_rdzv_t *r)
{
    return r ? r->cur.restarts : AMLDIST_EINVAL;
}

int amldist_rdzv_node_rank(const amldist_rdzv_t *r)
{
    return r ? r->cur.node : AMLDIST_EINVAL;
}

int amldist_rdzv_num_nodes(const amldist_rdzv_t *r)
{
    return r ? r->cur.nnodes : AMLDIST_EINVAL;
}

int amldist_rdzv_node_nproc(const amldist_rdzv_t *r, int node)
{
    if (!r || node < 0 || node >= r->cur.nnodes)
        return AMLDIST_EINVAL;
    return r->cur.nproc[node];
}

int amldist_rdzv_is_host(const amldist_rdzv_t *r)
{
    return r ? r->host != NULL : AMLDIST_EINVAL;
}

int amldist_rdzv_fd(const amldist_rdzv_t *r)
{
    return r ? r->efd : AMLDIST_EINVAL;
}

int amldist_rdzv_state(amldist_rdzv_t *r)
{
    if (!r)
        return AMLDIST_EINVAL;
    pthread_mutex_lock(&r->mu);
    int s = r->sh.state == C_STOP || r->sh.state == C_OVER
                ? AMLDIST_RDZV_STOP : AMLDIST_RDZV_RUNNING;
    /* A wake-up that was no stop (the round's own start) is taken, so
     * that a caller polling the descriptor does not spin; the thread
     * writes it under mu, so no stop is lost here. */
    if (s == AMLDIST_RDZV_RUNNING)
        take_wakeups(r);
    pthread_mutex_unlock(&r->mu);
    return s;
}

int amldist_rdzv_fail(amldist_rdzv_t *r, unsigned flags, int rank,
                      int status, const char *summary)
{
    amldist__clear_error();
    if (!r || status < 0 || status > 255)
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_fail: %s",
                             r ? "status outside 0..255" : "no handle");
    size_t n = summary ? strlen(summary) : 0;
    if (n > AMLDIST__RZ_SUMMARY_MAX)
        n = AMLDIST__RZ_SUMMARY_MAX;
    unsigned char *f = malloc(16 + n);
    if (!f)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    pthread_mutex_lock(&r->mu);
    amldist__net_put_u32(f, (uint32_t)r->sh.next.round);
    amldist__net_put_u32(f + 4, flags & AMLDIST_RDZV_FINAL);
    amldist__net_put_u32(f + 8, rank < 0 ? AMLDIST__RZ_NONE : (uint32_t)rank);
    amldist__net_put_u32(f + 12, (uint32_t)status);
    if (n)
        memcpy(f + 16, summary, n);
    free(r->sh.fail); /* one failure per round is the host's to hear */
    r->sh.fail = f;
    r->sh.fail_len = 16 + n;
    pthread_mutex_unlock(&r->mu);
    amldist__rz_wake(r);
    return 0;
}

int amldist_rdzv_done(amldist_rdzv_t *r, int status)
{
    amldist__clear_error();
    if (!r)
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_done: no handle");
    int port = r->cfg.master_port > 0 ? 0 : amldist__rz_free_port();
    pthread_mutex_lock(&r->mu);
    if (r->sh.state == C_RUNNING || r->sh.state == C_STOP) {
        r->sh.state = C_WAITING;
        r->sh.done = 1;
        r->sh.done_status = status & 0xff;
        r->sh.done_port = port;
    }
    pthread_mutex_unlock(&r->mu);
    amldist__rz_wake(r);
    return 0;
}

int amldist_rdzv_wait(amldist_rdzv_t *r, int timeout_ms)
{
    amldist__clear_error();
    if (!r)
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_wait: no handle");
    int rc = wait_round(r, r->cur.round, timeout_ms);
    if (rc == AMLDIST_ETIMEDOUT)
        return amldist__fail(rc, "the rest of the job has not answered yet");
    return rc;
}

int amldist_rdzv_next(amldist_rdzv_t *r, int status)
{
    int rc = amldist_rdzv_done(r, status);
    return rc < 0 ? rc : amldist_rdzv_wait(r, -1);
}

const char *amldist_rdzv_stop_reason(amldist_rdzv_t *r)
{
    if (!r)
        return "";
    pthread_mutex_lock(&r->mu);
    amldist__strlcpy(r->why, r->sh.stop_why, sizeof r->why);
    pthread_mutex_unlock(&r->mu);
    return r->why;
}

int amldist_rdzv_exit_status(const amldist_rdzv_t *r)
{
    if (!r)
        return AMLDIST_EINVAL;
    pthread_mutex_t *mu = (pthread_mutex_t *)&r->mu;
    pthread_mutex_lock(mu);
    int s = r->sh.state == C_OVER ? r->sh.status : 0;
    pthread_mutex_unlock(mu);
    return s;
}

const char *amldist_rdzv_failure(const amldist_rdzv_t *r)
{
    if (!r)
        return "";
    pthread_mutex_t *mu = (pthread_mutex_t *)&r->mu;
    pthread_mutex_lock(mu);
    /* Set once, when the job is over; never changed after. */
    const char *f = r->sh.state == C_OVER && r->sh.failure ? r->sh.failure
                                                           : "";
    pthread_mutex_unlock(mu);
    return f;
}

void amldist_rdzv_close(amldist_rdzv_t *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->sh.closing = 1;
    pthread_mutex_unlock(&r->mu);
    amldist__rz_wake(r);
    pthread_join(r->thread, NULL);
    free_handle(r);
}
