/* A one-node job's MASTER_PORT (see masterport.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/masterport.h"

/* Bind a listener to the wildcard address of `family` (IPv6 dual-stack,
 * as PyTorch's TCPStore binds) on `port`; its port, else -1 with errno. */
static int try_bind(int family, int port, int *fd_out)
{
    int s = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    int one = 1, zero = 0;
    struct sockaddr_storage a;
    memset(&a, 0, sizeof a);
    socklen_t len;
    if (family == AF_INET6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&a;
        a6->sin6_family = AF_INET6;
        a6->sin6_addr = in6addr_any;
        a6->sin6_port = htons((unsigned short)port);
        len = sizeof *a6;
        setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&a;
        a4->sin_family = AF_INET;
        a4->sin_addr.s_addr = htonl(INADDR_ANY);
        a4->sin_port = htons((unsigned short)port);
        len = sizeof *a4;
    }
    if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(s, (struct sockaddr *)&a, len) < 0 || listen(s, 1) < 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    *fd_out = s;
    return ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&a)->sin6_port
                                    : ((struct sockaddr_in *)&a)->sin_port);
}

/* IPv6 first (it covers IPv4 too); a kernel without IPv6 has IPv4 only. */
static int bind_any(int port, int *fd)
{
    int got = try_bind(AF_INET6, port, fd);
    if (got < 0 && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL))
        got = try_bind(AF_INET, port, fd);
    return got;
}

int master_port_free(int port)
{
    int fd;
    if (bind_any(port, &fd) >= 0) {
        close(fd);
        return 1;
    }
    return errno == EADDRINUSE ? 0 : -1;
}

int master_port_pick(void)
{
    int fd, port = bind_any(0, &fd);
    if (port > 0)
        close(fd);
    return port > 0 ? port : -1;
}
