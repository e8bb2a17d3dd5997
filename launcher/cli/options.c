/* amlrun's option parser: a table, one spelling per option, '_' == '-'. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output/msg.h"
#include "cli/options.h"
#include "cli/usage.h"

enum opt_id {
    O_NPROC, O_NNODES, O_NODE_RANK, O_MASTER_ADDR, O_MASTER_PORT,
    O_STANDALONE, O_MODE, O_RUN_ID, O_RDZV_ENDPOINT, O_RDZV_BACKEND,
    O_MAX_RESTARTS, O_TERM_TIMEOUT, O_IGNORE_SIGHUP, O_MODULE, O_NO_PYTHON,
    O_USE_ENV, O_LEGACY, O_PYTHON, O_PREFIX, O_TEE, O_LOG_DIR, O_RANKS,
    O_LOCAL_RANKS, O_DRY_RUN, O_VERBOSE, O_QUIET, O_CPU_BIND, O_MEM_BIND,
    O_NIC_BIND, O_GPU_BIND, O_TOPOLOGY, O_REPORT_BINDINGS, O_TOPO,
    O_HOSTFILE, O_HOSTS, O_LAUNCHER, O_HELP, O_VERSION, O_NO_NODE_CHECK,
    O_MONITOR_INTERVAL, O_START_METHOD, O_RDZV_CONF, O_ROLE, O_RUN_PATH,
    O_REDIRECTS, O_LOG_LAYOUT,
    O_COUNT
};

enum {
    ARG_NONE, ARG_REQUIRED, ARG_OPTIONAL /* only as --opt=value */,
    ARG_MASK = 3,
    /* torchrun's option: PET_<NAME> (PET_NPROC_PER_NODE) is its default,
     * as torch/distributed/argparse_util.py reads it. */
    PET = 4
};

#define AMLRUN_STR_(x) #x
#define AMLRUN_STR(x) AMLRUN_STR_(x)

static const struct option_def {
    const char *name;
    int arg;
    enum opt_id id;
} options[] = {
    {"nproc-per-node", ARG_REQUIRED | PET, O_NPROC},
    {"nnodes", ARG_REQUIRED | PET, O_NNODES},
    {"node-rank", ARG_REQUIRED | PET, O_NODE_RANK},
    {"master-addr", ARG_REQUIRED | PET, O_MASTER_ADDR},
    {"master-port", ARG_REQUIRED | PET, O_MASTER_PORT},
    {"standalone", ARG_NONE | PET, O_STANDALONE},
    {"no-node-check", ARG_NONE, O_NO_NODE_CHECK},
    {"mode", ARG_REQUIRED, O_MODE},
    {"run-id", ARG_REQUIRED, O_RUN_ID},
    {"rdzv-id", ARG_REQUIRED | PET, O_RUN_ID},
    {"rdzv-endpoint", ARG_REQUIRED | PET, O_RDZV_ENDPOINT},
    {"rdzv-backend", ARG_REQUIRED | PET, O_RDZV_BACKEND},
    {"max-restarts", ARG_REQUIRED | PET, O_MAX_RESTARTS},
    {"term-timeout", ARG_REQUIRED, O_TERM_TIMEOUT},
    {"ignore-sighup", ARG_NONE, O_IGNORE_SIGHUP},
    {"module", ARG_NONE | PET, O_MODULE},
    {"no-python", ARG_NONE | PET, O_NO_PYTHON},
    {"use-env", ARG_NONE, O_USE_ENV},
    {"legacy-launch", ARG_NONE, O_LEGACY},
    {"python", ARG_REQUIRED, O_PYTHON},
    {"prefix", ARG_OPTIONAL, O_PREFIX},
    {"tee", ARG_REQUIRED | PET, O_TEE},
    {"log-dir", ARG_REQUIRED | PET, O_LOG_DIR},
    {"ranks", ARG_REQUIRED, O_RANKS},
    {"local-ranks-filter", ARG_REQUIRED, O_LOCAL_RANKS},
    {"redirects", ARG_REQUIRED | PET, O_REDIRECTS},
    {"log-layout", ARG_REQUIRED, O_LOG_LAYOUT},
    {"dry-run", ARG_NONE, O_DRY_RUN},
    {"verbose", ARG_NONE, O_VERBOSE},
    {"quiet", ARG_NONE, O_QUIET},
    {"cpu-bind", ARG_REQUIRED, O_CPU_BIND},
    {"mem-bind", ARG_REQUIRED, O_MEM_BIND},
    {"nic-bind", ARG_REQUIRED, O_NIC_BIND},
    {"gpu-bind", ARG_REQUIRED, O_GPU_BIND},
    {"topology", ARG_REQUIRED, O_TOPOLOGY},
    {"report-bindings", ARG_OPTIONAL, O_REPORT_BINDINGS},
    {"topo", ARG_NONE, O_TOPO},
    {"hostfile", ARG_REQUIRED, O_HOSTFILE},
    {"hosts", ARG_REQUIRED, O_HOSTS},
    {"launcher", ARG_REQUIRED, O_LAUNCHER},
    {"help", ARG_NONE, O_HELP},
    {"version", ARG_NONE, O_VERSION},
    /* torchrun's, accepted for its command lines (see amlrun(1)) */
    {"monitor-interval", ARG_REQUIRED | PET, O_MONITOR_INTERVAL},
    {"start-method", ARG_REQUIRED | PET, O_START_METHOD},
    {"rdzv-conf", ARG_REQUIRED | PET, O_RDZV_CONF},
    {"role", ARG_REQUIRED | PET, O_ROLE},
    {"run-path", ARG_NONE | PET, O_RUN_PATH},
};

