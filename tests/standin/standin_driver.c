/*
 * Drives the stand-in libcudart / libnccl (tests/standin/) to test THEM,
 * not CUDA or NCCL: tests/sh/nccl_standin.sh runs it as 1 to 3 ranks.
 *
 *   standin_driver units            one process: devices, memory, streams,
 *                                   events, conversions, errors
 *   standin_driver init             init, print the outcome, destroy
 *   standin_driver collectives      every collective, type and op, checked
 *   standin_driver notready         rank 0 queries while peers are late
 *   standin_driver poll ITERS       all-reduces waited as nccl-tests does:
 *                                   cudaStreamQuery + ncclCommGetAsyncError
 *
 * A rank is RANK of WORLD_SIZE (amlrun's variables); rank 0's unique id
 * reaches the others through the file STANDIN_ID_FILE.  STANDIN_DEVICE
 * picks the device (default rank modulo the count), STANDIN_NRANKS
 * overrides the nranks given to NCCL, STANDIN_SLEEP_RANK=R makes rank R
 * sleep after init (for a test to kill), STANDIN_TIMEOUT bounds the poll
 * loop (seconds, default 10, times rank + 1).  Lines are "rank R: ..."; failures say FAIL
 * and the exit status is 1 (2: init failed, 3: async error, 4: timeout,
 * 5: wrong results in poll mode).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "standin.h"

static int rank, world = 1, failures;
static ncclComm_t comm;

#define say(...)                                                               \
    (printf("rank %d: ", rank), printf(__VA_ARGS__), putchar('\n'),            \
     fflush(stdout))
#define FAIL(...) (say("FAIL: " __VA_ARGS__), failures++)
#define CHECK(what, cond)                                                      \
    do {                                                                       \
        if (!(cond))                                                           \
            FAIL("%s (%s)", what, #cond);                                      \
    } while (0)

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

/* Fails the process: a CUDA or NCCL call the test depends on went wrong. */
#define CUDA(call)                                                             \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess) {                                               \
            say("FAIL: %s: %s", #call, cudaGetErrorString(e_));                \
            exit(1);                                                           \
        }                                                                      \
    } while (0)
