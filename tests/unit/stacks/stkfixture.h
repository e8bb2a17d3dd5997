/*
 * Synthetic sets of stacks for the tests of launcher/stacks: a builder
 * that appends to the last rank and thread, the stacks of a PyTorch job
 * (a rank in all_reduce, a rank stuck in its own function) and of a native
 * one, and a deep comparison of two sets.
 */
#ifndef STKFIXTURE_H
#define STKFIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "stacks/stacks.h"

static inline char *fx_dup(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* A rank: node rank / 8, local rank rank % 8, host "node<node>",
 * pid 1000 + rank (1 for a rank past 1000000), last progress 12.5 s ago. */
static inline void fx_rank(struct stk_set *s, int rank)
{
    s->ranks = realloc(s->ranks, (s->n + 1) * sizeof *s->ranks);
    struct stk_rank *r = &s->ranks[s->n++];
    memset(r, 0, sizeof *r);
    char host[32];
    snprintf(host, sizeof host, "node%d", rank / 8);
    r->rank = rank;
    r->local_rank = rank % 8;
    r->node = rank / 8;
    r->host = strdup(host);
    r->pid = rank >= 0 && rank < 1000000 ? 1000 + rank : 1;
    r->last_progress_s = 12.5;
}

static inline void fx_error(struct stk_set *s, const char *error)
{
    free(s->ranks[s->n - 1].error);
    s->ranks[s->n - 1].error = fx_dup(error);
}

static inline void fx_thread(struct stk_set *s, pid_t tid, const char *name)
{
    struct stk_rank *r = &s->ranks[s->n - 1];
    r->threads = realloc(r->threads, (r->nthreads + 1) * sizeof *r->threads);
    struct stk_thread *t = &r->threads[r->nthreads++];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    t->name = fx_dup(name);
}

static inline void fx_frame(struct stk_frame **a, size_t *n, const char *fn, const char *file,
                     int line, const char *module)
{
    *a = realloc(*a, (*n + 1) * sizeof **a);
    struct stk_frame *f = &(*a)[(*n)++];
    f->function = fx_dup(fn);
    f->file = fx_dup(file);
    f->line = line;
    f->module = fx_dup(module);
}

/* Frames of the last thread, innermost first. */
static inline void fx_py(struct stk_set *s, const char *fn, const char *file, int line)
{
    struct stk_rank *r = &s->ranks[s->n - 1];
    struct stk_thread *t = &r->threads[r->nthreads - 1];
    fx_frame(&t->python, &t->npython, fn, file, line, NULL);
}

static inline void fx_nat(struct stk_set *s, const char *fn, const char *file, int line,
                   const char *module)
{
    struct stk_rank *r = &s->ranks[s->n - 1];
    struct stk_thread *t = &r->threads[r->nthreads - 1];
    fx_frame(&t->native, &t->nnative, fn, file, line, module);
}

#define FX_LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define FX_TORCH "/usr/lib/python3/dist-packages/torch/"
#define FX_TRAIN "/work/job/train.py"

/* The native frames under a Python worker's main thread. */
static inline void fx_py_native(struct stk_set *s)
{
    fx_nat(s, "__futex_abstimed_wait_common", NULL, 0, FX_LIBC);
    fx_nat(s, "_PyEval_EvalFrameDefault", NULL, 0, "/usr/bin/python3.11");
    fx_nat(s, "__libc_start_main", NULL, 0, FX_LIBC);
}

/* A data loader's pin-memory thread, waiting for a batch. */
static inline void fx_py_pin_memory(struct stk_set *s, int rank)
{
    fx_thread(s, 2000 + rank, "pt_pin_memory");
    fx_py(s, "wait", "/usr/lib/python3.11/threading.py", 320);
    fx_py(s, "get", "/usr/lib/python3.11/queue.py", 171);
    fx_py(s, "_pin_memory_loop", FX_TORCH "utils/data/_utils/pin_memory.py", 52);
}

/* A PyTorch rank waiting in dist.all_reduce called at train.py:line, with
 * a pin-memory thread. */
static inline void fx_py_allreduce(struct stk_set *s, int rank, int line)
{
    fx_rank(s, rank);
    fx_thread(s, 1000 + rank, "python3");
    fx_py(s, "all_reduce", FX_TORCH "distributed/distributed_c10d.py", 2501);
    fx_py(s, "wrapper", FX_TORCH "distributed/c10d_logger.py", 83);
    fx_py(s, "train", FX_TRAIN, line);
    fx_py(s, "main", FX_TRAIN, 60);
    fx_py(s, "<module>", FX_TRAIN, 64);
    fx_py_native(s);
    fx_py_pin_memory(s, rank);
}

/* A PyTorch rank stuck in its own slow_step, at train.py:line. */
static inline void fx_py_stuck(struct stk_set *s, int rank, int line)
{
    fx_rank(s, rank);
    fx_thread(s, 1000 + rank, "python3");
    fx_py(s, "slow_step", FX_TRAIN, line);
    fx_py(s, "train", FX_TRAIN, 40);
    fx_py(s, "main", FX_TRAIN, 60);
    fx_py(s, "<module>", FX_TRAIN, 64);
    fx_py_native(s);
    fx_py_pin_memory(s, rank);
}

/* A native worker's frames: */
#define FX_WORKER "/work/build/tests/stuck_worker"
#define FX_LIBAMLDIST "/work/build/lib/libamldist.so.1"

/* spinning in spin() at worker.c:line. */
static inline void fx_native_spin(struct stk_set *s, int rank, int line)
{
    fx_rank(s, rank);
    fx_thread(s, 1000 + rank, "stuck_worker");
    fx_nat(s, "spin", "/work/tests/worker.c", line, FX_WORKER);
    fx_nat(s, "main", "/work/tests/worker.c", 30, FX_WORKER);
    fx_nat(s, "__libc_start_call_main", "../sysdeps/nptl/libc_start_call_main.h", 58, FX_LIBC);
}

/* waiting in the library's allreduce, and a helper thread caught at a
 * place that differs from rank to rank. */
static inline void fx_native_wait(struct stk_set *s, int rank)
{
    fx_rank(s, rank);
    fx_thread(s, 1000 + rank, "stuck_worker");
    fx_nat(s, "__GI___poll", "../sysdeps/unix/sysv/linux/poll.c", 29, FX_LIBC);
    fx_nat(s, "amldist__bs_wait", "lib/bootstrap/client.c", 80, FX_LIBAMLDIST);
    fx_nat(s, "amldist_allreduce", "lib/bootstrap/agree.c", 120, FX_LIBAMLDIST);
    fx_nat(s, "main", "/work/tests/worker.c", 41, FX_WORKER);
    fx_nat(s, "__libc_start_call_main", "../sysdeps/nptl/libc_start_call_main.h", 58, FX_LIBC);
    fx_thread(s, 2000 + rank, "helper");
    fx_nat(s, rank % 2 ? "epoll_wait" : "__GI___nanosleep", NULL, 0, FX_LIBC);
    fx_nat(s, "helper_loop", "/work/tests/worker.c", 12, FX_WORKER);
}

static inline int fx_str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static inline int fx_frames_eq(const struct stk_frame *a, size_t na, const struct stk_frame *b,
                        size_t nb)
{
    if (na != nb)
        return 0;
    for (size_t i = 0; i < na; i++)
        if (!fx_str_eq(a[i].function, b[i].function) || !fx_str_eq(a[i].file, b[i].file) ||
            !fx_str_eq(a[i].module, b[i].module) || a[i].line != b[i].line)
            return 0;
    return 1;
}

/* Every field of every rank, exactly (last_progress_s bit for bit). */
static inline int fx_set_eq(const struct stk_set *a, const struct stk_set *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++) {
        const struct stk_rank *x = &a->ranks[i], *y = &b->ranks[i];
        if (x->rank != y->rank || x->local_rank != y->local_rank || x->node != y->node ||
            x->pid != y->pid || memcmp(&x->last_progress_s, &y->last_progress_s, sizeof(double)) ||
            !fx_str_eq(x->host, y->host) || !fx_str_eq(x->error, y->error) ||
            x->nthreads != y->nthreads)
            return 0;
        for (size_t t = 0; t < x->nthreads; t++) {
            const struct stk_thread *p = &x->threads[t], *q = &y->threads[t];
            if (p->tid != q->tid || !fx_str_eq(p->name, q->name) ||
                !fx_frames_eq(p->python, p->npython, q->python, q->npython) ||
                !fx_frames_eq(p->native, p->nnative, q->native, q->nnative))
                return 0;
        }
    }
    return 1;
}

#endif /* STKFIXTURE_H */
