/*
 * Driver for bench/bootstrap.sh: one bootstrap exchange of LEN bytes among N
 * fork()ed ranks on loopback, REPS times.  Prints, per repetition, the wall
 * time from the first fork to the last rank's exit and rank 0's time from
 * listening to the last rank served, in milliseconds.
 *
 *     bootstrap_bench N LEN REPS
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"

static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return -1;
    close(fd);
    return ntohs(a.sin_port);
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return fprintf(stderr, "usage: bootstrap_bench N LEN REPS\n"), 2;
    int n = atoi(argv[1]), reps = atoi(argv[3]);
    size_t len = (size_t)atol(argv[2]);
    long long *serve_ms = mmap(NULL, sizeof *serve_ms, PROT_READ | PROT_WRITE,
                               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int *failed = mmap(NULL, sizeof *failed, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    if (n < 2 || reps < 1 || len < 1 || !pids || serve_ms == MAP_FAILED ||
        failed == MAP_FAILED)
        return fprintf(stderr, "bootstrap_bench: bad arguments\n"), 2;
    for (int rep = 0; rep < reps; rep++) {
        amldist__bs_params_t p;
        memset(&p, 0, sizeof p);
        p.world = n;
        strcpy(p.host, "127.0.0.1");
        p.port = free_port();
        p.timeout_ms = 60000;
        p.token = 42;
        p.round = 1;
        *failed = 0;
        long long t0 = amldist__now_ms();
        /* Clients first, as when rank 0 starts last: they must retry. */
        for (int r = n - 1; r >= 0; r--) {
            if ((pids[r] = fork()) == 0) {
                unsigned char *buf = calloc(1, len);
                p.rank = r;
                long long s = amldist__now_ms();
                int rc = r ? amldist__bs_fetch(&p, buf, len)
                           : amldist__bs_serve(&p, buf, len);
                if (rc < 0) {
                    fprintf(stderr, "%s\n", amldist_last_error());
                    __atomic_store_n(failed, 1, __ATOMIC_SEQ_CST);
                }
                if (r == 0)
                    *serve_ms = amldist__now_ms() - s;
                _exit(0);
            }
        }
        for (int r = 0; r < n; r++)
            waitpid(pids[r], NULL, 0);
        if (*failed)
            return 1;
        printf("%lld %lld\n", amldist__now_ms() - t0, *serve_ms);
    }
    free(pids);
    return 0;
}
