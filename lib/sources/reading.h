/*
 * A reading: what one launcher's variables say about this process, each
 * value with the text that explains it.  The readers (sources.h) fill one
 * each; lib/layout chooses among them and the chosen reading, completed, is
 * the handle (amldist_t).  envutil.c reads one variable into a reading.
 */
#ifndef AMLDIST_SOURCES_READING_H
#define AMLDIST_SOURCES_READING_H

#include "util/internal.h"
#include "util/parse.h"

#define AMLDIST__WHY_MAX 224

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
    /* The variables cannot place rank 0 (Open MPI's MPMD, seq): the PMIx
     * server's node numbers and master replace theirs on every rank, or,
     * without a server, the variables' node numbers stay. */
    int pmix_first;
    /* MASTER_ADDR / MASTER_PORT that this node's ranks alone have (Open
     * MPI: mpirun's shell, not forwarded with -x): a leftover that would
     * split the job's master (layout.c refuses it or sets it aside). */
    unsigned node_only;
};

#define AMLDIST__MASTER_ADDR_BIT 1u
#define AMLDIST__MASTER_PORT_BIT 2u

/* What a reader sees: the environment array and the caller's flags. */
typedef struct {
    char *const *envp;
    unsigned flags;
} amldist__env_t;

/* envutil.c */
const char *amldist__env_get(const amldist__env_t *env, const char *name);
/* `name` is set in env as in this process's own environment: what /proc
 * shows of our ancestors is about env. */
int amldist__env_own(const amldist__env_t *env, const char *name);
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

#endif /* AMLDIST_SOURCES_READING_H */
