/*
 * Driver for bench/rdzv.sh: the control plane's rendezvous among N fork()ed
 * agents on loopback, REPS times.  Every agent calls amldist_rdzv_join() on
 * the same endpoint at once (the first to bind it hosts); once all have
 * joined, the last one reports a failure and the others wait for their
 * descriptor to say STOP; then all call amldist_rdzv_next() and close.
 * Prints, per repetition, in milliseconds:
 *
 *     join  first fork to the last agent's join returning
 *     stop  amldist_rdzv_fail() to the last other agent woken with STOP
 *     over  amldist_rdzv_fail() to the last agent's next() returning 0
 *
 * With "prefork", the agents are forked first and all start at once (the
 * fork()s are not timed); with "threads", they are threads of one process
 * (no process is created or scheduled: closest to the library's own cost,
 * as with one agent per machine).
 *
 *     rdzv_bench N REPS [prefork|threads]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <amldist.h>

typedef struct {
    long long started, joined, stopped, over; /* us, CLOCK_MONOTONIC */
    int rc, status;
} agent_t;

typedef struct {
    int njoined, failed;
    long long fail_at;
    agent_t a[];
} shared_t;

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* A port below the ephemeral range that binds now. */
static int pick_port(unsigned *seed)
{
    for (int tries = 0; tries < 1000; tries++) {
        int port = 20000 + (int)(rand_r(seed) % 12000);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            return port;
    }
    return -1;
}

/* Pipes: the agents tell the parent they joined, the parent tells them to
 * go on (closing its end wakes them all), without anyone polling.  As
 * threads: barriers of the agents and the main thread. */
static int joined_pipe[2], go_pipe[2];
static int threads;
static pthread_barrier_t start_bar, joined_bar, go_bar;

static void joined_sync(void)
{
    if (threads) {
        pthread_barrier_wait(&joined_bar);
        pthread_barrier_wait(&go_bar);
        return;
    }
    char b = 1;
    while (write(joined_pipe[1], &b, 1) < 0 && errno == EINTR)
        ;
    while (read(go_pipe[0], &b, 1) < 0 && errno == EINTR)
        ;
}

static void agent(shared_t *sh, int i, int n, const char *ep, int gate)
{
    agent_t *me = &sh->a[i];
    if (gate >= 0) { /* pre-forked: wait for the parent's start */
        char b;
        while (read(gate, &b, 1) < 0 && errno == EINTR)
            ;
    }
    me->started = now_us();
    amldist_rdzv_options_t o = AMLDIST_RDZV_OPTIONS_INIT;
    o.endpoint = ep;
    o.run_id = "bench";
    o.token = "bench";
    o.min_nodes = o.max_nodes = n;
    o.nproc = 1;
    o.join_timeout_ms = 60000;
    amldist_rdzv_t *r = NULL;
    int rc = amldist_rdzv_join(&o, &r);
    me->joined = now_us();
    me->rc = rc;
    if (rc != 0) {
        fprintf(stderr, "agent %d: %s\n", i, amldist_last_error());
        __atomic_store_n(&sh->failed, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&sh->njoined, 1, __ATOMIC_SEQ_CST);
        if (threads) {
            joined_sync();
            return;
        }
        char b = 1;
        while (write(joined_pipe[1], &b, 1) < 0 && errno == EINTR)
            ;
        _exit(1);
    }
    __atomic_add_fetch(&sh->njoined, 1, __ATOMIC_SEQ_CST);
    joined_sync();
    int status = 143;
    if (i == n - 1) {
        sh->fail_at = now_us();
        amldist_rdzv_fail(r, 0, i, 1, "bench: a worker failed");
        status = 1;
    }
    struct pollfd p = {amldist_rdzv_fd(r), POLLIN, 0};
    long long end = now_us() + 20000000;
    while (now_us() < end) {
        int k = poll(&p, 1, 100);
        if (k == 1 && amldist_rdzv_state(r) == AMLDIST_RDZV_STOP) {
            me->stopped = now_us();
            break;
        }
        if (k < 0 && errno != EINTR)
            break;
    }
    rc = amldist_rdzv_next(r, status);
    me->over = now_us();
    me->status = amldist_rdzv_exit_status(r);
    if (rc != 0 || me->status != 1 || !me->stopped) {
        fprintf(stderr, "agent %d: next %d, status %d, %s: %s\n", i, rc,
                me->status, me->stopped ? "stopped" : "never stopped",
                amldist_last_error());
        __atomic_store_n(&sh->failed, 1, __ATOMIC_SEQ_CST);
    }
    amldist_rdzv_close(r);
    if (!threads)
        _exit(0);
}

typedef struct {
    shared_t *sh;
    int i, n;
    const char *ep;
} targ_t;

static void *agent_thread(void *p)
{
    targ_t *t = p;
    pthread_barrier_wait(&start_bar);
    agent(t->sh, t->i, t->n, t->ep, -1);
    return NULL;
}

