/* This amlrun's query socket (see qlisten.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "query/proto.h"
#include "query/qlisten.h"
#include "query/sockdir.h"

void qsock_remove(const char *path)
{
    if (!path[0])
        return;
    unlink(path);
    char dir[QDIR_PATH_MAX + 1];
    const char *slash = strrchr(path, '/');
    if (!slash || (size_t)(slash - path) >= sizeof dir)
        return;
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    if (qdir_is_fallback(geteuid(), dir))
        rmdir(dir); /* ENOTEMPTY: another job's socket is there */
}

/* One try of qsock_listen(): 1 when the socket's directory went away
 * between its choice and the bind (a job that ended removed its empty
 * fallback, qsock_remove()), for the caller to choose again. */
static int listen_once(const char *run_id, char *path, size_t size,
                       char *note, size_t notesize, char *why,
                       size_t whysize, int *fd_out)
{
    char dir[QDIR_PATH_MAX + 1];
    path[0] = '\0';
    *fd_out = -1;
    if (qdir_choose(geteuid(), getenv("XDG_RUNTIME_DIR"), dir, sizeof dir,
                    note, notesize, why, whysize) < 0)
        return -1;
    char p[QDIR_PATH_MAX + 1];
    if (qsock_path(dir, run_id, getpid(), p, sizeof p) < 0 ||
        strlen(p) >= size) {
        snprintf(why, whysize, "%s: the socket's name is too long", dir);
        return -1;
    }
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, p, strlen(p) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, whysize, "socket: %s", strerror(errno));
        return -1;
    }
    /* A file of a dead amlrun that had our pid. */
    unlink(p);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        chmod(p, 0600) < 0 || listen(fd, QLISTEN_BACKLOG) < 0) {
        int gone = errno == ENOENT && qdir_is_fallback(geteuid(), dir);
        snprintf(why, whysize, "%s: %s", p, strerror(errno));
        close(fd);
        unlink(p);
        return gone ? 1 : -1;
    }
    memcpy(path, p, strlen(p) + 1);
    *fd_out = fd;
    return 0;
}

int qsock_listen(const char *run_id, char *path, size_t size, char *note,
                 size_t notesize, char *why, size_t whysize)
{
    int fd = -1;
    for (int i = 0; i < 3; i++)
        if (listen_once(run_id, path, size, note, notesize, why, whysize,
                        &fd) != 1)
            break;
    return fd;
}

int qsock_peer_allowed(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 &&
           len == sizeof cr && (cr.uid == geteuid() || cr.uid == 0);
}

int qsock_read_request(int fd, char *req, size_t *len)
{
    for (;;) {
        ssize_t n = recv(fd, req + *len, QP_REQ_MAX - *len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            return -1;
        *len += (size_t)n;
        req[*len] = '\0';
        char *nl = memchr(req, '\n', *len);
        if (nl) {
            *nl = '\0';
            return 1;
        }
        if (*len == QP_REQ_MAX)
            return -1; /* no request is that long */
    }
}
