/*
 * amlrun's command line.  Options come first; the first argument that is
 * not an option (or the one after "--") starts the worker's command.  Every
 * option is also accepted with underscores (--nproc_per_node), the spelling
 * of torchrun, torch.distributed.launch and the seed's launch.py.  Options
 * torchrun has may also come from PET_<NAME> variables (PET_NPROC_PER_NODE),
 * as torchrun reads them: the command line wins.
 */
#ifndef AMLRUN_OPTPARSE_H
#define AMLRUN_OPTPARSE_H

#include "cli/options.h"

/* Parse argv into *o (options_init first).  Returns -1 to go on, or an
 * exit status: 0 after --help / --version, AMLRUN_EXIT_USAGE after a
 * message. */
int options_parse(int argc, char **argv, struct amlrun_opts *o);

#endif /* AMLRUN_OPTPARSE_H */