static const struct { char c; enum opt_id id; } short_options[] = {
    {'m', O_MODULE}, {'v', O_VERBOSE}, {'q', O_QUIET},
    {'h', O_HELP},   {'V', O_VERSION},
    /* torchrun's, with a value: -r 3, -r3, -t 0:1,1:2 */
    {'r', O_REDIRECTS}, {'t', O_TEE},
};

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

int rankset_parse(const char *s, struct rankset *out)
{
    out->n = 0;
    free(out->r);
    out->r = NULL;
    const char *p = s;
    while (*p) {
        int lo, hi;
        char *end;
        if (*p < '0' || *p > '9')
            return -1;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || v > INT_MAX)
            return -1;
        lo = hi = (int)v;
        if (*end == '-') {
            p = end + 1;
            if (*p < '0' || *p > '9')
                return -1;
            v = strtol(p, &end, 10);
            if (errno || v > INT_MAX || v < lo)
                return -1;
            hi = (int)v;
        }
        if (*end != ',' && *end != '\0')
            return -1;
        void *grown = realloc(out->r, (size_t)(out->n + 1) * sizeof *out->r);
        if (!grown)
            return -1;
        out->r = grown;
        out->r[out->n].lo = lo;
        out->r[out->n].hi = hi;
        out->n++;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p)
            return -1;
    }
    return out->n > 0 ? 0 : -1;
}

int rankset_has(const struct rankset *s, int r)
{
    if (s->n == 0)
        return 1;
    for (int i = 0; i < s->n; i++)
        if (r >= s->r[i].lo && r <= s->r[i].hi)
            return 1;
    return 0;
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
    int port = 0;
    if (colon && parse_int(colon + 1, 1, 65535, &port) < 0)
        return -1;
    free(o->owned_addr);
    o->owned_addr = strndup(host, hlen);
    if (!o->owned_addr)
        return -1;
    o->endpoint_port = port;
    return 0;
}

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

