/*
 * Stand-in libcudart for tests on machines without a GPU.  NOT CUDA: it
 * implements the runtime calls libamldist, amldist-nccl-check and the
 * examples make, with host memory as "device" memory and streams that run
 * their queued work when they are queried or synchronized.  See standin.h.
 *
 * Environment (read once, at the first call):
 *   FAKE_CUDA_DEVICES    number of devices (default: the number of
 *                        FAKE_CUDA_BUSIDS, else 1); 0 = no device
 *   FAKE_CUDA_BUSIDS     comma list of PCI bus ids, one per device
 *                        (default 0000:00:06.0, 0000:00:07.0, ...)
 *   FAKE_CUDA_MEM_FREE   bytes cudaMalloc may hand out in this process
 *                        (K/M/G/T suffixes accepted; default 16G)
 *   FAKE_CUDA_MEM_TOTAL  total memory reported (default 16G)
 *   CUDA_VISIBLE_DEVICES as CUDA, with indexes only: the listed devices in
 *                        that order, up to the first invalid entry
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "standin.h"

#define MAXDEV 64

/* ---------------------------------------------------------------------------
 * Configuration and errors
 */

static struct {
    int ndev;                /* visible devices */
    int phys[MAXDEV];        /* visible index -> physical index */
    char busid[MAXDEV][64];  /* by physical index */
    unsigned long long mem_free, mem_total;
} cfg;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

/* A bad setting is a broken test: say so and stop rather than guess. */
static void bad_env(const char *name, const char *value)
{
    fprintf(stderr, "fake libcudart (test stand-in, not CUDA): %s=%s: "
                    "invalid value\n", name, value);
    exit(70);
}

static unsigned long long env_size(const char *name, unsigned long long def)
{
    const char *s = getenv(name);
    char *end;
    unsigned long long v;
    int shift = 0;
    if (!s || !*s)
        return def;
    errno = 0;
    v = strtoull(s, &end, 10);
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    }
    if (errno || end == s || *end || (v << shift >> shift) != v)
        bad_env(name, s);
    return v << shift;
}

static void load_config(void)
{
    const char *ids = getenv("FAKE_CUDA_BUSIDS");
    const char *nd = getenv("FAKE_CUDA_DEVICES");
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    int nphys = 0, given = 0;

    for (const char *p = ids; p && *p && given < MAXDEV; given++) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof cfg.busid[0])
            bad_env("FAKE_CUDA_BUSIDS", ids);
        memcpy(cfg.busid[given], p, n);
        p += n + (p[n] == ',');
    }
    nphys = given ? given : 1;
    if (nd && *nd) {
        char *end;
        long v = strtol(nd, &end, 10);
        if (*end || v < 0 || v > MAXDEV)
            bad_env("FAKE_CUDA_DEVICES", nd);
        nphys = (int)v;
    }
    for (int i = given; i < nphys; i++)
        snprintf(cfg.busid[i], sizeof cfg.busid[i], "0000:00:%02x.0", 6 + i);

    if (!cvd) {
        for (int i = 0; i < nphys; i++)
            cfg.phys[cfg.ndev++] = i;
    } else {
        /* CUDA stops at the first entry that names no device. */
        for (const char *p = cvd; *p && cfg.ndev < MAXDEV;) {
            char *end;
            long v = strtol(p, &end, 10);
            int dup = 0;
            if (end == p || (*end && *end != ',') || v < 0 || v >= nphys)
                break;
            for (int i = 0; i < cfg.ndev; i++)
                dup |= cfg.phys[i] == v;
            if (dup)
                break;
            cfg.phys[cfg.ndev++] = (int)v;
            p = *end ? end + 1 : end;
        }
    }
    cfg.mem_free = env_size("FAKE_CUDA_MEM_FREE", 16ull << 30);
    cfg.mem_total = env_size("FAKE_CUDA_MEM_TOTAL", 16ull << 30);
}

