/*
 * Stand-in libnccl for tests on machines without a GPU: communicators,
 * errors and fault injection.  NOT NCCL: ranks meet and exchange data
 * through files in a directory named by the unique id (see fake_nccl.h),
 * which is enough to test the code that calls NCCL.
 *
 * Environment, read by ncclCommInitRank (R = rank, K = operation number,
 * counted from 0 over the collectives and send/recv groups of one
 * communicator, in the order they are called):
 *   FAKE_NCCL_DIR          where ncclGetUniqueId makes its directory
 *                          (default $TMPDIR, else /tmp)
 *   FAKE_NCCL_VERSION      what ncclGetVersion says (default the header's)
 *   FAKE_NCCL_LOG          file to append "init rank=... id=..." lines to
 *   FAKE_NCCL_INIT_TIMEOUT seconds init waits for every rank (default 30)
 *   FAKE_NCCL_INIT_FAIL=R      rank R's init fails (ncclSystemError)
 *   FAKE_NCCL_CORRUPT_RANK=R   element 0 of each of rank R's outputs is wrong
 *   FAKE_NCCL_ASYNC_ERROR=R:K  from operation K, rank R's operations never
 *                              end and its async error is ncclRemoteError
 *   FAKE_NCCL_HANG=R:K         rank R never posts operation K (a stuck peer)
 *   FAKE_NCCL_DIE=R:K          rank R _exit(9)s when its stream reaches K
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fake_nccl.h"

/* ---------------------------------------------------------------------------
 * Errors and version
 */

static char last_error[1024];

ncclResult_t fnccl_fail(ncclResult_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return last_error;
}

/* NCCL's own wording, so that messages built from them read the same. */
const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL "
               "developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

static void bad_env(const char *name, const char *value)
{
    fprintf(stderr, "fake libnccl (test stand-in, not NCCL): %s=%s: invalid "
                    "value\n", name, value);
    exit(70);
}

ncclResult_t ncclGetVersion(int *version)
{
    const char *v = getenv("FAKE_NCCL_VERSION");
    char *end;
    if (!version)
        return fnccl_fail(ncclInvalidArgument, "ncclGetVersion: NULL");
    *version = NCCL_VERSION_CODE;
    if (v && *v) {
        long n = strtol(v, &end, 10);
        if (*end || n < 0 || n > 0x7fffffff)
            bad_env("FAKE_NCCL_VERSION", v);
        *version = (int)n;
    }
    return ncclSuccess;
}

ncclResult_t fnccl_check_comm(const struct ncclComm *comm)
{
    if (!comm || comm->magic != FNCCL_MAGIC || !comm->user_ref)
        return fnccl_fail(ncclInvalidArgument, "invalid communicator");
    return ncclSuccess;
}

/* ---------------------------------------------------------------------------
 * Files
 */

static int path(char *out, size_t size, const char *dir, const char *name)
{
    return (size_t)snprintf(out, size, "%s/%s", dir, name) < size ? 0
                                                                  : -ENAMETOOLONG;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int fnccl_write(const char *dir, const char *name, const void *head,
                size_t hlen, const void *data, size_t dlen, int exclusive)
{
    char tmp[512], final[512];
    int fd, rc;
    char tname[300];
    snprintf(tname, sizeof tname, ".tmp.%d.%s", (int)getpid(), name);
    if ((rc = path(tmp, sizeof tmp, dir, tname)) < 0 ||
        (rc = path(final, sizeof final, dir, name)) < 0)
        return rc;
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
        return -errno;
    rc = write_all(fd, head, hlen);
    if (rc == 0 && dlen)
        rc = write_all(fd, data, dlen);
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && (exclusive ? link(tmp, final) : rename(tmp, final)) < 0)
        rc = -errno;
    if (exclusive || rc < 0)
        unlink(tmp);
    return rc;
}

