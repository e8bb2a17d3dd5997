/*
 * libamldist: one canonical distributed-training layout (rank, world size,
 * local rank, node rank, master address) from whatever launched this process:
 * torchrun or amlrun, Open MPI, Azure ML, Slurm, MPICH / Intel MPI, MVAPICH2,
 * PMIx, a Kubernetes job, or nothing at all.
 *
 * Every function that can fail returns a negative AMLDIST_E* code (or NULL)
 * and leaves a detailed, per-thread message in amldist_last_error() that
 * names the variable and the value that were wrong.  Getters on a handle are
 * thread-safe: a handle is immutable once amldist_init*() returned it.
 *
 * The full contract is in libamldist(3) and amldist-env(7).
 */
#ifndef AMLDIST_H
#define AMLDIST_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AMLDIST_VERSION_MAJOR 1
#define AMLDIST_VERSION_MINOR 5
#define AMLDIST_VERSION_PATCH 0
/* (major << 16) | (minor << 8) | patch, comparable with amldist_version(). */
#define AMLDIST_VERSION_HEX                                                    \
    ((AMLDIST_VERSION_MAJOR << 16) | (AMLDIST_VERSION_MINOR << 8) |            \
     AMLDIST_VERSION_PATCH)

#if defined(AMLDIST_BUILDING) && defined(__GNUC__)
#define AMLDIST_API __attribute__((visibility("default")))
#else
#define AMLDIST_API
#endif

/*
 * Error codes, from one table: XX(name, value, message).  Each code has its
 * value written here, never implied by its place, so that adding a code
 * does not renumber the others (the values are the ABI; a unit test pins
 * them).  A new code takes the next value down from the last one.  All are
 * negative; 0 is success.
 */
#define AMLDIST_ERRNO_MAP(XX)                                                  \
    XX(EINVAL, -999, "invalid argument")                                       \
    XX(ENOMEM, -998, "out of memory")                                          \
    XX(EPARSE, -997, "malformed value in the environment")                     \
    XX(ERANGE, -996, "value out of range")                                     \
    XX(EMISSING, -995, "required variable missing")                            \
    XX(ECONFLICT, -994, "launcher variables disagree")                         \
    XX(EUNKNOWN, -993, "value not known from this environment")                \
    XX(ESYS, -992, "system call failed")                                       \
    XX(ETOPO, -991, "topology discovery failed")                               \
    XX(ENOGPU, -990, "no GPU found")                                           \
    XX(EBIND, -989, "binding failed")                                          \
    XX(ETIMEDOUT, -988, "timed out")                                           \
    XX(EPROTO, -987, "protocol error")                                         \
    XX(EDENIED, -986, "peer refused (wrong job token)")                        \
    XX(ENOTSUP, -985, "not supported by this build")                           \
    XX(ECUDA, -984, "CUDA runtime error")                                      \
    XX(ENCCL, -983, "NCCL error")                                              \
    XX(EPEER, -982, "another rank failed")

typedef enum {
    AMLDIST_OK = 0,
#define AMLDIST__ERRNO_ENUM(name, value, msg) AMLDIST_##name = (value),
    AMLDIST_ERRNO_MAP(AMLDIST__ERRNO_ENUM)
#undef AMLDIST__ERRNO_ENUM
} amldist_errno_t;

/* Opaque, immutable layout of this process in the job. */
typedef struct amldist amldist_t;

/* Flags for amldist_init*(). */
enum {
    /* When two sources describe the same job and disagree, take the canonical
     * variables (RANK, WORLD_SIZE, ...) instead of failing with ECONFLICT. */
    AMLDIST_PREFER_CANONICAL = 1u << 0,
    /* ... or take the MPI / Slurm launcher's variables. */
    AMLDIST_PREFER_LAUNCHER = 1u << 1,
    /* Do not consult the PMIx server (no dlopen, no connection). */
    AMLDIST_NO_PMIX = 1u << 2,
    /* The caller is a per-node launcher and, where the environment does not
     * say otherwise, alone on its node (one amlrun or launch.py per node).
     * When the environment gives LOCAL_RANK 0 and either LOCAL_WORLD_SIZE 1
     * or a NODE_RANK equal to RANK, what it leaves open is filled in:
     * LOCAL_WORLD_SIZE 1, NODE_RANK = RANK, node count = WORLD_SIZE.
     * Nothing the environment says is changed. */
    AMLDIST_ONE_PER_NODE = 1u << 3
};

