/*
 * What each option's value does to struct amlrun_opts: one handler per
 * option, or per family of options (flags, plain strings, numbers in a
 * range), found by the option's id in the option table (opttable.h).
 */
#ifndef AMLRUN_OPTAPPLY_H
#define AMLRUN_OPTAPPLY_H

#include "cli/options.h"
#include "cli/opttable.h"

/* Apply option `id` with `val` (NULL: none given).  `label` names where
 * the value came from in messages: "--nnodes " on the command line,
 * "PET_NNODES=" from the environment.  -1 to go on, or an exit status: 0
 * after --help / --version, AMLRUN_EXIT_USAGE after a message. */
int options_apply(struct amlrun_opts *o, const char *label, enum opt_id id,
                  const char *val);

#endif /* AMLRUN_OPTAPPLY_H */
