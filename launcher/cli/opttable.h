/*
 * amlrun's option table, the launcher's ground floor: each long option's
 * one spelling, whether it takes a value, whether torchrun's PET_<NAME>
 * variable may give it, and the short options.  The parser (options.c,
 * optapply.c) and head-node mode (headnode.c, which must know where the
 * worker's command starts) both read it; it includes nothing of amlrun's.
 */
#ifndef AMLRUN_OPTTABLE_H
#define AMLRUN_OPTTABLE_H

#include <stdio.h>

enum opt_id {
    O_NPROC, O_NNODES, O_NODE_RANK, O_MASTER_ADDR, O_MASTER_PORT,
    O_STANDALONE, O_MODE, O_RUN_ID, O_RDZV_ENDPOINT, O_RDZV_BACKEND,
    O_MAX_RESTARTS, O_TERM_TIMEOUT, O_IGNORE_SIGHUP, O_MODULE, O_NO_PYTHON,
    O_USE_ENV, O_LEGACY, O_PYTHON, O_PREFIX, O_TEE, O_LOG_DIR, O_RANKS,
    O_LOCAL_RANKS, O_DRY_RUN, O_VERBOSE, O_QUIET, O_CPU_BIND, O_MEM_BIND,
    O_NIC_BIND, O_GPU_BIND, O_TOPOLOGY, O_REPORT_BINDINGS, O_TOPO,
    O_OUTPUT,
    O_HOSTFILE, O_HOSTS, O_LAUNCHER, O_HELP, O_VERSION, O_NO_NODE_CHECK,
    O_MONITOR_INTERVAL, O_START_METHOD, O_RDZV_CONF, O_ROLE, O_RUN_PATH,
    O_REDIRECTS, O_LOG_LAYOUT,
    O_NUMA_BINDING,
    O_SIGNALS_TO_HANDLE, O_EVENT_LOG_HANDLER, O_LOGS_SPECS, O_EVENT_LOG,
    O_LOCAL_ADDR, O_RESULT_JSON,
    O_STATUS, O_STACKS,
    O_HANG_TIMEOUT, O_HANG_REPORT, O_TIMEOUT,
    O_MAKE_SECRET,
    O_STDIN,
    O_COUNT
};

enum {
    ARG_NONE, ARG_REQUIRED, ARG_OPTIONAL /* only as --opt=value */,
    ARG_MASK = 3,
    /* torchrun's option: PET_<NAME> (PET_NPROC_PER_NODE) is its default,
     * as torch/distributed/argparse_util.py reads it. */
    PET = 4
};

struct option_def {
    const char *name; /* without "--", words joined by '-' */
    int arg;          /* ARG_*, | PET */
    enum opt_id id;   /* several names may share one (--run-id, --rdzv-id) */
};

/* Every long option, in the order PET_ variables are read; the entry after
 * the last has a NULL name. */
extern const struct option_def opttable[];

/* The entry of long option `name` (without "--"; read up to an '=', '_'
 * as '-'): its own spelling, else the one option it begins, as argparse
 * takes --nproc for --nproc-per-node; NULL when it names none or several. */
const struct option_def *opttable_find(const char *name);
/* The options `name` (as for opttable_find) begins, up to `max` of them
 * in `out`, one entry per option (--run-id and --rdzv-id are one); returns
 * how many there are. */
size_t opttable_candidates(const char *name, const struct option_def **out,
                           size_t max);
/* The entry of short option -c (-m is --module's), or NULL. */
const struct option_def *opttable_short(char c);
/* True when long option `name` (as for opttable_find) takes its value as
 * the next argument. */
int opttable_takes_value(const char *name);

/* The values option `d` accepts, for completion and the tests that hold
 * --help to them: words separated by spaces, each one the parser takes
 * as it is, or one of <file>, <dir>, <command>; NULL when any text goes. */
const char *opttable_values(const struct option_def *d);
/* The table as `amlrun --complete-spec` prints it, for the generator of
 * the shell completions (scripts/completion.sh): "long NAME ARG VALUES"
 * and "short C NAME" lines, tab-separated. */
void opttable_print_spec(FILE *f);

#endif /* AMLRUN_OPTTABLE_H */
