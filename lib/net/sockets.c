/* Sockets: listening, connecting with a deadline, whole-buffer I/O under a
 * deadline (see sockets.h). */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/sockets.h"

void amldist__net_format_addr(const char *host, int port, char *buf,
                             size_t size)
{
    if (strchr(host, ':'))
        snprintf(buf, size, "[%s]:%d", host, port);
    else
        snprintf(buf, size, "%s:%d", host, port);
}

static int resolve(const char *host, int port, int passive,
                   struct addrinfo **out)
{
    char serv[16];
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    /* No AI_ADDRCONFIG: it hides ::1 on hosts whose only IPv6 address is
     * the loopback one, which is exactly where a one-node job runs. */
    hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    snprintf(serv, sizeof serv, "%d", port);
    return getaddrinfo(host, serv, &hints, out);
}

int amldist__net_resolve(const char *host, int port, struct addrinfo **out,
                        char *err, size_t errsize)
{
    int rc = resolve(host, port, 0, out);
    if (rc == 0)
        return 0;
    snprintf(err, errsize, "cannot resolve %s: %s", host,
             rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    return -1;
}

/* One listening socket; -1 with errno on failure. */
static int listen_one(const struct addrinfo *ai)
{
    int one = 1;
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
                                       SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
        return -1;
    /* SO_REUSEADDR: a job restarted at once must not wait for the last
     * job's connections to leave TIME_WAIT.  V6ONLY: the IPv4 address of
     * the same name gets its own socket instead of colliding. */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        (ai->ai_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 4096) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int bind_all(struct addrinfo *res, int *fds, int max_fds, int *nfds,
                    int *last_errno)
{
    const struct addrinfo *done[16];
    int ndone = 0;
    for (struct addrinfo *ai = res; ai && *nfds < max_fds; ai = ai->ai_next) {
        int dup = 0;
        for (int i = 0; i < ndone; i++)
            dup |= done[i]->ai_addrlen == ai->ai_addrlen &&
                   !memcmp(done[i]->ai_addr, ai->ai_addr, ai->ai_addrlen);
        if (dup)
            continue;
        int fd = listen_one(ai);
        if (fd < 0) {
            /* A family the kernel lacks (IPv6 disabled) is not an error. */
            if (errno == EAFNOSUPPORT)
                continue;
            if (errno != EADDRNOTAVAIL || *last_errno == 0)
                *last_errno = errno;
            if (errno != EADDRNOTAVAIL)
                return -1;
            continue;
        }
        fds[(*nfds)++] = fd;
        if (ndone < 16)
            done[ndone++] = ai;
    }
    return 0;
}

int amldist__net_listen(const char *host, int port, int *fds, int max_fds,
                        int *nfds, char *err, size_t errsize)
{
    struct addrinfo *res;
    int e = 0, rc;
    *nfds = 0;
    if ((rc = resolve(host, port, 1, &res)) != 0) {
        if (err)
            snprintf(err, errsize, "%s",
                     rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return AMLDIST__NET_UNRESOLVED;
    }
    rc = bind_all(res, fds, max_fds, nfds, &e);
    freeaddrinfo(res);
    /* The name may reach this machine from outside (a NAT or a load
     * balancer address) that no local interface carries: listen on all. */
    if (rc == 0 && *nfds == 0 && e == EADDRNOTAVAIL &&
        resolve(NULL, port, 1, &res) == 0) {
        e = 0;
        rc = bind_all(res, fds, max_fds, nfds, &e);
        freeaddrinfo(res);
    }
    if (rc == 0 && *nfds > 0)
        return 0;
    for (int i = 0; i < *nfds; i++)
        close(fds[i]);
    *nfds = 0;
    errno = e ? e : EADDRNOTAVAIL;
    return -1;
}

int amldist__net_listen_local(const char *host, int port, int *fds,
                             int max_fds, int *nfds, int *err)
{
    struct addrinfo *res;
    *nfds = 0;
    *err = 0;
    if (resolve(host, port, 1, &res) != 0) {
        *err = EADDRNOTAVAIL;
        return 0;
    }
    int rc = bind_all(res, fds, max_fds, nfds, err);
    freeaddrinfo(res);
    if (rc == 0)
        return 0;
    for (int i = 0; i < *nfds; i++)
        close(fds[i]);
    *nfds = 0;
    return *err == EADDRINUSE ? 0 : -1;
}

/* Wait for `events` on fd until `deadline` (ms, monotonic).  0, or -1 with
 * errno ETIMEDOUT. */
static int wait_fd(int fd, short events, long long deadline)
{
    for (;;) {
        long long left = deadline - amldist__now_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pfd = {fd, events, 0};
        int n = poll(&pfd, 1, left > 1000000 ? 1000000 : (int)left);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

int amldist__net_connect(const struct addrinfo *ai, long long deadline)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
                                       SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
        return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        int e = errno, soerr = 0;
        socklen_t sl = sizeof soerr;
        if (e != EINPROGRESS ||
            wait_fd(fd, POLLOUT, deadline) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
            e = e != EINPROGRESS ? e : soerr ? soerr : errno;
            close(fd);
            errno = e;
            return -1;
        }
    }
    return fd;
}

int amldist__net_io(int fd, void *buf, size_t len, int writing,
                   long long deadline)
{
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = writing ? send(fd, p, len, MSG_NOSIGNAL)
                            : recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n == 0) {
            errno = ECONNRESET; /* the peer closed before the frame ended */
            return -1;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (wait_fd(fd, writing ? POLLOUT : POLLIN, deadline) < 0)
                return -1;
        } else if (errno != EINTR) {
            return -1;
        }
    }
    return 0;
}
