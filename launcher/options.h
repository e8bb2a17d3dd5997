/*
 * amlrun's command line.  Options come first; the first argument that is
 * not an option (or the one after "--") starts the worker's command.  Every
 * option is also accepted with underscores (--nproc_per_node), the spelling
 * of torchrun, torch.distributed.launch and the seed's launch.py.
 */
#ifndef AMLRUN_OPTIONS_H
#define AMLRUN_OPTIONS_H

#include "bind.h"
#include "headnode.h"

enum nproc_kind { NPROC_UNSET, NPROC_NUM, NPROC_GPU, NPROC_AUTO };

/* Most workers on one node: the binding plan's limit (libamldist plans at
 * most 4096 local ranks), far above any node's GPUs or sensible cores. */
#define AMLRUN_MAX_NPROC 4096
enum run_mode { MODE_AUTO, MODE_NODE, MODE_PROCESS };

/* A list like "0,2,4-7"; empty means every rank. */
struct rankset {
    int n;
    struct { int lo, hi; } *r;
};

struct amlrun_opts {
    /* layout */
    enum nproc_kind nproc_kind;
    int nproc;               /* with NPROC_NUM */
    int nnodes;              /* > 0 given */
    int node_rank;           /* >= 0 given */
    const char *master_addr; /* NULL: from the library */
    int master_port;         /* > 0 given */
    int standalone;
    enum run_mode mode;
    /* supervision */
    const char *run_id;
    int max_restarts;
    double term_timeout;
    int ignore_sighup;
    /* command */
    int module, no_python, use_env, legacy;
    const char *python;      /* --python, else $AMLRUN_PYTHON, else python3 */
    char **cmd;              /* points into argv */
    int ncmd;
    /* output */
    const char *prefix_fmt;  /* NULL: no prefixes */
    int prefix_streams;      /* 1 stdout, 2 stderr, 3 both */
    const char *log_dir;
    struct rankset ranks, local_ranks; /* console filters */
    int dry_run, verbose, quiet;
    /* other modules */
    int topo;
    struct amlrun_bind_opts bind;
    struct headnode_opts head;
    char *owned_addr;        /* storage for --rdzv-endpoint's host */
};

/* Parse argv into *o.  Returns -1 to go on, or an exit status: 0 after
 * --help / --version, AMLRUN_EXIT_USAGE after a message. */
int options_parse(int argc, char **argv, struct amlrun_opts *o);
void options_free(struct amlrun_opts *o);

/* True when long option `name` (without "--"; '_' or '-'; read up to an
 * '=') takes its value as the next argument: head-node mode asks, to find
 * where the worker's command starts. */
int options_takes_value(const char *name);

/* Parse "0,2,4-7" (ranks >= 0); 0 or -1. */
int rankset_parse(const char *s, struct rankset *out);
/* True when r is in the set, or the set is empty. */
int rankset_has(const struct rankset *s, int r);

#endif /* AMLRUN_OPTIONS_H */
