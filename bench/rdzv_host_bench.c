/*
 * Driver for bench/rdzv_host.sh: what the rendezvous host itself costs with
 * N agents (issue 40).  The host is agent 0, a process of its own (forked
 * first, it binds the endpoint before any other agent starts), so that its
 * CPU (getrusage, its two threads: the caller's, idle, and the backend's,
 * which runs the host) and its memory are its own; the N-1 other agents are
 * threads of processes of at most 1,000 agents each (an agent holds a few
 * descriptors) at nice 19 (in a job they are on other machines: here they
 * must not starve the host of its CPU), all released at once.  Prints one line:
 *
 *     form_ms form_cpu_ms steady_cpu_ms_per_s views_cpu_ms_per_s rss_mib
 *
 *     form       the threads' release to the last agent's join returning
 *     form_cpu   the host process's CPU from its start to its own join
 *                returning (listening, accepting, forming)
 *     steady     its CPU per second over SECS seconds of an idle job (the
 *                heartbeats only)
 *     views      its CPU per second over SECS more seconds in which every
 *                agent watches (amldist_rdzv_watch, 60 s) and sets a view
 *                of RANKS ranks that made progress every 250 ms ("-" when
 *                RANKS is 0)
 *     rss        the host's peak resident set (VmHWM), MiB
 *     gather     the host's own agent gathers an answer of GATHER_KB KiB
 *                from every agent (amldist_rdzv_gather, as --stacks and
 *                --status do): the wall time from the ask to the complete
 *                gather, the host process's CPU for it (the host relays
 *                every answer to its own agent, in the same process), and
 *                the answers that did not come whole ("-" when GATHER_KB
 *                is 0)
 *
 * Then one agent fails and every agent waits for the STOP, as a job does.
 *
 *     rdzv_host_bench N SECS [RANKS [GATHER_KB]]
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
#include <sys/resource.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <amldist.h>

#include "agent_procs.h"

typedef struct {
    /* phase: 1 steady, 2 views, 3 gather, 4 fail */
    int nfailed, njoined, phase;
    long long joined_max;
    double form_cpu, steady_cpu, views_cpu, rss_mib, gather_ms, gather_cpu;
    int gather_cut;
    char why[256];
} shared_t;

static shared_t *sh;
static int n, secs, ranks, gather_kb;
static char ep[64];
static int gate[2]; /* closed by main(): every agent starts */

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static double cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3 +
           ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3;
}

static double hwm_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6))
            kib = atof(line + 6);
    if (f)
        fclose(f);
    return kib / 1024;
}

static int bound(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int free_ = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return !free_;
}

/* The phase (and a failure) told to every agent of every process at once:
 * a futex on the shared page, not 4,095 threads polling it 50 times a
 * second, which would cost the machine more than the host measured. */
