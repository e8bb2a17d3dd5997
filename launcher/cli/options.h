/*
 * amlrun's options, as parsed (optparse.h) from its command line and
 * torchrun's PET_<NAME> variables; every part of amlrun reads them here.
 */
#ifndef AMLRUN_OPTIONS_H
#define AMLRUN_OPTIONS_H

#include "cli/rankset.h"
#include "cli/rdzvconf.h"
#include "output/torchlogs.h"

/* Binding (worker/bind.h applies them). */
struct amlrun_bind_opts {
    const char *cpu_bind;  /* --cpu-bind: none|numa|exclusive|socket|LIST */
    /* --numa-binding: torchrun 2.x's name for a --cpu-bind policy */
    const char *numa_binding;
    const char *mem_bind;  /* --mem-bind: local|none */
    const char *nic_bind;  /* --nic-bind: none|ucx|nccl */
    const char *gpu_bind;  /* --gpu-bind: none|single */
    const char *topology;  /* --topology FILE (hwloc XML) */
    int report_bindings;   /* --report-bindings */
    const char *output;    /* --output FILE.svg|png|pdf: draw the plan */
    int json;              /* --report-bindings=json */
    /* Per-process mode: each process plans the whole node, so its own
     * affinity (set by mpirun/srun for that one process) is not the
     * launcher's cpuset; plan over the node's allowed cpus instead. */
    int per_process;
};

/* Head-node mode (head/headnode.h runs it). */
struct headnode_opts {
    const char *hostfile; /* --hostfile FILE (Open MPI / DeepSpeed format) */
    const char *hosts;    /* --hosts a,b,c */
    const char *launcher; /* --launcher mpirun|slurm; NULL: detect */
    int dry_run;          /* --dry-run: print the command (OPT_JSON: as
                           * JSON), run nothing */
};

/* An option's name as typed, with what joins its value ("--nnodes ",
 * "PET_NNODES="). */
#define OPT_TYPED_MAX 72

/* --dry-run=json, --topo=json */
#define OPT_JSON 2

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

/* --python when neither it, AMLRUN_PYTHON nor PYTHON_EXEC is given: this
 * array itself (o->python == options_default_python). */
extern const char options_default_python[];

struct amlrun_opts {
    /* layout */
    enum nproc_kind nproc_kind;
    int nproc;               /* with NPROC_NUM */
    int nnodes;              /* > 0 given (the MAX of MIN:MAX) */
    int nnodes_min;          /* MIN of MIN:MAX (= nnodes for N) */
    /* where it came from, as typed ("--nnodes ", "PET_NNODES="), for
     * messages (mode.c) and the library's words (libwords.h) */
    char nnodes_by[OPT_TYPED_MAX];
    int node_rank;           /* >= 0 given */
    char node_rank_by[OPT_TYPED_MAX]; /* the same: "--node_rank " */
    const char *master_addr; /* NULL: from the library */
    /* the same for --master-addr, --master-port and --rdzv-endpoint */
    char master_addr_by[OPT_TYPED_MAX], master_port_by[OPT_TYPED_MAX];
    char endpoint_by[OPT_TYPED_MAX];
    const char *local_addr;  /* --local-addr: this node's address in the
                                rendezvous (node 0's: MASTER_ADDR) */
    int master_port;         /* > 0 given */
    int standalone;
    int no_node_check;       /* --no-node-check: no control plane (control.h) */
    enum run_mode mode;
    /* rendezvous: --rdzv-backend and --rdzv-conf, for the nodes' agreement
     * on the layout (the endpoint sets master_addr and master_port) */
    const char *rdzv_backend;  /* "static" (default) or a backend of
                                  lib/rdzv/backends.h's registry ("c10d") */
    struct rdzv_conf rdzv_conf; /* --rdzv-conf as given */
    /* --rdzv-endpoint and --rdzv-conf as given (NULL: none), for a
     * backend past the registry's first (etcd: a list of members, and
     * its own keys) */
    const char *rdzv_endpoint_raw, *rdzv_conf_raw;
    /* supervision */
    const char *run_id;
    int max_restarts;
    double term_timeout;
    int ignore_sighup;
    const char *role;        /* ROLE_NAME (--role, default "default") */
    /* --signals-to-handle: the signals that stop the job (bit 1 << sig),
     * and the list as given (NULL: amlrun's default set, see amlrun(1)) */
    unsigned long long stop_signals;
    const char *signals_to_handle;
    /* events: --event-log-handler console, --event-log FILE */
    int event_console;
    const char *event_log;
    const char *result_json; /* --result-json FILE: the job's result */
    /* hangs: --hang-timeout (or $AMLRUN_HANG_TIMEOUT) and --timeout in
     * seconds, 0: none; --hang-report FILE: the stacks as JSON */
    double hang_timeout;
    const char *hang_report;
    double timeout;
    /* command */
    int module, no_python, use_env, legacy;
    int run_path;            /* runpy.run_path(script) under python */
    const char *python;      /* --python, else $AMLRUN_PYTHON, else
                                $PYTHON_EXEC (torchrun's), else python3 */
    char **cmd;              /* points into argv */
    int ncmd;
    /* output */
    const char *prefix_fmt;  /* NULL: no prefixes */
    int prefix_given;        /* --prefix: amlrun's format, not torchrun's */
    /* $TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE (NULL: unset or empty):
     * torchrun's prefix of tee'd lines (output/lineprefix.h) */
    const char *prefix_template;
    int prefix_streams;      /* 1 stdout, 2 stderr, 3 both */
    const char *log_dir;
    struct rankset ranks, local_ranks; /* console filters */
    int dry_run, verbose, quiet; /* dry_run, topo: OPT_JSON with =json */
    /* torchrun's -r/--redirects and -t/--tee, by local rank */
    struct std_map redirects, tee;
    int redirects_given;
    enum log_layout log_layout;
    /* --stdin: who reads amlrun's stdin (run/stdin.h); stdin_rank for
     * STDIN_RANK */
    enum { STDIN_DEFAULT, STDIN_RANK, STDIN_ALL, STDIN_NONE } stdin_mode;
    int stdin_rank;
    /* other modules */
    int topo;
    /* --status[=json] and --stacks: ask a running job (query/client.h);
     * its JOB is the first word after the options, if any */
    int status, stacks;
    int version;             /* --version: printed once -v may be known */
    int make_secret;         /* --make-secret (run/jobtoken.h) */
    struct amlrun_bind_opts bind;
    struct headnode_opts head;
    char *owned_addr;        /* --rdzv-endpoint's host (NULL: none) */
    int endpoint_port;       /* and its port (0: none) */
    int endpoint_any_port;   /* its port is 0: one node, a free port */
};

/* The defaults, before any option: `argv0` is amlrun's argv[0] (named
 * launch or launch.py, it behaves as torch.distributed.launch). */
void options_init(struct amlrun_opts *o, const char *argv0);
void options_free(struct amlrun_opts *o);

/* True when these options (or the environment: SLURM_JOB_ID with
 * --launcher slurm) ask for head-node mode. */
int headnode_wanted(const struct headnode_opts *o);

/* Whether the nodes meet at a dynamic rendezvous (control.h): a backend
 * of lib/rdzv/backends.h's registry (c10d), not "static". */
int options_c10d(const struct amlrun_opts *o);
/* Whether log files follow torchrun's layout. */
int options_torchrun_layout(const struct amlrun_opts *o);
#endif /* AMLRUN_OPTIONS_H */
