/*
 * The network thread of an agent's handle (see handle.h): its connection
 * to the host (connect, JOIN, heartbeats, the host's frames turned into
 * the state the caller reads), and, when this process hosts the endpoint,
 * the host's service (host.c) on the same poll loop, so that heartbeats and
 * the host's duties go on while the caller starts and supervises workers.
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

/* How long one address may take to accept a connection. */
#define CONNECT_MS 2000


/* Something for the caller: a stop, a new round, the end (under mu). */
static void signal_caller(amldist_rdzv_t *r)
{
    uint64_t one = 1;
    while (write(r->efd, &one, sizeof one) < 0 && errno == EINTR) {
    }
    pthread_cond_broadcast(&r->cv);
}

/* A port nobody listens on now (the kernel's pick); 0 when none. */
int amldist__rz_free_port(void)
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

/* Port 0 (torchrun 2.x's localhost:0, one node only, api.c): the kernel
 * picks a free port on the endpoint's first local address, and this agent
 * connects to that address alone, so that nothing else listening on
 * another address of the name can answer for it.  Nobody else can know
 * the port, so an endpoint that is not this machine's is an error. */
static int host_any_port(amldist_rdzv_t *r)
{
    int fd, nfds = 0, err = 0;
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    char num[NI_MAXHOST], why[200];
    struct addrinfo *ai = NULL;
    int rc = amldist__net_listen_local(r->ep_host, 0, &fd, 1, &nfds, &err);
    if (nfds == 0 && (err == 0 || err == EADDRNOTAVAIL))
        return amldist__fail(AMLDIST_EINVAL, "rendezvous endpoint %s: port 0 "
                             "means a free port of this machine, and %s is "
                             "not one of its addresses", r->endpoint,
                             r->ep_host);
    if (rc < 0 || nfds == 0)
        return amldist__fail(AMLDIST_ESYS, "rendezvous endpoint %s: cannot "
                             "listen on a free port of %s: %s", r->endpoint,
                             r->ep_host, strerror(err));
    if (getsockname(fd, (struct sockaddr *)&a, &len) < 0 ||
        getnameinfo((struct sockaddr *)&a, len, num, sizeof num, NULL, 0,
                    NI_NUMERICHOST) != 0) {
        close(fd);
        return amldist__fail(AMLDIST_ESYS, "rendezvous endpoint %s: cannot "
                             "read the port picked", r->endpoint);
    }
    int port = ntohs(a.ss_family == AF_INET6
                         ? ((struct sockaddr_in6 *)&a)->sin6_port
                         : ((struct sockaddr_in *)&a)->sin_port);
    if (amldist__net_resolve(num, port, &ai, why, sizeof why) < 0) {
        close(fd);
        return amldist__fail(AMLDIST_ESYS, "rendezvous endpoint %s: %s",
                             r->endpoint, why);
    }
    r->host = amldist__rz_host_new(&r->cfg, r->loop, &fd, 1);
    if (!r->host) {
        close(fd);
        freeaddrinfo(ai);
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    }
    freeaddrinfo(r->ai);
    r->ai = ai;
    r->ep_port = port;
    snprintf(r->endpoint, sizeof r->endpoint,
             strchr(r->ep_host, ':') ? "[%s]:%d" : "%s:%d", r->ep_host, port);
    return 0;
}

/* Host the endpoint when its address is this machine's and the port is
 * free; else another agent hosts it.  Node 0 by order (a static job's
 * MASTER_ADDR may name it from outside: a NAT, a load balancer) hosts it
 * on every address when none of the endpoint's is its own. */
int amldist__rz_maybe_host(amldist_rdzv_t *r)
{
    int fds[8], nfds = 0, err = 0;
    if (r->ep_port == 0)
        return host_any_port(r);
    if (amldist__net_listen_local(r->ep_host, r->ep_port, fds, 8, &nfds,
                                 &err) < 0)
        return 0; /* another agent's: join as a client */
    if (nfds == 0 && (err != EADDRNOTAVAIL || r->order != 0 ||
                      amldist__net_listen(r->ep_host, r->ep_port, fds, 8,
                                          &nfds, NULL, 0) < 0))
        return 0; /* not ours: join as a client */
    r->host = amldist__rz_host_new(&r->cfg, r->loop, fds, nfds);
    if (!r->host) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    }
    return 0;
}

static void on_client(void *arg, int fd, short revents);

/* The connection to the host opens and closes through these two: its
 * descriptor is in the loop exactly while it is open. */
static int client_open(amldist_rdzv_t *r, int fd)
{
    amldist__rz_conn_init(&r->c, fd);
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
    if (type == AMLDIST__RZ_WAIT) {
        amldist__rz_note_wait(r, p, len);
        return;
    }
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
        host_lost(r, "cannot send", 1);
}

/* Connected to the host: the connection is the client's, JOIN first. */
static void connected(amldist_rdzv_t *r, int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (client_open(r, fd) < 0) {
        host_lost(r, "out of memory", 0);
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
        set_over(r, AMLDIST_RDZV_STATUS_LOST, r->sh.errmsg);
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
static void try_connect(amldist_rdzv_t *r)
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
static void connect_abort(amldist_rdzv_t *r)
{
    if (r->try_fd < 0)
        return;
    amldist__loop_unwatch(r->loop, r->try_fd);
    close(r->try_fd);
    r->try_fd = -1;
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
    long long now = amldist__now_ms();
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
        client_close(r);
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
        host_lost(r, "out of memory", 0);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&r->mu);
        int state = r->sh.state, closing = r->sh.closing;
        pthread_mutex_unlock(&r->mu);
        if (closing) {
            connect_abort(r);
            client_close(r);
            if (!r->host || amldist__rz_host_drained(r->host))
                break;
        }
        if (state == C_CONNECTING && !closing)
            try_connect(r);
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
            host_lost(r, why, 0);
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
