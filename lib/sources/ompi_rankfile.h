/*
 * Open MPI's rankfile (mpirun -rf FILE, exported to every rank as
 * OMPI_MCA_orte_rankfile): "rank N=HOST slot=..." places each rank.
 */
#ifndef AMLDIST_OMPI_RANKFILE_H
#define AMLDIST_OMPI_RANKFILE_H

#include <stddef.h>

#include "util/parse.h"

typedef struct {
    long nodes; /* distinct hosts */
    long node;  /* this rank's host among them, in order of their first rank */
    char rank0_host[AMLDIST__HOST_MAX];
} amldist__rankfile_t;

/* 0 with `out` filled from the file at `path` for rank `rank` of `world`,
 * or -1 with the reason in `why` (unreadable, a line it does not parse, a
 * rank missing, a host given by its place: "+n1"). */
int amldist__ompi_rankfile(const char *path, long rank, long world,
                           amldist__rankfile_t *out, char *why, size_t whysz);

#endif /* AMLDIST_OMPI_RANKFILE_H */