static void config(void)
{
    pthread_once(&cfg_once, load_config);
}

#define ERRORS(X)                                                              \
    X(cudaSuccess, "no error")                                                 \
    X(cudaErrorInvalidValue, "invalid argument")                               \
    X(cudaErrorMemoryAllocation, "out of memory")                              \
    X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")    \
    X(cudaErrorNoDevice, "no CUDA-capable device is detected")                 \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                        \
    X(cudaErrorInvalidResourceHandle, "invalid resource handle")               \
    X(cudaErrorNotReady, "device not ready")

const char *cudaGetErrorString(cudaError_t error)
{
#define X(code, text) if (error == code) return text;
    ERRORS(X)
#undef X
    return "unrecognized error code";
}

const char *cudaGetErrorName(cudaError_t error)
{
#define X(code, text) if (error == code) return #code;
    ERRORS(X)
#undef X
    return "cudaErrorUnknown";
}

/* Per thread, as CUDA's. */
static _Thread_local cudaError_t last_error;

static cudaError_t fail(cudaError_t e)
{
    last_error = e;
    return e;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return fail(cudaErrorInvalidValue);
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return fail(cudaErrorInvalidValue);
    *driverVersion = CUDART_VERSION;
    return cudaSuccess;
}

/* ---------------------------------------------------------------------------
 * Devices
 */

static int current_device; /* per process */

cudaError_t cudaGetDeviceCount(int *count)
{
    config();
    if (!count)
        return fail(cudaErrorInvalidValue);
    *count = cfg.ndev;
    return cfg.ndev ? cudaSuccess : fail(cudaErrorNoDevice);
}

static cudaError_t check_device(int device)
{
    config();
    if (cfg.ndev == 0)
        return fail(cudaErrorNoDevice);
    if (device < 0 || device >= cfg.ndev)
        return fail(cudaErrorInvalidDevice);
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    cudaError_t e = check_device(device);
    if (e == cudaSuccess)
        current_device = device;
    return e;
}

cudaError_t cudaGetDevice(int *device)
{
    cudaError_t e = check_device(current_device);
    if (!device)
        return fail(cudaErrorInvalidValue);
    if (e == cudaSuccess)
        *device = current_device;
    return e;
}

cudaError_t cudaDeviceReset(void)
{
    return check_device(current_device);
}

/* "[domain:]bus:device.function" in hex, as CUDA and NCCL accept them
 * (NCCL writes an 8-digit domain). */
static int parse_busid(const char *s, unsigned v[4])
{
    int n = -1;
    v[0] = 0;
    if (sscanf(s, "%x:%x:%x.%x%n", &v[0], &v[1], &v[2], &v[3], &n) == 4 &&
        n >= 0 && !s[n])
        return 0;
    n = -1;
    if (sscanf(s, "%x:%x.%x%n", &v[1], &v[2], &v[3], &n) == 3 && n >= 0 &&
        !s[n])
        return 0;
    return -1;
}

