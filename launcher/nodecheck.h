/*
 * Before any worker starts, the amlruns of a multi-node job check with each
 * other that they start the same number of workers: every node computes its
 * workers' RANK as (its own rank) * nproc + i, so one node with another count
 * gives ranks that overlap or leave gaps, and a job that hangs.
 */
#ifndef AMLRUN_NODECHECK_H
#define AMLRUN_NODECHECK_H

#include "mode.h"
#include "options.h"

/* -1 to go on (one amlrun, or all agree), or an exit status after a
 * message: AMLRUN_EXIT_USAGE when they disagree (on every node), or
 * AMLRUN_EXIT_SYSTEM when the others could not be reached. */
int nodecheck_run(const struct amlrun_opts *o, const struct plan *p);

#endif /* AMLRUN_NODECHECK_H */