static int apply(struct amlrun_opts *o, const char *name, enum opt_id id,
                 const char *val)
{
    switch (id) {
    case O_NPROC:
        if (strcmp(val, "gpu") == 0)
            o->nproc_kind = NPROC_GPU;
        else if (strcmp(val, "auto") == 0)
            o->nproc_kind = NPROC_AUTO;
        else if (strcmp(val, "cpu") == 0)
            return nproc_cpu(o, name, val);
        else if (parse_int(val, 1, AMLRUN_MAX_NPROC, &o->nproc) == 0)
            o->nproc_kind = NPROC_NUM;
        else
            return bad_value(name, val, "want a number from 1 to "
                             AMLRUN_STR(AMLRUN_MAX_NPROC)
                             ", 'gpu', 'auto' or 'cpu'");
        break;
    case O_NNODES: {
        /* torchrun's MIN:MAX form is accepted when it is not elastic. */
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
        break;
    }
    case O_NODE_RANK:
        if (parse_int(val, 0, 1 << 20, &o->node_rank) < 0)
            return bad_value(name, val, "want a number >= 0");
        break;
    case O_MASTER_ADDR:
        if (!*val)
            return bad_value(name, "''", "want a host name or address");
        o->master_addr = val;
        break;
    case O_MASTER_PORT:
        if (parse_int(val, 1, 65535, &o->master_port) < 0)
            return bad_value(name, val, "want a port 1..65535");
        break;
    case O_STANDALONE:
        o->standalone = 1;
        break;
    case O_NO_NODE_CHECK:
        o->no_node_check = 1;
        break;
    case O_MODE:
        if (strcmp(val, "auto") == 0)
            o->mode = MODE_AUTO;
        else if (strcmp(val, "node") == 0)
            o->mode = MODE_NODE;
        else if (strcmp(val, "process") == 0)
            o->mode = MODE_PROCESS;
        else
            return bad_value(name, val, "want auto, node or process");
        break;
    case O_RUN_ID:
        if (!*val)
            return bad_value(name, "''", "want a non-empty id");
        o->run_id = val;
        break;
    case O_RDZV_ENDPOINT:
        /* torchrun's default is "": the master address and port. */
        if (!*val) {
            free(o->owned_addr);
            o->owned_addr = NULL;
            o->endpoint_port = 0;
        } else if (set_endpoint(o, val) < 0) {
            return bad_value(name, val, "want HOST[:PORT]");
        }
        break;
    case O_RDZV_BACKEND:
        /* static: node ranks given (env://); c10d: the nodes meet at
         * --rdzv-endpoint and get theirs (control.h). */
        if (strcmp(val, "static") && strcmp(val, "c10d"))
            return bad_value(name, val, "want static or c10d");
        o->rdzv_backend = val;
        break;
    case O_MAX_RESTARTS:
        if (parse_int(val, 0, 1000000, &o->max_restarts) < 0)
            return bad_value(name, val, "want a number >= 0");
        break;
    case O_TERM_TIMEOUT: {
        char *end;
        errno = 0;
        double t = strtod(val, &end);
        if (errno || end == val || *end || !(t >= 0) || t > 1e6)
            return bad_value(name, val, "want seconds >= 0");
        o->term_timeout = t;
        break;
    }
    case O_IGNORE_SIGHUP: o->ignore_sighup = 1; break;
    case O_MODULE: o->module = 1; break;
    case O_NO_PYTHON: o->no_python = 1; break;
    case O_USE_ENV: o->use_env = 1; break;
    case O_LEGACY: o->legacy = 1; break;
    case O_PYTHON:
        if (!*val)
            return bad_value(name, "''", "want a program");
        o->python = val;
        break;
    case O_PREFIX:
        o->prefix_fmt = val ? val : "[rank%r]:";
        o->prefix_streams = 3;
        break;
    case O_TEE:
        /* Prefixes on the console, as before; torchrun's per-rank form
         * and, in torchrun's layout, log files too. */
        if (std_map_parse(val, &o->tee) < 0)
            return bad_value(name, val, "want 0 (none), 1 (stdout), "
                             "2 (stderr), 3 (both), or LOCAL:N,... as 0:1,1:2");
        o->prefix_streams = o->tee.n ? PREFIX_BY_TEE : o->tee.all;
        if (!o->prefix_fmt)
            o->prefix_fmt = "[rank%r]:";
        break;
    case O_LOG_DIR:
        if (!*val)
            return bad_value(name, "''", "want a directory");
        o->log_dir = val;
        break;
    case O_RANKS:
        if (rankset_parse(val, &o->ranks) < 0)
            return bad_value(name, val, "want a list like 0,2,4-7");
        break;
    case O_LOCAL_RANKS:
        if (rankset_parse(val, &o->local_ranks) < 0)
            return bad_value(name, val, "want a list like 0,2,4-7");
        break;
    case O_DRY_RUN: o->dry_run = o->head.dry_run = 1; break;
    case O_VERBOSE: o->verbose = 1; break;
    case O_QUIET: o->quiet = 1; break;
    case O_CPU_BIND: o->bind.cpu_bind = val; break;
    case O_MEM_BIND: o->bind.mem_bind = val; break;
    case O_NIC_BIND: o->bind.nic_bind = val; break;
    case O_GPU_BIND: o->bind.gpu_bind = val; break;
    case O_TOPOLOGY: o->bind.topology = val; break;
    case O_REPORT_BINDINGS:
        if (val && strcmp(val, "json"))
            return bad_value(name, val, "only --report-bindings=json");
        o->bind.report_bindings = 1;
        o->bind.json = val != NULL;
        break;
    case O_TOPO: o->topo = 1; break;
    case O_HOSTFILE: o->head.hostfile = val; break;
    case O_HOSTS: o->head.hosts = val; break;
    case O_LAUNCHER:
        if (strcmp(val, "mpirun") && strcmp(val, "slurm"))
            return bad_value(name, val, "want mpirun or slurm");
        o->head.launcher = val;
        break;
    case O_REDIRECTS:
        if (std_map_parse(val, &o->redirects) < 0)
            return bad_value(name, val, "want 0 (none), 1 (stdout), "
                             "2 (stderr), 3 (both), or LOCAL:N,... as 0:1,1:2");
        o->redirects_given = 1;
        break;
    case O_LOG_LAYOUT:
        if (strcmp(val, "amlrun") == 0)
            o->log_layout = LOG_LAYOUT_AMLRUN;
        else if (strcmp(val, "torchrun") == 0)
            o->log_layout = LOG_LAYOUT_TORCHRUN;
        else
            return bad_value(name, val, "want amlrun or torchrun");
        break;
    case O_HELP:
        usage_print(stdout);
        return 0;
    case O_VERSION:
        version_print(stdout);
        return 0;
    case O_MONITOR_INTERVAL: {
        /* torchrun's agent polls its workers this often; amlrun's event
         * loop learns of an exit at once, so there is nothing to set. */
        double t;
        if (parse_seconds(val, 1e6, &t) < 0)
            return bad_value(name, val, "want seconds >= 0");
        break;
    }
    case O_START_METHOD:
        /* How torchrun's multiprocessing makes a worker; amlrun's workers
         * are always new programs (fork + exec, like spawn). */
        if (strcmp(val, "spawn") && strcmp(val, "fork") &&
            strcmp(val, "forkserver"))
            return bad_value(name, val, "want spawn, fork or forkserver");
        break;
    case O_RDZV_CONF: {
        char why[160];
        if (rdzv_conf_parse(val, &o->rdzv_conf, why, sizeof why) < 0)
            return bad_value(name, val, why);
        break;
    }
    case O_ROLE:
        if (!*val)
            return bad_value(name, "''", "want a non-empty name");
        o->role = val;
        break;
    case O_RUN_PATH: o->run_path = 1; break;
    case O_COUNT: break;
    }
    return -1;
}

