/*
 * An agent's handle on the control plane (amldist_rdzv_*): its connection
 * to the host, and, when this process hosts the endpoint, the host itself,
 * both served by one thread so that heartbeats and the host's duties go on
 * while the caller starts and supervises workers.  The caller and the
 * thread share only `shared` (under `mu`); the thread owns every socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rdzv/rdzv_internal.h"

enum { C_CONNECTING, C_JOINING, C_RUNNING, C_STOP, C_WAITING, C_OVER };

struct amldist_rdzv {
    amldist__rz_cfg_t cfg;
    char endpoint[300]; /* as given, for messages */
    char ep_host[AMLDIST__HOST_MAX];
    int ep_port;
    uint64_t agent;
    int nproc, order;
    amldist__rz_round_t cur; /* the caller's view of the round */

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int wake[2]; /* caller -> thread */
    int efd;     /* thread -> caller: stop now */

    /* Thread-owned. */
    amldist__rz_host_t *host;
    amldist__conn_t c;
    struct addrinfo *ai;
    long long join_deadline, next_try, last_beat;
    int backoff_ms;

    /* Shared, under mu. */
    struct {
        int state;
        int err;               /* join's error, 0 */
        char errmsg[600];
        amldist__rz_round_t next; /* the last ASSIGN */
        int have_next;
        int status;            /* the job's, once C_OVER */
        char *failure;         /* its first failure, once C_OVER */
        char stop_why[AMLDIST__RZ_TEXT_MAX + 1]; /* the last STOP's */
        unsigned char *fail;   /* a FAIL frame to send */
        size_t fail_len;
        int done, done_status, done_port;
        int closing;
    } sh;
};

static long long now_ms(void) { return amldist__loop_now_ms(); }

static void wake_thread(amldist_rdzv_t *r)
{
    char b = 1;
    while (write(r->wake[1], &b, 1) < 0 && errno == EINTR) {
    }
}

/* Something for the caller: a stop, a new round, the end (under mu). */
static void signal_caller(amldist_rdzv_t *r)
{
    uint64_t one = 1;
    while (write(r->efd, &one, sizeof one) < 0 && errno == EINTR) {
    }
    pthread_cond_broadcast(&r->cv);
}

/* A port nobody listens on now (the kernel's pick); 0 when none. */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    socklen_t len = sizeof a;
    int port = 0;
    if (bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(s);
    return port;
}

/* ---- the thread: the agent's side ---- */

/* The job is over for this agent (FINISH, a refusal, or the host lost). */
static void set_over(amldist_rdzv_t *r, int status, const char *failure)
{
    int was = r->sh.state;
    r->sh.state = C_OVER;
    r->sh.status = status;
    free(r->sh.failure);
    r->sh.failure = strdup(failure ? failure : "");
    if (was == C_RUNNING)
        amldist__strlcpy(r->sh.stop_why, r->sh.failure, sizeof r->sh.stop_why);
    signal_caller(r);
}

/* The connection to the host is gone: after the first round the job is
 * over on this node.  Before it, a connection that merely closed is tried
 * again until the join deadline (a host that was out of descriptors, or
 * one that died while the round formed: an agent on its machine then
 * takes over); anything else is a join error. */
static void host_lost(amldist_rdzv_t *r, const char *why, int closed)
{
    amldist__conn_close(&r->c);
    pthread_mutex_lock(&r->mu);
    if (r->sh.state < C_RUNNING && !r->sh.err && closed &&
        now_ms() < r->join_deadline) {
        r->sh.state = C_CONNECTING;
        r->next_try = now_ms() + r->backoff_ms;
    } else if (r->sh.state < C_RUNNING && !r->sh.err) {
        r->sh.err = AMLDIST_ESYS;
        snprintf(r->sh.errmsg, sizeof r->sh.errmsg, "rendezvous at %s: %s",
                 r->endpoint, why);
        set_over(r, AMLDIST_RDZV_STATUS_LOST, r->sh.errmsg);
    } else if (r->sh.state != C_OVER) {
        char text[700];
        snprintf(text, sizeof text, "the rendezvous host at %s was lost: %s",
                 r->endpoint, why);
        set_over(r, AMLDIST_RDZV_STATUS_LOST, text);
    }
    pthread_mutex_unlock(&r->mu);
}

