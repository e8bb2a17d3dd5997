/*
 * Head-node mode: `amlrun --hostfile FILE ...` or `--hosts a,b` (or under a
 * Slurm allocation) starts one per-node amlrun on every host through mpirun
 * or srun, by building that command and exec'ing it.
 */
#ifndef AMLRUN_HEADNODE_H
#define AMLRUN_HEADNODE_H

#include "cli/options.h"

/* Build the mpirun/srun command that runs `self` (amlrun's own path) once per
 * host with amlrun's original argv minus the head-node options, then exec it
 * (or print it with dry_run).  Returns only on error or dry run: the exit
 * status for amlrun. */
int headnode_run(const struct headnode_opts *o, const char *self, int argc,
                 char *const argv[]);

#endif /* AMLRUN_HEADNODE_H */
