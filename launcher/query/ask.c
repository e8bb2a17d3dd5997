/* Asking running amlruns over their query sockets (see ask.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "query/ask.h"
#include "util/clock.h"

/* The most an answer may be. */
#define ANSWER_MAX (64u << 20)

/* Connect fd to `name` in the directory open as dfd (its path never
 * looked up again: fchdir, then the name alone); 0, or -1 with errno
 * (EAGAIN when the backlog is full: a Unix socket's connect never
 * completes by itself, so try again). */
static int try_connect(int fd, int dfd, const char *name)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(name) >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sa.sun_path, name);
    int here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (here < 0 || fchdir(dfd) < 0) {
        int e = errno;
        if (here >= 0)
            close(here);
        errno = e;
        return -1;
    }
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    int e = errno;
    (void)!fchdir(here);
    close(here);
    errno = e;
    return rc < 0 && errno == EISCONN ? 0 : rc;
}

/* The server's uid is the directory's owner (root's --status of another
 * user's job included): another socket, reached through a link swapped
 * in, is not asked. */
static int peer_is(int fd, uid_t owner)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
        len != sizeof cr)
        return 0;
    return cr.uid == owner;
}


static void asking_end(struct asking *a, int err)
{
    if (a->fd >= 0)
        close(a->fd);
    a->fd = -1;
    a->err = err;
}

/* Connect (again, when the backlog was full), check the peer, send. */
static void asking_connect(struct asking *a)
{
    if (try_connect(a->fd, a->dfd, a->name) < 0) {
        if (errno != EAGAIN && errno != EINPROGRESS)
            asking_end(a, errno);
        return;
    }
    a->connected = 1;
    if (!peer_is(a->fd, a->owner)) {
        asking_end(a, EPERM);
        return;
    }
    size_t rl = strlen(a->req);
    if (send(a->fd, a->req, rl, MSG_NOSIGNAL) != (ssize_t)rl)
        asking_end(a, errno ? errno : EIO);
}

static void asking_read(struct asking *a)
{
    for (;;) {
        if (a->cap - a->n < 4096) {
            if (a->cap >= ANSWER_MAX) {
                asking_end(a, EMSGSIZE);
                return;
            }
            size_t nc = a->cap ? a->cap * 2 : 16384;
            char *nb = realloc(a->buf, nc + 1);
            if (!nb) {
                asking_end(a, ENOMEM);
                return;
            }
            a->buf = nb;
            a->cap = nc;
        }
        ssize_t r = recv(a->fd, a->buf + a->n, a->cap - a->n, 0);
        if (r > 0) {
            a->n += (size_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (r < 0) {
            asking_end(a, errno);
            return;
        }
        /* The end: closed without a byte is "not ours to ask". */
        a->buf[a->n] = '\0';
        asking_end(a, a->n ? 0 : ECONNRESET);
        return;
    }
}

/* Ask every one of a[0..n) at once, until each answered or `timeout_ms`
 * passed (those still asking end with ETIMEDOUT). */
void ask_all(struct asking *a, size_t n, int timeout_ms)
{
    long long deadline = amldist__now_ms() + timeout_ms;
    for (size_t i = 0; i < n; i++) {
        a[i].fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                         0);
        if (a[i].fd < 0)
            a[i].err = errno;
        else
            asking_connect(&a[i]);
    }
    struct pollfd *p = calloc(n ? n : 1, sizeof *p);
    for (;;) {
        size_t np = 0, waiting = 0;
        for (size_t i = 0; i < n; i++) {
            if (a[i].fd < 0)
                continue;
            waiting++;
            if (!a[i].connected)
                continue; /* retried below */
            p[np++] = (struct pollfd){a[i].fd, POLLIN, 0};
        }
        long long left = deadline - amldist__now_ms();
        if (!waiting || left <= 0 || !p)
            break;
        /* A full backlog is tried again every 20 ms. */
        int wait = np < waiting && left > 20 ? 20 : (int)left;
        if (poll(p, (nfds_t)np, wait) < 0 && errno != EINTR)
            break;
        for (size_t i = 0, k = 0; i < n; i++) {
            if (a[i].fd < 0)
                continue;
            if (!a[i].connected) {
                asking_connect(&a[i]);
                continue;
            }
            if (p[k++].revents)
                asking_read(&a[i]);
        }
    }
    free(p);
    for (size_t i = 0; i < n; i++)
        if (a[i].fd >= 0)
            asking_end(&a[i], ETIMEDOUT);
}

/* Ask one socket one question; its whole answer (NUL-ended), or NULL with
 * errno (ETIMEDOUT when it did not answer in time). */
char *ask(int dfd, const char *name, uid_t owner, const char *req,
                 int timeout_ms, size_t *len)
{
    struct asking a = {-1, dfd, name, owner, req, 0, NULL, 0, 0, 0};
    ask_all(&a, 1, timeout_ms);
    if (a.err) {
        free(a.buf);
        errno = a.err;
        return NULL;
    }
    *len = a.n;
    return a.buf;
}