static const char *busid_of(int device)
{
    return cfg.busid[cfg.phys[device]];
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    cudaError_t e = check_device(device);
    if (e != cudaSuccess)
        return e;
    if (!pciBusId || len <= 0)
        return fail(cudaErrorInvalidValue);
    snprintf(pciBusId, (size_t)len, "%s", busid_of(device));
    return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *pciBusId)
{
    unsigned want[4], have[4];
    config();
    if (!device || !pciBusId || parse_busid(pciBusId, want) < 0)
        return fail(cudaErrorInvalidValue);
    for (int d = 0; d < cfg.ndev; d++)
        if (parse_busid(busid_of(d), have) == 0 &&
            !memcmp(want, have, sizeof want)) {
            *device = d;
            return cudaSuccess;
        }
    return fail(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    unsigned pci[4] = {0, 0, 0, 0};
    cudaError_t e = check_device(device);
    if (e != cudaSuccess)
        return e;
    if (!prop)
        return fail(cudaErrorInvalidValue);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "Stand-in GPU (not CUDA)");
    snprintf(prop->uuid.bytes, sizeof prop->uuid.bytes, "standin-gpu-%d",
             cfg.phys[device]);
    parse_busid(busid_of(device), pci);
    prop->pciDomainID = (int)pci[0];
    prop->pciBusID = (int)pci[1];
    prop->pciDeviceID = (int)pci[2];
    prop->totalGlobalMem = (size_t)cfg.mem_total;
    prop->major = 8;
    prop->minor = 0;
    prop->multiProcessorCount = 108;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->memoryBusWidth = 5120;
    prop->l2CacheSize = 40 << 20;
    prop->asyncEngineCount = 3;
    prop->concurrentKernels = 1;
    prop->canMapHostMemory = 1;
    prop->unifiedAddressing = 1;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr,
                                   int device)
{
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess)
        return e;
    if (!value)
        return fail(cudaErrorInvalidValue);
    switch (attr) {
    case cudaDevAttrPciDomainId: *value = p.pciDomainID; break;
    case cudaDevAttrPciBusId: *value = p.pciBusID; break;
    case cudaDevAttrPciDeviceId: *value = p.pciDeviceID; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    default: *value = 0; break;
    }
    return cudaSuccess;
}

/* ---------------------------------------------------------------------------
 * Memory.  "Device" memory is calloc'ed host memory, so nothing is touched
 * until it is written, and counted against FAKE_CUDA_MEM_FREE.
 */

/* One lock for all the runtime's state: allocations, streams, events. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

struct alloc {
    struct alloc *next;
    void *ptr;
    size_t size;
};
static struct alloc *allocs;
static unsigned long long allocated;

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    cudaError_t e = check_device(current_device);
    struct alloc *a;
    if (e != cudaSuccess)
        return e;
    if (!devPtr)
        return fail(cudaErrorInvalidValue);
    pthread_mutex_lock(&lock);
    if (size > cfg.mem_free - allocated || !(a = malloc(sizeof *a)))
        goto oom;
    if (!(a->ptr = calloc(1, size ? size : 1))) {
        free(a);
        goto oom;
    }
    a->size = size;
    a->next = allocs;
    allocs = a;
    allocated += size;
    *devPtr = a->ptr;
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
oom:
    pthread_mutex_unlock(&lock);
    return fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void *devPtr)
{
    struct alloc **p, *a;
    if (!devPtr)
        return cudaSuccess;
    pthread_mutex_lock(&lock);
    for (p = &allocs; *p && (*p)->ptr != devPtr; p = &(*p)->next)
        ;
    if (!(a = *p)) {
        pthread_mutex_unlock(&lock);
        return fail(cudaErrorInvalidValue);
    }
    *p = a->next;
    allocated -= a->size;
    pthread_mutex_unlock(&lock);
    free(a->ptr);
    free(a);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    cudaError_t e = check_device(current_device);
    if (e != cudaSuccess)
        return e;
    if (!free_bytes || !total)
        return fail(cudaErrorInvalidValue);
    pthread_mutex_lock(&lock);
    *free_bytes = (size_t)(cfg.mem_free - allocated);
    *total = (size_t)cfg.mem_total;
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    (void)flags;
    if (!pHost)
        return fail(cudaErrorInvalidValue);
    if (!(*pHost = calloc(1, size ? size : 1)))
        return fail(cudaErrorMemoryAllocation);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return cudaHostAlloc(ptr, size, 0);
}

cudaError_t cudaFreeHost(void *ptr)
{
    free(ptr);
    return cudaSuccess;
}

/* ---------------------------------------------------------------------------
 * Streams.  Each holds a queue of operations; progress() runs every queue as
 * far as it can.  The legacy default stream (0) orders with the blocking
 * streams as in CUDA: an operation waits for every earlier operation on the
 * default stream (blocking stream) or on any blocking stream (default
 * stream).  Earlier = a lower global sequence number.
 */

