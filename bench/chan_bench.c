/*
 * Driver for bench/chan.sh: what the channel (lib/net/chan.c) costs, in
 * microseconds, the minimum and the median of REPS:
 *
 *     first     a fresh process's first key derivation, handshake and
 *               frame (libcrypto's one-time set-up included)
 *     keys      the job's keys from its secret (HKDF), once per process
 *     handshake both sides' steps of one handshake, in one process
 *     seal+open one frame of 0, 64, 1024 and 8192 bytes sealed and opened
 *     rtt       one frame there and back over a socketpair through the
 *               framed connection (lib/net/conn.c), plain and sealed
 *
 *     chan_bench REPS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/chan.h"
#include "net/conn.h"
#include "net/loop.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    printf("%-22s %10.2f %10.2f\n", what, v[0], v[n / 2]);
}

static void open_pair(const amldist__chan_keys_t *k, amldist__chan_t **c,
                      amldist__chan_t **s)
{
    unsigned char a[AMLDIST__HS_SERVER_LEN], b[AMLDIST__HS_SERVER_LEN];
    unsigned ta, tb;
    uint32_t la, lb;
    const char *why;
    *c = amldist__chan_new(k, 0);
    *s = amldist__chan_new(k, 1);
    if (amldist__chan_start(*c, &ta, a, &la, &why) < 0 ||
        amldist__chan_handshake(*s, ta, a, la, &tb, b, &lb, &why) < 0 ||
        amldist__chan_handshake(*c, tb, b, lb, &ta, a, &la, &why) < 0 ||
        amldist__chan_handshake(*s, ta, a, la, &tb, b, &lb, &why) < 0) {
        fprintf(stderr, "chan_bench: handshake failed: %s\n", why);
        exit(1);
    }
}

static const amldist__frame_limit_t limits[] = {{16, 0, 65536}, {0, 0, 0}};

/* One frame of len bytes from a to b and back; us. */
static double rtt(amldist__conn_t *a, amldist__conn_t *b, size_t len)
{
    static unsigned char buf[8192];
    unsigned type;
    const unsigned char *p;
    uint32_t n;
    const char *why;
    double t0 = now_us();
    if (amldist__conn_send(a, 16, buf, len) < 0 ||
        amldist__conn_wait(b, amldist__now_ms() + 5000, &type, &p, &n,
                           &why) != 1 ||
        amldist__conn_send(b, 16, buf, len) < 0 ||
        amldist__conn_wait(a, amldist__now_ms() + 5000, &type, &p, &n,
                           &why) != 1) {
        fprintf(stderr, "chan_bench: round trip failed\n");
        exit(1);
    }
    return now_us() - t0;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 100;
    if (reps < 1)
        reps = 1;
    double *v = calloc((size_t)reps, sizeof *v);
    double *first = calloc((size_t)reps, sizeof *first);
    amldist__chan_keys_t k;
    printf("# the channel's costs, %d runs each; us: min, median\n", reps);
    printf("%-22s %10s %10s\n", "what", "min", "median");
    /* A fresh process each: libcrypto's first use. */
    for (int i = 0; i < reps && i < 50; i++) {
        int fd[2];
        if (pipe(fd) < 0)
            return 1;
        pid_t pid = fork();
        if (pid == 0) {
            double t0 = now_us();
            amldist__chan_t *c, *s;
            unsigned char f[64] = {0};
            amldist__chan_keys(&k, "rdzv", "bench-secret", 12);
            open_pair(&k, &c, &s);
            amldist__frame_put_header(f, 16, 16);
            amldist__chan_seal(c, f, f, 0, f + 12);
            double t = now_us() - t0;
            if (write(fd[1], &t, sizeof t) != sizeof t)
                _exit(1);
            _exit(0);
        }
        close(fd[1]);
        if (read(fd[0], &first[i], sizeof first[i]) != sizeof first[i])
            first[i] = 0;
        close(fd[0]);
        waitpid(pid, NULL, 0);
    }
    report("first (fresh process)", first, reps < 50 ? reps : 50);
    for (int i = 0; i < reps; i++) {
        double t0 = now_us();
        amldist__chan_keys(&k, "rdzv", "bench-secret", 12);
        v[i] = now_us() - t0;
    }
    report("keys", v, reps);
    for (int i = 0; i < reps; i++) {
        amldist__chan_t *c, *s;
        double t0 = now_us();
        open_pair(&k, &c, &s);
        v[i] = now_us() - t0;
        amldist__chan_free(c);
        amldist__chan_free(s);
    }
    report("handshake", v, reps);
    static const size_t sizes[] = {0, 64, 1024, 8192};
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
        amldist__chan_t *c, *s;
        static unsigned char f[12 + 8192 + 16];
        open_pair(&k, &c, &s);
        for (int i = 0; i < reps; i++) {
            double t0 = now_us();
            amldist__frame_put_header(f, 16, (uint32_t)(sizes[z] + 16));
            if (amldist__chan_seal(c, f, f + 12, sizes[z], f + 12) < 0 ||
                amldist__chan_open(s, f, f + 12, sizes[z] + 16) < 0) {
                fprintf(stderr, "chan_bench: seal/open failed\n");
                return 1;
            }
            v[i] = now_us() - t0;
        }
        char what[64];
        snprintf(what, sizeof what, "seal+open %zu B", sizes[z]);
        report(what, v, reps);
        amldist__chan_free(c);
        amldist__chan_free(s);
    }
    for (int sealed = 0; sealed < 2; sealed++) {
        int sv[2];
        amldist__conn_t a, b;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                       sv) < 0)
            return 1;
        amldist__conn_init(&a, sv[0], limits);
        amldist__conn_init(&b, sv[1], limits);
        if (sealed && (amldist__conn_secure(&b, &k, 1) < 0 ||
                       amldist__conn_secure(&a, &k, 0) < 0))
            return 1;
        /* The handshake: each side reads what the other sent. */
        for (int i = 0; i < 8; i++) {
            unsigned type;
            const unsigned char *p;
            uint32_t n;
            const char *why;
            amldist__conn_recv(&b, &type, &p, &n, &why);
            amldist__conn_recv(&a, &type, &p, &n, &why);
        }
        for (int i = 0; i < reps; i++)
            v[i] = rtt(&a, &b, 64);
        report(sealed ? "rtt 64 B, sealed" : "rtt 64 B, plain", v, reps);
        amldist__conn_close(&a);
        amldist__conn_close(&b);
    }
    amldist__chan_keys_clear(&k);
    free(v);
    free(first);
    return 0;
}
