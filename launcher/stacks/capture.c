/*
 * stk_capture(): the stacks of this node's workers (see stacks.h).
 *
 * Native frames first, for every target, then the Python frames (the
 * faulthandler signal runs a handler on one of the worker's threads, which
 * changes that thread's native stack).  The native pass runs on a thread of
 * its own made for it: the tracer of a ptrace attachment is a thread, and
 * when that thread ends the kernel detaches whatever it still traces, so
 * that whatever happens in between, no worker is left ptrace-stopped.
 *
 * The whole capture runs on that thread (stk_capture_start): amlrun's loop
 * goes on meanwhile (signals, exits, output) and learns of the end through
 * a descriptor (stk_capture_fd); stk_capture() is the same, waited for.
 * A worker's descendants (capture_kids.c) are targets of their own in the
 * native pass, and give their Python frames one process of a channel at a
 * time after their rank's.
 *
 * This file is the dispatcher: the two passes (capture_native.c,
 * capture_python.c) and the descendants (capture_kids.c) are below it, and
 * the helpers all share below them (capture_core.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stacks/capture.h"

static void rank_clear(struct stk_rank *r)
{
    for (size_t i = 0; i < r->nthreads; i++) {
        struct stk_thread *th = &r->threads[i];
        free(th->name);
        cap_frames_free(th->python, th->npython);
        cap_frames_free(th->native, th->nnative);
    }
    free(r->threads);
    free(r->host);
    free(r->error);
    memset(r, 0, sizeof *r);
}



/* One capture: the targets (the workers, then their descendants: nmain
 * and the rest), what is read of each, and the thread that reads. */
struct stk_capture {
    struct stk_target *t;
    size_t n, nmain;
    size_t *parent;        /* of a descendant (index >= nmain): its rank */
    struct stk_rank *r;
    struct cap_native *c;
    double start, end;
    int rc;
    int done[2];           /* a byte when the thread has ended */
    pthread_t th;
    int started;
};

static void capture_free(struct stk_capture *k)
{
    for (size_t i = 0; k->r && i < k->n; i++)
        rank_clear(&k->r[i]);
    for (size_t i = 0; k->c && i < k->n; i++)
        free(k->c[i].tp);
    for (size_t i = 0; k->t && i < k->n; i++)
        if (k->t[i].python_fd >= 0 && i < k->nmain)
            close(k->t[i].python_fd);
    free(k->t);
    free(k->parent);
    free(k->r);
    free(k->c);
    if (k->done[0] >= 0)
        close(k->done[0]);
    if (k->done[1] >= 0)
        close(k->done[1]);
    free(k);
}

/* Room for m more targets. */
static int grow(struct stk_capture *k, size_t m)
{
    size_t n = k->n + m + 1; /* never 0 */
    struct stk_target *t = realloc(k->t, n * sizeof *t);
    if (t)
        k->t = t;
    size_t *p = t ? realloc(k->parent, n * sizeof *p) : NULL;
    if (p)
        k->parent = p;
    return t && p ? 0 : -1;
}

/* The descendants of every worker, as targets after the workers (their
 * Python channel the rank's; python_fd -1: asked later, one at a time). */
static int add_descendants(struct stk_capture *k)
{
    for (size_t i = 0; i < k->nmain; i++) {
        pid_t *kids;
        size_t nk;
        if (cap_descendants(k->t[i].pid, &kids, &nk) < 0 ||
            grow(k, nk) < 0) {
            free(kids);
            return -1;
        }
        for (size_t j = 0; j < nk; j++) {
            k->t[k->n] = k->t[i];
            k->t[k->n].pid = kids[j];
            k->t[k->n].python_fd = -1;
            k->parent[k->n++] = i;
        }
        free(kids);
    }
    return 0;
}

/* Python frames of the descendants that took the hook and hold their
 * rank's channel: round after round, one process of a channel each, each
 * process once (asked[]: else the first of a channel is asked again every
 * round, until the deadline, its dump appended each time). */