static int refusal_code(uint32_t reason)
{
    switch (reason) {
    case AMLDIST__RZ_R_OPTIONS:
    case AMLDIST__RZ_R_PROTO:
        return AMLDIST_EPROTO;
    case AMLDIST__RZ_R_ORDER:
        return AMLDIST_ECONFLICT;
    case AMLDIST__RZ_R_TIMEOUT:
        return AMLDIST_ETIMEDOUT;
    default:
        return AMLDIST_EDENIED;
    }
}

static void on_frame(amldist_rdzv_t *r, unsigned type, const unsigned char *p,
                     uint32_t len)
{
    const char *why = NULL;
    pthread_mutex_lock(&r->mu);
    switch (type) {
    case AMLDIST__RZ_BEAT:
        break;
    case AMLDIST__RZ_ASSIGN:
        if (amldist__rz_get_assign(p, len, &r->sh.next, &why) < 0)
            break;
        r->sh.have_next = 1;
        r->sh.state = C_RUNNING;
        r->sh.stop_why[0] = '\0';
        signal_caller(r);
        break;
    case AMLDIST__RZ_STOP:
        if (r->sh.state == C_RUNNING &&
            (int)amldist__net_get_u32(p) == r->sh.next.round) {
            size_t n = len - 4;
            memcpy(r->sh.stop_why, p + 4, n);
            r->sh.stop_why[n] = '\0';
            r->sh.state = C_STOP;
            signal_caller(r);
        }
        break;
    case AMLDIST__RZ_FINISH: {
        char *text = malloc(len - 4 + 1);
        if (text) {
            memcpy(text, p + 4, len - 4);
            text[len - 4] = '\0';
        }
        if (!r->sh.have_next && !r->sh.err) {
            r->sh.err = AMLDIST_EDENIED;
            snprintf(r->sh.errmsg, sizeof r->sh.errmsg, "rendezvous at %s: "
                     "the job ended before this node got a round%s%s",
                     r->endpoint, text && *text ? ": " : "",
                     text ? text : "");
        }
        set_over(r, (int)(amldist__net_get_u32(p) & 0xff),
                 text ? text : "(out of memory)");
        free(text);
        break;
    }
    case AMLDIST__RZ_REFUSE: {
        size_t n = len - 4;
        uint32_t reason = amldist__net_get_u32(p);
        r->sh.err = refusal_code(reason);
        int k = snprintf(r->sh.errmsg, sizeof r->sh.errmsg,
                         reason == AMLDIST__RZ_R_TIMEOUT
                             ? "rendezvous at %s: "
                             : "rendezvous at %s refused this node: ",
                         r->endpoint);
        if (n > sizeof r->sh.errmsg - (size_t)k - 1)
            n = sizeof r->sh.errmsg - (size_t)k - 1;
        memcpy(r->sh.errmsg + k, p + 4, n);
        r->sh.errmsg[(size_t)k + n] = '\0';
        if (reason == AMLDIST__RZ_R_TOKEN)
            snprintf(r->sh.errmsg + k + n, sizeof r->sh.errmsg - (size_t)k - n,
                     "; this node's comes from %s", r->cfg.token_source);
        set_over(r, AMLDIST_RDZV_STATUS_LOST, r->sh.errmsg);
        break;
    }
    default:
        why = "a frame only agents send";
    }
    pthread_mutex_unlock(&r->mu);
    if (why)
        host_lost(r, why, 0);
}

static void send_join(amldist_rdzv_t *r)
{
    unsigned char buf[AMLDIST__RZ_JOIN_LEN];
    amldist__rz_join_t j = {
        .token = r->cfg.token, .agent = r->agent, .run = r->cfg.run,
        .round = 0, .nproc = (uint32_t)r->nproc,
        .order = r->order < 0 ? AMLDIST__RZ_NONE : (uint32_t)r->order,
        .min = (uint32_t)r->cfg.min, .max = (uint32_t)r->cfg.max,
        .max_restarts = (uint32_t)r->cfg.max_restarts,
        .port = (uint32_t)free_port(),
    };
    amldist__rz_put_join(buf, &j);
    if (amldist__conn_send(&r->c, AMLDIST__RZ_JOIN, buf, sizeof buf) < 0)
        host_lost(r, "cannot send", 1);
}