#define NCCL(call)                                                             \
    do {                                                                       \
        ncclResult_t r_ = (call);                                              \
        if (r_ != ncclSuccess) {                                               \
            say("FAIL: %s: %s: %s", #call, ncclGetErrorString(r_),             \
                ncclGetLastError(NULL));                                       \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* ---------------------------------------------------------------------------
 * Values: element i of rank r's input is a small integer, exact in every
 * type, and products of three stay below 127.
 */

static size_t tsize(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

static const char *tname(ncclDataType_t t)
{
    static const char *const n[] = {"int8", "uint8", "int32", "uint32",
                                    "int64", "uint64", "float16", "float32",
                                    "float64", "bfloat16"};
    return (unsigned)t < 10 ? n[t] : "?";
}

static double get_d(const void *p, ncclDataType_t t, size_t i)
{
    switch (t) {
    case ncclInt8: return ((const int8_t *)p)[i];
    case ncclUint8: return ((const uint8_t *)p)[i];
    case ncclInt32: return ((const int32_t *)p)[i];
    case ncclUint32: return ((const uint32_t *)p)[i];
    case ncclInt64: return (double)((const int64_t *)p)[i];
    case ncclUint64: return (double)((const uint64_t *)p)[i];
    case ncclFloat16: return standin_half_to_float(((const uint16_t *)p)[i]);
    case ncclBfloat16: return standin_bf16_to_float(((const uint16_t *)p)[i]);
    case ncclFloat32: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
    }
}

static void put_d(void *p, ncclDataType_t t, size_t i, double v)
{
    switch (t) {
    case ncclInt8: ((int8_t *)p)[i] = (int8_t)v; break;
    case ncclUint8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t *)p)[i] = (int32_t)v; break;
    case ncclUint32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case ncclInt64: ((int64_t *)p)[i] = (int64_t)v; break;
    case ncclUint64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case ncclFloat16:
        ((uint16_t *)p)[i] = standin_float_to_half((float)v);
        break;
    case ncclBfloat16:
        ((uint16_t *)p)[i] = standin_float_to_bf16((float)v);
        break;
    case ncclFloat32: ((float *)p)[i] = (float)v; break;
    default: ((double *)p)[i] = v; break;
    }
}

static double val(int r, size_t i)
{
    return (double)((i + 2u * (size_t)r) % 4 + 1);
}

static int is_int(ncclDataType_t t)
{
    return t <= ncclUint64;
}

/* What op over every rank's val(r, i) gives in type t. */
static double expect(ncclRedOp_t op, ncclDataType_t t, size_t i)
{
    double acc = val(0, i), tmp[1];
    for (int r = 1; r < world; r++) {
        double x = val(r, i);
        acc = op == ncclProd ? acc * x
              : op == ncclMax ? (x > acc ? x : acc)
              : op == ncclMin ? (x < acc ? x : acc)
                              : acc + x;
    }
    if (op == ncclAvg)
        acc = is_int(t) ? (double)((long long)acc / world) : acc / world;
    put_d(tmp, t, 0, acc); /* rounded to the type */
    return get_d(tmp, t, 0);
}

/* Compares n elements with want(i); says what differs. */
static void compare(const char *what, const void *got, ncclDataType_t t,
                    size_t n, double (*want)(size_t, void *), void *ctx)
{
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (get_d(got, t, i) != want(i, ctx) && !wrong++)
            first = i;
    if (wrong)
        FAIL("%s %s: %zu of %zu wrong, first [%zu] = %g, want %g", what,
             tname(t), wrong, n, first, get_d(got, t, first),
             want(first, ctx));
}

/* ---------------------------------------------------------------------------
 * Setup
 */

static void get_id(ncclUniqueId *id)
{
    const char *file = getenv("STANDIN_ID_FILE");
    char tmp[4096];
    FILE *f;
    if (!file) {
        say("FAIL: STANDIN_ID_FILE is not set");
        exit(1);
    }
    if (rank == 0) {
        NCCL(ncclGetUniqueId(id));
        snprintf(tmp, sizeof tmp, "%s.tmp", file);
        if (!(f = fopen(tmp, "wb")) || fwrite(id, sizeof *id, 1, f) != 1 ||
            fclose(f) != 0 || rename(tmp, file) != 0) {
            say("FAIL: cannot write %s", file);
            exit(1);
        }
        return;
    }
    for (int waited = 0;; waited += 5) {
        if ((f = fopen(file, "rb"))) {
            size_t got = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (got == 1)
                return;
        }
        if (waited > 20000) {
            say("FAIL: no unique id in %s after 20 s", file);
            exit(1);
        }
        sleep_ms(5);
    }
}

static ncclResult_t init(void)
{
    ncclUniqueId id;
    int count = 0, dev;
    ncclResult_t r;
    CUDA(cudaGetDeviceCount(&count));
    dev = env_int("STANDIN_DEVICE", rank % count);
    CUDA(cudaSetDevice(dev));
    get_id(&id);
    r = ncclCommInitRank(&comm, env_int("STANDIN_NRANKS", world), id, rank);
    say("init: %d (%s)%s%s", (int)r, ncclGetErrorString(r),
        r ? ": " : "", r ? ncclGetLastError(NULL) : "");
    return r;
}

/* ---------------------------------------------------------------------------
 * collectives
 */

static const ncclDataType_t types[] = {
    ncclFloat32, ncclFloat16, ncclBfloat16, ncclInt32, ncclInt8,
    ncclUint8,   ncclUint32,  ncclInt64,    ncclUint64, ncclFloat64};
static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin,
                                  ncclAvg};
static const char *const opname[] = {"sum", "prod", "max", "min", "avg"};

struct want_ctx {
    ncclRedOp_t op;
    ncclDataType_t t;
    size_t n, base;
    int from;
};

