/*
 * What slurm.c (the step's layout) and slurm_rank0.c (the host of rank 0)
 * share.
 */
#ifndef AMLDIST_SOURCES_SLURM_H
#define AMLDIST_SOURCES_SLURM_H

#include <stddef.h>
#include <stdio.h>

#include "sources/sources.h"

/* SLURM_GTIDS, the step's task ids on this node, once checked. */
typedef struct {
    const char *text; /* NULL: absent or not this task's */
    long count;
    int has_rank0;
} amldist__slurm_gtids_t;

/* The first variable of `names` that is set (names[0] when none is). */
const char *amldist__slurm_first_set(const amldist__env_t *env,
                                     const char *const *names, size_t n);
#define SLURM_FIRST_SET(env, ...)                                              \
    amldist__slurm_first_set(                                                  \
        env, (const char *const[]){__VA_ARGS__},                               \
        sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *))

/* A heterogeneous step (srun A : B): SLURM_HET_SIZE (SLURM_PACK_SIZE). */
int amldist__slurm_het(const amldist__env_t *env);
/* The index of `name` in a Slurm host list, -1 when absent or malformed. */
long amldist__slurm_host_index(const char *list, const char *name);
/* r's master address and its explanation: 0, or < 0 on a malformed list. */
int amldist__slurm_master(const amldist__env_t *env, struct amldist *r,
                          const amldist__slurm_gtids_t *g);

#endif /* AMLDIST_SOURCES_SLURM_H */
