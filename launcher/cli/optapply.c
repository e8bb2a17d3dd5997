/* The options' handlers (see optapply.h), in the manner of nginx's
 * ngx_command_t: a family's handler sets the field at the offset its entry
 * names, so that a flag or a plain string needs no code of its own. */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/optapply.h"
#include "cli/torchopts.h"
#include "cli/usage.h"
#include "output/msg.h"
#include "rdzv/backends.h"

#define AMLRUN_STR_(x) #x
#define AMLRUN_STR(x) AMLRUN_STR_(x)

struct handler;
/* -1 to go on, or an exit status (as options_apply). */
typedef int handler_fn(struct amlrun_opts *o, const struct handler *h,
                       const char *name, const char *val);

struct handler {
    handler_fn *fn;
    size_t field;     /* families: offsetof the field set */
    const char *want; /* families: what a bad value should be */
    long lo, hi;      /* on_int: the range */
};

#define FIELD(o, h, type) ((type *)(void *)((char *)(o) + (h)->field))

/* Strict decimal integer in [min, max]. */
static int parse_int(const char *s, long min, long max, int *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

/* `label` names where the value came from: "--nnodes " on the command
 * line, "PET_NNODES=" from the environment. */
static int bad_value(const char *label, const char *val, const char *want)
{
    msg("%s%s: %s (see amlrun --help)", label, val, want);
    return AMLRUN_EXIT_USAGE;
}

/* Seconds as a finite number >= 0, at most max. */
static int parse_seconds(const char *s, double max, double *out)
{
    char *end;
    errno = 0;
    double t = strtod(s, &end);
    if (errno || end == s || *end || isspace((unsigned char)*s) ||
        !(t >= 0) || t > max)
        return -1;
    *out = t;
    return 0;
}

/* ---- families ----------------------------------------------------------- */

static int on_flag(struct amlrun_opts *o, const struct handler *h,
                   const char *name, const char *val)
{
    (void)name;
    (void)val;
    *FIELD(o, h, int) = 1;
    return -1;
}

/* A string taken as it is (checked where it is used). */
static int on_string(struct amlrun_opts *o, const struct handler *h,
                     const char *name, const char *val)
{
    (void)name;
    *FIELD(o, h, const char *) = val;
    return -1;
}

/* A string that may not be empty. */
static int on_name(struct amlrun_opts *o, const struct handler *h,
                   const char *name, const char *val)
{
    if (!*val)
        return bad_value(name, "''", h->want);
    *FIELD(o, h, const char *) = val;
    return -1;
}

static int on_int(struct amlrun_opts *o, const struct handler *h,
                  const char *name, const char *val)
{
    if (parse_int(val, h->lo, h->hi, FIELD(o, h, int)) < 0)
        return bad_value(name, val, h->want);
    return -1;
}

static int on_rankset(struct amlrun_opts *o, const struct handler *h,
                      const char *name, const char *val)
{
    if (rankset_parse(val, FIELD(o, h, struct rankset)) < 0)
        return bad_value(name, val, h->want);
    return -1;
}

/* torchrun's -r/--redirects and -t/--tee: one stream set, or per rank. */
static int on_std_map(struct amlrun_opts *o, const struct handler *h,
                      const char *name, const char *val)
{
    if (std_map_parse(val, FIELD(o, h, struct std_map)) < 0)
        return bad_value(name, val, h->want);
    return -1;
}

/* ---- layout ------------------------------------------------------------- */

/* torchrun's --nproc-per-node cpu: os.cpu_count(), which is the number of
 * CPUs online, whatever this process may run on (auto counts those). */
static int nproc_cpu(struct amlrun_opts *o, const char *name, const char *val)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > AMLRUN_MAX_NPROC) {
        char want[96];
        snprintf(want, sizeof want, "%ld CPUs, more than the %d workers "
                 "amlrun starts on a node: give a number", n, AMLRUN_MAX_NPROC);
        return bad_value(name, val, want);
    }
    o->nproc = (int)n;
    o->nproc_kind = NPROC_NUM;
    return -1;
}