static double want_reduced(size_t i, void *ctx)
{
    struct want_ctx *w = ctx;
    return expect(w->op, w->t, w->base + i);
}

static double want_rank(size_t i, void *ctx) /* from's val, offset */
{
    struct want_ctx *w = ctx;
    return val(w->from, w->base + i);
}

static double want_gathered(size_t i, void *ctx)
{
    struct want_ctx *w = ctx;
    return val((int)(i / w->n), i % w->n);
}

static double want_alltoall(size_t i, void *ctx)
{
    struct want_ctx *w = ctx;
    return val((int)(i / w->n), (size_t)rank * w->n + i % w->n);
}

static double want_zero(size_t i, void *ctx)
{
    (void)i, (void)ctx;
    return 0;
}

/* Device buffers of n elements of t, send filled with val(rank, .). */
struct bufs {
    void *host, *send, *recv;
    size_t bytes;
};

static void setup(struct bufs *b, ncclDataType_t t, size_t n)
{
    b->bytes = n * tsize(t);
    b->host = malloc(b->bytes);
    CUDA(cudaMalloc(&b->send, b->bytes));
    CUDA(cudaMalloc(&b->recv, b->bytes));
    for (size_t i = 0; i < n; i++)
        put_d(b->host, t, i, val(rank, i));
    CUDA(cudaMemcpy(b->send, b->host, b->bytes, cudaMemcpyHostToDevice));
    CUDA(cudaMemset(b->recv, 0, b->bytes));
}

static void *fetch(struct bufs *b, const void *dev)
{
    CUDA(cudaMemcpy(b->host, dev, b->bytes, cudaMemcpyDeviceToHost));
    return b->host;
}

static void teardown(struct bufs *b)
{
    CUDA(cudaFree(b->send));
    CUDA(cudaFree(b->recv));
    free(b->host);
}

static void check_type(ncclDataType_t t, size_t n, cudaStream_t s)
{
    struct bufs b;
    struct want_ctx w = {ncclSum, t, n, 0, 0};
    char what[64];
    int root = world - 1;

    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        setup(&b, t, n);
        w.op = ops[k];
        NCCL(ncclAllReduce(b.send, b.recv, n, t, ops[k], comm, s));
        CUDA(cudaStreamSynchronize(s));
        snprintf(what, sizeof what, "all_reduce %s", opname[k]);
        compare(what, fetch(&b, b.recv), t, n, want_reduced, &w);
        teardown(&b);
    }

    /* In place, on the legacy default stream, which cudaMemcpy waits for. */
    setup(&b, t, n);
    w.op = ncclSum;
    NCCL(ncclAllReduce(b.send, b.send, n, t, ncclSum, comm, 0));
    compare("all_reduce in place", fetch(&b, b.send), t, n, want_reduced, &w);
    teardown(&b);

    setup(&b, t, n);
    NCCL(ncclReduce(b.send, b.recv, n, t, ncclMax, root, comm, s));
    CUDA(cudaStreamSynchronize(s));
    w.op = ncclMax;
    compare(rank == root ? "reduce max (root)" : "reduce (not root: untouched)",
            fetch(&b, b.recv), t, n, rank == root ? want_reduced : want_zero,
            &w);
    teardown(&b);

    setup(&b, t, n);
    w.from = 1 % world;
    NCCL(ncclBroadcast(b.send, b.recv, n, t, w.from, comm, s));
    CUDA(cudaStreamSynchronize(s));
    compare("broadcast", fetch(&b, b.recv), t, n, want_rank, &w);
    teardown(&b);

    /* n * world elements from here on. */
    setup(&b, t, n * (size_t)world);
    NCCL(ncclAllGather(b.send, b.recv, n, t, comm, s));
    CUDA(cudaStreamSynchronize(s));
    compare("all_gather", fetch(&b, b.recv), t, n * (size_t)world,
            want_gathered, &w);

    NCCL(ncclReduceScatter(b.send, b.recv, n, t, ncclMin, comm, s));
    CUDA(cudaStreamSynchronize(s));
    w.op = ncclMin;
    w.base = (size_t)rank * n;
    compare("reduce_scatter min", fetch(&b, b.recv), t, n, want_reduced, &w);
    w.base = 0;

    /* nccl-tests' alltoall: count elements to and from every rank. */
    NCCL(ncclGroupStart());
    for (int p = 0; p < world; p++) {
        size_t off = (size_t)p * n * tsize(t);
        NCCL(ncclSend((char *)b.send + off, n, t, p, comm, s));
        NCCL(ncclRecv((char *)b.recv + off, n, t, p, comm, s));
    }
    NCCL(ncclGroupEnd());
    CUDA(cudaStreamSynchronize(s));
    compare("alltoall", fetch(&b, b.recv), t, n * (size_t)world,
            want_alltoall, &w);
    teardown(&b);
}

