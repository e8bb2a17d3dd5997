/*
 * One small poll(2) (or epoll(7)) loop, in the manner of redis' ae.c: descriptors watched
 * with a callback each, and one-shot timers on the monotonic clock.  Used by
 * the bootstrap's server, the control plane's thread and amlrun's supervisor
 * (which links this file into itself: the library hides its symbols).
 *
 * Not thread-safe: one loop belongs to one thread.  Callbacks may watch,
 * unwatch and re-arm any descriptor or timer, their own included; a
 * descriptor unwatched (or watched anew) during a round gets no callback for
 * events polled before that change.
 */
#ifndef AMLDIST_NET_LOOP_H
#define AMLDIST_NET_LOOP_H

#include "util/clock.h"

struct pollfd;
typedef struct amldist__loop amldist__loop_t;

/* Called with the poll revents (POLLIN, POLLOUT, POLLERR, POLLHUP...). */
typedef void amldist__loop_io_fn(void *arg, int fd, short revents);
typedef void amldist__loop_timer_fn(void *arg);

/* poll() failing this many times in a row (EINTR aside) ends the loop's
 * round with -1; between failures it backs off, 1 ms doubling to 100 ms, so
 * that a loop out of memory neither spins nor gives up at the first try. */
#define AMLDIST__LOOP_MAX_FAILS 20

amldist__loop_t *amldist__loop_new(void);
/* The same loop on epoll(7): a round costs the descriptors that are ready,
 * not every one watched (the rendezvous host's thousands of connections);
 * poll() where epoll is not to be had, and while a poll function is set
 * (amldist__loop_set_poll).  Not across fork(): the set is shared. */
amldist__loop_t *amldist__loop_new_epoll(void);
void amldist__loop_free(amldist__loop_t *l);

/* Watch fd for `events` (POLLIN, POLLOUT or both; 0 keeps it registered
 * but asleep).  Watching an fd already watched replaces its callback.
 * 0, or -1 with errno (EINVAL, ENOMEM). */
int amldist__loop_watch(amldist__loop_t *l, int fd, short events,
                        amldist__loop_io_fn *fn, void *arg);
/* Change the events of a watched fd; 0, or -1 (EBADF) when not watched. */
int amldist__loop_events(amldist__loop_t *l, int fd, short events);
/* Forget fd (it is not closed).  Unknown fds are ignored. */
void amldist__loop_unwatch(amldist__loop_t *l, int fd);
/* The descriptor that is readable while a watched one is ready (epoll's),
 * for a caller that waits in another poll (libcurl's) and then runs a
 * round of 0 ms; -1 on poll(). */
int amldist__loop_fd(const amldist__loop_t *l);
/* Number of descriptors watched. */
int amldist__loop_nwatched(const amldist__loop_t *l);

/* A one-shot timer at `at_ms` on amldist__now_ms()'s clock (util/clock.h): its id
 * (> 0), or -1 (ENOMEM). */
int amldist__loop_timer(amldist__loop_t *l, long long at_ms,
                        amldist__loop_timer_fn *fn, void *arg);
/* Cancel a timer that has not fired; unknown ids are ignored. */
void amldist__loop_cancel(amldist__loop_t *l, int id);

/* One round: poll until an event, the first timer or `max_ms` (-1: no
 * bound besides the timers), then run the due timers and the callbacks of
 * the descriptors that are ready.  Returns the number of callbacks run
 * (timers included), 0 on a timeout or EINTR, or -1 with poll()'s errno
 * after AMLDIST__LOOP_MAX_FAILS failures in a row. */
int amldist__loop_once(amldist__loop_t *l, int max_ms);

/* Whether the last round's wait failed (EINTR aside): the round was no
 * round, and its caller's timers wait for one that waited. */
int amldist__loop_failed(const amldist__loop_t *l);

/* For tests: the poll(2) the loop calls (NULL: the real one). */
typedef int amldist__loop_poll_fn(struct pollfd *pfd, unsigned long n,
                                  int timeout_ms);
void amldist__loop_set_poll(amldist__loop_t *l, amldist__loop_poll_fn *fn);

#endif