static int on_nproc(struct amlrun_opts *o, const struct handler *h,
                    const char *name, const char *val)
{
    (void)h;
    if (strcmp(val, "gpu") == 0)
        o->nproc_kind = NPROC_GPU;
    else if (strcmp(val, "auto") == 0)
        o->nproc_kind = NPROC_AUTO;
    else if (strcmp(val, "cpu") == 0)
        return nproc_cpu(o, name, val);
    else if (strcmp(val, "xpu") == 0)
        return bad_value(name, val, "amlrun has no Intel XPU support (it "
                         "finds NVIDIA GPUs): give a number, 'gpu', 'auto' "
                         "or 'cpu'");
    else if (parse_int(val, 1, AMLRUN_MAX_NPROC, &o->nproc) == 0)
        o->nproc_kind = NPROC_NUM;
    else
        return bad_value(name, val, "want a number from 1 to "
                         AMLRUN_STR(AMLRUN_MAX_NPROC)
                         ", 'gpu', 'auto' or 'cpu'");
    return -1;
}

/* torchrun's MIN:MAX form is accepted when it is not elastic. */
static int on_nnodes(struct amlrun_opts *o, const struct handler *h,
                     const char *name, const char *val)
{
    (void)h;
    const char *colon = strchr(val, ':');
    int lo, hi;
    if (colon) {
        char first[32];
        size_t n = (size_t)(colon - val);
        if (n == 0 || n >= sizeof first)
            return bad_value(name, val, "want N or N:N");
        memcpy(first, val, n);
        first[n] = '\0';
        if (parse_int(first, 1, 1 << 20, &lo) < 0 ||
            parse_int(colon + 1, 1, 1 << 20, &hi) < 0)
            return bad_value(name, val, "want N or N:N");
        if (lo > hi)
            return bad_value(name, val, "want MIN:MAX with MIN <= MAX");
    } else if (parse_int(val, 1, 1 << 20, &lo) < 0) {
        return bad_value(name, val, "want a number >= 1");
    } else {
        hi = lo;
    }
    o->nnodes_min = lo;
    o->nnodes = hi;
    return -1;
}

static int on_mode(struct amlrun_opts *o, const struct handler *h,
                   const char *name, const char *val)
{
    (void)h;
    if (strcmp(val, "auto") == 0)
        o->mode = MODE_AUTO;
    else if (strcmp(val, "node") == 0)
        o->mode = MODE_NODE;
    else if (strcmp(val, "process") == 0)
        o->mode = MODE_PROCESS;
    else
        return bad_value(name, val, "want auto, node or process");
    return -1;
}

/* "host:port", "[v6]:port": master address and port (torchrun's
 * --rdzv-endpoint; the static rendezvous of env:// uses them as is).  Kept
 * apart until the end of parsing: as in torchrun, an endpoint beats
 * --master-addr and --master-port whatever their order. */
static int set_endpoint(struct amlrun_opts *o, const char *v)
{
    const char *colon = strrchr(v, ':');
    const char *host = v;
    size_t hlen = colon ? (size_t)(colon - v) : strlen(v);
    if (v[0] == '[') {
        const char *close = strchr(v, ']');
        if (!close || (close[1] != '\0' && close[1] != ':'))
            return -1;
        host = v + 1;
        hlen = (size_t)(close - v - 1);
        colon = close[1] == ':' ? close + 1 : NULL;
    }
    if (hlen == 0)
        return -1;
    /* Port 0: torchrun 2.x's "a free port", for one node (localhost:0,
     * checked with --nnodes in optparse.c). */
    int port = 0;
    if (colon && parse_int(colon + 1, 0, 65535, &port) < 0)
        return -1;
    free(o->owned_addr);
    o->owned_addr = strndup(host, hlen);
    if (!o->owned_addr)
        return -1;
    o->endpoint_port = port;
    o->endpoint_any_port = colon && port == 0;
    return 0;
}

