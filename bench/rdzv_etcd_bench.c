/*
 * Driver for bench/rdzv_etcd.sh: the etcd rendezvous backend (issue 40)
 * with N agents against an etcd of one member or three (the script's,
 * their pids given for their CPU; the first is the member the agents use,
 * the first of the endpoint's list).  Agent 0, a process of its own forked first, holds the decider
 * key (the others are released 0.5 s after it joined the store); the N-1
 * others are threads of processes of at most 512 agents each, at nice 19,
 * all released at once.  Prints one line:
 *
 *     form_ms agent_cpu_ms decider_cpu_ms steady_agents_ms_s steady_etcd_ms_s stop_ms takeover_ms member_stop_ms member_next_ms noticed
 *
 *     form       the threads' release to the last agent's join returning
 *     agent_cpu  the CPU of the N-1 agents' processes to form, per agent
 *     decider    agent 0's process's CPU from its start to its own join
 *     steady     the CPU per second of every agent (agent 0 included) and
 *                of etcd over SECS seconds of an idle job (keep-alives)
 *     stop       one agent's amldist_rdzv_fail() to the last other agent
 *                seeing the STOP
 *     takeover   agent 0 (the decider's) SIGKILLed in the next round: to
 *                the last of the others having the round after (its lease
 *                expires, another agent takes the key over, replays the
 *                log, the round re-forms without it: --nnodes N-1:N)
 *
 * With three members, then (each "-" with one): the member the agents use
 * SIGKILLed and at once one agent's failure, as a job's worker could fail
 * at any time:
 *     member_stop  the kill to the last other agent seeing the STOP (the
 *                  agents' requests and watches moved to another member)
 *     member_next  the kill to the last of them in the round after (all
 *                  N-1 of them: nobody's lease lost meanwhile)
 *     noticed      the agents that saw anything else over the dead time
 *                  and 3 s more (8 s): a STOP, another round, an error;
 *                  0 is "the job did not notice"
 *
 *     rdzv_etcd_bench N SECS ETCD_ENDPOINT ETCD_PID[,ETCD_PID...] [MISSES]
 *
 * MISSES: keep-alives every 1 s, the dead time (the lease) MISSES of them
 * (5, the defaults': --rdzv-conf keep_alive_max_attempt).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <amldist.h>

#include "agent_procs.h"

typedef struct {
    int nfailed, njoined, phase, nstopped, nnext, nmstopped, nmnext, noticed;
    long long joined_max, stopped_max, next_max, t_fail, t_kill;
    long long mstopped_max, mnext_max;
    double decider_cpu;
    long long agents_cpu_us;
    char why[256];
} shared_t;

static shared_t *sh;
static int n, secs, members, misses = 5;
static char ep[512];
static int gate[2];
static double form_ms = -1; /* said on a failure after the formation */

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static double cpu_ms(int who)
{
    struct rusage ru;
    getrusage(who, &ru);
    return ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3 +
           ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3;
}