/* One run with the agents as threads of this process. */
static int thread_run(shared_t *sh, int n, const char *ep, long long *t0)
{
    pthread_t *tid = calloc((size_t)n, sizeof *tid);
    targ_t *args = calloc((size_t)n, sizeof *args);
    if (!tid || !args)
        return -1;
    pthread_barrier_init(&start_bar, NULL, (unsigned)n + 1);
    pthread_barrier_init(&joined_bar, NULL, (unsigned)n + 1);
    pthread_barrier_init(&go_bar, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        args[i] = (targ_t){sh, i, n, ep};
        if (pthread_create(&tid[i], NULL, agent_thread, &args[i]))
            return -1;
    }
    usleep(10000);
    *t0 = now_us();
    pthread_barrier_wait(&start_bar);
    pthread_barrier_wait(&joined_bar);
    pthread_barrier_wait(&go_bar);
    for (int i = 0; i < n; i++)
        pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&start_bar);
    pthread_barrier_destroy(&joined_bar);
    pthread_barrier_destroy(&go_bar);
    free(tid);
    free(args);
    return 0;
}

/* One line: join, stop and over times of the run that started at t0. */
static void report(const shared_t *sh, int n, long long t0)
{
    long long joined = 0, stopped = 0, over = 0;
    for (int i = 0; i < n; i++) {
        if (sh->a[i].joined > joined)
            joined = sh->a[i].joined;
        if (i != n - 1 && sh->a[i].stopped > stopped)
            stopped = sh->a[i].stopped;
        if (sh->a[i].over > over)
            over = sh->a[i].over;
    }
    if (getenv("RDZV_BENCH_VERBOSE"))
        for (int i = 0; i < n; i++)
            fprintf(stderr, "agent %2d: started %6.1f joined %6.1f ms\n", i,
                    (sh->a[i].started - t0) / 1000.0,
                    (sh->a[i].joined - t0) / 1000.0);
    printf("%.1f %.1f %.1f\n", (joined - t0) / 1000.0,
           (stopped - sh->fail_at) / 1000.0, (over - sh->fail_at) / 1000.0);
}

int main(int argc, char **argv)
{
    if (argc != 3 && !(argc == 4 && (!strcmp(argv[3], "prefork") ||
                                     !strcmp(argv[3], "threads"))))
        return fprintf(stderr, "usage: rdzv_bench N REPS "
                               "[prefork|threads]\n"), 2;
    int n = atoi(argv[1]), reps = atoi(argv[2]);
    int prefork = argc == 4 && !strcmp(argv[3], "prefork");
    threads = argc == 4 && !strcmp(argv[3], "threads");
    if (n < 2 || n > 1024 || reps < 1)
        return fprintf(stderr, "rdzv_bench: bad arguments\n"), 2;
    size_t size = sizeof(shared_t) + (size_t)n * sizeof(agent_t);
    shared_t *sh = mmap(NULL, size, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    if (sh == MAP_FAILED || !pids)
        return fprintf(stderr, "rdzv_bench: out of memory\n"), 2;
    unsigned seed = (unsigned)getpid() ^ (unsigned)now_us();
    for (int rep = 0; rep < reps; rep++) {
        memset(sh, 0, size);
        int port = pick_port(&seed);
        char ep[64];
        snprintf(ep, sizeof ep, "127.0.0.1:%d", port);
        fflush(stdout);
        long long t0;
        if (threads) {
            if (thread_run(sh, n, ep, &t0) < 0)
                return fprintf(stderr, "rdzv_bench: threads\n"), 2;
            if (sh->failed)
                return fprintf(stderr, "rdzv_bench: run %d failed\n", rep), 1;
            report(sh, n, t0);
            continue;
        }
        /* Pre-forked: every agent is already a process, blocked on a pipe
         * that the parent closes (all wake at once), so that the fork()s
         * themselves are not timed. */
        int gate[2] = {-1, -1};
        if ((prefork && pipe(gate) < 0) || pipe(joined_pipe) < 0 ||
            pipe(go_pipe) < 0)
            return perror("pipe"), 2;
        t0 = now_us();
        for (int i = 0; i < n; i++)
            if ((pids[i] = fork()) == 0) {
                if (prefork)
                    close(gate[1]);
                close(joined_pipe[0]);
                close(go_pipe[1]);
                agent(sh, i, n, ep, gate[0]);
            }
        if (prefork) {
            close(gate[0]);
            usleep(20000 + 1000 * n); /* all are blocked in read() */
            t0 = now_us();
            close(gate[1]);
        }
        close(joined_pipe[1]);
        close(go_pipe[0]);
        for (int got = 0; got < n;) {
            char b[64];
            ssize_t k = read(joined_pipe[0], b, sizeof b);
            if (k > 0)
                got += (int)k;
            else if (k == 0 || errno != EINTR)
                return fprintf(stderr, "rdzv_bench: agents died\n"), 1;
        }
        close(joined_pipe[0]);
        close(go_pipe[1]); /* go: the last agent fails */
        int bad = 0;
        for (int i = 0; i < n; i++) {
            int st;
            waitpid(pids[i], &st, 0);
            bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        }
        if (bad || sh->failed)
            return fprintf(stderr, "rdzv_bench: run %d failed\n", rep), 1;
        report(sh, n, t0);
    }
    free(pids);
    return 0;
}