static int on_endpoint(struct amlrun_opts *o, const struct handler *h,
                       const char *name, const char *val)
{
    (void)h;
    o->rdzv_endpoint_raw = *val ? val : NULL;
    /* torchrun's default is "": the master address and port.  A list
     * ("H:P,H:P": etcd's members) is kept whole, for a backend that takes
     * one (optparse.c refuses it to the others). */
    if (*val && strchr(val, ',')) {
        free(o->owned_addr);
        if (!(o->owned_addr = strdup(val)))
            return bad_value(name, val, "out of memory");
        o->endpoint_port = 0;
        o->endpoint_any_port = 0;
    } else if (!*val) {
        free(o->owned_addr);
        o->owned_addr = NULL;
        o->endpoint_port = 0;
        o->endpoint_any_port = 0;
    } else if (set_endpoint(o, val) < 0) {
        return bad_value(name, val, "want HOST[:PORT]");
    }
    return -1;
}

/* static: node ranks given (env://); a backend of the library's registry
 * (lib/rdzv/backends.h: c10d): the nodes meet at --rdzv-endpoint and get
 * theirs (control.h).  Refused: "want static or c10d" ("want static, c10d
 * or B" with a second backend B). */
static int on_rdzv_backend(struct amlrun_opts *o, const struct handler *h,
                           const char *name, const char *val)
{
    (void)h;
    int known = strcmp(val, "static") == 0;
    char want[200] = "want static";
    size_t n = strlen(want);
    const char *b;
    for (int i = 0; (b = amldist__rz_backend_name(i)) != NULL; i++) {
        known |= strcmp(val, b) == 0;
        int k = snprintf(want + n, sizeof want - n, "%s%s",
                         amldist__rz_backend_name(i + 1) ? ", " : " or ", b);
        n += k > 0 && (size_t)k < sizeof want - n ? (size_t)k : 0;
    }
    if (!known)
        return bad_value(name, val, want);
    o->rdzv_backend = val;
    return -1;
}

static int on_rdzv_conf(struct amlrun_opts *o, const struct handler *h,
                        const char *name, const char *val)
{
    (void)h;
    char why[160];
    if (rdzv_conf_parse(val, &o->rdzv_conf, why, sizeof why) < 0)
        return bad_value(name, val, why);
    o->rdzv_conf_raw = *val ? val : NULL;
    return -1;
}

/* ---- supervision -------------------------------------------------------- */

static int on_term_timeout(struct amlrun_opts *o, const struct handler *h,
                           const char *name, const char *val)
{
    (void)h;
    char *end;
    errno = 0;
    double t = strtod(val, &end);
    if (errno || end == val || *end || !(t >= 0) || t > 1e6)
        return bad_value(name, val, "want seconds >= 0");
    o->term_timeout = t;
    return -1;
}

/* --hang-timeout, --timeout: decimal seconds as the other durations are
 * ("30", "2.5": digits and an optional fraction; no sign, exponent, hex,
 * inf or nan), from SECONDS_FLOOR (the supervisor's timers count
 * milliseconds: a shorter limit could not be kept) to a year. */
#define SECONDS_FLOOR 0.001
#define SECONDS_MAX (366 * 86400.0)

static int on_positive_seconds(struct amlrun_opts *o, const struct handler *h,
                               const char *name, const char *val)
{
    const char *p = val;
    while (isdigit((unsigned char)*p))
        p++;
    int whole = p > val;
    if (whole && *p == '.' && isdigit((unsigned char)p[1]))
        for (p++; isdigit((unsigned char)*p);)
            p++;
    double t;
    if (!whole || *p || parse_seconds(val, 1e300, &t) < 0 || !(t > 0))
        return bad_value(name, *val ? val : "''", h->want);
    if (t < SECONDS_FLOOR)
        return bad_value(name, val, "want at least 0.001 s (a millisecond)");
    if (t > SECONDS_MAX)
        return bad_value(name, val, "want at most a year (31622400 s)");
    *FIELD(o, h, double) = t;
    return -1;
}

/* torchrun's agent polls its workers this often; amlrun's event loop
 * learns of an exit at once, so there is nothing to set. */
