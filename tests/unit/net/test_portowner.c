/* Who listens on a local TCP port (lib/net/portowner.c), from
 * /proc/net/tcp and tcp6: this process's listeners, v4 and v6, seen as its
 * own uid's; a port only bound, or not used, has no stranger. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/portowner.h"
#include "test.h"

/* A socket bound to a kernel-picked port of loopback (v6 when `six`),
 * listening when `listening`; its port in *port. */
static int bound(int six, int listening, int *port)
{
    struct sockaddr_storage a;
    socklen_t len;
    memset(&a, 0, sizeof a);
    if (six) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&a;
        s->sin6_family = AF_INET6;
        s->sin6_addr = in6addr_loopback;
        len = sizeof *s;
    } else {
        struct sockaddr_in *s = (struct sockaddr_in *)&a;
        s->sin_family = AF_INET;
        s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *s;
    }
    int fd = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, len) < 0 ||
        (listening && listen(fd, 1) < 0) ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(six ? ((struct sockaddr_in6 *)&a)->sin6_port
                      : ((struct sockaddr_in *)&a)->sin_port);
    return fd;
}

static void owner(int six)
{
    int port = 0;
    unsigned uid = 12345, me = (unsigned)geteuid();
    int fd = bound(six, 1, &port);
    if (fd < 0 && six) {
        printf("# no IPv6 loopback: skipped\n");
        return;
    }
    CHECK(fd >= 0);
    /* Its own listener: no stranger.  Seen from another uid: this one. */
    CHECK_INT_EQ(amldist__net_port_stranger(port, me, &uid), 0);
    CHECK_INT_EQ(uid, 12345);
    CHECK_INT_EQ(amldist__net_port_stranger(port, me + 1, &uid), 1);
    CHECK_INT_EQ(uid, me);
    close(fd);
    /* Gone: nobody. */
    CHECK_INT_EQ(amldist__net_port_stranger(port, me + 1, &uid), 0);
}

static void test_owner_v4(void) { owner(0); }
static void test_owner_v6(void) { owner(1); }

/* Bound, not listening: not a listener (the agent joins, as before). */
static void test_bound_only(void)
{
    int port = 0;
    unsigned uid;
    int fd = bound(0, 0, &port);
    CHECK(fd >= 0);
    CHECK_INT_EQ(amldist__net_port_stranger(port, (unsigned)geteuid() + 1,
                                            &uid), 0);
    close(fd);
}

int main(void)
{
    RUN(test_owner_v4);
    RUN(test_owner_v6);
    RUN(test_bound_only);
    return test_summary();
}
