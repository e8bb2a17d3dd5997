/*
 * The collectives nccl-tests measures, their buffer counts and bus-bandwidth
 * factors (nccl-tests' doc/PERFORMANCE.md), the polling synchronisation, and
 * filling and checking buffers.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"

/* bus_factor_n codes the factor: 2 = 2(n-1)/n, 1 = (n-1)/n, 0 = 1. */
const coll_t colls[] = {
    {"all_reduce", 2, 0, 1, 1},     {"all_gather", 1, 0, 0, 1},
    {"reduce_scatter", 1, 0, 1, 1}, {"broadcast", 0, 1, 0, 1},
    {"reduce", 0, 1, 1, 1},         {"alltoall", 1, 0, 0, 0},
};
const int ncolls = (int)(sizeof colls / sizeof *colls);

const coll_t *coll_by_name(const char *name)
{
    for (int i = 0; i < ncolls; i++)
        if (!strcmp(name, colls[i].name))
            return &colls[i];
    return NULL;
}

double bus_factor(const coll_t *c, int world)
{
    if (c->bus_factor_n == 0)
        return 1.0;
    return c->bus_factor_n * (world - 1) / world;
}

static int is(const coll_t *c, const char *name)
{
    return !strcmp(c->name, name);
}

counts_t coll_counts(const coll_t *c, size_t bytes, size_t elt, int world)
{
    size_t count = bytes / elt, per = count / (size_t)world;
    counts_t n = {count, count, count};
    if (is(c, "all_gather"))
        n = (counts_t){per * world, per, per * world};
    else if (is(c, "reduce_scatter"))
        n = (counts_t){per * world, per * world, per};
    else if (is(c, "alltoall"))
        n = (counts_t){per * world, per * world, per * world};
    return n;
}

static char *at(void *base, size_t elems, const dtype_t *t)
{
    return (char *)base + elems * t->size;
}

/* In-place forms as nccl-tests runs them: the input is the rank's own part
 * of the output buffer (all_gather), or the output is the rank's part of
 * the input (reduce_scatter). */
static void buffers(ctx_t *x, const coll_t *c, const dtype_t *t,
                    const counts_t *n, int inplace, void **in, void **out)
{
    *in = x->send;
    *out = x->recv;
    if (!inplace)
        return;
    if (is(c, "all_gather")) {
        *out = x->recv;
        *in = at(x->recv, (size_t)x->rank * n->in, t);
    } else if (is(c, "reduce_scatter")) {
        *in = x->recv;
        *out = at(x->recv, (size_t)x->rank * n->out, t);
    } else {
        *in = *out = x->recv;
    }
}

ncclResult_t coll_launch(ctx_t *x, const coll_t *c, const dtype_t *t,
                         const counts_t *n, int inplace)
{
    void *in, *out;
    buffers(x, c, t, n, inplace, &in, &out);
    if (is(c, "all_reduce"))
        return ncclAllReduce(in, out, n->in, t->nccl, ncclSum, x->comm,
                             x->stream);
    if (is(c, "all_gather"))
        return ncclAllGather(in, out, n->in, t->nccl, x->comm, x->stream);
    if (is(c, "reduce_scatter"))
        return ncclReduceScatter(in, out, n->out, t->nccl, ncclSum, x->comm,
                                 x->stream);
    if (is(c, "broadcast"))
        return ncclBroadcast(in, out, n->in, t->nccl, 0, x->comm, x->stream);
    if (is(c, "reduce"))
        return ncclReduce(in, out, n->in, t->nccl, ncclSum, 0, x->comm,
                          x->stream);
    /* alltoall: one send and one receive of a rank's share per peer. */
    size_t share = n->in / (size_t)x->world;
    ncclResult_t r = ncclGroupStart(), r2;
    for (int p = 0; p < x->world && r == ncclSuccess; p++) {
        r = ncclSend(at(in, (size_t)p * share, t), share, t->nccl, p, x->comm,
                     x->stream);
        if (r == ncclSuccess)
            r = ncclRecv(at(out, (size_t)p * share, t), share, t->nccl, p,
                         x->comm, x->stream);
    }
    r2 = ncclGroupEnd();
    return r != ncclSuccess ? r : r2;
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void abort_comm(ctx_t *x)
{
    if (!x->aborted) {
        ncclCommAbort(x->comm);
        x->aborted = 1;
    }
}

int sync_stream(ctx_t *x, const char *what)
{
    double deadline = now_s() + x->timeout_s;
    for (;;) {
        cudaError_t e = cudaStreamQuery(x->stream);
        ncclResult_t r, async = ncclSuccess;
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady) {
            fprintf(stderr, "%s: rank %d: %s: %s\n", prog, x->rank, what,
                    cudaGetErrorString(e));
            abort_comm(x);
            return -1;
        }
        r = ncclCommGetAsyncError(x->comm, &async);
        if (r != ncclSuccess || (async != ncclSuccess &&
                                 async != ncclInProgress)) {
            fprintf(stderr, "%s: rank %d: %s: NCCL reports %s; aborting the "
                    "communicator\n", prog, x->rank, what,
                    ncclGetErrorString(r != ncclSuccess ? r : async));
            abort_comm(x);
            return -1;
        }
        if (now_s() > deadline) {
            fprintf(stderr, "%s: rank %d: %s did not finish within %d s (a "
                    "peer or the network stopped; --timeout sets the limit); "
                    "aborting the communicator\n",
                    prog, x->rank, what, x->timeout_s);
            abort_comm(x);
            return -1;
        }
        sched_yield();
    }
}