static int on_monitor_interval(struct amlrun_opts *o, const struct handler *h,
                               const char *name, const char *val)
{
    (void)o;
    (void)h;
    double t;
    if (parse_seconds(val, 1e6, &t) < 0)
        return bad_value(name, val, "want seconds >= 0");
    return -1;
}

/* How torchrun's multiprocessing makes a worker; amlrun's workers are
 * always new programs (fork + exec, like spawn). */
static int on_start_method(struct amlrun_opts *o, const struct handler *h,
                           const char *name, const char *val)
{
    (void)o;
    (void)h;
    if (strcmp(val, "spawn") && strcmp(val, "fork") && strcmp(val, "forkserver"))
        return bad_value(name, val, "want spawn, fork or forkserver");
    return -1;
}

/* ---- output ------------------------------------------------------------- */

static int on_prefix(struct amlrun_opts *o, const struct handler *h,
                     const char *name, const char *val)
{
    (void)h;
    (void)name;
    o->prefix_fmt = val ? val : "[rank%r]:";
    o->prefix_streams = 3;
    o->prefix_given = 1;
    return -1;
}

/* Prefixes on the console, as before; torchrun's per-rank form and, in
 * torchrun's layout, log files too. */
static int on_tee(struct amlrun_opts *o, const struct handler *h,
                  const char *name, const char *val)
{
    int rc = on_std_map(o, h, name, val);
    if (rc >= 0)
        return rc;
    o->prefix_streams = o->tee.n ? PREFIX_BY_TEE : o->tee.all;
    if (!o->prefix_fmt)
        o->prefix_fmt = "[rank%r]:";
    return -1;
}

static int on_redirects(struct amlrun_opts *o, const struct handler *h,
                        const char *name, const char *val)
{
    int rc = on_std_map(o, h, name, val);
    if (rc >= 0)
        return rc;
    o->redirects_given = 1;
    return -1;
}

/* mpirun's --stdin, srun's --input: a rank, all or none. */
static int on_stdin(struct amlrun_opts *o, const struct handler *h,
                    const char *name, const char *val)
{
    (void)h;
    if (strcmp(val, "all") == 0)
        o->stdin_mode = STDIN_ALL;
    else if (strcmp(val, "none") == 0)
        o->stdin_mode = STDIN_NONE;
    else if (parse_int(val, 0, 1 << 30, &o->stdin_rank) == 0)
        o->stdin_mode = STDIN_RANK;
    else
        return bad_value(name, val, "want a rank, all or none");
    return -1;
}

static int on_log_layout(struct amlrun_opts *o, const struct handler *h,
                         const char *name, const char *val)
{
    (void)h;
    if (strcmp(val, "amlrun") == 0)
        o->log_layout = LOG_LAYOUT_AMLRUN;
    else if (strcmp(val, "torchrun") == 0)
        o->log_layout = LOG_LAYOUT_TORCHRUN;
    else
        return bad_value(name, val, "want amlrun or torchrun");
    return -1;
}

/* --dry-run, --topo, --status: on, or OPT_JSON with =json. */
static int on_json_able(struct amlrun_opts *o, const struct handler *h,
                        const char *name, const char *val)
{
    if (val && strcmp(val, "json"))
        return bad_value(name, val, "want json");
    *FIELD(o, h, int) = val ? OPT_JSON : 1;
    o->head.dry_run = o->dry_run; /* 0, 1 or OPT_JSON */
    return -1;
}

/* ---- binding, head node, the rest --------------------------------------- */

static int on_report_bindings(struct amlrun_opts *o, const struct handler *h,
                              const char *name, const char *val)
{
    (void)h;
    if (val && strcmp(val, "json"))
        return bad_value(name, val, "only --report-bindings=json");
    o->bind.report_bindings = 1;
    o->bind.json = val != NULL;
    return -1;
}

