/*
 * Head-node mode: turn `amlrun --hostfile F [opts] CMD...` into
 *   mpirun -np N --host a:1,b:1 --npernode 1 --bind-to none -x VAR... \
 *       amlrun [opts] --nnodes N CMD...
 * (or `srun --ntasks-per-node 1 ...` under Slurm) and exec it, so that the
 * launcher we hand over to owns the job: its exit status is the job's.
 *
 * The master address is left to each node's libamldist (PMIx's host of rank
 * 0, Slurm's host of task 0) unless the user gave one: mpirun puts
 * rank 0 on its own node when that is in the list, and srun orders nodes
 * its own way, so "the first host listed" may not be where rank 0 runs.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/hostfile.h"
#include "cli/opttable.h"
#include "head/headjson.h"
#include "head/headnode.h"
#include "output/msg.h"

extern char **environ;

/* Variables the per-node amlrun and its workers need from the head node's
 * environment: mpirun starts remote daemons with a login environment, not
 * ours, and gives the rest to its own node's ranks alone (a MASTER_ADDR
 * there and not elsewhere would split the job: lib/sources/ompi_env.c).
 * srun passes everything already. */
static const char *const export_names[] = {
    "PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
    "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT",
};
static const char *const export_prefixes[] = {
    "AMLRUN_", "AMLDIST_", "NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "GLOO_",
    "UCX_", "FI_",
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* A growing NULL-terminated argv; strings it owns are kept in `owned`. */
struct argv_buf {
    char **v;
    int n, cap;
    char **owned;
    int nowned, capowned;
    int oom;
};

static void push(struct argv_buf *b, const char *s)
{
    if (b->oom)
        return;
    if (b->n + 2 > b->cap) {
        int cap = b->cap ? 2 * b->cap : 32;
        char **v = realloc(b->v, (size_t)cap * sizeof *v);
        if (!v) {
            b->oom = 1;
            return;
        }
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = (char *)s;
    b->v[b->n] = NULL;
}

/* Push a formatted string that the buffer owns. */
static void pushf(struct argv_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void pushf(struct argv_buf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    if (b->nowned == b->capowned) {
        int cap = b->capowned ? 2 * b->capowned : 16;
        char **o = realloc(b->owned, (size_t)cap * sizeof *o);
        if (!o) {
            b->oom = 1;
            return;
        }
        b->owned = o;
        b->capowned = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int k = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (k < 0) {
        b->oom = 1;
        return;
    }
    b->owned[b->nowned++] = s;
    push(b, s);
}

static void argv_free(struct argv_buf *b)
{
    for (int i = 0; i < b->nowned; i++)
        free(b->owned[i]);
    free(b->owned);
    free(b->v);
}

/* "--master_addr=x" (or "--master_a=x") names master-addr: the option
 * table reads it as the parser does, prefixes and all. */
static int opt_is(const char *arg, const char *name)
{
    const struct option_def *d = opttable_find(arg + 2);
    return d != NULL && strcmp(d->name, name) == 0;
}

/* "--name value", "-r 3": the option table says which options take one; in
 * a cluster of short ones (-vr 3) the first that does takes the rest. */
static int takes_value(const char *arg)
{
    if (arg[1] == '-')
        return strchr(arg, '=') == NULL && opttable_takes_value(arg + 2);
    for (const char *c = arg + 1; *c; c++) {
        const struct option_def *d = opttable_short(*c);
        if (d != NULL && (d->arg & ARG_MASK) == ARG_REQUIRED)
            return c[1] == '\0';
    }
    return 0;
}

/* What the scan of amlrun's own options found. */
struct scan {
    int cmd;          /* index of the command's first word */
    int dashdash;     /* "--" came before it */
    int has_nproc, has_topo;
    const char *nnodes, *node_rank;
    int *keep;        /* argv[i] goes to the per-node amlrun */
};

static int scan_argv(int argc, char *const argv[], struct scan *s)
{
    memset(s, 0, sizeof *s);
    s->keep = calloc((size_t)(argc > 0 ? argc : 1), sizeof *s->keep);
    if (!s->keep)
        return -1;
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            s->dashdash = 1;
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break;
        int has_next = takes_value(a) && i + 1 < argc;
        const char *eq = strchr(a, '=');
        const char *val = eq ? eq + 1 : has_next ? argv[i + 1] : NULL;
        /* Options we consume (or set ourselves) are not passed on. */
        const char **slot = NULL;
        int drop = 0;
        if (a[1] != '-')
            drop = 0; /* short options are all passed on */
        else if (opt_is(a, "hostfile") || opt_is(a, "hosts") ||
                 opt_is(a, "launcher") || opt_is(a, "dry-run"))
            drop = 1;
        else if (opt_is(a, "nnodes"))
            slot = &s->nnodes;
        else if (opt_is(a, "node-rank"))
            slot = &s->node_rank;
        else if (opt_is(a, "nproc-per-node"))
            s->has_nproc = 1;
        else if (opt_is(a, "topo"))
            s->has_topo = 1;
        if (slot) {
            *slot = val;
            drop = 1;
        }
        s->keep[i] = !drop;
        if (has_next) {
            i++;
            s->keep[i] = !drop;
        }
    }
    s->cmd = i;
    return 0;
}

static int exported(const char *entry, size_t namelen)
{
    for (size_t i = 0; i < COUNT(export_names); i++)
        if (strlen(export_names[i]) == namelen &&
            memcmp(entry, export_names[i], namelen) == 0)
            return 1;
    for (size_t i = 0; i < COUNT(export_prefixes); i++) {
        size_t k = strlen(export_prefixes[i]);
        if (namelen > k && memcmp(entry, export_prefixes[i], k) == 0)
            return 1;
    }
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* -x NAME for every variable to forward, sorted so that dry runs compare. */
static void push_exports(struct argv_buf *b)
{
    size_t n = 0;
    for (char **e = environ; *e; e++)
        n++;
    char **names = calloc(n + 1, sizeof *names);
    if (!names) {
        b->oom = 1;
        return;
    }
    size_t k = 0;
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (eq && eq > *e && exported(*e, (size_t)(eq - *e)))
            names[k++] = strndup(*e, (size_t)(eq - *e));
        if (k && !names[k - 1]) {
            b->oom = 1;
            k--;
            break;
        }
    }
    qsort(names, k, sizeof *names, cmp_str);
    for (size_t i = 0; i < k; i++) {
        if (i == 0 || strcmp(names[i], names[i - 1]) != 0) {
            push(b, "-x");
            pushf(b, "%s", names[i]);
        }
    }
    for (size_t i = 0; i < k; i++)
        free(names[i]);
    free(names);
}

/* Print argv as one shell command line that runs it unchanged. */
static void print_command(char *const v[])
{
    for (int i = 0; v[i]; i++) {
        const char *s = v[i];
        int plain = *s != '\0';
        for (const char *p = s; *p && plain; p++)
            plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                           "0123456789_@%+=:,./-", *p) != NULL;
        fputs(i ? " " : "", stdout);
        if (plain) {
            fputs(s, stdout);
            continue;
        }
        putchar('\'');
        for (const char *p = s; *p; p++) {
            if (*p == '\'')
                fputs("'\\''", stdout);
            else
                putchar(*p);
        }
        putchar('\'');
    }
    putchar('\n');
    fflush(stdout);
}

/* "N" or torchrun's "N:N" (elastic ranges are not supported); -1 if bad. */
static int parse_nnodes(const char *s)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    long n = strtol(s, &end, 10);
    if (*end == ':') {
        char *end2;
        const char *hi = end + 1;
        if (*hi < '0' || *hi > '9' || strtol(hi, &end2, 10) != n || *end2)
            return -1;
        end = end2;
    }
    if (errno || *end || n < 1 || n > 1000000)
        return -1;
    return (int)n;
}

/* "a<suffix>,b<suffix>,...": srun's --nodelist, mpirun's --host. */
static char *join_hosts(const struct hostlist *hl, const char *suffix)
{
    size_t len = 1, slen = strlen(suffix);
    for (int i = 0; i < hl->n; i++)
        len += strlen(hl->h[i].name) + slen + 1;
    char *list = malloc(len);
    if (!list)
        return NULL;
    /* Appended at the end kept in p: strcat would scan the list each time,
     * quadratic in the hosts. */
    char *p = list;
    for (int i = 0; i < hl->n; i++) {
        if (i)
            *p++ = ',';
        size_t nlen = strlen(hl->h[i].name);
        memcpy(p, hl->h[i].name, nlen);
        memcpy(p + nlen, suffix, slen);
        p += nlen + slen;
    }
    *p = '\0';
    return list;
}

/* Everything headnode_run decides before it builds the command. */
struct plan {
    int slurm;
    struct hostlist hosts;
    int nnodes;
    int slots;               /* > 0: pass --nproc-per-node */
    char self[PATH_MAX];
};

static int make_plan(const struct headnode_opts *o, const char *self,
                     const struct scan *s, struct plan *p)
{
    char err[1024];
    const char *slurm_job = getenv("SLURM_JOB_ID");
    p->slurm = o->launcher ? strcmp(o->launcher, "slurm") == 0
                           : slurm_job && *slurm_job;
    if (o->hostfile && o->hosts) {
        msg("--hostfile and --hosts both name the hosts: give one");
        return AMLRUN_EXIT_USAGE;
    }
    if ((o->hostfile ? hostfile_read(o->hostfile, &p->hosts, err, sizeof err)
         : o->hosts  ? hosts_parse(o->hosts, &p->hosts, err, sizeof err)
                     : 0) < 0) {
        msg("%s", err);
        return AMLRUN_EXIT_USAGE;
    }
    if (p->hosts.n == 0 && !p->slurm) {
        msg("--launcher mpirun needs the hosts: give --hostfile FILE or "
            "--hosts a,b");
        return AMLRUN_EXIT_USAGE;
    }
    if (!s->has_nproc) {
        p->slots = hostlist_common_slots(&p->hosts,
                                         o->hostfile ? o->hostfile : "--hosts",
                                         err, sizeof err);
        if (p->slots < 0) {
            msg("%s", err);
            return AMLRUN_EXIT_USAGE;
        }
    }
    if (s->node_rank) {
        msg("--node-rank %s: in head-node mode each host's node rank comes "
            "from %s", s->node_rank, p->slurm ? "srun" : "mpirun");
        return AMLRUN_EXIT_USAGE;
    }
    int given = s->nnodes ? parse_nnodes(s->nnodes) : 0;
    if (given < 0) {
        msg("--nnodes %s: want N or N:N, N from 1", s->nnodes);
        return AMLRUN_EXIT_USAGE;
    }
    p->nnodes = p->hosts.n;
    if (p->nnodes == 0) {
        /* Slurm without a host list: the allocation's nodes. */
        const char *v = getenv("SLURM_JOB_NUM_NODES");
        if (!v || !*v)
            v = getenv("SLURM_NNODES");
        p->nnodes = given ? given : v ? parse_nnodes(v) : -1;
        if (p->nnodes <= 0) {
            msg("--launcher slurm: how many nodes? Not inside an allocation "
                "(SLURM_JOB_NUM_NODES unset or bad): give --nnodes, --hosts "
                "or --hostfile");
            return AMLRUN_EXIT_USAGE;
        }
    } else if (given) {
        if (given != p->nnodes) {
            msg("--nnodes %s, but %s names %d host%s", s->nnodes,
                o->hostfile ? o->hostfile : "--hosts", p->nnodes,
                p->nnodes == 1 ? "" : "s");
            return AMLRUN_EXIT_USAGE;
        }
    }
    /* The remote side runs this same amlrun: by absolute path when we were
     * started by one (its working directory may differ), else through PATH. */
    if (!strchr(self, '/') || !realpath(self, p->self))
        snprintf(p->self, sizeof p->self, "%s", self);
    return -1;
}

static void build_command(const struct plan *p, const struct scan *s,
                          int argc, char *const argv[], struct argv_buf *b)
{
    if (p->slurm) {
        push(b, "srun");
        pushf(b, "--nodes=%d", p->nnodes);
        pushf(b, "--ntasks=%d", p->nnodes);
        push(b, "--ntasks-per-node=1");
        if (p->hosts.n) {
            char *list = join_hosts(&p->hosts, "");
            if (!list) {
                b->oom = 1;
                return;
            }
            pushf(b, "--nodelist=%s", list);
            free(list);
        }
        /* amlrun binds its workers itself; one failed node ends the step. */
        push(b, "--cpu-bind=none");
        push(b, "--kill-on-bad-exit=1");
    } else {
        push(b, "mpirun");
        push(b, "-np");
        pushf(b, "%d", p->nnodes);
        char *list = join_hosts(&p->hosts, ":1");
        if (!list) {
            b->oom = 1;
            return;
        }
        push(b, "--host");
        pushf(b, "%s", list);
        free(list);
        push(b, "--npernode");
        push(b, "1");
        /* Otherwise mpirun pins amlrun, and all its workers, to one core. */
        push(b, "--bind-to");
        push(b, "none");
        push_exports(b);
    }
    push(b, p->self);
    for (int i = 1; i < s->cmd; i++)
        if (s->keep[i])
            push(b, argv[i]);
    push(b, "--nnodes");
    pushf(b, "%d", p->nnodes);
    if (p->slots > 0) {
        push(b, "--nproc-per-node");
        pushf(b, "%d", p->slots);
    }
    if (s->dashdash)
        push(b, "--");
    for (int i = s->cmd; i < argc; i++)
        push(b, argv[i]);
}

int headnode_run(const struct headnode_opts *o, const char *self, int argc,
                 char *const argv[])
{
    struct scan s;
    struct plan p;
    struct argv_buf b = {0};
    memset(&p, 0, sizeof p);
    if (scan_argv(argc, argv, &s) < 0) {
        msg_errno(ENOMEM, "head-node mode");
        return AMLRUN_EXIT_SYSTEM;
    }
    int rc = make_plan(o, self, &s, &p);
    if (rc < 0 && s.cmd >= argc && !s.has_topo) {
        msg("no command given (see amlrun --help)");
        rc = AMLRUN_EXIT_USAGE;
    }
    if (rc < 0) {
        build_command(&p, &s, argc, argv, &b);
        if (b.oom) {
            msg_errno(ENOMEM, "head-node mode");
            rc = AMLRUN_EXIT_SYSTEM;
        }
    }
    if (rc < 0 && o->dry_run == OPT_JSON) {
        rc = headnode_print_json(p.slurm ? "srun" : "mpirun", &p.hosts,
                                 p.slots, b.v) < 0 ? AMLRUN_EXIT_SYSTEM : 0;
    } else if (rc < 0 && o->dry_run) {
        print_command(b.v);
        rc = 0;
    }
    if (rc < 0) {
        fflush(NULL);
        execvp(b.v[0], b.v);
        int err = errno;
        msg_errno(err, "cannot run %s", b.v[0]);
        rc = err == ENOENT ? AMLRUN_EXIT_NOTFOUND : AMLRUN_EXIT_NOEXEC;
    }
    argv_free(&b);
    hostlist_free(&p.hosts);
    free(s.keep);
    return rc;
}
