/*
 * An agent's handle between its caller and its network thread (lib/rdzv/
 * api.c, thread.c), on loopback, with the system calls that the library
 * makes interposed by this program (its definitions come before libc's):
 * a wall clock that steps, and a poll(2) that fails.  Each case is one
 * process (test.h), so the interposers' switches never leak.
 */
#undef _FORTIFY_SOURCE /* this file defines poll() itself */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
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

/* Set: poll() fails with ENOMEM (read by the handle's thread). */
static int poll_fails;

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
    CHECK_STR_HAS(amldist_rdzv_failure(r), "poll() failed");
    CHECK_STR_HAS(amldist_rdzv_failure(r), strerror(ENOMEM));
    amldist_rdzv_close(r);
}

int main(void)
{
    RUN(test_wait_clock_set_back);
    RUN(test_wait_clock_set_forward);
    RUN(test_stop_reason_is_the_callers);
    RUN(test_poll_failing_fails_the_handle);
    return test_summary();
}