static int on_launcher(struct amlrun_opts *o, const struct handler *h,
                       const char *name, const char *val)
{
    (void)h;
    if (strcmp(val, "mpirun") && strcmp(val, "slurm"))
        return bad_value(name, val, "want mpirun or slurm");
    o->head.launcher = val;
    return -1;
}

static int on_help(struct amlrun_opts *o, const struct handler *h,
                   const char *name, const char *val)
{
    (void)o;
    (void)h;
    (void)name;
    (void)val;
    usage_print(stdout);
    return 0;
}

static int on_version(struct amlrun_opts *o, const struct handler *h,
                      const char *name, const char *val)
{
    (void)h;
    (void)name;
    (void)val;
    /* Printed after the other options: --version -v says more. */
    o->version = 1;
    return -1;
}

#define AT(field) offsetof(struct amlrun_opts, field)
#define WANT_STD_MAP "want 0 (none), 1 (stdout), 2 (stderr), 3 (both), " \
                     "or LOCAL:N,... as 0:1,1:2"
#define WANT_RANKS "want a list like 0,2,4-7"

static const struct handler handlers[O_COUNT] = {
    [O_NPROC] = {on_nproc, 0, NULL, 0, 0},
    [O_NNODES] = {on_nnodes, 0, NULL, 0, 0},
    [O_NODE_RANK] = {on_int, AT(node_rank), "want a number >= 0", 0, 1 << 20},
    [O_MASTER_ADDR] = {on_name, AT(master_addr), "want a host name or address",
                       0, 0},
    [O_MASTER_PORT] = {on_int, AT(master_port), "want a port 1..65535", 1,
                       65535},
    [O_LOCAL_ADDR] = {on_name, AT(local_addr), "want a host name or address",
                      0, 0},
    [O_STANDALONE] = {on_flag, AT(standalone), NULL, 0, 0},
    [O_NO_NODE_CHECK] = {on_flag, AT(no_node_check), NULL, 0, 0},
    [O_MODE] = {on_mode, 0, NULL, 0, 0},
    [O_RUN_ID] = {on_name, AT(run_id), "want a non-empty id", 0, 0},
    [O_RDZV_ENDPOINT] = {on_endpoint, 0, NULL, 0, 0},
    [O_RDZV_BACKEND] = {on_rdzv_backend, 0, NULL, 0, 0},
    [O_RDZV_CONF] = {on_rdzv_conf, 0, NULL, 0, 0},
    [O_MAX_RESTARTS] = {on_int, AT(max_restarts), "want a number >= 0", 0,
                        1000000},
    [O_TERM_TIMEOUT] = {on_term_timeout, 0, NULL, 0, 0},
    [O_IGNORE_SIGHUP] = {on_flag, AT(ignore_sighup), NULL, 0, 0},
    [O_ROLE] = {on_name, AT(role), "want a non-empty name", 0, 0},
    [O_MONITOR_INTERVAL] = {on_monitor_interval, 0, NULL, 0, 0},
    [O_START_METHOD] = {on_start_method, 0, NULL, 0, 0},
    [O_MODULE] = {on_flag, AT(module), NULL, 0, 0},
    [O_NO_PYTHON] = {on_flag, AT(no_python), NULL, 0, 0},
    [O_USE_ENV] = {on_flag, AT(use_env), NULL, 0, 0},
    [O_LEGACY] = {on_flag, AT(legacy), NULL, 0, 0},
    [O_RUN_PATH] = {on_flag, AT(run_path), NULL, 0, 0},
    [O_PYTHON] = {on_name, AT(python), "want a program", 0, 0},
    [O_PREFIX] = {on_prefix, 0, NULL, 0, 0},
    [O_TEE] = {on_tee, AT(tee), WANT_STD_MAP, 0, 0},
    [O_REDIRECTS] = {on_redirects, AT(redirects), WANT_STD_MAP, 0, 0},
    [O_LOG_DIR] = {on_name, AT(log_dir), "want a directory", 0, 0},
    [O_LOG_LAYOUT] = {on_log_layout, 0, NULL, 0, 0},
    [O_STDIN] = {on_stdin, 0, NULL, 0, 0},
    [O_RANKS] = {on_rankset, AT(ranks), WANT_RANKS, 0, 0},
    [O_LOCAL_RANKS] = {on_rankset, AT(local_ranks), WANT_RANKS, 0, 0},
    [O_DRY_RUN] = {on_json_able, AT(dry_run), NULL, 0, 0},
    [O_VERBOSE] = {on_flag, AT(verbose), NULL, 0, 0},
    [O_QUIET] = {on_flag, AT(quiet), NULL, 0, 0},
    [O_CPU_BIND] = {on_string, AT(bind.cpu_bind), NULL, 0, 0},
    [O_MEM_BIND] = {on_string, AT(bind.mem_bind), NULL, 0, 0},
    [O_NIC_BIND] = {on_string, AT(bind.nic_bind), NULL, 0, 0},
    [O_GPU_BIND] = {on_string, AT(bind.gpu_bind), NULL, 0, 0},
    [O_NUMA_BINDING] = {on_string, AT(bind.numa_binding), NULL, 0, 0},
    [O_TOPOLOGY] = {on_string, AT(bind.topology), NULL, 0, 0},
    [O_REPORT_BINDINGS] = {on_report_bindings, 0, NULL, 0, 0},
    [O_TOPO] = {on_json_able, AT(topo), NULL, 0, 0},
    [O_OUTPUT] = {on_string, AT(bind.output), NULL, 0, 0},
    [O_HOSTFILE] = {on_string, AT(head.hostfile), NULL, 0, 0},
    [O_HOSTS] = {on_string, AT(head.hosts), NULL, 0, 0},
    [O_LAUNCHER] = {on_launcher, 0, NULL, 0, 0},
    [O_HELP] = {on_help, 0, NULL, 0, 0},
    [O_VERSION] = {on_version, 0, NULL, 0, 0},
    [O_SIGNALS_TO_HANDLE] = {on_signals_to_handle, 0, NULL, 0, 0},
    [O_EVENT_LOG_HANDLER] = {on_event_log_handler, 0, NULL, 0, 0},
    [O_LOGS_SPECS] = {on_logs_specs, 0, NULL, 0, 0},
    [O_EVENT_LOG] = {on_name, AT(event_log), "want a file", 0, 0},
    [O_RESULT_JSON] = {on_name, AT(result_json), "want a file", 0, 0},
    [O_STATUS] = {on_json_able, AT(status), NULL, 0, 0},
    [O_STACKS] = {on_flag, AT(stacks), NULL, 0, 0},
    [O_HANG_TIMEOUT] = {on_positive_seconds, AT(hang_timeout),
                        "want seconds > 0", 0, 0},
    [O_HANG_REPORT] = {on_name, AT(hang_report), "want a file", 0, 0},
    [O_TIMEOUT] = {on_positive_seconds, AT(timeout), "want seconds > 0", 0, 0},
    [O_MAKE_SECRET] = {on_flag, AT(make_secret), NULL, 0, 0},
};

/*
 * Where the options that reach the library came from, as typed ("--nnodes
 * ", "--node_rank ", "PET_MASTER_ADDR="): c10d's note on --node-rank says
 * it so (optparse.c), and so do the library's messages (libwords.h).
 */
static void note_typed(struct amlrun_opts *o, enum opt_id id,
                       const char *label)
{
    char *by = id == O_NNODES          ? o->nnodes_by
               : id == O_NODE_RANK     ? o->node_rank_by
               : id == O_MASTER_ADDR   ? o->master_addr_by
               : id == O_MASTER_PORT   ? o->master_port_by
               : id == O_RDZV_ENDPOINT ? o->endpoint_by
                                       : NULL;
    if (by)
        snprintf(by, OPT_TYPED_MAX, "%s", label);
}

int options_apply(struct amlrun_opts *o, const char *label, enum opt_id id,
                  const char *val)
{
    if ((unsigned)id >= O_COUNT || !handlers[id].fn)
        return -1;
    note_typed(o, id, label);
    return handlers[id].fn(o, &handlers[id], label, val);
}
