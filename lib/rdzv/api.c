/*
 * The caller's side of an agent's handle (amldist_rdzv_*(); see handle.h),
 * the handler: joining (the backend its endpoint picks, backend.h), the
 * round as the caller sees it, and what the caller tells the backend (a
 * failure, its workers done, closing).  Every call here runs on the
 * caller's thread; the backend is reached only through the sink (`sk`,
 * under its mu) and its table.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "rdzv/handle.h"
#include "util/secret.h"

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
    /* Without a backend's keys ("etcd://...?key=value,..."): the
     * endpoint in messages, and the token's. */
    amldist__strlcpy(c->endpoint, o->endpoint, sizeof c->endpoint);
    c->endpoint[strcspn(c->endpoint, "?")] = '\0';
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
        const char *origin = getenv(AMLDIST__SECRET_ORIGIN_VAR);
        if (rc < 0 && strcmp(c->secret_source, "AMLDIST_JOB_TOKEN") == 0 &&
            origin && strcmp(origin, AMLDIST__SECRET_ORIGIN_ONE_NODE) == 0)
            goto open; /* amlrun's own, one node: as bootstrap/config.c */
        if (rc < 0)
            return amldist__fail(AMLDIST_ESYS, "rendezvous: the job has a "
                                 "secret, and OpenSSL 3's libcrypto.so.3 "
                                 "cannot be loaded or failed (install "
                                 "libssl3)");
        c->secure = 1;
    }
open:
    if ((rc = amldist__rz_token(o->token, c->endpoint, c->secure, &c->token,
                                c->token_source, sizeof c->token_source)) < 0)
        return rc;
    c->run = amldist__bs_hash(run, AMLDIST__BS_HASH_START);
    uint64_t *agent = &r->me.agent;
    if (getrandom(agent, sizeof *agent, GRND_NONBLOCK) !=
        (ssize_t)sizeof *agent)
        *agent = (uint64_t)getpid() << 32 ^ (uint64_t)amldist__now_ms();
    c->self_agent = *agent;
    return 0;
}

/* This agent's JOIN (its local address, machine and agent id are in
 * already): what every agent must share, and its own. */
static void fill_me(amldist_rdzv_t *r, const amldist_rdzv_options_t *o)
{
    const amldist__rz_cfg_t *c = &r->cfg;
    amldist__rz_join_t *j = &r->me;
    j->token = c->token;
    j->run = c->run;
    j->round = 0;
    j->nproc = (uint32_t)o->nproc;
    j->order = o->order < 0 ? AMLDIST__RZ_NONE : (uint32_t)o->order;
    j->min = (uint32_t)c->min;
    j->max = (uint32_t)c->max;
    j->max_restarts = (uint32_t)c->max_restarts;
    j->keepalive_ms = (uint32_t)c->keepalive_ms;
    j->keepalive_misses = (uint32_t)c->keepalive_misses;
    j->last_call_ms = (uint32_t)c->last_call_ms;
    j->join_timeout_ms = (uint32_t)c->join_timeout_ms;
}

/* The handle but its backend (closed, or never opened). */
static void free_handle(amldist_rdzv_t *r)
{
    amldist__chan_keys_clear(&r->cfg.keys);
    amldist__rz_sink_free(&r->sk);
    free(r->cur.nproc);
    free(r->warnings);
    free(r);
}

/* Under mu: empty the caller's descriptor of what the caller has now seen
 * in the state, unless it is a stop (readable until the next round). */