struct op {
    struct op *next;
    unsigned long long seq;
    fakecuda_poll_fn poll;
    void (*release)(void *);
    void *arg;
};

struct CUstream_st {
    struct CUstream_st *next;
    struct op *head, *tail;
    unsigned flags;
    int destroyed; /* freed once its queue is empty */
};

static struct CUstream_st legacy_stream;
static struct CUstream_st *streams = &legacy_stream; /* the default first */
static unsigned long long op_seq;

static struct CUstream_st *find_stream(cudaStream_t s)
{
    if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread)
        return &legacy_stream;
    for (struct CUstream_st *t = streams; t; t = t->next)
        if (t == s && !t->destroyed)
            return t;
    return NULL;
}

static int may_run(const struct CUstream_st *s, const struct op *o)
{
    if (s->flags & cudaStreamNonBlocking)
        return 1;
    for (const struct CUstream_st *t = streams; t; t = t->next) {
        if (t == s || !t->head || t->head->seq > o->seq ||
            (t->flags & cudaStreamNonBlocking))
            continue;
        if (s == &legacy_stream || t == &legacy_stream)
            return 0;
    }
    return 1;
}

static void progress_locked(void)
{
    int moved;
    do {
        moved = 0;
        for (struct CUstream_st **p = &streams, *s; (s = *p);) {
            struct op *o;
            while ((o = s->head) && may_run(s, o) && o->poll(o->arg)) {
                if (!(s->head = o->next))
                    s->tail = NULL;
                if (o->release)
                    o->release(o->arg);
                free(o);
                moved = 1;
            }
            /* A destroyed stream goes once drained; the default stream,
             * first in the list, is never destroyed. */
            if (s->destroyed && !s->head) {
                *p = s->next;
                free(s);
            } else {
                p = &s->next;
            }
        }
    } while (moved);
}

void fakecuda_lock(void)
{
    pthread_mutex_lock(&lock);
}

void fakecuda_unlock(void)
{
    pthread_mutex_unlock(&lock);
}

void fakecuda_progress(void)
{
    pthread_mutex_lock(&lock);
    progress_locked();
    pthread_mutex_unlock(&lock);
}