static int maybe_host(amldist_rdzv_t *r);

/* Connect (the host may not listen yet: retry with backoff until the join
 * deadline).  Blocks at most a short while: an agent that hosts connects to
 * itself at once. */
static void try_connect(amldist_rdzv_t *r)
{
    long long now = now_ms();
    if (now < r->next_try)
        return;
    /* The host may have gone before the round formed: the port is free
     * again, and an agent on the endpoint's machine takes it over. */
    if (!r->host)
        maybe_host(r);
    int last = ECONNREFUSED;
    for (const struct addrinfo *ai = r->ai; ai; ai = ai->ai_next) {
        long long dl = now + 2000 < r->join_deadline ? now + 2000
                                                     : r->join_deadline;
        int fd = amldist__net_connect(ai, dl);
        if (fd >= 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            amldist__rz_conn_init(&r->c, fd);
            pthread_mutex_lock(&r->mu);
            r->sh.state = C_JOINING;
            pthread_mutex_unlock(&r->mu);
            send_join(r);
            return;
        }
        last = errno;
    }
    if (now_ms() >= r->join_deadline) {
        char why[200];
        snprintf(why, sizeof why, "no host answered within %.0f s (last: %s)",
                 r->cfg.join_timeout_ms / 1000.0, strerror(last));
        pthread_mutex_lock(&r->mu);
        r->sh.err = AMLDIST_ETIMEDOUT;
        snprintf(r->sh.errmsg, sizeof r->sh.errmsg, "rendezvous at %s: %s",
                 r->endpoint, why);
        set_over(r, AMLDIST_RDZV_STATUS_LOST, r->sh.errmsg);
        pthread_mutex_unlock(&r->mu);
        return;
    }
    r->next_try = now_ms() + r->backoff_ms;
    if (r->backoff_ms < 200)
        r->backoff_ms *= 2;
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
        host_lost(r, "cannot send to it", 1);
}

/* amldist__conn_read() stops by itself once on_frame() closed r->c. */
static int client_frame(void *r, unsigned type, const unsigned char *p,
                        uint32_t len)
{
    on_frame(r, type, p, len);
    return 0;
}

static void client_io(amldist_rdzv_t *r, short revents)
{
    if ((revents & POLLOUT) && amldist__conn_flush(&r->c) < 0) {
        host_lost(r, "the connection failed", 1);
        return;
    }
    if (!(revents & (POLLIN | POLLHUP | POLLERR)))
        return;
    const char *why;
    int rc = amldist__conn_read(&r->c, client_frame, r, &why);
    if (rc < 0)
        host_lost(r, why, rc == -2);
}

static void client_timers(amldist_rdzv_t *r)
{
    long long now = now_ms();
    if (r->c.fd < 0)
        return;
    if (now - r->c.last_rx > r->cfg.dead_ms) {
        char why[96];
        snprintf(why, sizeof why, "no heartbeat for %.1f s",
                 r->cfg.dead_ms / 1000.0);
        host_lost(r, why, 0);
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
        set_over(r, AMLDIST_RDZV_STATUS_LOST, r->sh.errmsg);
        pthread_mutex_unlock(&r->mu);
        amldist__conn_close(&r->c);
        return;
    }
    if (now - r->last_beat >= r->cfg.keepalive_ms) {
        r->last_beat = now;
        if (amldist__conn_send(&r->c, AMLDIST__RZ_BEAT, NULL, 0) < 0)
            host_lost(r, "it stopped reading", 0);
    }
}

