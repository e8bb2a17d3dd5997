/*
 * amlrun's command line.  Options come first; the first argument that is
 * not an option (or the one after "--") starts the worker's command.  Every
 * option is also accepted with underscores (--nproc_per_node), the spelling
 * of torchrun, torch.distributed.launch and the seed's launch.py.  Options
 * torchrun has may also come from PET_<NAME> variables (PET_NPROC_PER_NODE),
 * as torchrun reads them: the command line wins.
 */
#ifndef AMLRUN_OPTIONS_H
#define AMLRUN_OPTIONS_H

#include "run/bind.h"
#include "head/headnode.h"
#include "cli/rdzvconf.h"
#include "output/torchlogs.h"

enum nproc_kind { NPROC_UNSET, NPROC_NUM, NPROC_GPU, NPROC_AUTO };

/* Most workers on one node: the binding plan's limit (libamldist plans at
 * most 4096 local ranks), far above any node's GPUs or sensible cores. */
#define AMLRUN_MAX_NPROC 4096
enum run_mode { MODE_AUTO, MODE_NODE, MODE_PROCESS };
/* Where log files go: amlrun's --log-dir/rank<R>.<stream>, or torchrun's
 * <log-dir>/<run_id>_<x>/attempt_<n>/<local>/<stream>.log (auto: torchrun's
 * when -r/--redirects is given). */
enum log_layout { LOG_LAYOUT_AUTO, LOG_LAYOUT_AMLRUN, LOG_LAYOUT_TORCHRUN };
/* prefix_streams: per local rank, from a --tee mapping. */
#define PREFIX_BY_TEE 4

/* A list like "0,2,4-7"; empty means every rank. */
struct rankset {
    int n;
    struct { int lo, hi; } *r;
};

struct amlrun_opts {
    /* layout */
    enum nproc_kind nproc_kind;
    int nproc;               /* with NPROC_NUM */
    int nnodes;              /* > 0 given (the MAX of MIN:MAX) */
    int nnodes_min;          /* MIN of MIN:MAX (= nnodes for N) */
    int node_rank;           /* >= 0 given */
    const char *master_addr; /* NULL: from the library */
    int master_port;         /* > 0 given */
    int standalone;
    int no_node_check;       /* --no-node-check: no control plane (control.h) */
    enum run_mode mode;
    /* rendezvous: --rdzv-backend and --rdzv-conf, for the nodes' agreement
     * on the layout (the endpoint sets master_addr and master_port) */
    const char *rdzv_backend;  /* "static" (default) or "c10d" */
    struct rdzv_conf rdzv_conf; /* --rdzv-conf as given */
    /* supervision */
    const char *run_id;
    int max_restarts;
    double term_timeout;
    int ignore_sighup;
    const char *role;        /* ROLE_NAME (--role, default "default") */
    /* command */
    int module, no_python, use_env, legacy;
    int run_path;            /* runpy.run_path(script) under python */
    const char *python;      /* --python, else $AMLRUN_PYTHON, else
                                $PYTHON_EXEC (torchrun's), else python3 */
    char **cmd;              /* points into argv */
    int ncmd;
    /* output */
    const char *prefix_fmt;  /* NULL: no prefixes */
    int prefix_streams;      /* 1 stdout, 2 stderr, 3 both */
    const char *log_dir;
    struct rankset ranks, local_ranks; /* console filters */
    int dry_run, verbose, quiet;
    /* torchrun's -r/--redirects and -t/--tee, by local rank */
    struct std_map redirects, tee;
    int redirects_given;
    enum log_layout log_layout;
    /* other modules */
    int topo;
    struct amlrun_bind_opts bind;
    struct headnode_opts head;
    char *owned_addr;        /* --rdzv-endpoint's host (NULL: none) */
    int endpoint_port;       /* and its port (0: none) */
};

/* Parse argv into *o.  Returns -1 to go on, or an exit status: 0 after
 * --help / --version, AMLRUN_EXIT_USAGE after a message. */
int options_parse(int argc, char **argv, struct amlrun_opts *o);
void options_free(struct amlrun_opts *o);

/* Whether the nodes meet at a c10d rendezvous (control.h). */
int options_c10d(const struct amlrun_opts *o);
/* Whether log files follow torchrun's layout. */
int options_torchrun_layout(const struct amlrun_opts *o);
/* True when long option `name` (without "--"; '_' or '-'; read up to an
 * '=') takes its value as the next argument: head-node mode asks, to find
 * where the worker's command starts. */
int options_takes_value(const char *name);

/* Parse "0,2,4-7" (ranks >= 0); 0 or -1. */
int rankset_parse(const char *s, struct rankset *out);
/* True when r is in the set, or the set is empty. */
int rankset_has(const struct rankset *s, int r);

#endif /* AMLRUN_OPTIONS_H */
