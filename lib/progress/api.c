/* amldist_progress() and amldist_progress_expect(): the worker's side of
 * the progress page (page.h).
 *
 * The first call finds the page (AMLDIST_PROGRESS_FD, AMLDIST_PROGRESS_SLOT),
 * maps it and claims the slot, once per process (pthread_once); every later
 * call is a load of the slot's address, the vDSO's clock and a few stores.
 * A child made by fork() never writes (pthread_atfork, registered when the
 * library loads): its parent writes the slot, and two writers of one slot would make each other's records
 * meaningless.  A program that a worker runs inherits the descriptor and
 * the variables, but finds the slot claimed by the worker: it records
 * nothing either. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "progress/page.h"
#include "util/internal.h"

static pthread_once_t found = PTHREAD_ONCE_INIT;
static _Atomic(void *) my_slot;
/* Set in a forked child: it never looks again. */
static atomic_int forked;

static void forget_in_child(void)
{
    atomic_store(&forked, 1);
    atomic_store(&my_slot, NULL);
}

/* Registered when the library loads, so that a child forked before the
 * worker's first call does not claim its parent's slot either. */
static atomic_int atfork_ok;
__attribute__((constructor)) static void watch_forks(void)
{
    atomic_store(&atfork_ok,
                 pthread_atfork(NULL, NULL, forget_in_child) == 0);
}

static void find(void)
{
    /* A child could not be told: no page rather than two writers. */
    if (!atomic_load(&atfork_ok) || atomic_load(&forked))
        return;
    void *s = amldist__progress_slot_open(getenv(AMLDIST__PROGRESS_FD_ENV),
                                          getenv(AMLDIST__PROGRESS_SLOT_ENV),
                                          (int)getpid());
    atomic_store_explicit(&my_slot, s, memory_order_release);
}

/* This process's slot, found at the first call; NULL: none. */
static void *slot(void)
{
    void *s = atomic_load_explicit(&my_slot, memory_order_acquire);
    if (!s) {
        if (atomic_load_explicit(&forked, memory_order_relaxed))
            return NULL;
        pthread_once(&found, find);
        s = atomic_load_explicit(&my_slot, memory_order_acquire);
    }
    return s;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int amldist_progress(uint64_t step)
{
    void *s = slot();
    if (s)
        amldist__progress_slot_write(s, step, now_ns());
    return 0;
}

/* The longest step one may announce: far beyond any job, and no overflow
 * of the clock's nanoseconds. */
#define EXPECT_MAX_S 1e9

int amldist_progress_expect(double seconds)
{
    if (!(seconds >= 0) || seconds > EXPECT_MAX_S) {
        errno = EINVAL; /* NaN, negative, or beyond any job */
        return -1;
    }
    void *s = slot();
    if (s)
        amldist__progress_slot_expect(s, now_ns() + (int64_t)(seconds * 1e9));
    return 0;
}