static int poll_timeout(const amldist_rdzv_t *r, int connecting)
{
    long long now = now_ms();
    long long t = r->last_beat + r->cfg.keepalive_ms;
    if (connecting && r->next_try < t)
        t = r->next_try;
    if (r->host) {
        long long h = amldist__rz_host_next_wake(r->host);
        if (h < t)
            t = h;
    }
    if (t <= now)
        return 0;
    return t - now > 60000 ? 60000 : (int)(t - now);
}

static void *run(void *arg)
{
    amldist_rdzv_t *r = arg;
    enum { MAXFD = AMLDIST_RDZV_MAX_NODES + 1024 + 16 };
    struct pollfd *pfd = malloc(MAXFD * sizeof *pfd);
    if (!pfd) {
        host_lost(r, "out of memory", 0);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&r->mu);
        int state = r->sh.state, closing = r->sh.closing;
        pthread_mutex_unlock(&r->mu);
        if (closing) {
            amldist__conn_close(&r->c);
            if (!r->host || amldist__rz_host_drained(r->host))
                break;
        }
        if (state == C_CONNECTING && !closing)
            try_connect(r);
        send_queued(r);
        int n = 0;
        pfd[n++] = (struct pollfd){r->wake[0], POLLIN, 0};
        int cfd = r->c.fd;
        if (cfd >= 0)
            pfd[n++] = (struct pollfd){cfd, (short)(POLLIN |
                       (r->c.out_off < r->c.out_len ? POLLOUT : 0)), 0};
        int hbase = n;
        if (r->host)
            amldist__rz_host_fds(r->host, pfd, &n, MAXFD);
        pthread_mutex_lock(&r->mu);
        int connecting = r->sh.state == C_CONNECTING;
        pthread_mutex_unlock(&r->mu);
        if (poll(pfd, (nfds_t)n, poll_timeout(r, connecting)) < 0 &&
            errno != EINTR)
            continue;
        if (pfd[0].revents) {
            char b[64];
            while (read(r->wake[0], b, sizeof b) > 0) {
            }
        }
        if (cfd >= 0 && r->c.fd == cfd)
            client_io(r, pfd[1].revents);
        client_timers(r);
        if (r->host)
            amldist__rz_host_serve(r->host, pfd + hbase, n - hbase);
    }
    free(pfd);
    return NULL;
}

/* ---- the caller's side ---- */

static const size_t options_sizes[AMLDIST_RDZV_OPTIONS_VERSION + 1] = {
    [1] = sizeof(amldist_rdzv_options_t),
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
    c->dead_ms = (long long)c->keepalive_ms * misses > 3600000
                     ? 3600000 : c->keepalive_ms * misses;
    c->master_port = o->master_port > 0 ? o->master_port : 0;
    if (o->master_addr)
        amldist__strlcpy(c->master_addr, o->master_addr,
                         sizeof c->master_addr);
    c->token = amldist__rz_token(o->token, o->endpoint, c->token_source,
                                 sizeof c->token_source);
    c->run = amldist__bs_hash(run, 0xcbf29ce484222325ull);
    if (getrandom(&r->agent, sizeof r->agent, GRND_NONBLOCK) !=
        (ssize_t)sizeof r->agent)
        r->agent = (uint64_t)getpid() << 32 ^ (uint64_t)now_ms();
    c->self_agent = r->agent;
    return 0;
}

/* Host the endpoint when its address is this machine's and the port is
 * free; else another agent hosts it.  Node 0 by order (a static job's
 * MASTER_ADDR may name it from outside: a NAT, a load balancer) hosts it
 * on every address when none of the endpoint's is its own. */
static int maybe_host(amldist_rdzv_t *r)
{
    int fds[8], nfds = 0, err = 0;
    if (amldist__net_listen_local(r->ep_host, r->ep_port, fds, 8, &nfds,
                                 &err) < 0)
        return 0; /* another agent's: join as a client */
    if (nfds == 0 && (err != EADDRNOTAVAIL || r->order != 0 ||
                      amldist__net_listen(r->ep_host, r->ep_port, fds, 8,
                                          &nfds, NULL, 0) < 0))
        return 0; /* not ours: join as a client */
    r->host = amldist__rz_host_new(&r->cfg, fds, nfds);
    if (!r->host) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    }
    return 0;
}