static void take_wakeups(amldist_rdzv_t *r)
{
    uint64_t v;
    if (r->sk.state != C_STOP)
        while (read(r->sk.efd, &v, sizeof v) > 0) {
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
    pthread_mutex_lock(&r->sk.mu);
    /* A new round counts even when its STOP came right behind it: the
     * caller then starts the round and sees the stop at once. */
#define NEW_ROUND                                                              \
    (r->sk.have_next && r->sk.next.round > after &&                           \
     (r->sk.state == C_RUNNING || r->sk.state == C_STOP))
    while (r->sk.state != C_OVER && !NEW_ROUND) {
        if (timeout_ms == 0 ||
            (timeout_ms > 0 &&
             pthread_cond_timedwait(&r->sk.cv, &r->sk.mu, &until) == ETIMEDOUT)) {
            take_wakeups(r);
            pthread_mutex_unlock(&r->sk.mu);
            return AMLDIST_ETIMEDOUT;
        }
        if (timeout_ms < 0)
            pthread_cond_wait(&r->sk.cv, &r->sk.mu);
    }
    int got = NEW_ROUND;
#undef NEW_ROUND
    take_wakeups(r);
    if (got) {
        amldist__rz_round_t n = r->sk.next;
        amldist__rz_round_t copy = {0};
        if (amldist__rz_round_alloc(&copy, n.nnodes) < 0) {
            pthread_mutex_unlock(&r->sk.mu);
            return AMLDIST_ENOMEM;
        }
        memcpy(copy.nproc, n.nproc, 3 * (size_t)n.nnodes * sizeof *n.nproc);
        free(r->cur.nproc);
        r->cur = n;
        r->cur.nproc = copy.nproc;
        r->cur.gpu_first = copy.gpu_first;
        r->cur.machine_ranks = copy.machine_ranks;
    }
    pthread_mutex_unlock(&r->sk.mu);
    if (got)
        amldist__rz_note_round(r);
    return got;
}

/* A handle for options o (checked), its sink made; NULL when out of
 * memory. */
static amldist_rdzv_t *handle_new(const amldist_rdzv_options_t *o)
{
    amldist_rdzv_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    amldist__rz_clock_reload();
    r->cur.round = -1;
    amldist__rz_sink_init(&r->sk);
    amldist__rz_note_options(r, o);
    return r;
}

/* The backend the endpoint's scheme picks (backend.h), the job's values,
 * the sink's descriptors and the backend's join: 0, or an error (message
 * set; nothing of the backend's left). */
static int handle_open(amldist_rdzv_t *r, const amldist_rdzv_options_t *o)
{
    const char *ep;
    int rc;
    r->ops = amldist__rz_backend_pick(o->endpoint, &ep);
    if ((rc = r->ops->check(ep, o->max_nodes)) < 0 ||
        (rc = fill_cfg(r, o)) < 0)
        return rc;
    fill_me(r, o);
    if (amldist__rz_sink_open(&r->sk) < 0)
        return amldist__fail(AMLDIST_ESYS, "rendezvous: %s", strerror(errno));
    return r->ops->open(ep, &r->cfg, &r->me, &r->sk, &r->be);
}

/* The first round, or why there is none (the handle closed). */
/* The status of the job that ended before this thread's last join got a
 * round (amldist_rdzv_join_status()), -1 when it did not end so. */
static _Thread_local int join_status = -1;

static int join_wait(amldist_rdzv_t *r, amldist_rdzv_t **out)
{
    int rc = wait_round(r, -1, -1);
    if (rc == 1) {
        *out = r;
        return 0;
    }
    pthread_mutex_lock(&r->sk.mu);
    int code = r->sk.err ? r->sk.err : AMLDIST_ESYS;
    if (r->sk.finished && code == AMLDIST_EDENIED)
        join_status = r->sk.status;
    char msg[sizeof r->sk.errmsg];
    amldist__strlcpy(msg, r->sk.err ? r->sk.errmsg : r->sk.failure
                                                         ? r->sk.failure : "",
                     sizeof msg);
    pthread_mutex_unlock(&r->sk.mu);
    amldist_rdzv_close(r);
    return amldist__fail(rc < 0 ? rc : code, "%s", msg);
}

int amldist_rdzv_join_status(void)
{
    return join_status;
}

int amldist_rdzv_join(const amldist_rdzv_options_t *opts, amldist_rdzv_t **out)
{
    amldist__clear_error();
    join_status = -1;
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
    amldist_rdzv_t *r = handle_new(&o);
    if (!r)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    if ((rc = handle_open(r, &o)) < 0) {
        free_handle(r);
        return rc;
    }
    return join_wait(r, out);
}

int amldist_rdzv_join_failed(const amldist_rdzv_options_t *opts, int status,
                             const char *summary)
{
    amldist__clear_error();
    amldist_rdzv_options_t o = AMLDIST_RDZV_OPTIONS_INIT;
    int rc;
    if (!opts || status < 0 || status > 255)
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_join_failed: %s",
                             opts ? "status outside 0..255" : "no options");
    if ((rc = amldist__opts_copy(&options_kind, "amldist_rdzv_join_failed",
                                 &o, opts)) < 0 ||
        (rc = check_options(&o)) < 0)
        return rc;
    amldist_rdzv_t *r = handle_new(&o);
    if (!r)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    /* The FAIL is queued before the thread runs: it follows the JOIN on
     * the connection (tcp/thread.c keeps it while connecting). */
    size_t n = summary ? strlen(summary) : 0;
    if (n > AMLDIST__RZ_SUMMARY_MAX)
        n = AMLDIST__RZ_SUMMARY_MAX;
    struct amldist__rz_fail *f = malloc(sizeof *f + n);
    if (!f) {
        free_handle(r);
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    }
    *f = (struct amldist__rz_fail){.round = AMLDIST__RZ_ROUND_FAILING,
                                   .flags = AMLDIST_RDZV_FINAL,
                                   .rank = AMLDIST__RZ_NONE,
                                   .status = (uint32_t)status, .len = n};
    if (n)
        memcpy(f->text, summary, n);
    r->sk.fail = f;
    const struct amldist__rz_backend_ops *ops;
    const char *ep;
    ops = amldist__rz_backend_pick(o.endpoint, &ep);
    r->ops = ops;
    if ((rc = ops->check(ep, o.max_nodes)) < 0 || (rc = fill_cfg(r, &o)) < 0) {
        free_handle(r);
        return rc;
    }
    fill_me(r, &o);
    r->me.round = AMLDIST__RZ_ROUND_FAILING;
    if (amldist__rz_sink_open(&r->sk) < 0) {
        free_handle(r);
        return amldist__fail(AMLDIST_ESYS, "rendezvous: %s", strerror(errno));
    }
    if ((rc = ops->open(ep, &r->cfg, &r->me, &r->sk, &r->be)) < 0) {
        free_handle(r);
        return rc;
    }
    /* Heard when the host ends the job with this node's status; a host
     * that goes on without it (a round runs) refuses it. */
    wait_round(r, -1, -1);
    pthread_mutex_lock(&r->sk.mu);
    int heard = r->sk.state == C_OVER && r->sk.finished &&
                r->sk.status == status;
    char msg[sizeof r->sk.errmsg];
    amldist__strlcpy(msg, r->sk.errmsg, sizeof msg);
    pthread_mutex_unlock(&r->sk.mu);
    /* The host this agent may run stays until the nodes still to come
     * were told (or the join timeout): close waits for it. */
    amldist_rdzv_close(r);
    return heard ? 0 : amldist__fail(AMLDIST_EDENIED, "%s", msg);
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
    return r ? r->ops->hosts(r->be) : AMLDIST_EINVAL;
}