cudaError_t fakecuda_enqueue(cudaStream_t stream, fakecuda_poll_fn poll,
                             void (*release)(void *arg), void *arg)
{
    struct CUstream_st *s;
    struct op *o = calloc(1, sizeof *o);
    if (!o)
        return fail(cudaErrorMemoryAllocation);
    pthread_mutex_lock(&lock);
    if (!(s = find_stream(stream))) {
        pthread_mutex_unlock(&lock);
        free(o);
        return fail(cudaErrorInvalidResourceHandle);
    }
    o->seq = ++op_seq;
    o->poll = poll;
    o->release = release;
    o->arg = arg;
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    /* Start at once what can start, as a GPU would: a rank's input reaches
     * its peers even if it blocks on something else before synchronizing. */
    progress_locked();
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

/* Polls cond(arg) every half millisecond, progressing the streams, for as
 * long as it takes: CUDA waits forever for work that never ends (a dead NCCL
 * peer), and the code under test must not rely on it returning. */
static void wait_until(int (*cond)(void *), void *arg)
{
    const struct timespec tick = {0, 500 * 1000};
    for (;;) {
        int done;
        pthread_mutex_lock(&lock);
        progress_locked();
        done = cond(arg);
        pthread_mutex_unlock(&lock);
        if (done)
            return;
        nanosleep(&tick, NULL);
    }
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream,
                                         unsigned int flags, int priority)
{
    struct CUstream_st *s;
    (void)priority;
    if (!pStream)
        return fail(cudaErrorInvalidValue);
    if (!(s = calloc(1, sizeof *s)))
        return fail(cudaErrorMemoryAllocation);
    s->flags = flags;
    pthread_mutex_lock(&lock);
    s->next = legacy_stream.next;
    legacy_stream.next = s;
    pthread_mutex_unlock(&lock);
    *pStream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream,
                                      unsigned int flags)
{
    return cudaStreamCreateWithPriority(pStream, flags, 0);
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    return cudaStreamCreateWithPriority(pStream, cudaStreamDefault, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    struct CUstream_st *s;
    pthread_mutex_lock(&lock);
    s = stream ? find_stream(stream) : NULL;
    if (!s || s == &legacy_stream) {
        pthread_mutex_unlock(&lock);
        return fail(cudaErrorInvalidResourceHandle);
    }
    /* As in CUDA, queued work still runs; the stream goes when done. */
    s->destroyed = 1;
    progress_locked();
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    struct CUstream_st *s;
    int busy;
    pthread_mutex_lock(&lock);
    if (!(s = find_stream(stream))) {
        pthread_mutex_unlock(&lock);
        return fail(cudaErrorInvalidResourceHandle);
    }
    progress_locked();
    busy = s->head != NULL;
    pthread_mutex_unlock(&lock);
    /* Not ready is an answer, not an error: cudaGetLastError stays clean. */
    return busy ? cudaErrorNotReady : cudaSuccess;
}

static int stream_empty(void *arg)
{
    return ((struct CUstream_st *)arg)->head == NULL;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    struct CUstream_st *s;
    pthread_mutex_lock(&lock);
    s = find_stream(stream);
    pthread_mutex_unlock(&lock);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    wait_until(stream_empty, s);
    return cudaSuccess;
}

static int all_empty(void *arg)
{
    (void)arg;
    for (struct CUstream_st *s = streams; s; s = s->next)
        if (s->head)
            return 0;
    return 1;
}

cudaError_t cudaDeviceSynchronize(void)
{
    wait_until(all_empty, NULL);
    return cudaSuccess;
}

/* Host functions and copies as stream operations. */

struct host_fn {
    cudaHostFn_t fn;
    void *data;
};

static int run_host_fn(void *arg)
{
    struct host_fn *h = arg;
    h->fn(h->data);
    return 1;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn,
                               void *userData)
{
    struct host_fn *h;
    cudaError_t e;
    if (!fn)
        return fail(cudaErrorInvalidValue);
    if (!(h = malloc(sizeof *h)))
        return fail(cudaErrorMemoryAllocation);
    h->fn = fn;
    h->data = userData;
    if ((e = fakecuda_enqueue(stream, run_host_fn, free, h)) != cudaSuccess)
        free(h);
    return e;
}

struct copy {
    void *dst;
    const void *src; /* NULL: a memset of byte */
    int byte;
    size_t n;
    int *done; /* set for the synchronous forms */
};

static int run_copy(void *arg)
{
    struct copy *c = arg;
    if (c->n && c->src)
        memmove(c->dst, c->src, c->n);
    else if (c->n)
        memset(c->dst, c->byte, c->n);
    if (c->done)
        *c->done = 1;
    return 1;
}

static int flag_set(void *arg)
{
    return *(int *)arg;
}

/* Queues the copy on stream; the synchronous forms wait for it, which on the
 * legacy default stream means after all earlier work of blocking streams. */
static cudaError_t copy(void *dst, const void *src, int byte, size_t n,
                        cudaStream_t stream, int sync)
{
    int done = 0;
    struct copy *c;
    cudaError_t e;
    if (n && (!dst || (!src && byte < 0)))
        return fail(cudaErrorInvalidValue);
    if (!(c = malloc(sizeof *c)))
        return fail(cudaErrorMemoryAllocation);
    *c = (struct copy){dst, src, byte, n, sync ? &done : NULL};
    if ((e = fakecuda_enqueue(stream, run_copy, free, c)) != cudaSuccess) {
        free(c);
        return e;
    }
    if (sync)
        wait_until(flag_set, &done);
    return cudaSuccess;
}

static cudaError_t check_kind(enum cudaMemcpyKind kind)
{
    return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault
               ? cudaSuccess
               : fail(cudaErrorInvalidMemcpyDirection);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                       enum cudaMemcpyKind kind)
{
    cudaError_t e = check_kind(kind);
    return e ? e : copy(dst, src, -1, count, NULL, 1);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                            enum cudaMemcpyKind kind, cudaStream_t stream)
{
    cudaError_t e = check_kind(kind);
    return e ? e : copy(dst, src, -1, count, stream, 0);
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    return copy(devPtr, NULL, value & 0xff, count, NULL, 1);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count,
                            cudaStream_t stream)
{
    return copy(devPtr, NULL, value & 0xff, count, stream, 0);
}

/* ---------------------------------------------------------------------------
 * Events: a record is a stream operation that stamps CLOCK_MONOTONIC when
 * the stream reaches it.  Queued records and waits hold a reference, so an
 * event destroyed early is freed after them.
 */

struct CUevent_st {
    unsigned flags;
    int pending;  /* records queued, not yet reached */
    int recorded; /* reached at least once */
    int refs;
    struct timespec when;
};

static void event_unref(void *arg)
{
    struct CUevent_st *ev = arg;
    if (--ev->refs == 0)
        free(ev);
}

static int run_record(void *arg)
{
    struct CUevent_st *ev = arg;
    clock_gettime(CLOCK_MONOTONIC, &ev->when);
    ev->pending--;
    ev->recorded = 1;
    return 1;
}

static int event_reached(void *arg)
{
    return ((struct CUevent_st *)arg)->pending == 0;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    struct CUevent_st *ev;
    if (!event)
        return fail(cudaErrorInvalidValue);
    if (!(ev = calloc(1, sizeof *ev)))
        return fail(cudaErrorMemoryAllocation);
    ev->flags = flags;
    ev->refs = 1;
    *event = ev;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    if (!event)
        return fail(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&lock);
    event_unref(event);
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

static cudaError_t event_op(cudaEvent_t ev, cudaStream_t stream,
                            fakecuda_poll_fn poll, int record)
{
    cudaError_t e;
    if (!ev)
        return fail(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&lock);
    ev->refs++;
    ev->pending += record;
    pthread_mutex_unlock(&lock);
    if ((e = fakecuda_enqueue(stream, poll, event_unref, ev)) != cudaSuccess) {
        pthread_mutex_lock(&lock);
        ev->pending -= record;
        event_unref(ev);
        pthread_mutex_unlock(&lock);
    }
    return e;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    return event_op(event, stream, run_record, 1);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int flags)
{
    (void)flags;
    return event_op(event, stream, event_reached, 0);
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    int busy;
    if (!event)
        return fail(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&lock);
    progress_locked();
    busy = event->pending > 0;
    pthread_mutex_unlock(&lock);
    return busy ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    if (!event)
        return fail(cudaErrorInvalidResourceHandle);
    wait_until(event_reached, event);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    cudaError_t e = cudaSuccess;
    if (!ms)
        return fail(cudaErrorInvalidValue);
    if (!start || !end)
        return fail(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&lock);
    progress_locked();
    if ((start->flags | end->flags) & cudaEventDisableTiming)
        e = cudaErrorInvalidResourceHandle;
    else if (start->pending || end->pending)
        e = cudaErrorNotReady;
    else if (!start->recorded || !end->recorded)
        e = cudaErrorInvalidResourceHandle;
    else
        *ms = (float)((double)(end->when.tv_sec - start->when.tv_sec) * 1e3 +
                      (double)(end->when.tv_nsec - start->when.tv_nsec) / 1e6);
    pthread_mutex_unlock(&lock);
    return e == cudaSuccess ? e : fail(e);
}