int fnccl_read(const char *dir, const char *name, void **buf, size_t *len)
{
    char p[512];
    struct stat st;
    char *b;
    size_t got = 0;
    int fd, rc = path(p, sizeof p, dir, name);
    if (rc < 0)
        return rc;
    if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !(b = malloc((size_t)st.st_size + 1))) {
        close(fd);
        return -ENOMEM;
    }
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    b[got] = '\0';
    *buf = b;
    *len = got;
    return 0;
}

void fnccl_unlink(const char *dir, const char *name)
{
    char p[512];
    if (path(p, sizeof p, dir, name) == 0)
        unlink(p);
}

/* Whether dir/<what>.r<rank> exists. */
static int exists(const char *dir, const char *what, int rank)
{
    char name[64], p[512];
    struct stat st;
    snprintf(name, sizeof name, "%s.r%d", what, rank);
    return path(p, sizeof p, dir, name) == 0 && stat(p, &st) == 0;
}

/* Alive, and not a zombie: an exited child its parent has not reaped yet
 * still answers kill(0). */
static int pid_alive(pid_t pid)
{
    char p[64], buf[512], *close_paren;
    FILE *f;
    size_t n;
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return 0;
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    if (!(f = fopen(p, "re")))
        return 1;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    close_paren = strrchr(buf, ')');
    return !(close_paren && close_paren[1] == ' ' &&
             (close_paren[2] == 'Z' || close_paren[2] == 'X'));
}

/* ---------------------------------------------------------------------------
 * Unique id: "FAKENCCL", the creator's pid, the directory.
 */

struct id_layout {
    char magic[8];
    int32_t pid;
    char dir[NCCL_UNIQUE_ID_BYTES - 12];
};
_Static_assert(sizeof(struct id_layout) == NCCL_UNIQUE_ID_BYTES, "id size");

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    struct id_layout id;
    const char *base = getenv("FAKE_NCCL_DIR");
    char dir[4096];
    if (!uniqueId)
        return fnccl_fail(ncclInvalidArgument, "ncclGetUniqueId: NULL");
    if (!base || !*base)
        base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    memset(&id, 0, sizeof id);
    if ((size_t)snprintf(dir, sizeof dir, "%s/fakenccl.XXXXXX", base) >=
        sizeof id.dir)
        return fnccl_fail(ncclInvalidArgument,
                          "fake NCCL: directory %s/fakenccl.XXXXXX does not "
                          "fit in an ncclUniqueId", base);
    if (!mkdtemp(dir))
        return fnccl_fail(ncclSystemError, "fake NCCL: mkdtemp %s: %s", dir,
                          strerror(errno));
    memcpy(id.magic, "FAKENCCL", 8);
    id.pid = (int32_t)getpid();
    memcpy(id.dir, dir, strlen(dir) + 1);
    memcpy(uniqueId->internal, &id, sizeof id);
    return ncclSuccess;
}

/* FNV-1a: a short name for an id in the log. */
static unsigned long long id_hash(const ncclUniqueId *id)
{
    unsigned long long h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof id->internal; i++)
        h = (h ^ (unsigned char)id->internal[i]) * 0x100000001b3ull;
    return h;
}

/* ---------------------------------------------------------------------------
 * Leaving: each rank marks how it left; the last one removes the directory
 * (best effort: a rank that died never leaves, and its files stay).
 */

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            fnccl_unlink(dir, e->d_name);
    closedir(d);
    rmdir(dir);
}

static void leave(const char *dir, int rank, int nranks, int clean)
{
    char name[32];
    int gone = 0;
    snprintf(name, sizeof name, "%s.r%d", clean ? "done" : "abort", rank);
    fnccl_write(dir, name, "", 0, NULL, 0, 0);
    for (int r = 0; r < nranks; r++)
        gone += exists(dir, "done", r) || exists(dir, "abort", r);
    if (gone == nranks)
        remove_dir(dir);
}

/* ---------------------------------------------------------------------------
 * Init
 */

struct join {
    int rank, nranks;
    char busid[64];
    int pid;
};