int allreduce_double(ctx_t *x, double *v, ncclRedOp_t op)
{
    ncclResult_t r;
    cudaError_t e;
    if ((e = cudaMemcpy(x->scratch, v, sizeof *v, cudaMemcpyHostToDevice))) {
        fprintf(stderr, "%s: rank %d: cudaMemcpy: %s\n", prog, x->rank,
                cudaGetErrorString(e));
        return -1;
    }
    if ((r = ncclAllReduce(x->scratch, x->scratch, 1, ncclFloat64, op,
                           x->comm, x->stream))) {
        fprintf(stderr, "%s: rank %d: ncclAllReduce: %s\n", prog, x->rank,
                ncclGetErrorString(r));
        return -1;
    }
    if (sync_stream(x, "exchanging results") < 0)
        return -1;
    if ((e = cudaMemcpy(v, x->scratch, sizeof *v, cudaMemcpyDeviceToHost))) {
        fprintf(stderr, "%s: rank %d: cudaMemcpy: %s\n", prog, x->rank,
                cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

static int copy(ctx_t *x, void *dst, const void *src, size_t len,
                enum cudaMemcpyKind kind)
{
    cudaError_t e = cudaMemcpy(dst, src, len, kind);
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: rank %d: cudaMemcpy of %zu bytes: %s\n", prog,
                x->rank, len, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

int fill(ctx_t *x, const dtype_t *t, void *dev, size_t count, int r)
{
    size_t first = count < CHUNK_ELEMS ? count : CHUNK_ELEMS;
    /* The pattern repeats within a chunk, so one host chunk fills all. */
    for (size_t i = 0; i < first; i++)
        encode(t, pattern(t, i, r), at(x->host, i, t));
    for (size_t off = 0; off < count; off += CHUNK_ELEMS) {
        size_t n = count - off < CHUNK_ELEMS ? count - off : CHUNK_ELEMS;
        if (copy(x, at(dev, off, t), x->host, n * t->size,
                 cudaMemcpyHostToDevice) < 0)
            return -1;
    }
    return 0;
}

/* The encoded bytes every element can take: the pattern's values 0 .. M-1,
 * and the sums over the ranks by residue, so that checking a buffer is a
 * table lookup and a compare per element, with no conversions. */
typedef struct {
    unsigned char value[17][8], sum[17][8];
} table_t;

static void make_table(ctx_t *x, const dtype_t *t, table_t *tab)
{
    for (int k = 0; k < t->modulus; k++) {
        long long sum = 0;
        for (int r = 0; r < x->world; r++)
            sum += pattern(t, (size_t)k, r);
        encode(t, k, tab->value[k]);
        encode(t, sum, tab->sum[k]);
    }
}

/* Element i of this rank's result. */
static const unsigned char *expected(ctx_t *x, const coll_t *c,
                                     const dtype_t *t, const counts_t *n,
                                     size_t i, const table_t *tab)
{
    size_t share;
    if (is(c, "all_gather")) {
        share = n->in;
        return tab->value[pattern(t, i % share, (int)(i / share))];
    }
    if (is(c, "reduce_scatter"))
        return tab->sum[((size_t)x->rank * n->out + i) % (size_t)t->modulus];
    if (is(c, "broadcast"))
        return tab->value[pattern(t, i, 0)];
    if (is(c, "alltoall")) {
        share = n->in / (size_t)x->world;
        return tab->value[pattern(t, (size_t)x->rank * share + i % share,
                                  (int)(i / share))];
    }
    return tab->sum[i % (size_t)t->modulus]; /* all_reduce, reduce's root */
}

long long count_wrong(ctx_t *x, const coll_t *c, const dtype_t *t,
                      const counts_t *n, int inplace)
{
    table_t tab;
    long long wrong = 0;
    void *in, *out;
    if (is(c, "reduce") && x->rank != 0)
        return 0; /* only the root's buffer is defined */
    buffers(x, c, t, n, inplace, &in, &out);
    make_table(x, t, &tab);
    for (size_t off = 0; off < n->out; off += CHUNK_ELEMS) {
        size_t len = n->out - off < CHUNK_ELEMS ? n->out - off : CHUNK_ELEMS;
        const unsigned char *got = (const unsigned char *)x->host;
        if (copy(x, x->host, at(out, off, t), len * t->size,
                 cudaMemcpyDeviceToHost) < 0)
            return -1;
        for (size_t i = 0; i < len; i++, got += t->size)
            wrong += memcmp(got, expected(x, c, t, n, off + i, &tab),
                            t->size) != 0;
    }
    return wrong;
}

int prepare(ctx_t *x, const coll_t *c, const dtype_t *t, const counts_t *n,
            int inplace)
{
    void *in, *out;
    cudaError_t e;
    buffers(x, c, t, n, inplace, &in, &out);
    /* All ones in every byte (NaN, -1) in the output first: a collective
     * that writes nothing cannot pass for one that wrote the right values. */
    if ((e = cudaMemset(x->recv, 0xff, n->total * t->size))) {
        fprintf(stderr, "%s: rank %d: cudaMemset: %s\n", prog, x->rank,
                cudaGetErrorString(e));
        return -1;
    }
    return fill(x, t, in, n->in, x->rank);
}