/* Half and bfloat16 sums are taken in float and rounded once, to nearest
 * even: rank 0 gives 1 and 1 + ulp, the others half an ulp each. */
static void check_rounding(ncclDataType_t t)
{
    const int half = t == ncclFloat16;
    const uint16_t one = half ? 0x3c00 : 0x3f80, hulp = half ? 0x1000 : 0x3b80;
    /* world 2: both ties, to even; world 3: exact */
    const uint16_t want[2][2] = {{one, (uint16_t)(one + 2)},
                                 {(uint16_t)(one + 1), (uint16_t)(one + 2)}};
    uint16_t in[2] = {one, (uint16_t)(one + 1)}, out[2], *dev;
    if (world != 2 && world != 3)
        return;
    if (rank)
        in[0] = in[1] = hulp;
    CUDA(cudaMalloc((void **)&dev, sizeof in));
    CUDA(cudaMemcpy(dev, in, sizeof in, cudaMemcpyHostToDevice));
    NCCL(ncclAllReduce(dev, dev, 2, t, ncclSum, comm, 0));
    CUDA(cudaMemcpy(out, dev, sizeof out, cudaMemcpyDeviceToHost));
    CUDA(cudaFree(dev));
    for (int i = 0; i < 2; i++)
        if (out[i] != want[world - 2][i])
            FAIL("%s rounding [%d]: 0x%04x, want 0x%04x", tname(t), i, out[i],
                 want[world - 2][i]);
}

static int collectives(void)
{
    cudaStream_t s;
    struct bufs b;
    struct want_ctx w = {ncclSum, ncclFloat32, 0, 0, 0};
    size_t big = 1u << 20; /* 4 MiB of float */
    int count, urank, dev;

    NCCL(ncclCommCount(comm, &count));
    NCCL(ncclCommUserRank(comm, &urank));
    NCCL(ncclCommCuDevice(comm, &dev));
    CHECK("ncclCommCount", count == world);
    CHECK("ncclCommUserRank", urank == rank);
    CUDA(cudaGetDevice(&count));
    CHECK("ncclCommCuDevice", dev == count);
    CUDA(cudaStreamCreate(&s));
    for (size_t k = 0; k < sizeof types / sizeof *types; k++)
        check_type(types[k], 1000, s);
    check_rounding(ncclFloat16);
    check_rounding(ncclBfloat16);

    setup(&b, ncclFloat32, big);
    NCCL(ncclAllReduce(b.send, b.recv, big, ncclFloat32, ncclSum, comm, s));
    CUDA(cudaStreamSynchronize(s));
    compare("all_reduce 4 MiB", fetch(&b, b.recv), ncclFloat32, big,
            want_reduced, &w);
    teardown(&b);
    CUDA(cudaStreamDestroy(s));
    NCCL(ncclCommDestroy(comm));
    if (!failures)
        say("collectives: all right (%zu types)", sizeof types / sizeof *types);
    return failures ? 1 : 0;
}

/* ---------------------------------------------------------------------------
 * notready: rank 0's all-reduce cannot finish while the others are late.
 */

