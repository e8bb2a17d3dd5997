/*
 * The driver of bench/progress.sh: nanoseconds per heartbeat, one process,
 * on this machine.
 *   progress_bench page N      amldist_progress() into a page this process
 *                              makes (as amlrun does) and names in its own
 *                              environment; beside it CLOCK_MONOTONIC alone
 *   progress_bench nopage N    amldist_progress() without amlrun
 *   progress_bench socket N    a heartbeat over a Unix stream socket to a
 *                              monitor process: 16 bytes and a 16-byte reply
 *                              (ft_launcher's rank monitor answers each
 *                              heartbeat), then 16 bytes one way
 * One "name: X ns" line each.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "amldist.h"
#include "progress/page.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int calls(const char *name, long n)
{
    double t0 = now_ns();
    for (long i = 1; i <= n; i++)
        if (amldist_progress((uint64_t)i) != 0)
            return 1;
    printf("%s: %.1f ns\n", name, (now_ns() - t0) / (double)n);
    return 0;
}

static int page(long n)
{
    amldist__progress_page_t *pg = amldist__progress_page_create(1);
    if (!pg)
        return 1;
    char fd[16];
    snprintf(fd, sizeof fd, "%d", amldist__progress_page_fd(pg));
    setenv(AMLDIST__PROGRESS_FD_ENV, fd, 1);
    setenv(AMLDIST__PROGRESS_SLOT_ENV, "0", 1);
    amldist_progress(0); /* the first call maps the page */
    if (calls("C amldist_progress, page", n))
        return 1;
    amldist__progress_sample_t s;
    if (amldist__progress_page_read(pg, 0, &s) < 0 ||
        s.calls != (uint64_t)n + 1) {
        fprintf(stderr, "progress_bench: the page has %llu calls, not %ld\n",
                (unsigned long long)s.calls, n + 1);
        return 1;
    }
    struct timespec ts;
    long long sum = 0;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sum += ts.tv_nsec;
    }
    printf("C clock_gettime(CLOCK_MONOTONIC) alone: %.1f ns\n",
           (now_ns() - t0) / (double)n);
    if (sum == -1)
        puts(""); /* keeps the loop */
    amldist__progress_page_destroy(pg);
    return 0;
}

static int full_io(int fd, char *buf, size_t len, int out)
{
    size_t done = 0;
    while (done < len) {
        ssize_t k = out ? write(fd, buf + done, len - done)
                        : read(fd, buf + done, len - done);
        if (k <= 0)
            return -1;
        done += (size_t)k;
    }
    return 0;
}

/* The monitor: answers each 16-byte heartbeat of the first `replies`,
 * then reads the rest. */
static void monitor(int fd, long replies)
{
    char m[16];
    for (long i = 0; i < replies; i++)
        if (full_io(fd, m, sizeof m, 0) < 0 || full_io(fd, m, sizeof m, 1) < 0)
            _exit(1);
    while (read(fd, m, sizeof m) > 0) {
    }
    _exit(0);
}

static int sockets(long n)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return 1;
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(sv[0]);
        monitor(sv[1], n);
    }
    close(sv[1]);
    char m[16] = "heartbeat";
    double t0 = now_ns();
    for (long i = 0; i < n; i++)
        if (full_io(sv[0], m, sizeof m, 1) < 0 || full_io(sv[0], m, sizeof m, 0) < 0)
            return 1;
    printf("C Unix socket heartbeat and reply: %.1f ns\n",
           (now_ns() - t0) / (double)n);
    t0 = now_ns();
    for (long i = 0; i < n; i++)
        if (full_io(sv[0], m, sizeof m, 1) < 0)
            return 1;
    printf("C Unix socket heartbeat, one way: %.1f ns\n",
           (now_ns() - t0) / (double)n);
    close(sv[0]);
    int status;
    waitpid(pid, &status, 0);
    return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv)
{
    long n = argc == 3 ? atol(argv[2]) : 0;
    if (n <= 0) {
        fprintf(stderr, "usage: progress_bench page|nopage|socket N\n");
        return 2;
    }
    if (strcmp(argv[1], "page") == 0)
        return page(n);
    if (strcmp(argv[1], "nopage") == 0) {
        unsetenv(AMLDIST__PROGRESS_FD_ENV);
        return calls("C amldist_progress, no amlrun", n);
    }
    if (strcmp(argv[1], "socket") == 0)
        return sockets(n);
    return 2;
}