static void free_handle(amldist_rdzv_t *r)
{
    if (r->wake[0] >= 0)
        close(r->wake[0]);
    if (r->wake[1] >= 0)
        close(r->wake[1]);
    if (r->efd >= 0)
        close(r->efd);
    amldist__conn_close(&r->c);
    amldist__rz_host_free(r->host);
    if (r->ai)
        freeaddrinfo(r->ai);
    free(r->cur.nproc);
    free(r->sh.next.nproc);
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
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
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
        int *copy = malloc((size_t)n.nnodes * sizeof *copy);
        if (!copy) {
            pthread_mutex_unlock(&r->mu);
            return AMLDIST_ENOMEM;
        }
        memcpy(copy, n.nproc, (size_t)n.nnodes * sizeof *copy);
        free(r->cur.nproc);
        r->cur = n;
        r->cur.nproc = copy;
    }
    pthread_mutex_unlock(&r->mu);
    return got;
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
    r->wake[0] = r->wake[1] = r->efd = -1;
    r->c.fd = -1;
    r->cur.round = -1;
    r->sh.next.round = -1;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    amldist__strlcpy(r->endpoint, o.endpoint, sizeof r->endpoint);
    r->nproc = o.nproc;
    r->order = o.order;
    char err[300];
    if (amldist__parse_hostport(o.endpoint, r->ep_host, sizeof r->ep_host,
                                &r->ep_port) < 0 || r->ep_port <= 0) {
        rc = amldist__fail(AMLDIST_EINVAL, "rendezvous endpoint '%s': want "
                           "HOST:PORT", o.endpoint);
    } else if ((rc = fill_cfg(r, &o)) < 0) {
        /* message set */
    } else if (amldist__net_resolve(r->ep_host, r->ep_port, &r->ai, err,
                                   sizeof err) < 0) {
        rc = amldist__fail(AMLDIST_ESYS, "rendezvous endpoint %s: %s",
                           o.endpoint, err);
    } else if (pipe2(r->wake, O_CLOEXEC | O_NONBLOCK) < 0 ||
               (r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        rc = amldist__fail(AMLDIST_ESYS, "rendezvous: %s", strerror(errno));
    } else {
        rc = maybe_host(r);
    }
    if (rc < 0) {
        free_handle(r);
        return rc;
    }
    r->join_deadline = now_ms() + r->cfg.join_timeout_ms;
    r->backoff_ms = 1;
    r->last_beat = now_ms();
    /* The thread takes no signal: the caller's signalfd must see them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&r->thread, NULL, run, r);
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
    wake_thread(r);
    return 0;
}

int amldist_rdzv_done(amldist_rdzv_t *r, int status)
{
    amldist__clear_error();
    if (!r)
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_done: no handle");
    int port = r->cfg.master_port > 0 ? 0 : free_port();
    pthread_mutex_lock(&r->mu);
    if (r->sh.state == C_RUNNING || r->sh.state == C_STOP) {
        r->sh.state = C_WAITING;
        r->sh.done = 1;
        r->sh.done_status = status & 0xff;
        r->sh.done_port = port;
    }
    pthread_mutex_unlock(&r->mu);
    wake_thread(r);
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
    /* Written by the thread only on a STOP, a new round or the end, none
     * of which comes while the caller reads it between two waits. */
    const char *why = r->sh.stop_why;
    pthread_mutex_unlock(&r->mu);
    return why;
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
    wake_thread(r);
    pthread_join(r->thread, NULL);
    free_handle(r);
}

int amldist_rdzv_worker_layout(const amldist_rdzv_t *r, int index,
                               amldist_t **out)
{
    amldist__clear_error();
    if (!r || !out || r->cur.round < 0)
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_worker_layout: "
                             "no handle, out or round");
    *out = NULL;
    int node = r->cur.node, own = r->cur.nproc[node];
    if (index < 0 || index >= own)
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_worker_layout: "
                             "worker %d of %d", index, own);
    return amldist__rz_layout(&r->cur, index, out);
}
