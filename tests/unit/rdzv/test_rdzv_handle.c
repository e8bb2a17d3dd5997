/*
 * An agent's handle between its caller and its network thread (lib/rdzv/
 * api.c, tcp/thread.c), on loopback, with the system calls that the library
 * makes interposed by this program (its definitions come before libc's):
 * a wall clock that steps, a poll(2) that fails, a connect(2) sent to an
 * address that never answers.  Each case is one
 * process (test.h), so the interposers' switches never leak.
 *
 * amldist-test: slow (cases wait out the agent's timeouts: 6 s)
 */
#undef _FORTIFY_SOURCE /* this file defines poll() itself */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#include "rdzv/handle.h"
#include "test.h"

/* ---- interposers ---- */

/* Added to CLOCK_REALTIME as the library reads it: a clock step. */
static long long realtime_step_ms;

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    if (rc == 0 && id == CLOCK_REALTIME && realtime_step_ms) {
        long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec +
                       realtime_step_ms * 1000000LL;
        ts->tv_sec = (time_t)(ns / 1000000000LL);
        ts->tv_nsec = (long)(ns % 1000000000LL);
    }
    return rc;
}

/* Set: poll() and epoll_wait() fail with ENOMEM (read by the handle's
 * thread, whose loop is on epoll). */
static int poll_fails;

int epoll_wait(int ep, struct epoll_event *ev, int max, int timeout_ms)
{
    static int (*real)(int, struct epoll_event *, int, int);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "epoll_wait");
    if (__atomic_load_n(&poll_fails, __ATOMIC_RELAXED)) {
        errno = ENOMEM;
        return -1;
    }
    return real(ep, ev, max, timeout_ms);
}

int poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
    static int (*real)(struct pollfd *, nfds_t, int);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "poll");
    if (__atomic_load_n(&poll_fails, __ATOMIC_RELAXED)) {
        errno = ENOMEM;
        return -1;
    }
    return real(fds, n, timeout_ms);
}

/* Set: the next divert_left connects to port divert_port go to divert_to
 * instead (read by the handle's thread). */
static int divert_port, divert_left;
static struct sockaddr_in divert_to;

int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
    static int (*real)(int, __CONST_SOCKADDR_ARG, socklen_t);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "connect");
    const struct sockaddr_in *in =
        (const struct sockaddr_in *)addr.__sockaddr__;
    if (in->sin_family == AF_INET && divert_port &&
        ntohs(in->sin_port) == divert_port &&
        __atomic_fetch_sub(&divert_left, 1, __ATOMIC_RELAXED) > 0)
        return real(fd, (const struct sockaddr *)&divert_to,
                    sizeof divert_to);
    return real(fd, addr, len);
}

/* ---- helpers ---- */

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static char endpoint[64];

/* Options of a job of `nodes` nodes on a fresh loopback endpoint. */
static amldist_rdzv_options_t options(int nodes, int max_restarts)
{
    amldist_rdzv_options_t o = AMLDIST_RDZV_OPTIONS_INIT;
    if (!endpoint[0])
        snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d",
                 amldist__rz_free_port());
    o.endpoint = endpoint;
    o.token = "rdzv-handle-test";
    o.min_nodes = o.max_nodes = nodes;
    o.max_restarts = max_restarts;
    o.join_timeout_ms = 20000;
    o.last_call_ms = 0;
    o.keepalive_ms = 100;
    o.keepalive_misses = 5;
    return o;
}

/* A one-node job: this process hosts it and is its node 0. */
static amldist_rdzv_t *join_alone(int max_restarts)
{
    amldist_rdzv_options_t o = options(1, max_restarts);
    amldist_rdzv_t *r = NULL;
    int rc = amldist_rdzv_join(&o, &r);
    if (rc < 0)
        fprintf(stderr, "# join: %s\n", amldist_last_error());
    CHECK_INT_EQ(rc, 0);
    CHECK_INT_EQ(amldist_rdzv_is_host(r), 1);
    return r;
}

/* ---- cases ---- */

/* amldist_rdzv_wait()'s timeout is a duration: a step of the wall clock
 * (set back an hour, or forward 5 s) moves it neither way. */
static void wait_through_step(long long step_ms)
{
    amldist_rdzv_t *r = join_alone(0);
    if (!r)
        return;
    realtime_step_ms = step_ms;
    long long t0 = mono_ms();
    CHECK_INT_EQ(amldist_rdzv_wait(r, 300), AMLDIST_ETIMEDOUT);
    long long took = mono_ms() - t0;
    realtime_step_ms = 0;
    if (took < 250 || took > 2000)
        TEST__FAIL("wait(300 ms) took %lld ms after a clock step of %lld ms",
                   took, step_ms);
    amldist_rdzv_close(r);
}

