/* The poll loop (see loop.h). */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "net/loop.h"

struct watch {
    amldist__loop_io_fn *fn;
    void *arg;
    unsigned gen;  /* changes when the fd is watched anew */
    short events;
    short armed;   /* epoll: the events registered (0: not registered) */
    int slot;      /* index in fds[], or -1 when not watched */
};

struct timer {
    long long at;
    amldist__loop_timer_fn *fn;
    void *arg;
    int id;
};

struct amldist__loop {
    struct watch *w;    /* indexed by fd */
    int wcap;
    int *fds;           /* the watched fds, dense */
    int nfds, fdcap;
    struct pollfd *pfd; /* one round's poll set and the gens it saw */
    unsigned *pgen;
    int pcap, gcap;
    unsigned gen;
    struct timer *t;
    int nt, tcap, next_id;
    int fails, failed;
    amldist__loop_poll_fn *poll;
    int ep; /* epoll's descriptor, or -1: poll() */
    struct epoll_event *ev;
    int evcap;
};

amldist__loop_t *amldist__loop_new(void)
{
    amldist__loop_t *l = calloc(1, sizeof(amldist__loop_t));
    if (l)
        l->ep = -1;
    return l;
}

amldist__loop_t *amldist__loop_new_epoll(void)
{
    amldist__loop_t *l = amldist__loop_new();
    if (l)
        l->ep = epoll_create1(EPOLL_CLOEXEC); /* -1: poll() after all */
    return l;
}

int amldist__loop_fd(const amldist__loop_t *l)
{
    return l->poll ? -1 : l->ep;
}

void amldist__loop_free(amldist__loop_t *l)
{
    if (!l)
        return;
    free(l->w);
    free(l->fds);
    free(l->pfd);
    free(l->pgen);
    free(l->t);
    free(l->ev);
    if (l->ep >= 0)
        close(l->ep);
    free(l);
}

/* Grows *p (of *cap elements of `size`) to hold `need`. */
static int grow(void **p, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return 0;
    int n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, (size_t)n * size);
    if (!q) {
        errno = ENOMEM;
        return -1;
    }
    *p = q;
    *cap = n;
    return 0;
}

static struct watch *watched(const amldist__loop_t *l, int fd)
{
    if (fd < 0 || fd >= l->wcap || l->w[fd].slot < 0)
        return NULL;
    return &l->w[fd];
}

/* epoll: fd's registration made what its watch says (events 0: none,
 * as poll() is not asked about it).  A descriptor closed while watched
 * left the set by itself, and one of the same number is added anew. */
static int arm(amldist__loop_t *l, int fd, struct watch *w)
{
    if (l->ep < 0)
        return 0;
    struct epoll_event e = {.events = (uint32_t)w->events,
                            .data.u64 = (uint64_t)w->gen << 32 |
                                        (uint32_t)fd};
    int rc = 0;
    if (!w->events) {
        if (w->armed)
            epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL);
    } else if (w->armed) {
        rc = epoll_ctl(l->ep, EPOLL_CTL_MOD, fd, &e);
        if (rc < 0 && errno == ENOENT)
            rc = epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &e);
    } else {
        rc = epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &e);
        if (rc < 0 && errno == EEXIST)
            rc = epoll_ctl(l->ep, EPOLL_CTL_MOD, fd, &e);
    }
    w->armed = rc == 0 ? w->events : 0;
    return rc;
}

int amldist__loop_watch(amldist__loop_t *l, int fd, short events,
                        amldist__loop_io_fn *fn, void *arg)
{
    if (fd < 0 || !fn) {
        errno = EINVAL;
        return -1;
    }
    if (fd >= l->wcap) {
        int old = l->wcap;
        if (grow((void **)&l->w, &l->wcap, fd + 1, sizeof *l->w) < 0)
            return -1;
        for (int i = old; i < l->wcap; i++) {
            l->w[i].slot = -1;
            l->w[i].armed = 0;
        }
    }
    struct watch *w = &l->w[fd];
    if (w->slot < 0) {
        if (grow((void **)&l->fds, &l->fdcap, l->nfds + 1, sizeof *l->fds) < 0)
            return -1;
        w->slot = l->nfds;
        l->fds[l->nfds++] = fd;
    }
    w->fn = fn;
    w->arg = arg;
    w->events = events;
    w->gen = ++l->gen;
    if (arm(l, fd, w) < 0) {
        int e = errno;
        amldist__loop_unwatch(l, fd);
        errno = e;
        return -1;
    }
    return 0;
}

int amldist__loop_events(amldist__loop_t *l, int fd, short events)
{
    struct watch *w = watched(l, fd);
    if (!w) {
        errno = EBADF;
        return -1;
    }
    if (w->events == events)
        return 0;
    w->events = events;
    return arm(l, fd, w);
}

void amldist__loop_unwatch(amldist__loop_t *l, int fd)
{
    struct watch *w = watched(l, fd);
    if (!w)
        return;
    if (l->ep >= 0 && w->armed)
        epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL);
    w->armed = 0;
    int last = l->fds[--l->nfds];
    l->fds[w->slot] = last;
    l->w[last].slot = w->slot;
    w->slot = -1;
    w->fn = NULL;
}

int amldist__loop_nwatched(const amldist__loop_t *l)
{
    return l->nfds;
}