static long long env_fault(const char *name, int rank, int want_op)
{
    const char *v = getenv(name);
    char *end;
    long r, k = 0;
    if (!v || !*v)
        return -1;
    r = strtol(v, &end, 10);
    if (end == v || r < 0 || (want_op ? *end != ':' : *end != '\0'))
        bad_env(name, v);
    if (want_op) {
        const char *ks = end + 1;
        k = strtol(ks, &end, 10);
        if (end == ks || *end || k < 0)
            bad_env(name, v);
    }
    return r == rank ? k : -1;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* What the directory says about the other ranks. */
struct scan {
    struct join *joins; /* by rank; .rank -1 until joined */
    int joined, ready;
    int aborted;        /* a rank that aborted or failed, or -1 */
    int mismatch;       /* a rank with another nranks, or -1 */
    int other_nranks;
};

static ncclResult_t scan(const char *dir, int nranks, struct scan *sc)
{
    DIR *d;
    struct dirent *e;
    sc->joined = sc->ready = sc->other_nranks = 0;
    sc->aborted = sc->mismatch = -1;
    for (int r = 0; r < nranks; r++)
        sc->joins[r].rank = -1;
    if (!(d = opendir(dir)))
        return fnccl_fail(ncclSystemError, "fake NCCL: %s: %s", dir,
                          strerror(errno));
    while ((e = readdir(d))) {
        struct join j;
        void *buf;
        size_t len;
        int r;
        if (sscanf(e->d_name, "abort.r%d", &r) == 1)
            sc->aborted = r;
        if (sscanf(e->d_name, "ready.r%d", &r) == 1)
            sc->ready++;
        if (sscanf(e->d_name, "join.r%d", &r) != 1 ||
            fnccl_read(dir, e->d_name, &buf, &len) < 0)
            continue;
        if (sscanf(buf, "rank=%d nranks=%d busid=%63s pid=%d", &j.rank,
                   &j.nranks, j.busid, &j.pid) == 4) {
            if (j.nranks != nranks) {
                sc->mismatch = j.rank;
                sc->other_nranks = j.nranks;
            } else if (j.rank >= 0 && j.rank < nranks) {
                sc->joined += sc->joins[j.rank].rank < 0;
                sc->joins[j.rank] = j;
            }
        }
        free(buf);
    }
    closedir(d);
    return ncclSuccess;
}

/* Init in two steps, as NCCL's is collective: every rank joins and checks
 * the others' records (all of them there, same nranks, no GPU twice), says
 * it is ready, and succeeds once all are.  A rank that fails after joining
 * leaves an abort marker, so the others fail at once instead of by timeout.
 * Returns ncclInProgress while waiting. */
static ncclResult_t init_step(const char *dir, int rank, int nranks,
                              pid_t creator, struct scan *sc, int *ready)
{
    ncclResult_t rc = scan(dir, nranks, sc);
    if (rc != ncclSuccess)
        return rc;
    if (sc->mismatch >= 0)
        return fnccl_fail(ncclInvalidUsage, "fake NCCL: rank %d has nranks "
                          "%d, rank %d has nranks %d", rank, nranks,
                          sc->mismatch, sc->other_nranks);
    if (*ready && sc->ready == nranks)
        return ncclSuccess;
    /* As NCCL: only the ranks sharing a GPU say so. */
    for (int r = 0; sc->joined == nranks && r < nranks; r++)
        if (r != rank && !strcmp(sc->joins[r].busid, sc->joins[rank].busid))
            return fnccl_fail(ncclInvalidUsage, "Duplicate GPU detected : "
                              "rank %d and rank %d both on CUDA device %s",
                              rank, r, sc->joins[rank].busid);
    if (sc->aborted >= 0)
        return fnccl_fail(ncclRemoteError, "fake NCCL: rank %d: rank %d "
                          "failed or aborted during init", rank, sc->aborted);
    for (int r = 0; r < nranks; r++)
        if (sc->joins[r].rank >= 0 && !pid_alive(sc->joins[r].pid))
            return fnccl_fail(ncclRemoteError, "fake NCCL: rank %d: rank %d "
                              "(pid %d) exited during init", rank, r,
                              sc->joins[r].pid);
    if (!pid_alive(creator))
        return fnccl_fail(ncclRemoteError, "fake NCCL: rank %d: the process "
                          "that made the unique id (pid %d) has exited", rank,
                          (int)creator);
    if (sc->joined == nranks && !*ready) {
        char name[32];
        snprintf(name, sizeof name, "ready.r%d", rank);
        if (fnccl_write(dir, name, "", 0, NULL, 0, 0) < 0)
            return fnccl_fail(ncclSystemError, "fake NCCL: %s/%s: %s", dir,
                              name, strerror(errno));
        *ready = 1;
    }
    return ncclInProgress;
}

static ncclResult_t wait_ranks(const char *dir, int rank, int nranks,
                               pid_t creator, double timeout, struct scan *sc)
{
    const struct timespec tick = {0, 1000 * 1000};
    double start = now();
    int ready = 0, missing = 0;
    ncclResult_t rc;
    while ((rc = init_step(dir, rank, nranks, creator, sc, &ready)) ==
           ncclInProgress) {
        if (now() - start <= timeout) {
            nanosleep(&tick, NULL);
            continue;
        }
        while (missing < nranks && sc->joins[missing].rank >= 0)
            missing++;
        if (missing < nranks)
            return fnccl_fail(ncclSystemError, "fake NCCL: rank %d: timed out "
                              "after %g s waiting for rank %d to join", rank,
                              timeout, missing);
        return fnccl_fail(ncclSystemError, "fake NCCL: rank %d: timed out "
                          "after %g s waiting for the ranks to be ready",
                          rank, timeout);
    }
    return rc;
}

static void comm_free(struct ncclComm *c)
{
    c->magic = 0;
    free(c->pids);
    free(c->sent);
    free(c->received);
    free(c);
}

static struct ncclComm *comm_new(int nranks)
{
    struct ncclComm *c = calloc(1, sizeof *c);
    if (c && (c->pids = calloc((size_t)nranks, sizeof *c->pids)) &&
        (c->sent = calloc((size_t)nranks, sizeof *c->sent)) &&
        (c->received = calloc((size_t)nranks, sizeof *c->received)))
        return c;
    if (c)
        comm_free(c);
    return NULL;
}

static void log_init(const struct ncclComm *c, const char *busid,
                     const ncclUniqueId *id)
{
    const char *file = getenv("FAKE_NCCL_LOG");
    char line[512];
    int fd, n;
    if (!file || !*file)
        return;
    n = snprintf(line, sizeof line,
                 "init rank=%d nranks=%d device=%d busid=%s id=%016llx "
                 "pid=%d\n",
                 c->rank, c->nranks, c->device, busid, id_hash(id),
                 (int)getpid());
    /* One write to an O_APPEND file: ranks' lines never interleave. */
    if ((fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) >= 0) {
        if (write(fd, line, (size_t)n) != n)
            fprintf(stderr, "fake libnccl: %s: short write\n", file);
        close(fd);
    }
}

static ncclResult_t init_rank(ncclComm_t *out, int nranks, ncclUniqueId commId,
                              int rank)
{
    struct id_layout id;
    struct ncclComm *c = NULL;
    struct scan sc;
    char busid[64], rec[160], name[32], *end;
    const char *tv = getenv("FAKE_NCCL_INIT_TIMEOUT");
    double timeout = 30;
    cudaError_t ce;
    ncclResult_t rc;
    int dev, wrc;

    if (!out)
        return fnccl_fail(ncclInvalidArgument, "ncclCommInitRank: comm NULL");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return fnccl_fail(ncclInvalidArgument, "ncclCommInitRank: rank %d "
                          "nranks %d: invalid rank requested", rank, nranks);
    memcpy(&id, commId.internal, sizeof id);
    if (memcmp(id.magic, "FAKENCCL", 8) || !memchr(id.dir, '\0', sizeof id.dir))
        return fnccl_fail(ncclInvalidArgument, "ncclCommInitRank: not a "
                          "unique id from the fake NCCL's ncclGetUniqueId");
    if (tv && *tv && ((timeout = strtod(tv, &end)) <= 0 || *end))
        bad_env("FAKE_NCCL_INIT_TIMEOUT", tv);
    if ((ce = cudaGetDevice(&dev)) != cudaSuccess ||
        (ce = cudaDeviceGetPCIBusId(busid, sizeof busid, dev)) != cudaSuccess)
        return fnccl_fail(ncclUnhandledCudaError, "Cuda failure %d '%s'",
                          (int)ce, cudaGetErrorString(ce));

    snprintf(name, sizeof name, "join.r%d", rank);
    snprintf(rec, sizeof rec, "rank=%d nranks=%d busid=%s pid=%d\n", rank,
             nranks, busid, (int)getpid());
    if ((wrc = fnccl_write(id.dir, name, rec, strlen(rec), NULL, 0, 1)) < 0)
        return fnccl_fail(wrc == -EEXIST ? ncclInvalidUsage : ncclSystemError,
                          "fake NCCL: rank %d: %s/%s: %s", rank, id.dir, name,
                          wrc == -EEXIST ? "another process already joined as "
                                           "this rank" : strerror(-wrc));
    /* Joined: from here a failure is announced to the others. */
    if (env_fault("FAKE_NCCL_INIT_FAIL", rank, 0) >= 0) {
        leave(id.dir, rank, nranks, 0);
        return fnccl_fail(ncclSystemError, "fake NCCL: rank %d: init failure "
                          "injected by FAKE_NCCL_INIT_FAIL", rank);
    }
    if (!(sc.joins = calloc((size_t)nranks, sizeof *sc.joins)))
        rc = fnccl_fail(ncclSystemError, "out of memory");
    else
        rc = wait_ranks(id.dir, rank, nranks, id.pid, timeout, &sc);
    if (rc == ncclSuccess && !(c = comm_new(nranks)))
        rc = fnccl_fail(ncclSystemError, "out of memory");
    if (rc != ncclSuccess) {
        free(sc.joins);
        leave(id.dir, rank, nranks, 0);
        return rc;
    }
    c->magic = FNCCL_MAGIC;
    memcpy(c->dir, id.dir, sizeof id.dir);
    c->rank = rank;
    c->nranks = nranks;
    c->device = dev;
    c->user_ref = 1;
    for (int r = 0; r < nranks; r++)
        c->pids[r] = sc.joins[r].pid;
    free(sc.joins);
    c->corrupt = env_fault("FAKE_NCCL_CORRUPT_RANK", rank, 0) >= 0;
    c->die_at = env_fault("FAKE_NCCL_DIE", rank, 1);
    c->hang_at = env_fault("FAKE_NCCL_HANG", rank, 1);
    c->async_at = env_fault("FAKE_NCCL_ASYNC_ERROR", rank, 1);
    log_init(c, busid, &commId);
    *out = c;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks,
                              ncclUniqueId commId, int rank)
{
    return init_rank(comm, nranks, commId, rank);
}

/* Always blocking: with config->blocking 0 NCCL may return ncclInProgress,
 * and it may as well finish first, as this one does. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    (void)config;
    return init_rank(comm, nranks, commId, rank);
}

/* ---------------------------------------------------------------------------
 * Queries, async errors, faults
 */

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    ncclResult_t rc = fnccl_check_comm(comm);
    if (rc == ncclSuccess && !count)
        rc = fnccl_fail(ncclInvalidArgument, "ncclCommCount: count NULL");
    if (rc == ncclSuccess)
        *count = comm->nranks;
    return rc;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    ncclResult_t rc = fnccl_check_comm(comm);
    if (rc == ncclSuccess && !device)
        rc = fnccl_fail(ncclInvalidArgument, "ncclCommCuDevice: device NULL");
    if (rc == ncclSuccess)
        *device = comm->device;
    return rc;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    ncclResult_t rc = fnccl_check_comm(comm);
    if (rc == ncclSuccess && !rank)
        rc = fnccl_fail(ncclInvalidArgument, "ncclCommUserRank: rank NULL");
    if (rc == ncclSuccess)
        *rank = comm->rank;
    return rc;
}