int amldist_rdzv_fd(const amldist_rdzv_t *r)
{
    return r ? r->sk.efd : AMLDIST_EINVAL;
}

int amldist_rdzv_state(amldist_rdzv_t *r)
{
    if (!r)
        return AMLDIST_EINVAL;
    pthread_mutex_lock(&r->sk.mu);
    int s = r->sk.state == C_STOP || r->sk.state == C_OVER
                ? AMLDIST_RDZV_STOP : AMLDIST_RDZV_RUNNING;
    /* A wake-up that was no stop (the round's own start) is taken, so
     * that a caller polling the descriptor does not spin; the thread
     * writes it under mu, so no stop is lost here. */
    if (s == AMLDIST_RDZV_RUNNING)
        take_wakeups(r);
    pthread_mutex_unlock(&r->sk.mu);
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
    struct amldist__rz_fail *f = malloc(sizeof *f + n);
    if (!f)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    f->flags = flags & AMLDIST_RDZV_FINAL;
    f->rank = rank < 0 ? AMLDIST__RZ_NONE : (uint32_t)rank;
    f->status = (uint32_t)status;
    f->len = n;
    if (n)
        memcpy(f->text, summary, n);
    pthread_mutex_lock(&r->sk.mu);
    f->round = (uint32_t)r->sk.next.round;
    free(r->sk.fail); /* one failure per round is the host's to hear */
    r->sk.fail = f;
    pthread_mutex_unlock(&r->sk.mu);
    amldist__rz_wake(r);
    return 0;
}

int amldist_rdzv_done(amldist_rdzv_t *r, int status)
{
    amldist__clear_error();
    if (!r)
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_done: no handle");
    int port = r->cfg.master_port > 0 ? 0 : amldist__rz_free_port();
    pthread_mutex_lock(&r->sk.mu);
    if (r->sk.state == C_RUNNING || r->sk.state == C_STOP) {
        r->sk.state = C_WAITING;
        r->sk.done = 1;
        r->sk.done_status = status & 0xff;
        r->sk.done_port = port;
    }
    pthread_mutex_unlock(&r->sk.mu);
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
    pthread_mutex_lock(&r->sk.mu);
    amldist__strlcpy(r->why, r->sk.stop_why, sizeof r->why);
    pthread_mutex_unlock(&r->sk.mu);
    return r->why;
}

int amldist_rdzv_exit_status(const amldist_rdzv_t *r)
{
    if (!r)
        return AMLDIST_EINVAL;
    pthread_mutex_t *mu = (pthread_mutex_t *)&r->sk.mu;
    pthread_mutex_lock(mu);
    int s = r->sk.state == C_OVER ? r->sk.status : 0;
    pthread_mutex_unlock(mu);
    return s;
}

const char *amldist_rdzv_failure(const amldist_rdzv_t *r)
{
    if (!r)
        return "";
    pthread_mutex_t *mu = (pthread_mutex_t *)&r->sk.mu;
    pthread_mutex_lock(mu);
    /* Set once, when the job is over; never changed after. */
    const char *f = r->sk.state == C_OVER && r->sk.failure ? r->sk.failure
                                                           : "";
    pthread_mutex_unlock(mu);
    return f;
}

void amldist_rdzv_close(amldist_rdzv_t *r)
{
    if (!r)
        return;
    r->ops->close(r->be);
    free_handle(r);
}