static void test_wait_clock_set_back(void) { wait_through_step(-3600000); }
static void test_wait_clock_set_forward(void) { wait_through_step(5000); }

/* Wait until the handle's state is a stop (its descriptor readable). */
static int wait_stop(amldist_rdzv_t *r, int ms)
{
    struct pollfd p = {amldist_rdzv_fd(r), POLLIN, 0};
    long long end = mono_ms() + ms;
    while (mono_ms() < end) {
        if (amldist_rdzv_state(r) == AMLDIST_RDZV_STOP)
            return 1;
        poll(&p, 1, 50);
    }
    return 0;
}

/* The reason a caller holds stays as it read it while the thread takes in
 * the next round (whose ASSIGN empties the handle's own). */
static void test_stop_reason_is_the_callers(void)
{
    amldist_rdzv_t *r = join_alone(1);
    if (!r)
        return;
    CHECK_STR_EQ(amldist_rdzv_stop_reason(r), "");
    CHECK_INT_EQ(amldist_rdzv_fail(r, 0, 0, 3, "boom"), 0);
    CHECK(wait_stop(r, 10000));
    const char *why = amldist_rdzv_stop_reason(r);
    char seen[256];
    snprintf(seen, sizeof seen, "%s", why);
    CHECK_STR_HAS(seen, "a worker, failed with exit status 3");
    CHECK_INT_EQ(amldist_rdzv_done(r, 3), 0);
    CHECK_INT_EQ(amldist_rdzv_wait(r, 10000), 1); /* the restart */
    CHECK_INT_EQ(amldist_rdzv_restart_count(r), 1);
    CHECK_STR_EQ(why, seen);
    CHECK_STR_EQ(amldist_rdzv_stop_reason(r), ""); /* read anew: running */
    amldist_rdzv_close(r);
}

/* A thread whose poll() keeps failing neither spins nor goes on in
 * silence: after the loop's retries the handle fails, saying why. */
static void test_poll_failing_fails_the_handle(void)
{
    amldist_rdzv_t *r = join_alone(0);
    if (!r)
        return;
    __atomic_store_n(&poll_fails, 1, __ATOMIC_RELAXED);
    CHECK_INT_EQ(amldist_rdzv_wait(r, 8000), 0); /* the job is over here */
    __atomic_store_n(&poll_fails, 0, __ATOMIC_RELAXED);
    CHECK_INT_EQ(amldist_rdzv_state(r), AMLDIST_RDZV_STOP);
    CHECK_INT_EQ(amldist_rdzv_exit_status(r), AMLDIST_RDZV_STATUS_LOST);
    CHECK_STR_HAS(amldist_rdzv_failure(r), "(epoll_wait) failed");
    CHECK_STR_HAS(amldist_rdzv_failure(r), strerror(ENOMEM));
    amldist_rdzv_close(r);
}

/* A listener on loopback that answers no SYN: its one-place backlog is
 * full.  Its address in *to; 0, or -1 when the kernel answers anyway. */
static int silent_listener(struct sockaddr_in *to, int *fds, int nfds)
{
    socklen_t len = sizeof *to;
    *to = (struct sockaddr_in){.sin_family = AF_INET,
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (bind(fds[0], (struct sockaddr *)to, sizeof *to) < 0 ||
        listen(fds[0], 0) < 0 ||
        getsockname(fds[0], (struct sockaddr *)to, &len) < 0)
        return -1;
    for (int i = 1; i < nfds; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        0);
        connect(fds[i], (struct sockaddr *)to, sizeof *to);
        struct pollfd p = {fds[i], POLLOUT, 0};
        if (poll(&p, 1, 200) == 0)
            return 0; /* this one hangs: so will the next */
    }
    return -1;
}

