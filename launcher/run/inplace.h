/*
 * Per-process mode: a launcher (mpirun, srun, Azure ML) started amlrun as
 * one rank.  amlrun exports the layout and the rank's binding and execs
 * the command in place: same pid, so the launcher sees the real worker's
 * exit status and signals.
 */
#ifndef AMLRUN_INPLACE_H
#define AMLRUN_INPLACE_H

#include "worker/command.h"
#include "cli/mode.h"
#include "cli/options.h"

/* Returns only on failure or --dry-run: amlrun's exit status. */
int inplace_run(const struct amlrun_opts *o, const struct plan *p,
                const struct command *c);

#endif /* AMLRUN_INPLACE_H */