static int kids_python(struct stk_capture *k)
{
    size_t m = k->n - k->nmain, *next = calloc(k->nmain, sizeof *next);
    struct stk_target *t = calloc(m ? m : 1, sizeof *t);
    struct stk_rank *r = calloc(m ? m : 1, sizeof *r);
    struct cap_native *c = calloc(m ? m : 1, sizeof *c);
    size_t *at = calloc(m ? m : 1, sizeof *at);
    unsigned char *asked = calloc(m ? m : 1, 1);
    int rc = next && t && r && c && at && asked ? 0 : -1;
    for (size_t round = 0; rc == 0 && cap_now_ms() < k->end; round++) {
        size_t nr = 0;
        for (size_t i = k->nmain; i < k->n; i++) {
            int fd = k->t[k->parent[i]].python_fd;
            if (asked[i - k->nmain] || next[k->parent[i]] != round ||
                fd < 0 || k->c[i].exited ||
                !cap_python_hooked(k->t[i].pid, fd))
                continue;
            asked[i - k->nmain] = 1;
            next[k->parent[i]]++; /* its next one, in the next round */
            t[nr] = k->t[i];
            t[nr].python_fd = fd;
            r[nr] = k->r[i];
            c[nr] = k->c[i];
            at[nr++] = i;
        }
        if (nr == 0)
            break;
        rc = cap_python(t, nr, r, c, k->end);
        for (size_t j = 0; j < nr; j++)
            k->r[at[j]] = r[j];
    }
    free(asked);
    free(next);
    free(t);
    free(r);
    free(c);
    free(at);
    return rc;
}
/* pthread_create(), also in a process whose children are born in another
 * PID namespace than its own (amlrun's pidns containment: unshare
 * CLONE_NEWPID), where the kernel refuses a thread (clone's EINVAL): the
 * thread is made with amlrun's own namespace for children, which is then
 * put back (setns to the same namespace, then to the job's: amlrun holds
 * CAP_SYS_ADMIN, which the unshare needed).  The thread sees the workers
 * as amlrun does: their pids and /proc are amlrun's namespace's. */
static int tracer_create(pthread_t *th, void *(*fn)(void *), void *arg)
{
    int err = pthread_create(th, NULL, fn, arg);
    if (err != EINVAL)
        return err;
    int own = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    int kids = open("/proc/self/ns/pid_for_children", O_RDONLY | O_CLOEXEC);
    struct stat a, b;
    if (own >= 0 && kids >= 0 && fstat(own, &a) == 0 &&
        fstat(kids, &b) == 0 && a.st_ino != b.st_ino &&
        setns(own, CLONE_NEWPID) == 0) {
        err = pthread_create(th, NULL, fn, arg);
        if (setns(kids, CLONE_NEWPID) < 0)
            abort(); /* workers would escape the job's namespace */
    }
    if (own >= 0)
        close(own);
    if (kids >= 0)
        close(kids);
    return err;
}

/* Each rank as its target says, on host: 0, or -1 when out of memory
 * (the ranks all set all the same). */
static int ranks_init(const struct stk_target *t, size_t n, const char *host,
                      struct stk_rank *r)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        r[i].rank = t[i].rank;
        r[i].local_rank = t[i].local_rank;
        r[i].node = t[i].node;
        r[i].pid = t[i].pid;
        r[i].last_progress_s = t[i].last_progress_s;
        if (host && !(r[i].host = strdup(host)))
            rc = -1;
    }
    return rc;
}


/* The capture's thread: the native pass, then the Python frames, which
 * get what it leaves and at least a third of the time (a dump comes
 * within milliseconds of the signal); then the byte that says so. */
