/*
 * amldist_nccl_comm_init(): device, unique id, bootstrap, ncclCommInitRank.
 *
 * NCCL and the CUDA runtime are reached through dlopen at the first call,
 * never linked: every program linked with libamldist (amlrun first) would
 * otherwise load them, and fail to start where they are missing.  The
 * headers are only needed for the types, so the real code is compiled when
 * the build found them (AMLDIST_HAVE_NCCL); without them the function still
 * exists and says why it cannot work.
 */
#include "internal.h"

#ifndef AMLDIST_HAVE_NCCL

int amldist_nccl_comm_init(const amldist_t *layout, int device, void *comm_out,
                           const amldist_bootstrap_options_t *opts)
{
    (void)layout, (void)device, (void)comm_out, (void)opts;
    amldist__clear_error();
    return amldist__fail(AMLDIST_ENOTSUP,
                         "amldist_nccl_comm_init: this libamldist was built "
                         "without NCCL (nccl.h and cuda_runtime.h were not "
                         "found under CUDA_HOME at build time)");
}

#else /* AMLDIST_HAVE_NCCL */

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nccl.h declares a few functions with () instead of (void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#include <nccl.h>
#pragma GCC diagnostic pop

/* The functions used, resolved once. */
static struct {
    cudaError_t (*get_device_count)(int *);
    cudaError_t (*set_device)(int);
    cudaError_t (*device_by_bus_id)(int *, const char *);
    const char *(*cuda_error)(cudaError_t);
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    const char *(*nccl_error)(ncclResult_t);
    const char *(*nccl_last_error)(ncclComm_t); /* NCCL >= 2.13 only */
    int rc;
    char why[512];
} api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void *open_first(const char *const *names, char *tried, size_t size)
{
    void *h = NULL;
    size_t used = 0;
    for (; *names && !h; names++) {
        /* RTLD_NOLOAD first: a program linked with the library (the
         * validation tool, the examples) must share its copy. */
        if (!(h = dlopen(*names, RTLD_NOW | RTLD_NOLOAD)))
            h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
        if (!h && used < size)
            used += (size_t)snprintf(tried + used, size - used, "%s%s",
                                     used ? "; " : "", dlerror());
    }
    return h;
}

static void *sym(void *h, const char *name, int required)
{
    void *p = dlsym(h, name);
    if (!p && required && api.rc == 0)
        api.rc = amldist__fail(AMLDIST_ENOTSUP, "%s: %s", name, dlerror());
    return p;
}

#define LOAD(field, h, name, req)                                              \
    do {                                                                       \
        void *p_ = sym(h, name, req);                                          \
        memcpy(&api.field, &p_, sizeof p_);                                    \
    } while (0)

static void load(void)
{
    /* The loader's path first, then the toolkit's own directory, which is
     * often missing from it. */
    const char *home = getenv("CUDA_HOME") ? getenv("CUDA_HOME")
                                           : "/usr/local/cuda";
    char cudart[32], cudart_home[300], nccl_home[300], tried[400];
    const char *cuda_names[] = {cudart, "libcudart.so", cudart_home, NULL};
    const char *nccl_names[] = {"libnccl.so.2", "libnccl.so", nccl_home, NULL};
    void *c, *n;
    snprintf(cudart, sizeof cudart, "libcudart.so.%d", CUDART_VERSION / 1000);
    snprintf(cudart_home, sizeof cudart_home, "%s/lib64/%s", home, cudart);
    snprintf(nccl_home, sizeof nccl_home, "%s/lib64/libnccl.so.2", home);
    if (!(c = open_first(cuda_names, tried, sizeof tried))) {
        api.rc = AMLDIST_ENOTSUP;
        snprintf(api.why, sizeof api.why,
                 "cannot load the CUDA runtime (%s)", tried);
        return;
    }
    if (!(n = open_first(nccl_names, tried, sizeof tried))) {
        api.rc = AMLDIST_ENOTSUP;
        snprintf(api.why, sizeof api.why, "cannot load NCCL (%s)", tried);
        return;
    }
    LOAD(get_device_count, c, "cudaGetDeviceCount", 1);
    LOAD(set_device, c, "cudaSetDevice", 1);
    LOAD(device_by_bus_id, c, "cudaDeviceGetByPCIBusId", 1);
    LOAD(cuda_error, c, "cudaGetErrorString", 1);
    LOAD(get_unique_id, n, "ncclGetUniqueId", 1);
    LOAD(comm_init_rank, n, "ncclCommInitRank", 1);
    LOAD(nccl_error, n, "ncclGetErrorString", 1);
    LOAD(nccl_last_error, n, "ncclGetLastError", 0);
    if (api.rc)
        amldist__strlcpy(api.why, amldist_last_error(), sizeof api.why);
    /* The handles stay open: the communicator lives on in them. */
}

/* The rank's device: explicit, else AMLDIST_GPU (amlrun's choice, a PCI bus
 * id, which survives CUDA_VISIBLE_DEVICES renumbering), else local rank
 * modulo the visible devices. */
static int pick_device(const amldist_t *layout, int rank, int device, int *out)
{
    int count = 0, lrank;
    const char *bus = getenv("AMLDIST_GPU");
    cudaError_t e = api.get_device_count(&count);
    if (e != cudaSuccess || count <= 0)
        return amldist__fail(AMLDIST_ENOGPU,
                             "rank %d: no visible CUDA device (%s; "
                             "CUDA_VISIBLE_DEVICES=%s)",
                             rank, e ? api.cuda_error(e) : "0 devices",
                             getenv("CUDA_VISIBLE_DEVICES")
                                 ? getenv("CUDA_VISIBLE_DEVICES")
                                 : "(unset)");
    if (device >= 0) {
        if (device >= count)
            return amldist__fail(AMLDIST_ENOGPU,
                                 "rank %d: device %d requested, %d visible",
                                 rank, device, count);
        *out = device;
        return 0;
    }
    if (bus && *bus) {
        if ((e = api.device_by_bus_id(out, bus)) != cudaSuccess)
            return amldist__fail(AMLDIST_ENOGPU,
                                 "rank %d: AMLDIST_GPU=%s: no visible CUDA "
                                 "device has this PCI bus id (%s)",
                                 rank, bus, api.cuda_error(e));
        return 0;
    }
    if ((lrank = amldist_local_rank(layout)) < 0)
        return lrank;
    *out = lrank % count;
    return 0;
}

int amldist_nccl_comm_init(const amldist_t *layout, int device, void *comm_out,
                           const amldist_bootstrap_options_t *opts)
{
    /* The blob carries rank 0's status first, so that a rank 0 that cannot
     * make an id fails every rank at once instead of by timeout. */
    struct {
        unsigned char ok;
        ncclUniqueId id;
    } msg;
    int rank, world, dev, rc;
    ncclResult_t nr = ncclSuccess;
    cudaError_t e;

    amldist__clear_error();
    if (!comm_out)
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_nccl_comm_init: comm_out is NULL");
    if ((rank = amldist_rank(layout)) < 0)
        return rank;
    if ((world = amldist_world_size(layout)) < 0)
        return world;
    pthread_once(&api_once, load);
    if (api.rc)
        return amldist__fail(api.rc, "rank %d: amldist_nccl_comm_init: %s",
                             rank, api.why);
    if ((rc = pick_device(layout, rank, device, &dev)) < 0)
        return rc;
    if ((e = api.set_device(dev)) != cudaSuccess)
        return amldist__fail(AMLDIST_ECUDA, "rank %d: cudaSetDevice(%d): %s",
                             rank, dev, api.cuda_error(e));
    memset(&msg, 0, sizeof msg);
    if (rank == 0) {
        nr = api.get_unique_id(&msg.id);
        msg.ok = nr == ncclSuccess;
    }
    if ((rc = amldist_bootstrap_bcast(layout, &msg, sizeof msg, opts)) < 0)
        return rc;
    if (!msg.ok)
        return amldist__fail(AMLDIST_ENCCL, "rank %d: rank 0 could not create "
                             "the NCCL unique id%s%s",
                             rank, rank == 0 ? ": " : " (see rank 0's error)",
                             rank == 0 ? api.nccl_error(nr) : "");
    nr = api.comm_init_rank((ncclComm_t *)comm_out, world, msg.id, rank);
    if (nr != ncclSuccess)
        return amldist__fail(AMLDIST_ENCCL,
                             "rank %d: ncclCommInitRank(world %d, device %d): "
                             "%s%s%s",
                             rank, world, dev, api.nccl_error(nr),
                             api.nccl_last_error ? ": " : "",
                             api.nccl_last_error ? api.nccl_last_error(NULL)
                                                 : "");
    return 0;
}

#endif /* AMLDIST_HAVE_NCCL */