/* The table's entry for `name` (up to an '=', '_' read as '-'), or NULL. */
static const struct option_def *option_find(const char *name)
{
    size_t n = strcspn(name, "=");
    for (size_t k = 0; k < sizeof options / sizeof options[0]; k++) {
        const char *d = options[k].name;
        size_t j = 0;
        while (j < n && d[j] == (name[j] == '_' ? '-' : name[j]))
            j++;
        if (j == n && d[j] == '\0')
            return &options[k];
    }
    return NULL;
}

int options_takes_value(const char *name)
{
    const struct option_def *d = option_find(name);
    return d != NULL && (d->arg & ARG_MASK) == ARG_REQUIRED;
}

/* --long[=value] at argv[*i]; advances *i past a separate value and marks
 * the option given. */
static int parse_long_option(struct amlrun_opts *o, int argc, char **argv,
                             int *i, unsigned char *given)
{
    const char *arg = argv[*i] + 2;
    const char *eq = strchr(arg, '=');
    char name[64];
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    if (n >= sizeof name) {
        msg("unknown option %s (see amlrun --help)", argv[*i]);
        return AMLRUN_EXIT_USAGE;
    }
    for (size_t k = 0; k < n; k++)
        name[k] = arg[k] == '_' ? '-' : arg[k];
    name[n] = '\0';
    const struct option_def *d = option_find(name);
    if (d == NULL) {
        msg("unknown option --%s (see amlrun --help)", name);
        return AMLRUN_EXIT_USAGE;
    }
    const char *val = eq ? eq + 1 : NULL;
    int kind = d->arg & ARG_MASK;
    if (kind == ARG_NONE && val) {
        msg("option --%s takes no value", name);
        return AMLRUN_EXIT_USAGE;
    }
    if (kind == ARG_REQUIRED && !val) {
        if (*i + 1 >= argc) {
            msg("option --%s needs a value", name);
            return AMLRUN_EXIT_USAGE;
        }
        val = argv[++*i];
    }
    given[d->id] = 1;
    char label[sizeof name + 4];
    snprintf(label, sizeof label, "--%s ", d->name);
    return apply(o, label, d->id, val);
}

