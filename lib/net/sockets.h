/*
 * TCP sockets for the bootstrap and the control plane: listening on an
 * address, connecting with a deadline, and whole-buffer I/O under a
 * deadline.  Every descriptor is close-on-exec and non-blocking; sends
 * never raise SIGPIPE.  Deadlines are in ms of amldist__now_ms()
 * (net/loop.h), the monotonic clock.  Errors come back as errno or as text
 * for the caller to word its own message: nothing here knows who calls.
 */
#ifndef AMLDIST_NET_SOCKETS_H
#define AMLDIST_NET_SOCKETS_H

#include <stddef.h>

#include "net/loop.h"

struct addrinfo;

/* "10.0.0.4:29501" or "[fe80::1]:29501". */
void amldist__net_format_addr(const char *host, int port, char *buf,
                              size_t size);

/* `host` did not resolve (amldist__net_listen). */
#define AMLDIST__NET_UNRESOLVED (-2)

/* Listening sockets on every address `host` resolves to, or on every
 * address of this machine when none of them is its own (the name may reach
 * it from outside: a NAT, a load balancer).  0; -1 with errno when no
 * socket listens (EADDRINUSE: the port is taken); AMLDIST__NET_UNRESOLVED
 * with getaddrinfo's reason in `err` (which may be NULL). */
int amldist__net_listen(const char *host, int port, int *fds, int max_fds,
                        int *nfds, char *err, size_t errsize);
/* Listening sockets on the addresses `host` resolves to that are this
 * machine's, never the wildcard: 0 with *nfds 0 when none is local or the
 * port is taken (*err says which), -1 on other errors. */
int amldist__net_listen_local(const char *host, int port, int *fds,
                              int max_fds, int *nfds, int *err);
/* getaddrinfo for a client; -1 with the reason in err. */
int amldist__net_resolve(const char *host, int port, struct addrinfo **out,
                         char *err, size_t errsize);
/* A connected non-blocking socket, or -1 with errno (ETIMEDOUT at the
 * deadline). */
int amldist__net_connect(const struct addrinfo *ai, long long deadline);
/* Send or receive exactly len bytes before the deadline; 0, or -1 with errno
 * (ECONNRESET when the peer closed first). */
int amldist__net_io(int fd, void *buf, size_t len, int writing,
                    long long deadline);

#endif /* AMLDIST_NET_SOCKETS_H */