/* A process's CPU (utime + stime), ms, from /proc. */
static double pid_cpu_ms(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (p)
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
               &ut, &st);
    return (ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

static void max_at(long long *slot, long long t)
{
    long long prev = __atomic_load_n(slot, __ATOMIC_SEQ_CST);
    while (t > prev && !__atomic_compare_exchange_n(
                           slot, &prev, t, 0, __ATOMIC_SEQ_CST,
                           __ATOMIC_SEQ_CST)) {
    }
}

static void fail_with(const char *what)
{
    if (__atomic_fetch_add(&sh->nfailed, 1, __ATOMIC_SEQ_CST) == 0)
        snprintf(sh->why, sizeof sh->why, "%s: %s", what,
                 amldist_last_error());
}

static int wait_phase(int p)
{
    while (__atomic_load_n(&sh->phase, __ATOMIC_SEQ_CST) < p) {
        if (sh->nfailed)
            return -1;
        usleep(100000); /* the bench's own cost stays out of the figures */
    }
    return 0;
}

/* wait_phase(p), and r watched meanwhile: a STOP, another round or an
 * error counts this agent in sh->noticed (once). */
static int wait_phase_watching(int p, amldist_rdzv_t *r)
{
    int round = amldist_rdzv_round(r), seen = 0;
    while (__atomic_load_n(&sh->phase, __ATOMIC_SEQ_CST) < p) {
        if (sh->nfailed)
            return -1;
        if (!seen && (amldist_rdzv_state(r) != AMLDIST_RDZV_RUNNING ||
                      amldist_rdzv_round(r) != round)) {
            seen = 1;
            __atomic_add_fetch(&sh->noticed, 1, __ATOMIC_SEQ_CST);
        }
        usleep(100000);
    }
    return 0;
}

/* Until r's state is `want` (60 s at most): 0, or -1. */
static int wait_state(amldist_rdzv_t *r, int want)
{
    struct pollfd p = {amldist_rdzv_fd(r), POLLIN, 0};
    long long end = now_us() + 60000000;
    while (now_us() < end && amldist_rdzv_state(r) != want)
        poll(&p, 1, 20);
    return amldist_rdzv_state(r) == want ? 0 : -1;
}

static void agent(int i)
{
    amldist_rdzv_options_t o = AMLDIST_RDZV_OPTIONS_INIT;
    o.endpoint = ep;
    o.run_id = "bench";
    o.min_nodes = n - 1;
    o.max_nodes = n;
    o.last_call_ms = 60000; /* the first round waits for all N */
    o.nproc = 1;
    o.max_restarts = 3;
    o.join_timeout_ms = 120000;
    o.keepalive_ms = 1000;
    o.keepalive_misses = misses;
    amldist_rdzv_t *r = NULL;
    if (amldist_rdzv_join(&o, &r) != 0) {
        fail_with("join");
        return;
    }
    max_at(&sh->joined_max, now_us());
    __atomic_add_fetch(&sh->njoined, 1, __ATOMIC_SEQ_CST);
    if (i == 0)
        sh->decider_cpu = cpu_ms(RUSAGE_SELF);
    if (wait_phase(3) < 0)
        goto out;
    /* The stop: the last agent fails, every other sees the STOP. */
    if (i == n - 1) {
        sh->t_fail = now_us();
        amldist_rdzv_fail(r, 0, i, 1, "bench: a worker failed");
    } else if (wait_state(r, AMLDIST_RDZV_STOP) < 0) {
        fail_with("no STOP");
        goto out;
    } else {
        max_at(&sh->stopped_max, now_us());
    }
    __atomic_add_fetch(&sh->nstopped, 1, __ATOMIC_SEQ_CST);
    /* The next round (a restart of all N), then agent 0 killed: the
     * round after, of the N-1 left. */
    int got = amldist_rdzv_next(r, i == n - 1 ? 1 : 143);
    if (got != 1) {
        char what[300];
        snprintf(what, sizeof what, "no round after the stop (%d, status "
                 "%d: %.200s)", got, got == 0 ? amldist_rdzv_exit_status(r) : -1,
                 got == 0 && amldist_rdzv_failure(r) ? amldist_rdzv_failure(r)
                                                     : "");
        fail_with(what);
        goto out;
    }
    if (i == 0) { /* killed in phase 4 */
        for (;;)
            pause();
    }
    __atomic_add_fetch(&sh->nnext, 1, __ATOMIC_SEQ_CST);
    got = wait_phase(5) < 0 ? -2 : wait_state(r, AMLDIST_RDZV_STOP) < 0
                                       ? -3 : amldist_rdzv_next(r, 143);
    if (got != 1) {
        char what[300];
        snprintf(what, sizeof what, "no round after the decider's agent was "
                 "killed (%d, status %d: %.200s)", got,
                 got == 0 ? amldist_rdzv_exit_status(r) : -1,
                 got == 0 && amldist_rdzv_failure(r) ? amldist_rdzv_failure(r)
                                                     : "");
        fail_with(what);
        goto out;
    }
    max_at(&sh->next_max, now_us());
    __atomic_add_fetch(&sh->nnext, 1, __ATOMIC_SEQ_CST);
    if (wait_phase(6) < 0 || members < 2)
        goto out;
    /* The member the agents use killed: the last agent fails at once,
     * every other sees the STOP and all N-1 meet in the round after. */
    if (i == n - 1) {
        amldist_rdzv_fail(r, 0, i, 1, "bench: a worker failed");
    } else if (wait_state(r, AMLDIST_RDZV_STOP) < 0) {
        fail_with("no STOP after an etcd member was killed");
        goto out;
    } else {
        max_at(&sh->mstopped_max, now_us());
    }
    __atomic_add_fetch(&sh->nmstopped, 1, __ATOMIC_SEQ_CST);
    got = amldist_rdzv_next(r, i == n - 1 ? 1 : 143);
    if (got != 1 || amldist_rdzv_num_nodes(r) != n - 1) {
        char what[300];
        snprintf(what, sizeof what, "no round of %d after an etcd member "
                 "was killed (%d, %d nodes: %.200s)", n - 1, got,
                 got == 1 ? amldist_rdzv_num_nodes(r) : 0,
                 got == 0 && amldist_rdzv_failure(r) ? amldist_rdzv_failure(r)
                                                     : "");
        fail_with(what);
        goto out;
    }
    max_at(&sh->mnext_max, now_us());
    __atomic_add_fetch(&sh->nmnext, 1, __ATOMIC_SEQ_CST);
    wait_phase_watching(7, r);
out:
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

static int wait_count(int *slot, int want, int ms)
{
    long long end = now_us() + ms * 1000LL;
    while (__atomic_load_n(slot, __ATOMIC_SEQ_CST) < want && !sh->nfailed &&
           now_us() < end)
        usleep(2000);
    return __atomic_load_n(slot, __ATOMIC_SEQ_CST) >= want ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6)
        return fprintf(stderr, "usage: rdzv_etcd_bench N SECS ETCD_ENDPOINT "
                       "ETCD_PID[,ETCD_PID...]\n"), 2;
    n = atoi(argv[1]);
    secs = atoi(argv[2]);
    long etcd_pids[8];
    for (char *p = argv[4]; *p && members < 8; p += *p == ',') {
        char *e;
        etcd_pids[members++] = strtol(p, &e, 10);
        p = e;
    }
    snprintf(ep, sizeof ep, "etcd://%s", argv[3]);
    if (argc == 6)
        misses = atoi(argv[5]);
    if (n < 3 || n > 8192 || secs < 1 || members < 1 || misses < 2)
        return fprintf(stderr, "rdzv_etcd_bench: bad arguments\n"), 2;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return perror("mmap"), 2;
    pid_t decider = fork();
    if (decider == 0) {
        agent(0);
        _exit(0);
    }
    usleep(500000); /* agent 0 holds the decider key */
    if (pipe(gate) < 0)
        return perror("pipe"), 2;
    enum { PER = 512 };
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
        /* Its agents' CPU to form, added up. */
        while (__atomic_load_n(&sh->phase, __ATOMIC_SEQ_CST) < 1 &&
               !sh->nfailed)
            usleep(2000);
        __atomic_add_fetch(&sh->agents_cpu_us,
                           (long long)(cpu_ms(RUSAGE_SELF) * 1000),
                           __ATOMIC_SEQ_CST);
        for (int i = lo; i < hi; i++)
            pthread_join(tid[i - lo], NULL);
        _exit(0);
    }
    close(gate[0]);
    usleep(200000 + 200 * n);
    long long t0 = now_us();
    close(gate[1]);
    if (wait_count(&sh->njoined, n, 120000) < 0)
        goto bad;
    form_ms = (sh->joined_max - t0) / 1000.0;
    __atomic_store_n(&sh->phase, 1, __ATOMIC_SEQ_CST);
    usleep(500000);
    /* Steady: every agent's process and etcd, SECS seconds. */
    double a0 = pid_cpu_ms(decider), e0 = 0, e1 = 0, k0 = 0, k1 = 0;
    for (int k = 0; k < members; k++)
        e0 += pid_cpu_ms(etcd_pids[k]);
    for (int k = 0; k < nproc; k++)
        k0 += pid_cpu_ms(kids[k]);
    sleep((unsigned)secs);
    for (int k = 0; k < nproc; k++)
        k1 += pid_cpu_ms(kids[k]);
    for (int k = 0; k < members; k++)
        e1 += pid_cpu_ms(etcd_pids[k]);
    double steady_agents = (k1 - k0 + pid_cpu_ms(decider) - a0) / secs;
    double steady_etcd = (e1 - e0) / secs;
    __atomic_store_n(&sh->phase, 3, __ATOMIC_SEQ_CST);
    if (wait_count(&sh->nstopped, n - 1, 60000) < 0)
        goto bad;
    double stop_ms = (sh->stopped_max - sh->t_fail) / 1000.0;
    if (wait_count(&sh->nnext, n - 1, 60000) < 0)
        goto bad;
    usleep(300000);
    __atomic_store_n(&sh->phase, 4, __ATOMIC_SEQ_CST);
    long long t_kill = now_us();
    kill(decider, SIGKILL);
    __atomic_store_n(&sh->phase, 5, __ATOMIC_SEQ_CST);
    if (wait_count(&sh->nnext, 2 * (n - 1), 60000) < 0)
        goto bad;
    double takeover_ms = (sh->next_max - t_kill) / 1000.0;
    char member[100] = "- - -";
    if (members > 1) {
        usleep(300000);
        long long t_mkill = now_us();
        kill((pid_t)etcd_pids[0], SIGKILL);
        __atomic_store_n(&sh->phase, 6, __ATOMIC_SEQ_CST);
        if (wait_count(&sh->nmstopped, n - 1, 60000) < 0 ||
            wait_count(&sh->nmnext, n - 1, 60000) < 0)
            goto bad;
        sleep((unsigned)misses + 3); /* the lease's time and more: nobody
                                       should notice */
        snprintf(member, sizeof member, "%.1f %.1f %d",
                 (sh->mstopped_max - t_mkill) / 1000.0,
                 (sh->mnext_max - t_mkill) / 1000.0, sh->noticed);
    }
    __atomic_store_n(&sh->phase, 7, __ATOMIC_SEQ_CST);
    for (int k = 0; k < nproc; k++)
        waitpid(kids[k], NULL, 0);
    waitpid(decider, NULL, 0);
    printf("%.1f %.2f %.1f %.1f %.1f %.1f %.1f %s\n", form_ms,
           sh->agents_cpu_us / 1000.0 / (n - 1), sh->decider_cpu, steady_agents,
           steady_etcd, stop_ms, takeover_ms, member);
    return 0;
bad:
    fprintf(stderr, "rdzv_etcd_bench: %d failed (%s), %d joined, %d stopped, "
            "%d next, %d stopped and %d next after the member's kill; "
            "formed in %.0f ms\n", sh->nfailed, sh->why, sh->njoined,
            sh->nstopped, sh->nnext, sh->nmstopped, sh->nmnext, form_ms);
    kill(decider, SIGKILL);
    for (int k = 0; k < nproc; k++)
        kill(kids[k], SIGKILL);
    return 1;
}
