/*
 * Stand-in libnccl: collectives, send/recv and datatypes.  NOT NCCL.
 *
 * A collective is queued on its stream.  When the stream reaches it, the
 * rank writes its input to op<C>.r<rank> in the communicator's directory;
 * each later progress checks whether every rank's op<C> file is there and,
 * once they all are, computes this rank's output from them (reductions in
 * rank order, in float for half and bfloat16, so every rank gets the same
 * bits).  Sends write one file per message, receives wait for it and
 * delete it.  Simple and correct for the small buffers tests use.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fake_nccl.h"

/* ---------------------------------------------------------------------------
 * Datatypes and reductions
 */

enum family { FAM_NONE, FAM_SIGNED, FAM_UNSIGNED, FAM_FLOAT, FAM_DOUBLE };

static enum family family(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclInt32: case ncclInt64: return FAM_SIGNED;
    case ncclUint8: case ncclUint32: case ncclUint64: return FAM_UNSIGNED;
    case ncclFloat16: case ncclBfloat16: case ncclFloat32: return FAM_FLOAT;
    case ncclFloat64: return FAM_DOUBLE;
    default: return FAM_NONE; /* the fp8 types: not done here */
    }
}

static size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

static int64_t get_s(const void *p, ncclDataType_t t, size_t i)
{
    switch (t) {
    case ncclInt8: return ((const int8_t *)p)[i];
    case ncclInt32: return ((const int32_t *)p)[i];
    default: return ((const int64_t *)p)[i];
    }
}

static uint64_t get_u(const void *p, ncclDataType_t t, size_t i)
{
    switch (t) {
    case ncclUint8: return ((const uint8_t *)p)[i];
    case ncclUint32: return ((const uint32_t *)p)[i];
    default: return ((const uint64_t *)p)[i];
    }
}