static void set_phase(int p)
{
    __atomic_store_n(&sh->phase, p, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &sh->phase, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

static void fail_with(const char *what)
{
    if (__atomic_fetch_add(&sh->nfailed, 1, __ATOMIC_SEQ_CST) == 0)
        snprintf(sh->why, sizeof sh->why, "%s: %s", what,
                 amldist_last_error());
    set_phase(__atomic_load_n(&sh->phase, __ATOMIC_SEQ_CST));
}

static int wait_phase(int p)
{
    int now;
    while ((now = __atomic_load_n(&sh->phase, __ATOMIC_SEQ_CST)) < p) {
        if (sh->nfailed)
            return -1;
        struct timespec ts = {1, 0};
        syscall(SYS_futex, &sh->phase, FUTEX_WAIT, now, &ts, NULL, 0);
    }
    return 0;
}

/* Request `q` answered with gather_kb KiB. */
static int answer_request(amldist_rdzv_t *r, const amldist_rdzv_request_t *q)
{
    static const unsigned char blob[1 << 20];
    size_t len = (size_t)gather_kb << 10;
    return amldist_rdzv_answer(r, q->id, blob,
                               len < sizeof blob ? len : sizeof blob);
}

/* An agent's part of the gather: its request answered. */
static int answer_one(amldist_rdzv_t *r)
{
    struct pollfd p = {amldist_rdzv_events_fd(r), POLLIN, 0};
    long long end = now_us() + 60000000;
    while (now_us() < end && !sh->nfailed) {
        amldist_rdzv_request_t *q;
        if (amldist_rdzv_next_request(r, &q) == 1) {
            int rc = answer_request(r, q);
            amldist_rdzv_request_free(q);
            return rc == 0 ? 0 : -1;
        }
        poll(&p, 1, 100);
    }
    return -1;
}

/* The host's own agent asks every agent (and answers itself). */
static int host_gather(amldist_rdzv_t *r)
{
    unsigned tag;
    double c0 = cpu_ms();
    long long t0 = now_us();
    if (amldist_rdzv_gather(r, AMLDIST_RDZV_TOPIC_USER, "bench", 5, 60000,
                            &tag) != 0)
        return -1;
    struct pollfd p = {amldist_rdzv_events_fd(r), POLLIN, 0};
    long long end = t0 + 65000000;
    while (now_us() < end) {
        amldist_rdzv_request_t *q;
        amldist_rdzv_gather_t *g;
        if (amldist_rdzv_next_request(r, &q) == 1) {
            answer_request(r, q);
            amldist_rdzv_request_free(q);
        }
        if (amldist_rdzv_next_gather(r, &g) == 1) {
            sh->gather_ms = (now_us() - t0) / 1000.0;
            sh->gather_cpu = cpu_ms() - c0;
            sh->gather_cut = g->refused ? n : n - g->n;
            for (int k = 0; k < g->n; k++)
                sh->gather_cut += g->answers[k].status != 0 ||
                                  g->answers[k].len != (size_t)gather_kb << 10;
            amldist_rdzv_gather_free(g);
            return 0;
        }
        poll(&p, 1, 100);
    }
    return -1;
}

/* One agent: join, then views while the host asks for them, then the
 * failure of the last one and the STOP everywhere. */
static void agent(int i)
{
    amldist_rdzv_options_t o = AMLDIST_RDZV_OPTIONS_INIT;
    o.endpoint = ep;
    o.run_id = "bench";
    o.token = "bench";
    o.min_nodes = o.max_nodes = n;
    o.nproc = ranks > 0 ? ranks : 1;
    o.join_timeout_ms = 120000;
    amldist_rdzv_t *r = NULL;
    if (amldist_rdzv_join(&o, &r) != 0) {
        fail_with("join");
        return;
    }
    long long t = now_us();
    long long prev = __atomic_load_n(&sh->joined_max, __ATOMIC_SEQ_CST);
    while (t > prev && !__atomic_compare_exchange_n(
                           &sh->joined_max, &prev, t, 0, __ATOMIC_SEQ_CST,
                           __ATOMIC_SEQ_CST)) {
    }
    __atomic_add_fetch(&sh->njoined, 1, __ATOMIC_SEQ_CST);
    if (i == 0) { /* the host: its own figures */
        sh->form_cpu = cpu_ms();
        if (wait_phase(1) < 0)
            return;
        double c0 = cpu_ms();
        sleep((unsigned)secs);
        sh->steady_cpu = (cpu_ms() - c0) / secs;
        set_phase(2);
        if (ranks > 0) {
            sleep(1); /* the views start */
            c0 = cpu_ms();
            sleep((unsigned)secs);
            sh->views_cpu = (cpu_ms() - c0) / secs;
        }
        set_phase(3);
        if (gather_kb > 0 && host_gather(r) < 0)
            fail_with("gather");
        sh->rss_mib = hwm_mib();
        set_phase(4);
    } else if (wait_phase(2) == 0 && ranks > 0) {
        amldist_rdzv_view_t v[64];
        int first = amldist_rdzv_node_rank(r) * ranks;
        amldist_rdzv_watch(r, 60000);
        while (__atomic_load_n(&sh->phase, __ATOMIC_SEQ_CST) < 3 &&
               !sh->nfailed) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            long long ns = ts.tv_sec * 1000000000LL + ts.tv_nsec;
            for (int k = 0; k < ranks && k < 64; k++)
                v[k] = (amldist_rdzv_view_t){
                    .rank = first + k,
                    .flags = AMLDIST_RDZV_VIEW_ALIVE | AMLDIST_RDZV_VIEW_API,
                    .start_ns = ns - 1000000000LL, .progress_ns = ns};
            amldist_rdzv_set_view(r, v, ranks < 64 ? ranks : 64);
            usleep(250000);
        }
        amldist_rdzv_watch(r, 0);
    }
    if (wait_phase(3) < 0 || (i > 0 && gather_kb > 0 && answer_one(r) < 0) ||
        wait_phase(4) < 0) {
        amldist_rdzv_close(r);
        return;
    }
    int status = 143;
    if (i == n - 1) {
        amldist_rdzv_fail(r, 0, i, 1, "bench: a worker failed");
        status = 1;
    }
    struct pollfd p = {amldist_rdzv_fd(r), POLLIN, 0};
    long long end = now_us() + 60000000;
    while (now_us() < end && amldist_rdzv_state(r) != AMLDIST_RDZV_STOP)
        poll(&p, 1, 100);
    if (amldist_rdzv_state(r) != AMLDIST_RDZV_STOP)
        fail_with("no STOP");
    amldist_rdzv_next(r, status);
    amldist_rdzv_close(r);
}

static void *agent_thread(void *p)
{
    char b;
    while (read(gate[0], &b, 1) < 0 && errno == EINTR)
        ;
    agent((int)(long)p);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 5)
        return fprintf(stderr, "usage: rdzv_host_bench N SECS [RANKS "
                       "[GATHER_KB]]\n"), 2;
    n = atoi(argv[1]);
    secs = atoi(argv[2]);
    ranks = argc >= 4 ? atoi(argv[3]) : 0;
    gather_kb = argc == 5 ? atoi(argv[4]) : 0;
    if (n < 2 || n > 8192 || secs < 1 || ranks < 0 || ranks > 64 ||
        gather_kb < 0 || gather_kb > 1024)
        return fprintf(stderr, "rdzv_host_bench: bad arguments\n"), 2;
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return perror("mmap"), 2;
    unsigned seed = (unsigned)getpid() ^ (unsigned)now_us();
    int port = -1;
    for (int tries = 0; tries < 1000 && port < 0; tries++) {
        int p = 20000 + (int)(rand_r(&seed) % 12000);
        if (!bound(p))
            port = p;
    }
    snprintf(ep, sizeof ep, "127.0.0.1:%d", port);
    pid_t host = fork();
    if (host == 0) {
        /* A session of its own: its own autogroup, the kernel's CFS group
         * of a session, which weighs as much as the bench's, where its
         * 4,095 agent threads are.  Without, each of them weighed 15 (nice
         * 19) against the host's 1,024 and all at once 60 to 1: the host
         * had 2 % of a CPU while they were runnable, most of a 2-3 s
         * formation at 4,096 (issue 40).  In a job they are on other
         * machines.  Where autogroups are off it is their nice alone. */
        setsid();
        agent(0);
        _exit(sh->nfailed ? 1 : 0);
    }
    while (!bound(port)) { /* the host listens first */
        if (waitpid(host, NULL, WNOHANG) == host)
            return fprintf(stderr, "rdzv_host_bench: the host died\n"), 1;
        usleep(2000);
    }
    if (pipe(gate) < 0)
        return perror("pipe"), 2;
    enum { PER = 1000 };
    int nproc = agent_nprocs(n, PER);
    pid_t *kids = calloc((size_t)nproc, sizeof *kids);
    int lo, hi;
    pthread_t *tid;
    int child = agent_procs(n, PER, gate, kids, agent_thread, &lo, &hi, &tid);
    if (child == -2) {
        fail_with("pthread_create");
        _exit(2);
    }
    if (child >= 0) {
        for (int i = lo; i < hi; i++)
            pthread_join(tid[i - lo], NULL);
        _exit(0);
    }
    close(gate[0]);
    usleep(200000 + 100 * n); /* every thread waits on the gate */
    long long t0 = now_us();
    close(gate[1]);
    /* Formed when every agent's join returned, the host's own too. */
    while (!sh->nfailed && __atomic_load_n(&sh->njoined, __ATOMIC_SEQ_CST) < n &&
           waitpid(host, NULL, WNOHANG) == 0)
        usleep(5000);
    set_phase(1);
    double form_ms = (sh->joined_max - t0) / 1000.0;
    for (int k = 0; k < nproc; k++)
        waitpid(kids[k], NULL, 0);
    int st = 0;
    waitpid(host, &st, 0);
    if (sh->nfailed || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return fprintf(stderr, "rdzv_host_bench: %d failed (%s)\n",
                       sh->nfailed, sh->why), 1;
    char views[32] = "-", gather[96] = "- - -";
    if (ranks > 0)
        snprintf(views, sizeof views, "%.1f", sh->views_cpu);
    if (gather_kb > 0)
        snprintf(gather, sizeof gather, "%.1f %.1f %d", sh->gather_ms,
                 sh->gather_cpu, sh->gather_cut);
    printf("%.1f %.1f %.1f %s %.1f %s\n", form_ms, sh->form_cpu,
           sh->steady_cpu, views, sh->rss_mib, gather);
    return 0;
}
