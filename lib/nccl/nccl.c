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
#include <stdio.h>

#include "util/internal.h"

#include "nccl/nccl_internal.h"

#ifndef AMLDIST_HAVE_NCCL

void amldist__nccl_describe(char *nccl, size_t nccl_size, char *cuda,
                            size_t cuda_size)
{
    snprintf(nccl, nccl_size, "NCCL: no (not built in: nccl.h was not found "
                              "at build time)");
    snprintf(cuda, cuda_size, "CUDA runtime: no (not built in: "
                              "cuda_runtime_api.h was not found at build "
                              "time)");
}

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
#include <strings.h>

/* nccl.h declares a few functions with () instead of (void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#include <nccl.h>
#pragma GCC diagnostic pop

#include "bootstrap/bootstrap_internal.h"

/* The functions used, resolved once. */
static struct {
    cudaError_t (*get_device_count)(int *);
    cudaError_t (*set_device)(int);
    cudaError_t (*device_by_bus_id)(int *, const char *);
    const char *(*cuda_error)(cudaError_t);
    ncclResult_t (*get_version)(int *);
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    const char *(*nccl_error)(ncclResult_t);
    const char *(*nccl_last_error)(ncclComm_t); /* NCCL >= 2.13 only */
    cudaError_t (*runtime_version)(int *);       /* for --version -v */
    int nccl_version;
    char cuda_where[256];
    char nccl_where[256]; /* which file the NCCL in use came from */
    int rc;
    char why[640];
} api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

/*
 * A library already in the process comes first, whatever its name: a
 * program linked with NCCL or the CUDA runtime (PyTorch, the tools here)
 * must share its copy, since a communicator or a current device of a second
 * copy means nothing to the first.  Then the override variable, then the
 * names in order.
 */
static void *open_first(const char *probe, const char *override,
                        const char *const *names, char *tried, size_t size)
{
    void *h = NULL;
    size_t used = 0;
    /* dlopen(NULL): the global scope as a handle (RTLD_DEFAULT is NULL,
     * which would read as a failure). */
    if (dlsym(RTLD_DEFAULT, probe))
        return dlopen(NULL, RTLD_NOW);
    if (override && *override) {
        if (!(h = dlopen(override, RTLD_NOW | RTLD_LOCAL)))
            snprintf(tried, size, "%s", dlerror());
        return h;
    }
    for (const char *const *n = names; *n && !h; n++)
        h = dlopen(*n, RTLD_NOW | RTLD_NOLOAD);
    for (const char *const *n = names; *n && !h; n++) {
        if (!(h = dlopen(*n, RTLD_NOW | RTLD_LOCAL)) && used < size)
            used += (size_t)snprintf(tried + used, size - used, "%s%s",
                                     used ? "; " : "", dlerror());
    }
    return h;
}

static void *sym(void *h, const char *name, int required)
{
    void *p = dlsym(h, name);
    if (!p && required && api.rc == 0) {
        api.rc = AMLDIST_ENOTSUP;
        snprintf(api.why, sizeof api.why, "%s: %s", name, dlerror());
    }
    return p;
}

#define LOAD(field, h, name, req)                                              \
    do {                                                                       \
        void *p_ = sym(h, name, req);                                          \
        memcpy(&api.field, &p_, sizeof p_);                                    \
    } while (0)

/* NCCL_VERSION_CODE is major*1000+minor*100+patch before 2.9, then
 * major*10000+minor*100+patch. */
static int version_major(int code)
{
    return code >= 10000 ? code / 10000 : code / 1000;
}

static void check_nccl_version(void)
{
    Dl_info info;
    void *addr;
    memcpy(&addr, &api.get_unique_id, sizeof addr);
    if (dladdr(addr, &info) && info.dli_fname)
        snprintf(api.nccl_where, sizeof api.nccl_where, "%s", info.dli_fname);
    if (api.get_version(&api.nccl_version) != ncclSuccess)
        api.nccl_version = 0;
    if (version_major(api.nccl_version) != NCCL_MAJOR) {
        api.rc = AMLDIST_ENOTSUP;
        snprintf(api.why, sizeof api.why,
                 "NCCL from %s reports version code %d; this libamldist was "
                 "built for NCCL %d.x (nccl.h %d.%d.%d)",
                 api.nccl_where, api.nccl_version, NCCL_MAJOR, NCCL_MAJOR,
                 NCCL_MINOR, NCCL_PATCH);
    }
}