static int notready(void)
{
    struct bufs b;
    struct want_ctx w = {ncclSum, ncclFloat32, 0, 0, 0};
    cudaStream_t s;
    cudaEvent_t ev;
    ncclResult_t ae;
    cudaError_t q;
    double t0;
    CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA(cudaEventCreate(&ev));
    setup(&b, ncclFloat32, 256);
    if (rank != 0)
        sleep_ms(300);
    t0 = now_ms();
    NCCL(ncclAllReduce(b.send, b.recv, 256, ncclFloat32, ncclSum, comm, s));
    CUDA(cudaEventRecord(ev, s));
    if (rank == 0) {
        q = cudaStreamQuery(s);
        say("cudaStreamQuery while peers are late: %s", cudaGetErrorName(q));
        CHECK("cudaStreamQuery is not ready", q == cudaErrorNotReady);
        q = cudaEventQuery(ev);
        CHECK("cudaEventQuery is not ready", q == cudaErrorNotReady);
        CHECK("no sticky error", cudaGetLastError() == cudaSuccess);
        NCCL(ncclCommGetAsyncError(comm, &ae));
        CHECK("no async error while waiting", ae == ncclSuccess);
    }
    CUDA(cudaStreamSynchronize(s));
    CHECK("cudaEventQuery after the sync", cudaEventQuery(ev) == cudaSuccess);
    if (rank == 0) {
        double waited = now_ms() - t0;
        say("waited %.0f ms for the late peers", waited);
        CHECK("waited for the late peers", waited >= 200);
    }
    compare("all_reduce after the wait", fetch(&b, b.recv), ncclFloat32, 256,
            want_reduced, &w);
    teardown(&b);
    CUDA(cudaEventDestroy(ev));
    CUDA(cudaStreamDestroy(s));
    NCCL(ncclCommDestroy(comm));
    return failures ? 1 : 0;
}

/* ---------------------------------------------------------------------------
 * poll: what a health check must do.  Never cudaStreamSynchronize: it would
 * wait forever for a dead peer.
 */

static int poll_loop(int iters)
{
    const size_t n = 1024;
    /* Rank 0 gives up first, so a test knows which rank aborts. */
    const double limit = env_int("STANDIN_TIMEOUT", 10) * 1e3 * (rank + 1);
    struct bufs b;
    cudaStream_t s;
    int bad = 0;
    if (rank == env_int("STANDIN_SLEEP_RANK", -1)) {
        say("sleeping (pid %d)", (int)getpid());
        sleep(60);
        return 0;
    }
    CUDA(cudaStreamCreate(&s));
    setup(&b, ncclFloat32, n);
    for (int it = 0; it < iters; it++) {
        double t0 = now_ms();
        size_t wrong = 0;
        const float *got;
        cudaError_t q;
        NCCL(ncclAllReduce(b.send, b.recv, n, ncclFloat32, ncclSum, comm, s));
        while ((q = cudaStreamQuery(s)) == cudaErrorNotReady) {
            ncclResult_t ae;
            NCCL(ncclCommGetAsyncError(comm, &ae));
            if (ae != ncclSuccess) {
                say("iteration %d: async error after %.0f ms: %s: %s", it,
                    now_ms() - t0, ncclGetErrorString(ae),
                    ncclGetLastError(comm));
                NCCL(ncclCommAbort(comm));
                /* Aborting ends the queued work: this returns. */
                CUDA(cudaStreamSynchronize(s));
                say("stream drained after abort");
                return 3;
            }
            if (now_ms() - t0 > limit) {
                say("iteration %d: timeout after %.0f ms", it, now_ms() - t0);
                NCCL(ncclCommAbort(comm));
                return 4;
            }
            sleep_ms(1);
        }
        CUDA(q);
        got = fetch(&b, b.recv);
        for (size_t i = 0; i < n; i++) {
            double want = 0;
            for (int r = 0; r < world; r++)
                want += val(r, i);
            wrong += got[i] != (float)want;
        }
        say("iteration %d: %zu wrong", it, wrong);
        bad |= wrong != 0;
    }
    teardown(&b);
    CUDA(cudaStreamDestroy(s));
    NCCL(ncclCommDestroy(comm));
    say("poll: done");
    return bad ? 5 : 0;
}

