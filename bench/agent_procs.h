/*
 * The rendezvous benches' agents 1..n-1 (agent 0 is the bench's own
 * process or the host's): threads of processes of their own, `per` a
 * process, at the lowest priority (in a job the other agents run on other
 * machines: here 4,095 of them on a few CPUs must not starve the one
 * measured), each thread waiting on the gate's pipe before it joins.
 * Shared by bench/rdzv_host_bench.c and bench/rdzv_etcd_bench.c.
 */
#ifndef AMLDIST_BENCH_AGENT_PROCS_H
#define AMLDIST_BENCH_AGENT_PROCS_H

#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

/* The processes agents 1..n-1 need, `per` each. */
static inline int agent_nprocs(int n, int per)
{
    return (n - 1 + per - 1) / per;
}

/* Fork the agents' processes into kids[0..agent_nprocs(n, per)).  In each
 * child: its index, its agents [*lo, *hi) and its threads started (fn
 * given the agent's number), or -2 when a thread could not be made; in
 * the parent: -1 once every one is forked. */
static inline int agent_procs(int n, int per, const int gate[2], pid_t *kids,
                              void *(*fn)(void *), int *lo, int *hi,
                              pthread_t **tids)
{
    for (int k = 0; k < agent_nprocs(n, per); k++) {
        if ((kids[k] = fork()) != 0)
            continue;
        close(gate[1]);
        setpriority(PRIO_PROCESS, 0, 19);
        *lo = 1 + k * per;
        *hi = *lo + per < n ? *lo + per : n;
        pthread_t *tid = calloc((size_t)(*hi - *lo), sizeof *tid);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 256 << 10);
        for (int i = *lo; i < *hi; i++)
            if (!tid || pthread_create(&tid[i - *lo], &attr, fn, (void *)(long)i))
                return -2;
        *tids = tid;
        return k;
    }
    return -1;
}

#endif /* AMLDIST_BENCH_AGENT_PROCS_H */
