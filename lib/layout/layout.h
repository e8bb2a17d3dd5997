/*
 * The layout handle and the interface between layout.c and the one reader
 * per launcher (lib/src_*.c).  A reader looks at its own variables only and
 * fills a `struct amldist` with what they say, each value with the text that
 * explains it; layout.c decides which reading describes this process
 * (the precedence order in amldist-env(7), with merge.c, options.c and
 * master.c) and validate.c checks the result.
 */
#ifndef AMLDIST_LAYOUT_H
#define AMLDIST_LAYOUT_H

#include "util/internal.h"
#include "util/parse.h"

#define AMLDIST__WHY_MAX 224

/* torchrun's default rendezvous port, used when nothing names one. */
#define AMLDIST__DEFAULT_PORT 29500
/* The ports the Azure ML guide's aml_mpienv.py uses (multi- / single node). */
#define AMLDIST__AZURE_PORT 6105
#define AMLDIST__AZURE_SINGLE_PORT 54965

/* Immutable once returned, so getters need no lock. */
struct amldist {
    char source[16];
    /* Indexed by amldist_field_t; AMLDIST_EUNKNOWN when not known.  The
     * MASTER_ADDR slot is unused: addr[0] == '\0' means unknown. */
    int val[AMLDIST_FIELD_COUNT];
    char addr[AMLDIST__HOST_MAX];
    char why[AMLDIST_FIELD_COUNT][AMLDIST__WHY_MAX];
    /* Canonical readings only: set by a launcher marker (torchrun, amlrun),
     * which makes them authoritative over MPI / Slurm variables. */
    int marker;
    /* The PMIx server may know what the variables do not say. */
    int want_pmix;
};

/* What a reader sees: the environment array and the caller's flags. */
typedef struct {
    char *const *envp;
    unsigned flags;
} amldist__env_t;

/* envutil.c */
const char *amldist__env_get(const amldist__env_t *env, const char *name);
/* 1: found, *out set; 0: absent; < 0: malformed (message names the
 * variable and its value). */
int amldist__env_long(const amldist__env_t *env, const char *name, long min,
                      long max, long *out);
/* NAME into field f (ranks from 0, sizes from 1): 1 set, 0 absent, < 0. */
int amldist__env_field(const amldist__env_t *env, struct amldist *r,
                       amldist_field_t f, const char *name);
/* A launcher's rank/size pair and local rank/size pair (NULL: none); each
 * pair complete or absent (EMISSING names the missing half).  1 when the
 * rank pair is present, 0 when not. */
int amldist__env_quad(const amldist__env_t *env, struct amldist *r,
                      const char *rank, const char *size,
                      const char *local_rank, const char *local_size);
void amldist__reading_init(struct amldist *r, const char *source);
void amldist__set(struct amldist *r, amldist_field_t f, long v,
                  const char *fmt, ...) AMLDIST__PRINTF(4, 5);
void amldist__why(struct amldist *r, amldist_field_t f, const char *fmt, ...)
    AMLDIST__PRINTF(3, 4);
int amldist__known(const struct amldist *r, amldist_field_t f);

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
/* kubeflow.c: a canonical reading (no marker, no local pair) that is a
 * PyTorchJob pod's one process per PET_NNODES: 1 when r was completed. */
int amldist__kubeflow_pod(const amldist__env_t *env, struct amldist *r);
/* Azure ML only names the master.  `layout` is the rank layout already
 * chosen (single node or not decides which variable counts). */
int amldist__src_azureml(const amldist__env_t *env,
                         const struct amldist *layout, struct amldist *r);

/* Which reading wins when two of one job disagree: none (an error),
 * the canonical variables or the launcher's (AMLDIST_PREFER or the
 * AMLDIST_PREFER_* flags, as layout.c reads them). */
enum { AMLDIST__PREFER_NONE, AMLDIST__PREFER_CANON, AMLDIST__PREFER_LAUNCHER };

/* merge.c: canonical variables without a marker (canon) beside an MPI or
 * Slurm launcher (outer): one job, or outer launched a per-node launcher
 * that set them.  The reading that describes us into `chosen`; 0 or < 0. */
int amldist__relate(struct amldist *canon, const struct amldist *outer,
                    int prefer, struct amldist *chosen);
/* merge.c: an MPI reading that is srun's own step (--mpi=pmix, pmi2) must
 * agree with SLURM_*, which fills in what it does not say; 0 or < 0. */
int amldist__same_step_under_srun(const amldist__env_t *env,
                                  struct amldist *mpi,
                                  const struct amldist *slurm);
/* merge.c: an explanation quoted inside a derived one, without a second
 * "derived: ". */
const char *amldist__why_inner(const char *why);

/* options.c: the caller's options over h (from_env: a launcher's reading,
 * else none); 0 or < 0 when they conflict with it or are out of range. */
int amldist__apply_options(struct amldist *h, const amldist_options_t *o,
                           int from_env);
/* master.c: h's master address and port, from the options already in h,
 * MASTER_ADDR/PORT, Azure ML, the launcher's idea (`launcher`), defaults. */
int amldist__resolve_master(const amldist__env_t *env, struct amldist *h,
                            const struct amldist *launcher);
/* validate.c: 0 when h's values fit together, else < 0 naming them. */
int amldist__validate(const struct amldist *h);

/* pernode.c: canon's RANK and WORLD_SIZE are a multiple of the outer
 * launcher's; fill in `chosen` (a copy of canon) what one launcher per node
 * implies. */
void amldist__per_node_launcher(struct amldist *chosen,
                                const struct amldist *canon,
                                const struct amldist *outer);
/* The node count equals the world size: one rank per node. */
void amldist__one_per_node(struct amldist *h);

/* pmix.c: ask the PMIx server (dlopen'ed libpmix) about this process. */
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

#endif /* AMLDIST_LAYOUT_H */