/* Wait until something accepts connections on 127.0.0.1:port. */
static int wait_accepting(int port, int ms)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (long long end = mono_ms() + ms; mono_ms() < end;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
        close(fd);
        if (ok)
            return 1;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* This process hosts a two-node job, and its own agent's first connect
 * to the endpoint hangs (2 s, its bound).  The host serves meanwhile: the
 * other agent, whose dead time is 0.5 s, hears its heartbeats and stays,
 * and the round forms once this agent's second try connects. */
static void test_host_serves_while_its_agent_connects(void)
{
    int held[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    if (silent_listener(&divert_to, held, 8) < 0) {
        printf("ok - test_host_serves_while_its_agent_connects # SKIP "
               "loopback answers every SYN\n");
        return;
    }
    amldist_rdzv_options_t o = options(2, 0);
    o.join_timeout_ms = 6000;
    int port = atoi(strrchr(endpoint, ':') + 1);
    pid_t pid = fork();
    if (pid == 0) {
        amldist_rdzv_t *r = NULL;
        if (!wait_accepting(port, 10000))
            _exit(2);
        int rc = amldist_rdzv_join(&o, &r);
        if (rc < 0) {
            fprintf(stderr, "# the other agent: %s\n", amldist_last_error());
            _exit(1);
        }
        amldist_rdzv_done(r, 0);
        rc = amldist_rdzv_wait(r, 10000);
        amldist_rdzv_close(r);
        _exit(rc == 0 ? 0 : 3);
    }
    divert_port = port;
    divert_left = 1;
    amldist_rdzv_t *r = NULL;
    int rc = amldist_rdzv_join(&o, &r);
    if (rc < 0)
        fprintf(stderr, "# join: %s\n", amldist_last_error());
    CHECK_INT_EQ(rc, 0);
    if (r) {
        CHECK_INT_EQ(amldist_rdzv_is_host(r), 1);
        CHECK_INT_EQ(amldist_rdzv_num_nodes(r), 2);
        CHECK_INT_EQ(amldist_rdzv_done(r, 0), 0);
        CHECK_INT_EQ(amldist_rdzv_wait(r, 10000), 0);
        amldist_rdzv_close(r);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < 8 && held[i] >= 0; i++)
        close(held[i]);
}

/* An agent whose host is not there yet waits between its tries: bound but
 * not listening, the endpoint refuses every connect, and the join times
 * out having cost little CPU. */
static void test_waiting_for_a_host_does_not_spin(void)
{
    amldist_rdzv_options_t o = options(1, 0);
    int port = atoi(strrchr(endpoint, ':') + 1);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK_INT_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    o.join_timeout_ms = 1500;
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    amldist_rdzv_t *r = NULL;
    CHECK_INT_EQ(amldist_rdzv_join(&o, &r), AMLDIST_ETIMEDOUT);
    CHECK_STR_HAS(amldist_last_error(), "no host answered");
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    long long cpu = (c1.tv_sec - c0.tv_sec) * 1000LL +
                    (c1.tv_nsec - c0.tv_nsec) / 1000000;
    if (cpu > 500)
        TEST__FAIL("a join of 1.5 s took %lld ms of CPU", cpu);
    close(fd);
}

struct joiner {
    amldist_rdzv_options_t o;
    int rc, status;
    char error[512];
};

static void *join_thread(void *arg)
{
    struct joiner *j = arg;
    amldist_rdzv_t *r = NULL;
    j->rc = amldist_rdzv_join(&j->o, &r);
    j->status = amldist_rdzv_join_status(); /* this thread's */
    snprintf(j->error, sizeof j->error, "%s", amldist_last_error());
    if (r)
        amldist_rdzv_close(r);
    return NULL;
}

/* A node that cannot start (amldist_rdzv_join_failed) ends the forming
 * job: the node that joined is refused with its reason, and
 * amldist_rdzv_join_status() gives its status, so that its launcher exits
 * with the first failure's; a join that worked leaves -1.  Whichever
 * agent hosts (the joiner, or the failing node if it binds first and
 * tells the joiner when it comes), the joiner hears the same. */
static void test_join_status_after_another_node_failed(void)
{
    amldist_rdzv_t *alone = join_alone(0);
    CHECK_INT_EQ(amldist_rdzv_join_status(), -1);
    amldist_rdzv_close(alone);
    endpoint[0] = '\0';
    struct joiner j = {.o = options(2, 0), .rc = 1};
    pthread_t t;
    CHECK_INT_EQ(pthread_create(&t, NULL, join_thread, &j), 0);
    struct timespec pause = {0, 300 * 1000000L};
    nanosleep(&pause, NULL); /* (either order: see above) */
    amldist_rdzv_options_t o = options(2, 0);
    CHECK_INT_EQ(amldist_rdzv_join_failed(&o, 127,
                                          "amlrun:   ./typo: not found\n"),
                 0);
    pthread_join(t, NULL);
    CHECK_INT_EQ(j.rc, AMLDIST_EDENIED);
    CHECK_STR_HAS(j.error, "could not start, exit status 127");
    CHECK_INT_EQ(j.status, 127);
}

int main(void)
{
    RUN(test_wait_clock_set_back);
    RUN(test_wait_clock_set_forward);
    RUN(test_stop_reason_is_the_callers);
    RUN(test_poll_failing_fails_the_handle);
    RUN(test_host_serves_while_its_agent_connects);
    RUN(test_waiting_for_a_host_does_not_spin);
    RUN(test_join_status_after_another_node_failed);
    return test_summary();
}