static void load(void)
{
    /* The runtime's soname changed form with CUDA 12 (libcudart.so.11.0,
     * then libcudart.so.12): the build's own first, then the others, then
     * the toolkit's directory, which is often missing from the loader's
     * path. */
    const char *home = getenv("CUDA_HOME") ? getenv("CUDA_HOME")
                                           : "/usr/local/cuda";
    char own[32], own0[32], cudart_home[300], nccl_home[300], tried[400];
    const char *cuda_names[] = {own, own0, "libcudart.so.13", "libcudart.so.12",
                                "libcudart.so.11.0", "libcudart.so",
                                cudart_home, NULL};
    const char *nccl_names[] = {"libnccl.so.2", "libnccl.so", nccl_home, NULL};
    void *c, *n;
    snprintf(own, sizeof own, "libcudart.so.%d", CUDART_VERSION / 1000);
    snprintf(own0, sizeof own0, "libcudart.so.%d.0", CUDART_VERSION / 1000);
    snprintf(cudart_home, sizeof cudart_home, "%s/lib64/libcudart.so", home);
    snprintf(nccl_home, sizeof nccl_home, "%s/lib64/libnccl.so.2", home);
    tried[0] = '\0';
    if (!(c = open_first("cudaSetDevice", getenv("AMLDIST_CUDART_LIBRARY"),
                         cuda_names, tried, sizeof tried))) {
        api.rc = AMLDIST_ENOTSUP;
        snprintf(api.why, sizeof api.why,
                 "cannot load the CUDA runtime (%s); AMLDIST_CUDART_LIBRARY "
                 "names the file to use",
                 tried);
        return;
    }
    tried[0] = '\0';
    if (!(n = open_first("ncclCommInitRank", getenv("AMLDIST_NCCL_LIBRARY"),
                         nccl_names, tried, sizeof tried))) {
        api.rc = AMLDIST_ENOTSUP;
        snprintf(api.why, sizeof api.why,
                 "cannot load NCCL (%s); AMLDIST_NCCL_LIBRARY names the file "
                 "to use",
                 tried);
        return;
    }
    LOAD(get_device_count, c, "cudaGetDeviceCount", 1);
    LOAD(set_device, c, "cudaSetDevice", 1);
    LOAD(device_by_bus_id, c, "cudaDeviceGetByPCIBusId", 1);
    LOAD(cuda_error, c, "cudaGetErrorString", 1);
    LOAD(get_version, n, "ncclGetVersion", 1);
    LOAD(get_unique_id, n, "ncclGetUniqueId", 1);
    LOAD(comm_init_rank, n, "ncclCommInitRank", 1);
    LOAD(nccl_error, n, "ncclGetErrorString", 1);
    LOAD(nccl_last_error, n, "ncclGetLastError", 0);
    LOAD(runtime_version, c, "cudaRuntimeGetVersion", 0);
    Dl_info info;
    void *addr;
    memcpy(&addr, &api.set_device, sizeof addr);
    if (addr && dladdr(addr, &info) && info.dli_fname)
        snprintf(api.cuda_where, sizeof api.cuda_where, "%s", info.dli_fname);
    if (api.rc == 0)
        check_nccl_version();
    /* The handles stay open: the communicator lives on in them. */
}

/* NCCL's version code as the text its headers would print. */
static void nccl_version_text(int code, char *out, size_t size)
{
    int major = version_major(code);
    int rest = code >= 10000 ? code % 10000 : code % 1000;
    snprintf(out, size, "%d.%d.%d", major, rest / 100, rest % 100);
}