/* Never blocks.  A peer that aborted, or whose process is gone without a
 * clean destroy, is a remote error, and stays one. */
static ncclResult_t async_error(struct ncclComm *c)
{
    for (int r = 0; c->async == ncclSuccess && r < c->nranks; r++) {
        if (r == c->rank)
            continue;
        if (exists(c->dir, "abort", r))
            c->async = fnccl_fail(ncclRemoteError, "fake NCCL: rank %d: peer "
                                  "rank %d aborted", c->rank, r);
        else if (!pid_alive(c->pids[r]) && !exists(c->dir, "done", r))
            c->async = fnccl_fail(ncclRemoteError, "fake NCCL: rank %d: peer "
                                  "rank %d (pid %d) exited", c->rank, r,
                                  (int)c->pids[r]);
    }
    return c->async;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    ncclResult_t rc = fnccl_check_comm(comm);
    if (rc == ncclSuccess && !asyncError)
        rc = fnccl_fail(ncclInvalidArgument, "ncclCommGetAsyncError: NULL");
    if (rc == ncclSuccess)
        *asyncError = async_error(comm);
    return rc;
}

int fnccl_reach(struct ncclComm *c, unsigned long long k)
{
    if (c->die_at >= 0 && k >= (unsigned long long)c->die_at)
        _exit(9);
    if (c->async_at >= 0 && k >= (unsigned long long)c->async_at) {
        if (c->async == ncclSuccess)
            c->async = fnccl_fail(ncclRemoteError, "fake NCCL: rank %d: "
                                  "network error injected at operation %llu "
                                  "by FAKE_NCCL_ASYNC_ERROR", c->rank, k);
        return 0;
    }
    return !(c->hang_at >= 0 && k >= (unsigned long long)c->hang_at);
}

