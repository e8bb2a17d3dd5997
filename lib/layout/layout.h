/*
 * The precedence rules over the readings of lib/sources: layout.c decides
 * which reading describes this process (the precedence order in
 * amldist-env(7), asking the readers by kind: sources/sources.h) and runs
 * the steps in their order, with merge.c, options.c and master.c; validate.c
 * checks the result.  The chosen reading, completed, is the handle.
 */
#ifndef AMLDIST_LAYOUT_H
#define AMLDIST_LAYOUT_H

#include "sources/reading.h"
#include "sources/sources.h"
#include "util/internal.h"
#include "util/parse.h"

/* torchrun's default rendezvous port, used when nothing names one. */
#define AMLDIST__DEFAULT_PORT 29500

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
 * MASTER_ADDR/PORT, the master readers (Azure ML), the launcher's idea
 * (`launcher`), defaults. */
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

#endif /* AMLDIST_LAYOUT_H */
