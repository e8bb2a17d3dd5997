/*
 * Whether this agent hosts the rendezvous endpoint: it does when the
 * endpoint's address is this machine's and its port is free (port 0: a
 * free port the kernel picks).  The host (host.c) then runs on the
 * backend's thread beside the agent's own connection.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/portowner.h"
#include "rdzv/tcp/tcp.h"

/* HOST:PORT where PORT may also be 0 (torchrun 2.x's "a free port",
 * below), which util's parser, made for real ports, refuses: "host:0" and
 * "[v6]:0" only, never a bare IPv6 address ending in ":0". */
int amldist__rz_endpoint_parse(const char *ep, char *host, size_t size,
                               int *port)
{
    size_t n = strlen(ep);
    char buf[AMLDIST__HOST_MAX + 2];
    if (n > 2 && n - 2 < sizeof buf && strcmp(ep + n - 2, ":0") == 0) {
        memcpy(buf, ep, n - 2);
        buf[n - 2] = '\0';
        int bracketed = buf[0] == '[' && buf[n - 3] == ']';
        if ((bracketed || !strchr(buf, ':')) &&
            amldist__parse_hostport(buf, host, size, port) == 0) {
            *port = 0;
            return 0;
        }
    }
    return amldist__parse_hostport(ep, host, size, port);
}

/* Descriptors the host holds beyond one per node: its listeners, the
 * spare of make_room() (host.c), connections that have not joined yet or
 * were refused, and what the agent's process holds besides (amlrun's
 * worker pipes, the sink's). */
#define HOST_FD_MARGIN 128

/* The host holds a connection per node: the soft RLIMIT_NOFILE (1024 on
 * most systems) is raised to the hard one, as servers do at their start;
 * where the hard one cannot hold the job, hosting is refused now, naming
 * both numbers, rather than the job failing to form at its join timeout
 * with the nodes beyond the limit never accepted. */
static int host_fds(const amldist__rz_tcp_t *t)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)t->cfg->max + HOST_FD_MARGIN;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
        return amldist__fail(AMLDIST_ESYS, "rendezvous endpoint %s: hosting "
                             "a job of up to %d nodes needs %llu open files "
                             "(a connection a node and %d more), and this "
                             "process's hard limit (RLIMIT_NOFILE, ulimit "
                             "-Hn) is %llu: raise it, or host the endpoint "
                             "where it is higher", t->endpoint, t->cfg->max,
                             (unsigned long long)need, HOST_FD_MARGIN,
                             (unsigned long long)rl.rlim_max);
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return amldist__fail(AMLDIST_ESYS, "rendezvous endpoint %s: cannot "
                             "raise the open files limit to %llu for %d "
                             "nodes: %s", t->endpoint,
                             (unsigned long long)rl.rlim_max, t->cfg->max,
                             strerror(errno));
    return 0;
}

/* Port 0 (torchrun 2.x's localhost:0, one node only: backend.c): the kernel
 * picks a free port on the endpoint's first local address, and this agent
 * connects to that address alone, so that nothing else listening on
 * another address of the name can answer for it.  Nobody else can know
 * the port, so an endpoint that is not this machine's is an error. */
static int host_any_port(amldist__rz_tcp_t *t)
{
    int fd, nfds = 0, err = 0;
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    char num[NI_MAXHOST], why[200];
    struct addrinfo *ai = NULL;
    int rc = amldist__net_listen_local(t->ep_host, 0, &fd, 1, &nfds, &err);
    if (rc == 0 && nfds > 0 && host_fds(t) < 0) {
        close(fd);
        return -1;
    }
    if (nfds == 0 && (err == 0 || err == EADDRNOTAVAIL))
        return amldist__fail(AMLDIST_EINVAL, "rendezvous endpoint %s: port 0 "
                             "means a free port of this machine, and %s is "
                             "not one of its addresses", t->endpoint,
                             t->ep_host);
    if (rc < 0 || nfds == 0)
        return amldist__fail(AMLDIST_ESYS, "rendezvous endpoint %s: cannot "
                             "listen on a free port of %s: %s", t->endpoint,
                             t->ep_host, strerror(err));
    if (getsockname(fd, (struct sockaddr *)&a, &len) < 0 ||
        getnameinfo((struct sockaddr *)&a, len, num, sizeof num, NULL, 0,
                    NI_NUMERICHOST) != 0) {
        close(fd);
        return amldist__fail(AMLDIST_ESYS, "rendezvous endpoint %s: cannot "
                             "read the port picked", t->endpoint);
    }
    int port = ntohs(a.ss_family == AF_INET6
                         ? ((struct sockaddr_in6 *)&a)->sin6_port
                         : ((struct sockaddr_in *)&a)->sin_port);
    if (amldist__net_resolve(num, port, &ai, why, sizeof why) < 0) {
        close(fd);
        return amldist__fail(AMLDIST_ESYS, "rendezvous endpoint %s: %s",
                             t->endpoint, why);
    }
    t->host = amldist__rz_host_new(t->cfg, t->loop, &fd, 1);
    if (!t->host) {
        close(fd);
        freeaddrinfo(ai);
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    }
    freeaddrinfo(t->ai);
    t->ai = ai;
    t->ep_port = port;
    snprintf(t->endpoint, sizeof t->endpoint,
             strchr(t->ep_host, ':') ? "[%s]:%d" : "%s:%d", t->ep_host, port);
    return 0;
}

/* Host the endpoint when its address is this machine's and the port is
 * free; else another agent hosts it.  Node 0 by order (a static job's
 * MASTER_ADDR may name it from outside: a NAT, a load balancer) hosts it
 * on every address when none of the endpoint's is its own. */
int amldist__rz_maybe_host(amldist__rz_tcp_t *t)
{
    int fds[8], nfds = 0, err = 0;
    if (t->ep_port == 0)
        return host_any_port(t);
    if (amldist__net_listen_local(t->ep_host, t->ep_port, fds, 8, &nfds,
                                 &err) < 0)
        return 0; /* another agent's: join as a client */
    /* The port is this machine's and held: only a process of this user's
     * (another agent of the job) is joined, never another user's, which
     * could have bound it first to pass for the job's host. */
    unsigned uid;
    if (nfds == 0 && err == EADDRINUSE &&
        amldist__net_port_stranger(t->ep_port, (unsigned)geteuid(), &uid))
        return amldist__fail(AMLDIST_EDENIED, "rendezvous endpoint %s: its "
                             "port on this machine is held by uid %u, not by "
                             "this user (uid %u): refused, not joined (a "
                             "process of another user may pass for the "
                             "job's host; free the port or give another)",
                             t->endpoint, uid, (unsigned)geteuid());
    if (nfds == 0 && (err != EADDRNOTAVAIL || t->me.order != 0 ||
                      amldist__net_listen(t->ep_host, t->ep_port, fds, 8,
                                          &nfds, NULL, 0) < 0))
        return 0; /* not ours: join as a client */
    if (host_fds(t) < 0) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return -1;
    }
    t->host = amldist__rz_host_new(t->cfg, t->loop, fds, nfds);
    if (!t->host) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    }
    return 0;
}