/* The values a layout holds; amldist_explain() tells where each came from. */
typedef enum {
    AMLDIST_FIELD_RANK,
    AMLDIST_FIELD_WORLD_SIZE,
    AMLDIST_FIELD_LOCAL_RANK,
    AMLDIST_FIELD_LOCAL_WORLD_SIZE,
    AMLDIST_FIELD_NODE_RANK,
    AMLDIST_FIELD_NUM_NODES,
    AMLDIST_FIELD_MASTER_ADDR,
    AMLDIST_FIELD_MASTER_PORT,
    AMLDIST_FIELD_COUNT
} amldist_field_t;

/*
 * Options for amldist_init_opts(): explicit values (a launcher's command-line
 * options).  The master's take precedence over the environment; num_nodes
 * and node_rank fill in what the launcher variables do not say, and one
 * that contradicts them is ECONFLICT.  Initialise with
 * AMLDIST_OPTIONS_INIT so that fields added later keep their defaults.
 * Every versioned options structure is read at any version from 1 to the
 * library's own, a field an older version lacks taking its default; 0 and
 * newer versions are EINVAL (libamldist(3), "Options structures").
 */
#define AMLDIST_OPTIONS_VERSION 1
typedef struct {
    unsigned version;        /* AMLDIST_OPTIONS_VERSION */
    unsigned flags;          /* AMLDIST_PREFER_* ... */
    char *const *envp;       /* environment to read; NULL: environ */
    int num_nodes;           /* > 0 overrides; <= 0: from the environment */
    int node_rank;           /* >= 0 overrides; < 0: from the environment */
    const char *master_addr; /* non-NULL overrides */
    int master_port;         /* > 0 overrides */
} amldist_options_t;
#define AMLDIST_OPTIONS_INIT {AMLDIST_OPTIONS_VERSION, 0u, NULL, 0, -1, NULL, 0}

/*
 * Read the layout: amldist_init() from environ, amldist_init_from() from
 * `envp` (NULL: empty), amldist_init_opts() with explicit options that
 * override the environment.  Precedence, innermost launcher first:
 *   1. canonical variables (RANK, WORLD_SIZE, ...) with a launcher marker:
 *      AMLDIST_LAUNCHER=amlrun, or torchrun's TORCHELASTIC_RUN_ID / GROUP_RANK;
 *   2. canonical variables without one (Kubernetes, Azure ML PyTorch);
 *   3. the MPI family: Open MPI, MVAPICH2, MPICH / Intel MPI, PMIx;
 *   4. Slurm (srun step tasks);
 *   5. nothing: rank 0 of 1, master 127.0.0.1.
 * A lower source with the same world size must agree (else ECONFLICT, unless
 * a PREFER flag or AMLDIST_PREFER=canonical|launcher picks one); a world size
 * that divides the canonical one is an outer launcher.  Azure ML only names
 * the master.  Details: amldist-env(7).
 */
AMLDIST_API int amldist_init(amldist_t **out, unsigned flags);
AMLDIST_API int amldist_init_from(amldist_t **out, char *const envp[],
                                  unsigned flags);
AMLDIST_API int amldist_init_opts(amldist_t **out,
                                  const amldist_options_t *opts);
AMLDIST_API void amldist_free(amldist_t *h);

/*
 * Layout of worker `index` (0 <= index < nproc) that a per-node launcher
 * described by `parent` starts: rank = parent_rank * nproc + index, world =
 * parent_world * nproc, the parent's node rank and master.
 */