/* Whether option `id` takes a value, as its entry in the one table says
 * (torchrun's -r and -t take theirs like --redirects and --tee). */
static int id_takes_value(enum opt_id id)
{
    for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
        if (options[k].id == id)
            return (options[k].arg & ARG_MASK) == ARG_REQUIRED;
    return 0;
}

/* -abc at argv[*i]; a short option with a value takes the rest of the
 * argument or the next one (-r3, -r 3), as argparse does. */
static int parse_short_options(struct amlrun_opts *o, int argc, char **argv,
                               int *i, unsigned char *given)
{
    const char *arg = argv[*i];
    for (const char *c = arg + 1; *c; c++) {
        size_t k;
        for (k = 0; k < sizeof short_options / sizeof short_options[0]; k++)
            if (short_options[k].c == *c)
                break;
        if (k == sizeof short_options / sizeof short_options[0]) {
            msg("unknown option -%c (see amlrun --help)", *c);
            return AMLRUN_EXIT_USAGE;
        }
        given[short_options[k].id] = 1;
        if (id_takes_value(short_options[k].id)) {
            const char *val = c[1] == '=' ? c + 2 : c[1] ? c + 1 : NULL;
            if (!val) {
                if (*i + 1 >= argc) {
                    msg("option -%c needs a value", *c);
                    return AMLRUN_EXIT_USAGE;
                }
                val = argv[++*i];
            }
            char label[8];
            snprintf(label, sizeof label, "-%c ", *c);
            return apply(o, label, short_options[k].id, val);
        }
        int rc = apply(o, "", short_options[k].id, NULL);
        if (rc >= 0)
            return rc;
    }
    return -1;
}

/*
 * torchrun's rule (argparse_util.py): PET_<NAME> is the default of each of
 * its options, so Kubeflow's PyTorchJob and TorchX can configure it without
 * flags; a flag on the command line wins.  A flag option's variable is an
 * integer, 0 meaning off.  A value is checked as the option's would be, and
 * a bad one is named by its variable.
 */
static int apply_pet_env(struct amlrun_opts *o, const unsigned char *given)
{
    for (size_t k = 0; k < sizeof options / sizeof options[0]; k++) {
        const struct option_def *d = &options[k];
        if (!(d->arg & PET) || given[d->id])
            continue;
        char var[64];
        size_t n = (size_t)snprintf(var, sizeof var, "PET_%s", d->name);
        for (size_t c = 4; c < n && c < sizeof var; c++)
            var[c] = var[c] == '-' ? '_' : (char)toupper((unsigned char)var[c]);
        const char *val = getenv(var);
        if (!val)
            continue;
        char label[sizeof var + 1];
        snprintf(label, sizeof label, "%s=", var);
        if (o->verbose)
            msg("%s%s: used as --%s (torchrun's variable)", label, val,
                d->name);
        if ((d->arg & ARG_MASK) == ARG_NONE) {
            char *end;
            errno = 0;
            long on = strtol(val, &end, 10);
            if (errno || end == val || *end)
                return bad_value(label, *val ? val : "''",
                                 "want 1 (on) or 0 (off)");
            if (!on)
                continue;
            val = NULL;
        }
        int rc = apply(o, label, d->id, val);
        if (rc >= 0)
            return rc;
    }
    return -1;
}

/* What depends on several options, once all are known. */
static void resolve(struct amlrun_opts *o)
{
    /* c10d's endpoint is the rendezvous's, not PyTorch's store. */
    if (o->owned_addr && !options_c10d(o)) {
        o->master_addr = o->owned_addr;
        if (o->endpoint_port > 0)
            o->master_port = o->endpoint_port;
    }
}

/* The port of a c10d endpoint that names none, as in torchrun. */
#define C10D_DEFAULT_PORT 29400