int amldist__loop_timer(amldist__loop_t *l, long long at_ms,
                        amldist__loop_timer_fn *fn, void *arg)
{
    if (grow((void **)&l->t, &l->tcap, l->nt + 1, sizeof *l->t) < 0)
        return -1;
    if (++l->next_id <= 0) /* wrapped: ids stay positive */
        l->next_id = 1;
    l->t[l->nt++] = (struct timer){at_ms, fn, arg, l->next_id};
    return l->next_id;
}

void amldist__loop_cancel(amldist__loop_t *l, int id)
{
    for (int i = 0; i < l->nt; i++)
        if (l->t[i].id == id) {
            l->t[i] = l->t[--l->nt];
            return;
        }
}

/* The poll timeout: up to the first timer, within max_ms. */
static int timeout_ms(const amldist__loop_t *l, int max_ms, long long now)
{
    long long t = max_ms < 0 ? -1 : max_ms;
    for (int i = 0; i < l->nt; i++) {
        long long left = l->t[i].at - now;
        if (left < 0)
            left = 0;
        if (t < 0 || left < t)
            t = left;
    }
    return t > 86400000 ? 86400000 : (int)t;
}

/* Runs the timers due now, earliest first.  Only those set before the
 * round: a callback that re-arms at once waits for the next round, so that
 * I/O is never starved. */
static int run_timers(amldist__loop_t *l, int last_id)
{
    int ran = 0;
    for (;;) {
        long long now = amldist__now_ms();
        int best = -1;
        for (int i = 0; i < l->nt; i++)
            if (l->t[i].at <= now && l->t[i].id <= last_id &&
                (best < 0 || l->t[i].at < l->t[best].at))
                best = i;
        if (best < 0)
            return ran;
        struct timer t = l->t[best];
        l->t[best] = l->t[--l->nt];
        t.fn(t.arg);
        ran++;
    }
}

static void back_off(int fails)
{
    long ms = fails >= 8 ? 100 : 1L << (fails - 1);
    if (ms > 100)
        ms = 100;
    struct timespec ts = {0, ms * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static int real_poll(struct pollfd *pfd, unsigned long n, int timeout_ms)
{
    return poll(pfd, (nfds_t)n, timeout_ms);
}

void amldist__loop_set_poll(amldist__loop_t *l, amldist__loop_poll_fn *fn)
{
    l->poll = fn;
}

int amldist__loop_failed(const amldist__loop_t *l)
{
    return l->failed;
}

/* A failed wait (EINTR aside): -1 after AMLDIST__LOOP_MAX_FAILS in a row,
 * else 0 after backing off. */
static int wait_failed(amldist__loop_t *l)
{
    int e = errno;
    l->failed = 1;
    if (++l->fails >= AMLDIST__LOOP_MAX_FAILS) {
        l->fails = 0;
        errno = e;
        return -1;
    }
    back_off(l->fails);
    errno = e;
    return 0;
}

/* One round on epoll: only the descriptors that are ready cost anything. */
static int once_epoll(amldist__loop_t *l, int max_ms)
{
    int cap = l->nfds < 64 ? 64 : l->nfds;
    if (grow((void **)&l->ev, &l->evcap, cap, sizeof *l->ev) < 0)
        return -1;
    int last_id = l->next_id;
    int ready = epoll_wait(l->ep, l->ev, l->evcap,
                           timeout_ms(l, max_ms, amldist__now_ms()));
    l->failed = 0;
    if (ready < 0)
        return errno == EINTR ? 0 : wait_failed(l);
    l->fails = 0;
    int ran = run_timers(l, last_id);
    for (int i = 0; i < ready; i++) {
        int fd = (int)(uint32_t)l->ev[i].data.u64;
        unsigned gen = (unsigned)(l->ev[i].data.u64 >> 32);
        struct watch *w = watched(l, fd);
        /* Unwatched, or watched anew by an earlier callback this round. */
        if (!w || w->gen != gen || !w->events)
            continue;
        w->fn(w->arg, fd, (short)l->ev[i].events);
        ran++;
    }
    return ran;
}

int amldist__loop_once(amldist__loop_t *l, int max_ms)
{
    if (l->ep >= 0 && !l->poll)
        return once_epoll(l, max_ms);
    if (grow((void **)&l->pfd, &l->pcap, l->nfds, sizeof *l->pfd) < 0 ||
        grow((void **)&l->pgen, &l->gcap, l->nfds, sizeof *l->pgen) < 0)
        return -1;
    int n = 0;
    for (int i = 0; i < l->nfds; i++) {
        struct watch *w = &l->w[l->fds[i]];
        if (!w->events)
            continue;
        l->pfd[n] = (struct pollfd){l->fds[i], w->events, 0};
        l->pgen[n++] = w->gen;
    }
    int last_id = l->next_id;
    int ready = (l->poll ? l->poll : real_poll)(
        l->pfd, (unsigned long)n, timeout_ms(l, max_ms, amldist__now_ms()));
    l->failed = 0;
    if (ready < 0)
        return errno == EINTR ? 0 : wait_failed(l);
    l->fails = 0;
    int ran = run_timers(l, last_id);
    for (int i = 0; i < n && ready > 0; i++) {
        if (!l->pfd[i].revents)
            continue;
        ready--;
        struct watch *w = watched(l, l->pfd[i].fd);
        /* Unwatched, or watched anew by an earlier callback this round. */
        if (!w || w->gen != l->pgen[i])
            continue;
        w->fn(w->arg, l->pfd[i].fd, l->pfd[i].revents);
        ran++;
    }
    return ran;
}