/* ---------------------------------------------------------------------------
 * units: the runtime alone (FAKE_CUDA_DEVICES=3,
 * FAKE_CUDA_BUSIDS=0000:00:06.0,0000:1A:00.0, FAKE_CUDA_MEM_FREE=1M).
 */

static void slow_host_fn(void *arg)
{
    (void)arg;
    sleep_ms(30);
}

static void units(void)
{
    int n = -1, d = -1, v;
    char bus[32];
    struct cudaDeviceProp p;
    size_t fr, tot;
    void *a, *c;
    cudaStream_t s;
    cudaEvent_t e0, e1;
    float ms = -1;
    unsigned char host[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[8];

    CUDA(cudaGetDeviceCount(&n));
    CHECK("3 devices", n == 3);
    CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, 1));
    CHECK("bus id of device 1 as given", !strcmp(bus, "0000:1A:00.0"));
    CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, 2));
    CHECK("default bus id of device 2", !strcmp(bus, "0000:00:08.0"));
    CUDA(cudaDeviceGetByPCIBusId(&d, "0000:1a:00.0"));
    CHECK("by bus id, lower case", d == 1);
    CUDA(cudaDeviceGetByPCIBusId(&d, "00000000:00:06.0"));
    CHECK("by bus id, 8-digit domain", d == 0);
    CUDA(cudaDeviceGetByPCIBusId(&d, "00:08.0"));
    CHECK("by bus id, no domain", d == 2);
    CHECK("unknown bus id", cudaDeviceGetByPCIBusId(&d, "0000:99:00.0") ==
                                cudaErrorInvalidDevice);
    CHECK("last error kept", cudaPeekAtLastError() == cudaErrorInvalidDevice);
    CHECK("last error read", cudaGetLastError() == cudaErrorInvalidDevice);
    CHECK("last error reset", cudaGetLastError() == cudaSuccess);
    CHECK("cudaSetDevice(3) invalid",
          cudaSetDevice(3) == cudaErrorInvalidDevice);
    (void)cudaGetLastError();
    CUDA(cudaSetDevice(1));
    CUDA(cudaGetDevice(&d));
    CHECK("cudaGetDevice", d == 1);
    CUDA(cudaGetDeviceProperties(&p, 1));
    CHECK("name", !strcmp(p.name, "Stand-in GPU (not CUDA)"));
    CHECK("pciBusID", p.pciBusID == 0x1a && p.pciDomainID == 0);
    CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrPciBusId, 1));
    CHECK("cudaDevAttrPciBusId", v == 0x1a);
    CUDA(cudaRuntimeGetVersion(&v));
    CHECK("runtime version", v == CUDART_VERSION);
    CHECK("error string", !strcmp(cudaGetErrorString(cudaErrorNoDevice),
                                  "no CUDA-capable device is detected"));

    /* FAKE_CUDA_MEM_FREE=1M */
    CUDA(cudaMemGetInfo(&fr, &tot));
    CHECK("free memory", fr == 1u << 20);
    CUDA(cudaMalloc(&a, 768u << 10));
    CUDA(cudaMemGetInfo(&fr, &tot));
    CHECK("free memory after cudaMalloc", fr == 256u << 10);
    CHECK("cudaMalloc beyond the free memory",
          cudaMalloc(&c, 512u << 10) == cudaErrorMemoryAllocation);
    (void)cudaGetLastError();
    CUDA(cudaFree(a));
    CUDA(cudaMalloc(&c, 512u << 10));
    CHECK("cudaFree of a host pointer", cudaFree(host) == cudaErrorInvalidValue);
    (void)cudaGetLastError();

    /* Stream order: copy in, memset part, copy out, all queued. */
    CUDA(cudaStreamCreate(&s));
    CUDA(cudaEventCreate(&e0));
    CUDA(cudaEventCreate(&e1));
    CUDA(cudaEventRecord(e0, s));
    CUDA(cudaMemcpyAsync(c, host, 8, cudaMemcpyHostToDevice, s));
    CUDA(cudaLaunchHostFunc(s, slow_host_fn, NULL));
    CUDA(cudaMemsetAsync((char *)c + 4, 0, 2, s));
    CUDA(cudaMemcpyAsync(back, c, 8, cudaMemcpyDeviceToHost, s));
    CUDA(cudaEventRecord(e1, s));
    CUDA(cudaEventSynchronize(e1));
    CHECK("queued copies in order", back[0] == 1 && back[3] == 4 &&
                                        back[4] == 0 && back[5] == 0 &&
                                        back[6] == 7);
    CUDA(cudaEventElapsedTime(&ms, e0, e1));
    CHECK("event times the host function", ms >= 25 && ms < 5000);
    CUDA(cudaStreamQuery(s));
    CUDA(cudaEventDestroy(e0));
    CUDA(cudaEventDestroy(e1));
    CUDA(cudaStreamDestroy(s));
    CUDA(cudaDeviceSynchronize());
    CUDA(cudaFree(c));

    /* Conversions. */
    CHECK("half(1/3)", standin_float_to_half(1.0f / 3) == 0x3555);
    CHECK("bf16(1/3)", standin_float_to_bf16(1.0f / 3) == 0x3eab);
    CHECK("half(65519)", standin_float_to_half(65519.0f) == 0x7bff);
    CHECK("half(65520) = inf", standin_float_to_half(65520.0f) == 0x7c00);
    CHECK("half(2^-24)", standin_float_to_half(0x1p-24f) == 0x0001);
    CHECK("half(2^-25) ties to 0", standin_float_to_half(0x1p-25f) == 0);
    CHECK("half(3*2^-25) ties to 2", standin_float_to_half(0x3p-25f) == 2);
    CHECK("half 0x3555 back", standin_half_to_float(0x3555) == 0x1.554p-2f);
    CHECK("half subnormal back", standin_half_to_float(0x0003) == 0x3p-24f);

    /* NCCL without a communicator. */
    NCCL(ncclGetVersion(&v));
    CHECK("ncclGetVersion", v == env_int("FAKE_NCCL_VERSION", NCCL_VERSION_CODE));
    CHECK("ncclGetErrorString",
          !strcmp(ncclGetErrorString(ncclRemoteError),
                  "remote process exited or there was a network error"));
    {
        ncclUniqueId id;
        ncclComm_t x;
        memset(&id, 0, sizeof id);
        CHECK("init with a foreign id",
              ncclCommInitRank(&x, 1, id, 0) == ncclInvalidArgument);
        NCCL(ncclGetUniqueId(&id));
        CHECK("init with rank >= nranks",
              ncclCommInitRank(&x, 2, id, 2) == ncclInvalidArgument);
        NCCL(ncclCommInitRank(&x, 1, id, 0));
        NCCL(ncclCommDestroy(x));
    }
    if (!failures)
        say("units: all right");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    rank = env_int("RANK", 0);
    world = env_int("WORLD_SIZE", 1);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "units")) {
        units();
        return failures ? 1 : 0;
    }
    if (strcmp(mode, "init") && strcmp(mode, "collectives") &&
        strcmp(mode, "notready") && strcmp(mode, "poll")) {
        fprintf(stderr, "usage: standin_driver units|init|collectives|"
                        "notready|poll ITERS\n");
        return 2;
    }
    if (init() != ncclSuccess)
        return 2;
    if (!strcmp(mode, "collectives"))
        return collectives();
    if (!strcmp(mode, "notready"))
        return notready();
    if (!strcmp(mode, "poll"))
        return poll_loop(argc > 2 ? atoi(argv[2]) : 1);
    {
        int count = 0, urank = -1, dev = -1;
        NCCL(ncclCommCount(comm, &count));
        NCCL(ncclCommUserRank(comm, &urank));
        NCCL(ncclCommCuDevice(comm, &dev));
        say("comm: count=%d rank=%d device=%d", count, urank, dev);
        NCCL(ncclCommDestroy(comm));
    }
    return 0;
}