static void *capture_main(void *arg)
{
    struct stk_capture *k = arg;
    int any_python = 0;
    for (size_t i = 0; i < k->nmain; i++)
        any_python |= k->t[i].python_fd >= 0;
    double native_end =
        any_python ? k->start + (k->end - k->start) * 2 / 3 : k->end;
    if (cap_native_all(k->t, k->n, k->r, k->c, native_end) < 0)
        k->rc = -1;
    if (k->rc == 0 && any_python &&
        (cap_python(k->t, k->nmain, k->r, k->c, k->end) < 0 ||
         kids_python(k) < 0))
        k->rc = -1;
    /* The descendants' threads under their ranks (the children of a
     * worker that are gone by now are not worth a line). */
    for (size_t i = k->nmain; k->rc == 0 && i < k->n; i++) {
        if (k->c[i].exited) {
            free(k->r[i].error);
            k->r[i].error = NULL;
        }
        if (cap_adopt(&k->r[k->parent[i]], &k->r[i]) < 0)
            k->rc = -1;
    }
    char b = 'd';
    while (write(k->done[1], &b, 1) < 0 && errno == EINTR) {
    }
    return NULL;
}

/* The targets copied, each Python channel a descriptor of the capture's
 * own (the caller may close its own meanwhile), and their descendants. */
static int capture_setup(struct stk_capture *k, const struct stk_target *t,
                         size_t n, const char *host)
{
    if (grow(k, n) < 0)
        return -1;
    memcpy(k->t, t, n * sizeof *t);
    k->n = k->nmain = n;
    for (size_t i = 0; i < n; i++)
        if (t[i].python_fd >= 0)
            k->t[i].python_fd = fcntl(t[i].python_fd, F_DUPFD_CLOEXEC, 3);
    if (add_descendants(k) < 0)
        return -1;
    k->r = calloc(k->n, sizeof *k->r);
    k->c = calloc(k->n, sizeof *k->c);
    if (!k->r || !k->c || ranks_init(k->t, k->n, host, k->r) < 0)
        return -1;
    return pipe2(k->done, O_CLOEXEC | O_NONBLOCK);
}

struct stk_capture *stk_capture_start(const struct stk_target *t, size_t n,
                                      const char *host, int timeout_ms)
{
    struct stk_capture *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->done[0] = k->done[1] = -1;
    k->start = cap_now_ms();
    k->end = k->start + (timeout_ms > 0 ? timeout_ms : 0);
    if (capture_setup(k, t, n, host) < 0) {
        capture_free(k);
        return NULL;
    }
    int err = tracer_create(&k->th, capture_main, k);
    if (err == 0) {
        k->started = 1;
        return k;
    }
    /* Traced from the caller's thread, a thread that never stopped would
     * stay traced: no native frames instead. */
    for (size_t i = 0; i < k->nmain && k->rc == 0; i++)
        k->rc = cap_error(&k->r[i], "no native frames: no thread to read "
                                    "them from: %s", strerror(err));
    char b = 'd';
    if (write(k->done[1], &b, 1) != 1 || k->rc < 0) {
        capture_free(k);
        return NULL;
    }
    return k;
}

int stk_capture_fd(const struct stk_capture *k)
{
    return k->done[0];
}

int stk_capture_collect(struct stk_capture *k, struct stk_set *out)
{
    if (k->started)
        pthread_join(k->th, NULL);
    struct stk_rank *grown =
        k->rc == 0 ? realloc(out->ranks, (out->n + k->nmain) * sizeof *grown)
                   : NULL;
    int rc = grown ? 0 : -1;
    if (grown) {
        out->ranks = grown;
        memcpy(out->ranks + out->n, k->r, k->nmain * sizeof *k->r);
        memset(k->r, 0, k->nmain * sizeof *k->r);
        out->n += k->nmain;
    }
    capture_free(k);
    return rc;
}

void stk_capture_cancel(struct stk_capture *k)
{
    struct stk_set none = {NULL, 0};
    (void)stk_capture_collect(k, &none);
    stk_set_free(&none);
}

int stk_capture(const struct stk_target *t, size_t n, const char *host,
                int timeout_ms, struct stk_set *out)
{
    if (n == 0)
        return 0;
    struct stk_capture *k = stk_capture_start(t, n, host, timeout_ms);
    return k ? stk_capture_collect(k, out) : -1;
}
