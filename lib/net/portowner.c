/* Who listens on a local TCP port (see portowner.h). */
#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/portowner.h"

#define TCP_LISTEN 0x0A /* the kernel's TCP_LISTEN state */

/* One /proc/net/tcp{,6} table: 1 with a stranger's uid, else 0.  A line:
 *   sl local_address rem_address st tx_queue:rx_queue tr:tm->when
 *   retrnsmt uid timeout inode ...
 * with addresses as HEX:PORT (the port in hex). */
static int scan(const char *path, int port, unsigned self, unsigned *uid)
{
    FILE *f = fopen(path, "re");
    char line[512];
    int found = 0;
    if (!f)
        return 0;
    if (!fgets(line, sizeof line, f)) { /* the header */
        fclose(f);
        return 0;
    }
    while (!found && fgets(line, sizeof line, f)) {
        unsigned lport, st, u;
        if (sscanf(line, " %*u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x "
                         "%*x:%*x %*x:%*x %*x %u",
                   &lport, &st, &u) == 3 &&
            (int)lport == port && st == TCP_LISTEN && u != self) {
            *uid = u;
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* The same through the kernel's socket diagnostics (what ss(8) reads),
 * asking for listening sockets only: /proc/net/tcp lists every socket,
 * thousands in TIME_WAIT on a busy node, and formatting them took each
 * agent of a 64-agent join about 10 ms.  1 stranger, 0 none, -1 when
 * sock_diag cannot answer (then /proc is read). */
static int diag(int family, int port, unsigned self, unsigned *uid)
{
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -1;
    struct {
        struct nlmsghdr nh;
        struct inet_diag_req_v2 r;
    } req;
    memset(&req, 0, sizeof req);
    req.nh.nlmsg_len = sizeof req;
    req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.r.sdiag_family = (unsigned char)family;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = 1u << TCP_LISTEN;
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    int found = -1;
    if (sendto(fd, &req, sizeof req, 0, (struct sockaddr *)&sa, sizeof sa) !=
        (ssize_t)sizeof req)
        goto out;
    long buf[8192 / sizeof(long)];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            goto out;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, n);
             h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type == NLMSG_DONE) {
                found = found == 1 ? 1 : 0;
                goto out;
            }
            if (h->nlmsg_type == NLMSG_ERROR)
                goto out;
            const struct inet_diag_msg *m = NLMSG_DATA(h);
            if (h->nlmsg_len < NLMSG_LENGTH(sizeof *m))
                goto out;
            if (ntohs(m->id.idiag_sport) == port && m->idiag_uid != self &&
                found != 1) {
                *uid = m->idiag_uid;
                found = 1;
            }
        }
    }
out:
    close(fd);
    return found;
}

int amldist__net_port_stranger(int port, unsigned self, unsigned *uid)
{
    int v4 = diag(AF_INET, port, self, uid);
    if (v4 == 1)
        return 1;
    int v6 = diag(AF_INET6, port, self, uid);
    if (v6 == 1)
        return 1;
    if (v4 == 0 && v6 == 0)
        return 0;
    return scan("/proc/net/tcp", port, self, uid) ||
           scan("/proc/net/tcp6", port, self, uid);
}