void amldist__nccl_describe(char *nccl, size_t nccl_size, char *cuda,
                            size_t cuda_size)
{
    pthread_once(&api_once, load);
    char built[32], found[32];
    nccl_version_text(NCCL_VERSION_CODE, built, sizeof built);
    int rt = 0;
    if (api.runtime_version == NULL || api.runtime_version(&rt) != cudaSuccess)
        rt = 0;
    if (api.set_device == NULL)
        snprintf(cuda, cuda_size, "CUDA runtime: no (%s); built with %d.%d",
                 api.why, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    else
        snprintf(cuda, cuda_size, "CUDA runtime: yes, %d.%d (%s); built "
                                  "with %d.%d",
                 rt / 1000, rt % 1000 / 10, api.cuda_where,
                 CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    if (api.get_version == NULL) {
        snprintf(nccl, nccl_size, "NCCL: no (%s); built with nccl.h %s",
                 api.set_device ? api.why : "it needs the CUDA runtime",
                 built);
        return;
    }
    nccl_version_text(api.nccl_version, found, sizeof found);
    snprintf(nccl, nccl_size, "NCCL: %s, %s (%s); built with nccl.h %s%s%s",
             api.rc == 0 ? "yes" : "no", found, api.nccl_where, built,
             api.rc == 0 ? "" : ": ", api.rc == 0 ? "" : api.why);
}

static int truthy(const char *v)
{
    return v && (!strcmp(v, "1") || !strcasecmp(v, "yes") ||
                 !strcasecmp(v, "true"));
}

/* The rank's device: explicit, else AMLDIST_GPU (amlrun's choice, a PCI bus
 * id, which survives CUDA_VISIBLE_DEVICES renumbering), else the local rank
 * among the visible devices.  Two ranks on one GPU is an error: NCCL refuses
 * it at init ("Duplicate GPU detected"), after every rank has paid for the
 * bootstrap; sharing the only GPU is allowed on request. */
static int pick_device(const amldist_t *layout, int rank, int device, int *out)
{
    int count = 0, lrank, lworld;
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
        if (truthy(getenv("AMLDIST_GPU_SHARED")) &&
            !(count == 1 && truthy(getenv("AMLDIST_GPU_SHARE"))))
            return amldist__fail(AMLDIST_ENOGPU,
                                 "rank %d: AMLDIST_GPU=%s is shared with "
                                 "another rank of this node (amlrun, or the "
                                 "amlruns of this machine together, started "
                                 "more workers than GPUs), which NCCL refuses "
                                 "(\"Duplicate GPU detected\"); start one "
                                 "worker per GPU (amlrun --nproc-per-node "
                                 "gpu)%s",
                                 rank, bus,
                                 count == 1 ? ", or set AMLDIST_GPU_SHARE=1 "
                                              "to put every rank on the one "
                                              "GPU"
                                            : "");
        return 0;
    }
    if ((lrank = amldist_local_rank(layout)) < 0)
        return lrank;
    if ((lworld = amldist_local_world_size(layout)) < 0) {
        amldist__clear_error();
        lworld = lrank + 1;
    }
    if (lworld > count) {
        if (count == 1 && truthy(getenv("AMLDIST_GPU_SHARE"))) {
            *out = 0;
            return 0;
        }
        return amldist__fail(AMLDIST_ENOGPU,
                             "rank %d: %d ranks on this node (local rank %d) "
                             "but %d visible CUDA device%s: ranks would share "
                             "a GPU, which NCCL refuses (\"Duplicate GPU "
                             "detected\"); start one rank per GPU (amlrun "
                             "--nproc-per-node gpu)%s",
                             rank, lworld, lrank, count, count == 1 ? "" : "s",
                             count == 1 ? ", or set AMLDIST_GPU_SHARE=1 to put "
                                          "every rank on the one GPU"
                                        : "");
    }
    *out = lrank;
    return 0;
}

/* What this rank can do alone before the exchange: load, pick and set the
 * device, and on rank 0 make the id. */
static int prepare(const amldist_t *layout, int rank, int device, int *dev,
                   ncclUniqueId *id)
{
    cudaError_t e;
    ncclResult_t nr;
    int rc;
    pthread_once(&api_once, load);
    if (api.rc)
        return amldist__fail(api.rc, "rank %d: amldist_nccl_comm_init: %s",
                             rank, api.why);
    if ((rc = pick_device(layout, rank, device, dev)) < 0)
        return rc;
    if ((e = api.set_device(*dev)) != cudaSuccess)
        return amldist__fail(AMLDIST_ECUDA, "rank %d: cudaSetDevice(%d): %s",
                             rank, *dev, api.cuda_error(e));
    if (rank == 0 && (nr = api.get_unique_id(id)) != ncclSuccess)
        return amldist__fail(AMLDIST_ENCCL,
                             "rank 0: ncclGetUniqueId (NCCL %d from %s): %s",
                             api.nccl_version, api.nccl_where,
                             api.nccl_error(nr));
    return 0;
}

int amldist_nccl_comm_init(const amldist_t *layout, int device, void *comm_out,
                           const amldist_bootstrap_options_t *opts)
{
    ncclUniqueId id;
    amldist__bs_params_t p;
    char mine[512];
    int rank, world, dev = -1, rc, xrc;
    ncclResult_t nr;

    amldist__clear_error();
    if (!comm_out)
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_nccl_comm_init: comm_out is NULL");
    if ((rank = amldist_rank(layout)) < 0)
        return rank;
    if ((world = amldist_world_size(layout)) < 0)
        return world;
    memset(&id, 0, sizeof id);
    rc = prepare(layout, rank, device, &dev, &id);
    /* Every rank takes part in the exchange, a failed one too: it checks in
     * as failed, rank 0 hands the id out only when every rank is in and
     * none failed, and so every rank learns of a failure at once instead of
     * waiting for the timeout (or, in ncclCommInitRank, forever). */
    amldist__strlcpy(mine, amldist_last_error(), sizeof mine);
    if ((xrc = amldist__bs_setup(layout, opts, &p)) == 0 && p.world > 1) {
        p.barrier = 1;
        p.failed = rc < 0;
        amldist__strlcpy(p.why, mine, sizeof p.why);
        xrc = amldist__bs_exchange(&p, &id, sizeof id);
    }
    if (rc < 0)
        return amldist__fail(rc, "%s", mine);
    if (xrc < 0)
        return xrc;
    nr = api.comm_init_rank((ncclComm_t *)comm_out, world, id, rank);
    if (nr != ncclSuccess)
        return amldist__fail(AMLDIST_ENCCL,
                             "rank %d: ncclCommInitRank(world %d, device %d; "
                             "NCCL %d from %s): %s%s%s",
                             rank, world, dev, api.nccl_version,
                             api.nccl_where, api.nccl_error(nr),
                             api.nccl_last_error ? ": " : "",
                             api.nccl_last_error ? api.nccl_last_error(NULL)
                                                 : "");
    return 0;
}

#endif /* AMLDIST_HAVE_NCCL */