void fnccl_op_done(struct ncclComm *c)
{
    if (--c->pending == 0 && !c->user_ref)
        comm_free(c);
}

/* ---------------------------------------------------------------------------
 * Finalize, destroy, abort
 */

/* Waits for the queued operations, as NCCL does (forever if a peer is
 * stuck), unless an async error says they will never end. */
static ncclResult_t drain(struct ncclComm *c)
{
    const struct timespec tick = {0, 500 * 1000};
    for (;;) {
        int pending;
        fakecuda_progress();
        fakecuda_lock();
        pending = c->pending;
        fakecuda_unlock();
        if (pending == 0)
            return ncclSuccess;
        if (async_error(c) != ncclSuccess)
            return c->async;
        nanosleep(&tick, NULL);
    }
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    ncclResult_t rc = fnccl_check_comm(comm);
    return rc == ncclSuccess ? drain(comm) : rc;
}

static ncclResult_t end_comm(struct ncclComm *c, int clean)
{
    ncclResult_t rc = fnccl_check_comm(c);
    int last;
    if (rc != ncclSuccess)
        return rc;
    if (clean && drain(c) != ncclSuccess)
        clean = 0;
    leave(c->dir, c->rank, c->nranks, clean);
    /* Under the lock: another thread may be running the queued operations
     * (in cudaStreamSynchronize), and whichever side ends last frees. */
    fakecuda_lock();
    c->aborted = !clean; /* the queued operations end now, without data */
    c->user_ref = 0;
    last = c->pending == 0;
    fakecuda_unlock();
    if (last)
        comm_free(c);
    else
        fakecuda_progress();
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    return end_comm(comm, 1);
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    return end_comm(comm, 0);
}