static int check_combinations(struct amlrun_opts *o)
{
    /* --run-path runs the file through runpy whatever else is said, as
     * torchrun's does. */
    if (o->module && o->no_python && !o->run_path) {
        msg("--module runs a Python module: it cannot go with --no-python");
        return AMLRUN_EXIT_USAGE;
    }
    if (o->standalone && o->nnodes > 1) {
        msg("--standalone is for one node, but --nnodes is %d", o->nnodes);
        return AMLRUN_EXIT_USAGE;
    }
    if (o->nnodes_min != o->nnodes && !options_c10d(o)) {
        msg("--nnodes %d:%d: a range of nodes needs the c10d rendezvous "
            "(--rdzv-backend c10d --rdzv-endpoint HOST:PORT)", o->nnodes_min,
            o->nnodes);
        return AMLRUN_EXIT_USAGE;
    }
    if (options_c10d(o) && !o->owned_addr) {
        msg("--rdzv-backend c10d: give --rdzv-endpoint HOST[:PORT], where "
            "the nodes meet (one of them listens there)");
        return AMLRUN_EXIT_USAGE;
    }
    if (options_c10d(o) && o->endpoint_port <= 0)
        o->endpoint_port = C10D_DEFAULT_PORT; /* torchrun's */
    if (options_c10d(o) && o->node_rank >= 0) {
        msg("--rdzv-backend c10d assigns the node ranks: leave out "
            "--node-rank (or use --rdzv-backend static)");
        return AMLRUN_EXIT_USAGE;
    }
    if (o->log_layout == LOG_LAYOUT_AMLRUN && std_map_any(&o->redirects)) {
        msg("-r/--redirects takes streams off the console into torchrun's "
            "log layout: it cannot go with --log-layout amlrun");
        return AMLRUN_EXIT_USAGE;
    }
    if (o->mode == MODE_PROCESS && o->nproc_kind != NPROC_UNSET) {
        msg("--mode process runs one process in place: it cannot go with "
            "--nproc-per-node");
        return AMLRUN_EXIT_USAGE;
    }
    return -1;
}

int options_parse(int argc, char **argv, struct amlrun_opts *o)
{
    memset(o, 0, sizeof *o);
    o->node_rank = -1;
    o->term_timeout = 30.0;
    o->run_id = "none";
    o->role = "default";
    o->rdzv_backend = "static";
    /* torchrun runs scripts under $PYTHON_EXEC, else its own Python. */
    o->python = getenv("AMLRUN_PYTHON");
    if (!o->python || !*o->python)
        o->python = getenv("PYTHON_EXEC");
    if (!o->python || !*o->python)
        o->python = "python3";
    /* A copy of the seed's launch.py (a link named launch or launch.py)
     * behaves as torch.distributed.launch did. */
    const char *base = argc > 0 ? strrchr(argv[0], '/') : NULL;
    base = base ? base + 1 : (argc > 0 ? argv[0] : "");
    if (strcmp(base, "launch") == 0 || strcmp(base, "launch.py") == 0)
        o->legacy = 1;

    unsigned char given[O_COUNT] = {0};
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break;
        if (a[1] == '-')
            rc = parse_long_option(o, argc, argv, &i, given);
        else
            rc = parse_short_options(o, argc, argv, &i, given);
        if (rc >= 0)
            return rc;
    }
    o->cmd = argv + i;
    o->ncmd = argc - i;
    int rc = apply_pet_env(o, given);
    if (rc >= 0)
        return rc;
    resolve(o);
    rc = check_combinations(o);
    if (rc >= 0)
        return rc;
    if (o->ncmd == 0 && !o->topo && !headnode_wanted(&o->head)) {
        msg("no command given (see amlrun --help)");
        return AMLRUN_EXIT_USAGE;
    }
    return -1;
}

int options_c10d(const struct amlrun_opts *o)
{
    return !o->standalone && strcmp(o->rdzv_backend, "c10d") == 0;
}

int options_torchrun_layout(const struct amlrun_opts *o)
{
    return o->log_layout == LOG_LAYOUT_TORCHRUN ||
           (o->log_layout == LOG_LAYOUT_AUTO && o->redirects_given);
}

void options_free(struct amlrun_opts *o)
{
    std_map_free(&o->redirects);
    std_map_free(&o->tee);
    free(o->ranks.r);
    free(o->local_ranks.r);
    free(o->owned_addr);
    o->ranks.r = o->local_ranks.r = NULL;
    o->owned_addr = NULL;
}
