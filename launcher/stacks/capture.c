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
 * This file is the dispatcher: the two passes (capture_native.c,
 * capture_python.c) are below it, and the helpers all three share below
 * them (capture_core.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

struct native_pass {
    const struct stk_target *t;
    size_t n;
    struct stk_rank *r;
    struct cap_native *c;
    double deadline;
    int rc;
};

static void *native_main(void *arg)
{
    struct native_pass *p = arg;
    if (cap_native_all(p->t, p->n, p->r, p->c, p->deadline) < 0)
        p->rc = -1;
    return NULL;
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

int stk_capture(const struct stk_target *t, size_t n, const char *host,
                int timeout_ms, struct stk_set *out)
{
    if (n == 0)
        return 0;
    double start = cap_now_ms();
    struct stk_rank *r = calloc(n, sizeof *r);
    struct cap_native *c = calloc(n, sizeof *c);
    struct stk_rank *grown =
        r && c ? realloc(out->ranks, (out->n + n) * sizeof *grown) : NULL;
    if (!grown) {
        free(r);
        free(c);
        return -1;
    }
    out->ranks = grown;
    int rc = ranks_init(t, n, host, r);
    /* The Python frames get what the native pass leaves, and at least a
     * third of the time: a dump comes within milliseconds of the signal. */
    int any_python = 0;
    for (size_t i = 0; i < n; i++)
        any_python |= t[i].python_fd >= 0;
    double end = start + (timeout_ms > 0 ? timeout_ms : 0);
    struct native_pass p = {
        .t = t, .n = n, .r = r, .c = c, .rc = rc,
        .deadline = any_python ? start + timeout_ms * 2.0 / 3 : end,
    };
    pthread_t th;
    int err = p.rc == 0 ? pthread_create(&th, NULL, native_main, &p) : 0;
    if (p.rc == 0 && err == 0) {
        pthread_join(th, NULL);
    } else if (p.rc == 0) {
        /* Traced from amlrun's own thread, a thread that never stopped
         * would stay traced: no native frames instead. */
        for (size_t i = 0; i < n && p.rc == 0; i++)
            p.rc = cap_error(&r[i], "no native frames: no thread to read "
                                    "them from: %s", strerror(err));
    }
    if (p.rc == 0 && any_python && cap_python(t, n, r, c, end) < 0)
        p.rc = -1;
    for (size_t i = 0; i < n; i++)
        free(c[i].tp);
    free(c);
    if (p.rc < 0) {
        for (size_t i = 0; i < n; i++)
            rank_clear(&r[i]);
        free(r);
        return -1;
    }
    memcpy(out->ranks + out->n, r, n * sizeof *r);
    out->n += n;
    free(r);
    return 0;
}
