/*
 * The readers, one per launcher, and the table of them (readers.c) that
 * lib/layout walks by kind.  A reader looks at its own variables only and
 * fills a reading (reading.h) with what they say; which reading describes
 * this process is lib/layout's decision (layout.c, amldist-env(7)).
 *
 * A new launcher: its file here, its reader below and its row in readers.c.
 */
#ifndef AMLDIST_SOURCES_H
#define AMLDIST_SOURCES_H

#include "sources/reading.h"

/*
 * What a reading is to the precedence rules, one kind per step of
 * layout.c; within a kind, the first reader of the table that finds its
 * variables wins.
 */
typedef enum {
    AMLDIST__READ_CANONICAL, /* RANK, WORLD_SIZE, ...: torchrun, amlrun, pods */
    AMLDIST__READ_MPI,       /* an MPI launcher's per-rank variables */
    AMLDIST__READ_OUTER,     /* a launcher always outside MPI's: Slurm */
    AMLDIST__READ_MASTER,    /* names only the master, once ranks are known */
} amldist__read_kind_t;

/* The first reader of `kind` that finds its variables: 1 with r filled, 0
 * when none does, < 0 (the last error set) when one's variables are
 * malformed or half missing.  `layout`: the rank layout already chosen, for
 * a master reader (NULL for the others). */
int amldist__read_first(amldist__read_kind_t kind, const amldist__env_t *env,
                        const struct amldist *layout, struct amldist *r);

/*
 * Readers: 1 when the source is present (r filled), 0 when absent, < 0 with
 * the last error set when its variables are malformed or half missing.
 */
int amldist__src_canonical(const amldist__env_t *env, struct amldist *r);
int amldist__src_ompi(const amldist__env_t *env, struct amldist *r);
int amldist__src_mvapich2(const amldist__env_t *env, struct amldist *r);
int amldist__src_mpich(const amldist__env_t *env, struct amldist *r);
int amldist__src_pmix(const amldist__env_t *env, struct amldist *r);
int amldist__src_slurm(const amldist__env_t *env, struct amldist *r);
/* Azure ML only names the master.  `layout` is the rank layout already
 * chosen (single node or not decides which variable counts). */
int amldist__src_azureml(const amldist__env_t *env,
                         const struct amldist *layout, struct amldist *r);
/* kubeflow.c: a canonical reading (no marker, no local pair) that is a
 * PyTorchJob pod's one process per PET_NNODES: 1 when r was completed. */
int amldist__kubeflow_pod(const amldist__env_t *env, struct amldist *r);

/* ancestors.c: the nearest of this process's ancestors (at most
 * AMLDIST__ANCESTORS up: the wrappers between a launcher and us) whose
 * command line (argv NUL-separated, `len` bytes, the last a NUL) `match`
 * accepts: its pid, with its command line in buf (*len bytes), or -1. */
#define AMLDIST__ANCESTORS 8
typedef int (*amldist__argv_match_t)(const char *argv, size_t len,
                                     void *arg);
long amldist__ancestor(amldist__argv_match_t match, void *arg, char *buf,
                       size_t size, size_t *len);
/* /proc/<pid>/<what> (cmdline, environ, stat) into buf, NUL-terminated:
 * its length (size - 1: perhaps cut), or -1. */
long amldist__proc_read(long pid, const char *what, char *buf, size_t size);

/* ompi_env.c: on mpirun's node of a job of several nodes, which of
 * MASTER_ADDR and MASTER_PORT (AMLDIST__MASTER_ADDR_BIT, _PORT_BIT) this
 * rank has from mpirun's own environment and mpirun does not forward to
 * the other nodes (-x, mca_base_env_list): the bits, 0 when none or when
 * it cannot tell. */
unsigned amldist__ompi_node_only(const amldist__env_t *env);

/* mpich.c: a hydra_pmi_proxy command line (argv NUL-separated, `len`
 * bytes, the last a NUL): 1 with *p filled when it is one with a
 * --proxy-id, else 0. */
typedef struct {
    long id;           /* --proxy-id; -1: the launcher numbers the proxy */
    char launcher[16]; /* --launcher (ssh, slurm, ...); "" when not given */
} amldist__hydra_proxy_t;
int amldist__hydra_proxy_args(const char *argv, size_t len,
                              amldist__hydra_proxy_t *p);
/* mpich.c: r's node index and count from the srun step of the Hydra proxy
 * `proxy_pid` (--launcher slurm --proxy-id -1), read from env; unknown,
 * with the reason, where env is not that step's. */
void amldist__hydra_slurm_node(const amldist__env_t *env, long proxy_pid,
                               struct amldist *r);

/* pmix_client.c: ask the PMIx server (dlopen'ed libpmix) about this
 * process. */
typedef struct {
    long node_id, num_nodes, job_size, local_rank, local_size;
    /* This host's place in the job's PMIX_NODE_LIST (-1: not found), and
     * the list's length (-1: no list). */
    long node_index, list_nodes;
    char rank0_host[AMLDIST__HOST_MAX];
    char host[AMLDIST__HOST_MAX];
} amldist__pmix_info_t;
/* 0 with the fields it could learn (others -1), or < 0 with the reason in
 * `why` (no library, no server, AMLDIST_NO_PMIX). */
int amldist__pmix_query(const amldist__env_t *env, amldist__pmix_info_t *out,
                        char *why, size_t whysz);
/* The PMIx query is skipped when the flag or AMLDIST_NO_PMIX=1 asks so. */
int amldist__pmix_disabled(const amldist__env_t *env);
/* One line for amldist_build_info(): the libpmix a query would use, and
 * its version, or why there is none. */
void amldist__pmix_describe(char *const *envp, char *line, size_t size);
/* Fill r's unknown sizes and indices from the PMIx server, and `master`
 * with the host of rank 0; when it cannot be asked, say why in the
 * explanations of what stays unknown. */
void amldist__pmix_complete(const amldist__env_t *env, struct amldist *r,
                            struct amldist *master);

#endif /* AMLDIST_SOURCES_H */