static float get_f(const void *p, ncclDataType_t t, size_t i)
{
    switch (t) {
    case ncclFloat16: return standin_half_to_float(((const uint16_t *)p)[i]);
    case ncclBfloat16: return standin_bf16_to_float(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

/* Stores wrap to the type's width, as the integer arithmetic would. */
static void put_s(void *p, ncclDataType_t t, size_t i, int64_t v)
{
    switch (t) {
    case ncclInt8: ((int8_t *)p)[i] = (int8_t)v; break;
    case ncclInt32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: ((int64_t *)p)[i] = v; break;
    }
}

static void put_u(void *p, ncclDataType_t t, size_t i, uint64_t v)
{
    switch (t) {
    case ncclUint8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case ncclUint32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    default: ((uint64_t *)p)[i] = v; break;
    }
}

static void put_f(void *p, ncclDataType_t t, size_t i, float v)
{
    switch (t) {
    case ncclFloat16: ((uint16_t *)p)[i] = standin_float_to_half(v); break;
    case ncclBfloat16: ((uint16_t *)p)[i] = standin_float_to_bf16(v); break;
    default: ((float *)p)[i] = v; break;
    }
}

/* One op over two values of one family (sum and product wrap for
 * integers: unsigned arithmetic, no undefined overflow). */
#define COMBINE(acc, x, op)                                                    \
    ((op) == ncclProd ? (acc) * (x)                                            \
     : (op) == ncclMax ? ((x) > (acc) ? (x) : (acc))                           \
     : (op) == ncclMin ? ((x) < (acc) ? (x) : (acc))                           \
                       : (acc) + (x))

/* out[i] = in[0][off+i] op in[1][off+i] op ... (rank order), i < count. */
static void reduce(void *out, void *const *in, size_t off, size_t count,
                   ncclDataType_t t, ncclRedOp_t op, int n)
{
    for (size_t i = 0; i < count; i++) {
        size_t j = off + i;
        switch (family(t)) {
        case FAM_SIGNED: {
            uint64_t acc = (uint64_t)get_s(in[0], t, j);
            int64_t v;
            for (int r = 1; r < n; r++) {
                uint64_t x = (uint64_t)get_s(in[r], t, j);
                if (op == ncclMax || op == ncclMin) {
                    int64_t a = (int64_t)acc, b = (int64_t)x;
                    acc = (uint64_t)COMBINE(a, b, op);
                } else
                    acc = COMBINE(acc, x, op);
            }
            put_s(out, t, i, (int64_t)acc); /* wraps to the type ... */
            v = get_s(out, t, i);           /* ... before the average */
            if (op == ncclAvg)
                put_s(out, t, i, v / n);
            break;
        }
        case FAM_UNSIGNED: {
            uint64_t acc = get_u(in[0], t, j);
            for (int r = 1; r < n; r++)
                acc = COMBINE(acc, get_u(in[r], t, j), op);
            put_u(out, t, i, acc);
            if (op == ncclAvg)
                put_u(out, t, i, get_u(out, t, i) / (uint64_t)n);
            break;
        }
        case FAM_FLOAT: {
            float acc = get_f(in[0], t, j);
            for (int r = 1; r < n; r++)
                acc = COMBINE(acc, get_f(in[r], t, j), op);
            put_f(out, t, i, op == ncclAvg ? acc / (float)n : acc);
            break;
        }
        case FAM_DOUBLE: {
            double acc = ((const double *)in[0])[j];
            for (int r = 1; r < n; r++)
                acc = COMBINE(acc, ((const double *)in[r])[j], op);
            ((double *)out)[i] = op == ncclAvg ? acc / n : acc;
            break;
        }
        case FAM_NONE: break;
        }
    }
}

/* FAKE_NCCL_CORRUPT_RANK: element 0 made clearly wrong, whatever its type
 * (a flipped low bit could pass a float tolerance). */
static void corrupt(void *out, ncclDataType_t t)
{
    float f;
    switch (family(t)) {
    case FAM_SIGNED: put_s(out, t, 0, get_s(out, t, 0) + 1); break;
    case FAM_UNSIGNED: put_u(out, t, 0, get_u(out, t, 0) + 1); break;
    case FAM_FLOAT:
        f = get_f(out, t, 0);
        put_f(out, t, 0, fabsf(f) < 1 ? f + 1 : f * 2);
        break;
    case FAM_DOUBLE: {
        double *d = out;
        *d = fabs(*d) < 1 ? *d + 1 : *d * 2;
        break;
    }
    case FAM_NONE: break;
    }
}

static ncclResult_t check_args(struct ncclComm *comm, const char *fn,
                               ncclDataType_t t, ncclRedOp_t op, int root)
{
    ncclResult_t rc = fnccl_check_comm(comm);
    if (rc != ncclSuccess)
        return rc;
    if (family(t) == FAM_NONE)
        return fnccl_fail(ncclInvalidArgument, "%s: datatype %d is not "
                          "supported by the fake NCCL", fn, (int)t);
    if ((int)op < 0 || op >= ncclNumOps)
        return fnccl_fail(ncclInvalidArgument, "%s: invalid reduction "
                          "operation %d", fn, (int)op);
    if (root < 0 || root >= comm->nranks)
        return fnccl_fail(ncclInvalidArgument, "%s: invalid root/peer %d "
                          "(nranks %d)", fn, root, comm->nranks);
    return ncclSuccess;
}

/* ---------------------------------------------------------------------------
 * Collectives
 */

enum kind { ALLREDUCE, REDUCE, BROADCAST, ALLGATHER, REDUCESCATTER };
static const char *const kind_name[] = {"AllReduce", "Reduce", "Broadcast",
                                        "AllGather", "ReduceScatter"};

struct coll_head {
    char magic[8];
    int32_t kind, type, op, root, rank, pad;
    uint64_t count;
};

struct coll {
    struct ncclComm *comm;
    enum kind kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;
    unsigned long long k, c; /* operation number, collective number */
    int posted, broken;
};

/* Elements this rank writes to its op file. */
static size_t posted_count(const struct coll *o)
{
    switch (o->kind) {
    case BROADCAST: return o->comm->rank == o->root ? o->count : 0;
    case REDUCESCATTER: return o->count * (size_t)o->comm->nranks;
    default: return o->count;
    }
}

static int post(struct coll *o)
{
    struct ncclComm *c = o->comm;
    struct coll_head h = {"FAKECOLL", (int32_t)o->kind, (int32_t)o->type,
                          (int32_t)o->op, o->root, c->rank, 0, o->count};
    char name[64];
    int rc;
    snprintf(name, sizeof name, "op%llu.r%d", o->c, c->rank);
    rc = fnccl_write(c->dir, name, &h, sizeof h, o->send,
                     posted_count(o) * type_size(o->type), 0);
    if (rc < 0 && c->async == ncclSuccess)
        c->async = fnccl_fail(ncclSystemError, "fake NCCL: rank %d: %s/%s: %s",
                              c->rank, c->dir, name, strerror(-rc));
    return rc;
}

static int all_posted(const struct coll *o)
{
    char p[512];
    struct stat st;
    for (int r = 0; r < o->comm->nranks; r++) {
        snprintf(p, sizeof p, "%s/op%llu.r%d", o->comm->dir, o->c, r);
        if (stat(p, &st) < 0)
            return 0;
    }
    return 1;
}

/* Every rank must have called the same collective: NCCL would hang or
 * corrupt memory; here the async error says what differed. */
static int same_call(struct coll *o, const struct coll_head *h, size_t len)
{
    struct ncclComm *c = o->comm;
    const size_t want = sizeof *h + (size_t)(h->kind == BROADCAST ?
        (h->rank == o->root ? o->count : 0) :
        h->kind == REDUCESCATTER ? o->count * (size_t)c->nranks : o->count) *
        type_size(o->type);
    if (len >= sizeof *h && !memcmp(h->magic, "FAKECOLL", 8) &&
        h->kind == (int32_t)o->kind && h->type == (int32_t)o->type &&
        h->op == (int32_t)o->op && h->root == o->root &&
        h->count == o->count && len == want)
        return 1;
    o->broken = 1;
    if (c->async == ncclSuccess)
        c->async = fnccl_fail(ncclInvalidUsage, "fake NCCL: collective %llu: "
                              "rank %d called %s(count %zu, type %d, op %d, "
                              "root %d), rank %d called %s(count %llu, type "
                              "%d, op %d, root %d)", o->c, c->rank,
                              kind_name[o->kind], o->count, (int)o->type,
                              (int)o->op, o->root, (int)h->rank,
                              (unsigned)h->kind < 5 ? kind_name[h->kind] : "?",
                              (unsigned long long)h->count, (int)h->type,
                              (int)h->op, (int)h->root);
    return 0;
}

static void compute(struct coll *o, void *const *in)
{
    struct ncclComm *c = o->comm;
    size_t n = o->count, sz = type_size(o->type);
    switch (o->kind) {
    case ALLREDUCE:
        reduce(o->recv, in, 0, n, o->type, o->op, c->nranks);
        break;
    case REDUCE:
        if (c->rank != o->root)
            return; /* no output, nothing to corrupt */
        reduce(o->recv, in, 0, n, o->type, o->op, c->nranks);
        break;
    case BROADCAST:
        memmove(o->recv, in[o->root], n * sz);
        break;
    case ALLGATHER:
        for (int r = 0; r < c->nranks; r++)
            memmove((char *)o->recv + (size_t)r * n * sz, in[r], n * sz);
        break;
    case REDUCESCATTER:
        reduce(o->recv, in, (size_t)c->rank * n, n, o->type, o->op,
               c->nranks);
        break;
    }
    if (c->corrupt && n)
        corrupt(o->recv, o->type);
}

static int poll_coll(void *arg)
{
    struct coll *o = arg;
    struct ncclComm *c = o->comm;
    void **bufs;
    int ok = 1, r;
    char name[64];
    if (c->aborted)
        return 1; /* NCCL's kernels end on abort: done, the data is junk */
    if (o->broken)
        return 0;
    if (!o->posted) {
        if (!fnccl_reach(c, o->k) || post(o) < 0)
            return 0;
        o->posted = 1;
    }
    if (!all_posted(o))
        return 0;
    if (!(bufs = calloc((size_t)c->nranks, sizeof *bufs)))
        return 0;
    for (r = 0; ok && r < c->nranks; r++) {
        size_t len;
        snprintf(name, sizeof name, "op%llu.r%d", o->c, r);
        ok = fnccl_read(c->dir, name, &bufs[r], &len) == 0 &&
             same_call(o, bufs[r], len);
    }
    if (ok) {
        void **data = calloc((size_t)c->nranks, sizeof *data);
        if ((ok = data != NULL)) {
            for (r = 0; r < c->nranks; r++)
                data[r] = (struct coll_head *)bufs[r] + 1;
            compute(o, data);
            free(data);
        }
    }
    for (r = 0; r < c->nranks; r++)
        free(bufs[r]);
    free(bufs);
    if (!ok)
        return 0;
    /* Everyone has posted C, so everyone has finished C-1: its file can go. */
    if (o->c > 0) {
        snprintf(name, sizeof name, "op%llu.r%d", o->c - 1, c->rank);
        fnccl_unlink(c->dir, name);
    }
    return 1;
}

static void release_coll(void *arg)
{
    struct coll *o = arg;
    fnccl_op_done(o->comm);
    free(o);
}

/* Queues op; when that fails, release(op) drops it at once. */
static ncclResult_t enqueue(struct ncclComm *comm, cudaStream_t stream,
                            fakecuda_poll_fn poll, void (*release)(void *),
                            void *op)
{
    cudaError_t e;
    fakecuda_lock();
    comm->pending++;
    fakecuda_unlock();
    if ((e = fakecuda_enqueue(stream, poll, release, op)) != cudaSuccess) {
        fakecuda_lock(); /* where release runs otherwise */
        release(op);
        fakecuda_unlock();
        return fnccl_fail(ncclUnhandledCudaError, "Cuda failure %d '%s'",
                          (int)e, cudaGetErrorString(e));
    }
    return ncclSuccess;
}

static ncclResult_t coll(enum kind kind, const void *send, void *recv,
                         size_t count, ncclDataType_t type, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream)
{
    struct coll *o;
    ncclResult_t rc = check_args(comm, kind_name[kind], type, op, root);
    if (rc != ncclSuccess)
        return rc;
    /* Broadcast reads no input off the root, reduce writes no output. */
    if (count && ((!send && !(kind == BROADCAST && comm->rank != root)) ||
                  (!recv && !(kind == REDUCE && comm->rank != root))))
        return fnccl_fail(ncclInvalidArgument, "%s: NULL buffer",
                          kind_name[kind]);
    if (!(o = calloc(1, sizeof *o)))
        return fnccl_fail(ncclSystemError, "out of memory");
    *o = (struct coll){comm, kind, send, recv, count, type, op, root,
                       comm->nops++, comm->ncoll++, 0, 0};
    return enqueue(comm, stream, poll_coll, release_coll, o);
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream)
{
    return coll(ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm,
                stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream)
{
    return coll(REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm,
                stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    return coll(BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root,
                comm, stream);
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype,
                       int root, ncclComm_t comm, cudaStream_t stream)
{
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff,
                           size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream)
{
    return coll(ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0,
                comm, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff,
                               size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    return coll(REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0,
                comm, stream);
}

/* ---------------------------------------------------------------------------
 * Send and receive.  Messages between two ranks match in call order: the
 * N-th send from S to D is file p2p.S.D.N.  Calls between ncclGroupStart
 * and ncclGroupEnd make one operation per communicator and stream.
 */

struct p2p_item {
    int send;
    void *buf;
    size_t count;
    ncclDataType_t type;
    int peer;
    unsigned long long seq;
    int done;
};

struct p2p {
    struct ncclComm *comm; /* first, as in struct coll: see release_op */
    cudaStream_t stream;
    unsigned long long k;
    int n, posted, broken;
    struct p2p_item *items;
};

struct p2p_head {
    char magic[8];
    int32_t type, from;
    uint64_t count;
};

static void release_p2p(void *arg)
{
    struct p2p *o = arg;
    fnccl_op_done(o->comm);
    free(o->items);
    free(o);
}

static int poll_p2p(void *arg)
{
    struct p2p *o = arg;
    struct ncclComm *c = o->comm;
    char name[64];
    int left = 0, first_recv = 1;
    if (c->aborted)
        return 1;
    if (o->broken)
        return 0;
    if (!o->posted) {
        if (!fnccl_reach(c, o->k))
            return 0;
        for (int i = 0; i < o->n; i++) {
            struct p2p_item *it = &o->items[i];
            struct p2p_head h = {"FAKEP2P", (int32_t)it->type, c->rank,
                                 it->count};
            int rc;
            if (!it->send)
                continue;
            snprintf(name, sizeof name, "p2p.%d.%d.%llu", c->rank, it->peer,
                     it->seq);
            rc = fnccl_write(c->dir, name, &h, sizeof h, it->buf,
                             it->count * type_size(it->type), 0);
            if (rc < 0) {
                o->broken = 1;
                c->async = fnccl_fail(ncclSystemError, "fake NCCL: %s/%s: %s",
                                      c->dir, name, strerror(-rc));
                return 0;
            }
            it->done = 1;
        }
        o->posted = 1;
    }
    for (int i = 0; i < o->n; i++) {
        struct p2p_item *it = &o->items[i];
        struct p2p_head *h;
        void *buf;
        size_t len, bytes = it->count * type_size(it->type);
        int was_first = !it->send && first_recv;
        first_recv &= it->send;
        if (it->done)
            continue;
        snprintf(name, sizeof name, "p2p.%d.%d.%llu", it->peer, c->rank,
                 it->seq);
        if (fnccl_read(c->dir, name, &buf, &len) < 0) {
            left++;
            continue;
        }
        h = buf;
        if (len != sizeof *h + bytes || h->type != (int32_t)it->type ||
            h->count != it->count) {
            o->broken = 1;
            c->async = fnccl_fail(ncclInvalidUsage, "fake NCCL: rank %d "
                                  "receives %zu of type %d from rank %d, "
                                  "which sent %llu of type %d", c->rank,
                                  it->count, (int)it->type, it->peer,
                                  (unsigned long long)h->count, (int)h->type);
            free(buf);
            return 0;
        }
        memcpy(it->buf, h + 1, bytes);
        free(buf);
        fnccl_unlink(c->dir, name);
        if (was_first && c->corrupt && it->count)
            corrupt(it->buf, it->type);
        it->done = 1;
    }
    return left == 0;
}

/* The open group's operations, one per communicator and stream. */
static _Thread_local int group_depth;
static _Thread_local struct p2p **group_ops;
static _Thread_local int group_n;

static ncclResult_t p2p_call(int send, void *buf, size_t count,
                             ncclDataType_t type, int peer, ncclComm_t comm,
                             cudaStream_t stream)
{
    struct p2p *o = NULL, **ops;
    struct p2p_item *items;
    ncclResult_t rc = check_args(comm, send ? "ncclSend" : "ncclRecv", type,
                                 ncclSum, peer);
    if (rc != ncclSuccess)
        return rc;
    if (count && !buf)
        return fnccl_fail(ncclInvalidArgument, "%s: NULL buffer",
                          send ? "ncclSend" : "ncclRecv");
    for (int i = 0; group_depth && i < group_n; i++)
        if (group_ops[i]->comm == comm && group_ops[i]->stream == stream)
            o = group_ops[i];
    if (!o) {
        if (!(o = calloc(1, sizeof *o)))
            return fnccl_fail(ncclSystemError, "out of memory");
        o->comm = comm;
        o->stream = stream;
        if (group_depth) {
            if (!(ops = realloc(group_ops, (size_t)(group_n + 1) *
                                               sizeof *ops))) {
                free(o);
                return fnccl_fail(ncclSystemError, "out of memory");
            }
            group_ops = ops;
            group_ops[group_n++] = o;
        }
    }
    if (!(items = realloc(o->items, (size_t)(o->n + 1) * sizeof *items))) {
        if (!group_depth)
            free(o);
        return fnccl_fail(ncclSystemError, "out of memory");
    }
    o->items = items;
    items[o->n++] = (struct p2p_item){
        send, buf, count, type, peer,
        send ? comm->sent[peer]++ : comm->received[peer]++, 0};
    if (group_depth)
        return ncclSuccess;
    o->k = comm->nops++;
    return enqueue(comm, stream, poll_p2p, release_p2p, o);
}

ncclResult_t ncclSend(const void *sendbuff, size_t count,
                      ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return p2p_call(1, (void *)(uintptr_t)sendbuff, count, datatype, peer,
                    comm, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype,
                      int peer, ncclComm_t comm, cudaStream_t stream)
{
    return p2p_call(0, recvbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    ncclResult_t rc = ncclSuccess;
    if (group_depth == 0)
        return fnccl_fail(ncclInvalidUsage, "ncclGroupEnd: no group started");
    if (--group_depth)
        return ncclSuccess;
    for (int i = 0; i < group_n; i++) {
        struct p2p *o = group_ops[i];
        ncclResult_t r;
        o->k = o->comm->nops++;
        if ((r = enqueue(o->comm, o->stream, poll_p2p, release_p2p, o)) !=
                ncclSuccess &&
            rc == ncclSuccess)
            rc = r;
    }
    free(group_ops);
    group_ops = NULL;
    group_n = 0;
    return rc;
}
