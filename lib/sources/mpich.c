/*
 * MPICH's Hydra and Intel MPI: PMI_RANK and PMI_SIZE (the PMI-1/PMI-2 wire
 * protocol's own variables, also set by srun --mpi=pmi2), and the local
 * pair MPI_LOCALRANKID / MPI_LOCALNRANKS that Hydra adds.  No node index.
 *
 * Hydra's PMI-1 server knows it (PMI_process_mapping), but asking it is not
 * safe before the program's MPI_Init: a rank that sent "cmd=init" and exits
 * without "cmd=finalize" (any program that is not MPI: PyTorch) makes Hydra
 * kill the whole job, and after "cmd=finalize" the proxy closes PMI_FD, so
 * a later MPI_Init fails (MPICH 4.0: "PMI_Get_appnum returned -1").  What
 * is safe to read is the command line of the rank's Hydra proxy, the
 * process that started it: `hydra_pmi_proxy ... --proxy-id N`, where N is
 * the proxy's place in Hydra's proxy list, one proxy per node in use, which
 * is also the node index of PMI_process_mapping.  The proxy is looked for
 * among this process's nearest ancestors (a wrapper such as `env` or a
 * shell may stand between), and only when the variables read are this
 * process's own.  Node count and the host of rank 0 stay unknown.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sources/sources.h"

/* Wrappers between the proxy and us, at most. */
#define HYDRA_ANCESTORS 8
#define HYDRA_CMDLINE_MAX 8192

/* /proc/<pid>/<what> into buf, NUL-terminated: its length, or -1. */
static long read_proc(long pid, const char *what, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/%s", pid, what);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

/* The parent of `pid` from /proc/<pid>/stat, or -1. */
static long parent_of(long pid)
{
    char buf[512];
    if (read_proc(pid, "stat", buf, sizeof buf) < 0)
        return -1;
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses. */
    const char *p = strrchr(buf, ')');
    long ppid;
    if (p == NULL || sscanf(p + 1, " %*c %ld", &ppid) != 1)
        return -1;
    return ppid;
}

/* The value of --proxy-id in a hydra_pmi_proxy command line. */
static long proxy_id(const char *argv, size_t len)
{
    const char *end = argv + len, *arg0 = strrchr(argv, '/');
    arg0 = arg0 != NULL ? arg0 + 1 : argv;
    if (strcmp(arg0, "hydra_pmi_proxy") != 0)
        return -1;
    for (const char *a = argv; a < end; a += strlen(a) + 1) {
        const char *next = a + strlen(a) + 1;
        long v;
        if (strcmp(a, "--proxy-id") == 0 && next < end &&
            amldist__parse_long(next, 0, INT_MAX, &v) == 0)
            return v;
    }
    return -1;
}

/* This process's Hydra proxy: its node index and pid, or -1. */
static long find_proxy(long *proxy_pid)
{
    char buf[HYDRA_CMDLINE_MAX];
    long pid = (long)getpid();
    for (int i = 0; i < HYDRA_ANCESTORS; i++) {
        if ((pid = parent_of(pid)) <= 1)
            return -1;
        long n = read_proc(pid, "cmdline", buf, sizeof buf);
        if (n < 0)
            return -1;
        long id = proxy_id(buf, (size_t)n);
        if (id >= 0) {
            *proxy_pid = pid;
            return id;
        }
    }
    return -1;
}

/* The array's value of `name` is this process's own. */
static int own(const amldist__env_t *env, const char *name)
{
    const char *a = amldist__env_get(env, name), *b = getenv(name);
    return a != NULL && b != NULL && strcmp(a, b) == 0;
}

int amldist__src_mpich(const amldist__env_t *env, struct amldist *r)
{
    amldist__reading_init(r, "mpich");
    int rc = amldist__env_quad(env, r, "PMI_RANK", "PMI_SIZE",
                               "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
    if (rc != 1)
        return rc;
    amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                 "unknown: MPICH / Intel MPI export no node index, and no "
                 "Hydra proxy (hydra_pmi_proxy --proxy-id) started this "
                 "process");
    /* One node: layout.c derives the rest.  Hydra sets the local pair
     * (srun --mpi=pmi2 does not: then there is no proxy to look for). */
    if (!amldist__known(r, AMLDIST_FIELD_LOCAL_WORLD_SIZE) ||
        r->val[AMLDIST_FIELD_LOCAL_WORLD_SIZE] ==
            r->val[AMLDIST_FIELD_WORLD_SIZE] ||
        !own(env, "PMI_RANK") || !own(env, "MPI_LOCALNRANKS"))
        return rc;
    long pid, id = find_proxy(&pid);
    if (id < 0)
        return rc;
    if (id >= r->val[AMLDIST_FIELD_WORLD_SIZE]) {
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: the Hydra proxy (pid %ld) says --proxy-id "
                     "%ld, not below %s",
                     pid, id, r->why[AMLDIST_FIELD_WORLD_SIZE]);
        return rc;
    }
    amldist__set(r, AMLDIST_FIELD_NODE_RANK, id,
                 "hydra_pmi_proxy --proxy-id %ld (pid %ld, the Hydra proxy "
                 "that started this process)",
                 id, pid);
    amldist__why(r, AMLDIST_FIELD_NUM_NODES,
                 "unknown: Hydra's proxy names its own node index only");
    return rc;
}