AMLDIST_API int amldist_derive_child(const amldist_t *parent, int nproc,
                                     int index, amldist_t **out);

/* Getters: a value >= 0, or AMLDIST_EUNKNOWN / AMLDIST_EINVAL. */
AMLDIST_API int amldist_rank(const amldist_t *h);
AMLDIST_API int amldist_world_size(const amldist_t *h);
AMLDIST_API int amldist_local_rank(const amldist_t *h);
AMLDIST_API int amldist_local_world_size(const amldist_t *h);
AMLDIST_API int amldist_node_rank(const amldist_t *h);
AMLDIST_API int amldist_num_nodes(const amldist_t *h);
AMLDIST_API const char *amldist_master_addr(const amldist_t *h);
AMLDIST_API int amldist_master_port(const amldist_t *h);
/* Short name of the source: "env", "torchrun", "amlrun", "ompi", "azureml",
 * "slurm", "mpich", "mvapich2", "pmix", "options" or "default". */
AMLDIST_API const char *amldist_source(const amldist_t *h);
/* Where a value came from, e.g. "OMPI_COMM_WORLD_RANK=3". */
AMLDIST_API const char *amldist_explain(const amldist_t *h,
                                        amldist_field_t field);

/*
 * Set the canonical variables in this process's environment: RANK,
 * WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, GROUP_RANK,
 * GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
 * the AMLDIST_LAUNCHER marker.  Not thread-safe (setenv).
 */
AMLDIST_API int amldist_export_env(const amldist_t *h);
/*
 * The same, into a new array: a copy of `base` (NULL: empty) with the
 * canonical variables replaced or added.  Free with amldist_envp_free().
 */
AMLDIST_API int amldist_export_envp(const amldist_t *h, char *const base[],
                                    char ***out);

/*
 * Environment arrays for a launcher's workers: a malloc'd, NULL-terminated
 * array of malloc'd "NAME=value" strings, as amldist_export_envp() returns,
 * so these work on its result and amldist_envp_free() frees either.
 * amldist_envp_dup(): a deep copy of `src` (NULL: empty).
 * amldist_envp_set(): replace NAME's first entry or append one (*envp NULL:
 * a new array); on failure the array is unchanged.
 * amldist_envp_get(): NAME's first value, or NULL.
 * amldist_envp_unset(): remove every NAME entry, keeping the others' order;
 * 1 if one was there, 0 if not.
 * A name that is NULL, empty or holds '=' is AMLDIST_EINVAL.
 */
AMLDIST_API int amldist_envp_dup(char *const src[], char ***out);
AMLDIST_API int amldist_envp_set(char ***envp, const char *name,
                                 const char *value);
AMLDIST_API const char *amldist_envp_get(char *const envp[], const char *name);
AMLDIST_API int amldist_envp_unset(char **envp, const char *name);
AMLDIST_API void amldist_envp_free(char **envp);

AMLDIST_API const char *amldist_strerror(int err);
AMLDIST_API const char *amldist_err_name(int err);
/* The detailed message of the last failure on this thread ("" if none). */
AMLDIST_API const char *amldist_last_error(void);
/* AMLDIST_VERSION_HEX of the library actually loaded. */
AMLDIST_API unsigned amldist_version(void);
AMLDIST_API const char *amldist_version_string(void);
/* What this library was built with and finds at run time, one "name:
 * value" line each (libamldist, hwloc, NCCL, CUDA runtime, PMIx: "yes,
 * VERSION (FILE)" or "no (why)"), as amlrun --version -v prints them.
 * Loads NCCL, the CUDA runtime and libpmix if they are there (no GPU or
 * PMIx server is touched).  As snprintf: writes at most size bytes, and
 * returns the length of the whole text, or < 0.  Since AMLDIST_1.1. */
AMLDIST_API int amldist_build_info(char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#include "amldist/topo.h"
#include "amldist/bootstrap.h"
#include "amldist/rdzv.h"
#include "amldist/progress.h"

#endif /* AMLDIST_H */
