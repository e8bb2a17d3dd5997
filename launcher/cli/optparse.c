/* amlrun's option parser (see optparse.h): the command line and torchrun's
 * PET_ variables, read through the option table (opttable.h), one spelling
 * per option, '_' == '-'; each value goes to its handler (optapply.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/optapply.h"
#include "cli/options.h"
#include "cli/optparse.h"
#include "cli/opttable.h"
#include "cli/optsuggest.h"
#include "cli/usage.h"
#include "output/msg.h"

/* An option the table lacks, or a prefix of several of its options (as
 * argparse says it: "ambiguous option: --ma could match ..."). */
static int unknown_long_option(const char *word, const char *name)
{
    const struct option_def *cand[8];
    size_t n = opttable_candidates(name, cand, 8);
    const char *whose, *ours = optsuggest(word, &whose);
    if (n > 1) {
        char list[256] = "";
        for (size_t k = 0, len = 0; k < n && k < 8 && len < sizeof list; k++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s--%s",
                                    k ? ", " : "", cand[k]->name);
        if (whose)
            msg("ambiguous option: --%s could match %s%s (%s --%s is "
                "amlrun's --%s)", name, list, n > 8 ? ", ..." : "", whose,
                name, ours);
        else
            msg("ambiguous option: --%s could match %s%s", name, list,
                n > 8 ? ", ..." : "");
    } else if (ours && whose) {
        msg("unknown option --%s: %s --%s is amlrun's --%s (see amlrun "
            "--help)", name, whose, name, ours);
    } else if (ours) {
        msg("unknown option --%s; did you mean --%s? (see amlrun --help)",
            name, ours);
    } else {
        msg("unknown option --%s (see amlrun --help)", name);
    }
    return AMLRUN_EXIT_USAGE;
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
    const struct option_def *d = opttable_find(name);
    if (d == NULL)
        return unknown_long_option(argv[*i], name);
    const char *val = eq ? eq + 1 : NULL;
    int kind = d->arg & ARG_MASK;
    if (kind == ARG_NONE && val) {
        msg("option --%s takes no value", d->name);
        return AMLRUN_EXIT_USAGE;
    }
    if (kind == ARG_REQUIRED && !val) {
        if (*i + 1 >= argc) {
            msg("option --%s needs a value", d->name);
            return AMLRUN_EXIT_USAGE;
        }
        val = argv[++*i];
    }
    given[d->id] = 1;
    /* Messages name the option as typed (--node_rank, a prefix). */
    char label[sizeof name + 4];
    snprintf(label, sizeof label, "--%.*s ", (int)n, arg);
    return options_apply(o, label, d->id, val);
}

/* -abc at argv[*i]; a short option with a value takes the rest of the
 * argument or the next one (-r3, -r 3), as argparse does. */
static int parse_short_options(struct amlrun_opts *o, int argc, char **argv,
                               int *i, unsigned char *given)
{
    const char *arg = argv[*i];
    for (const char *c = arg + 1; *c; c++) {
        const struct option_def *d = opttable_short(*c);
        const char *whose, *ours;
        if (d == NULL && (ours = optsuggest(arg, &whose)) != NULL) {
            msg("unknown option %s: %s %s is amlrun's --%s (see amlrun "
                "--help)", arg, whose, arg, ours);
            return AMLRUN_EXIT_USAGE;
        }
        if (d == NULL) {
            msg("unknown option -%c (see amlrun --help)", *c);
            return AMLRUN_EXIT_USAGE;
        }
        given[d->id] = 1;
        /* torchrun's -r and -t take theirs like --redirects and --tee. */
        if ((d->arg & ARG_MASK) == ARG_REQUIRED) {
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
            return options_apply(o, label, d->id, val);
        }
        int rc = options_apply(o, "", d->id, NULL);
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
    for (const struct option_def *d = opttable; d->name; d++) {
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
            if (errno || end == val || *end) {
                msg("%s%s: want 1 (on) or 0 (off) (see amlrun --help)", label,
                    *val ? val : "''");
                return AMLRUN_EXIT_USAGE;
            }
            if (!on)
                continue;
            val = NULL;
        }
        int rc = options_apply(o, label, d->id, val);
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
    if (o->bind.output && !o->topo && !o->dry_run) {
        msg("--output %s draws the plan of --topo or --dry-run: give one "
            "of them", o->bind.output);
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
    int listed = o->owned_addr && strchr(o->owned_addr, ',');
    int c10d = options_c10d(o) && strcmp(o->rdzv_backend, "c10d") == 0;
    if (options_c10d(o) && !o->owned_addr) {
        msg(c10d ? "--rdzv-backend c10d: give --rdzv-endpoint HOST[:PORT], "
                   "where the nodes meet (one of them listens there)"
                 : "--rdzv-backend %s: give --rdzv-endpoint HOST:PORT[,...], "
                   "where the nodes meet", o->rdzv_backend);
        return AMLRUN_EXIT_USAGE;
    }
    if (listed && (!options_c10d(o) || c10d)) {
        msg("--rdzv-endpoint %s: a list of members is --rdzv-backend "
            "etcd's; %s takes HOST[:PORT]", o->owned_addr,
            options_c10d(o) ? "c10d" : "the static backend");
        return AMLRUN_EXIT_USAGE;
    }
    /* torchrun 2.x's localhost:0: the agent takes a free port, which the
     * other nodes could never learn. */
    if (o->endpoint_any_port && o->nnodes > 1) {
        char n[32];
        snprintf(n, sizeof n, o->nnodes_min != o->nnodes ? "%d:%d" : "%d",
                 o->nnodes_min, o->nnodes);
        msg("--rdzv-endpoint %s:0: port 0 (a free port, picked here) is for "
            "one node, and --nnodes is %s: give the port the nodes meet at",
            o->owned_addr, n);
        return AMLRUN_EXIT_USAGE;
    }
    if (c10d && o->endpoint_port <= 0 && !o->endpoint_any_port)
        o->endpoint_port = C10D_DEFAULT_PORT; /* torchrun's */
    /* torchrun 1.13 and 2.x pass --node_rank to the static rendezvous only
     * (run.py: rdzv_configs["rank"] with "static"), and the tutorials'
     * c10d lines carry one: ignored as there, but said. */
    if (options_c10d(o) && o->node_rank >= 0) {
        if (!o->quiet)
            msg("%s%d: ignored: --rdzv-backend c10d assigns the node ranks, "
                "as under torchrun (a node rank is --rdzv-backend "
                "static's)", o->node_rank_by, o->node_rank);
        o->node_rank = -1;
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

/* --status and --stacks ask a running job: one of them, and at most one
 * JOB after it. */
static int query_check(const struct amlrun_opts *o)
{
    const char *mode = o->status ? "--status" : "--stacks";
    if (o->status && o->stacks) {
        msg("--status and --stacks: give one of them");
        return AMLRUN_EXIT_USAGE;
    }
    if (o->ncmd > 1) {
        msg("%s [JOB]: one job at most (a run id or an amlrun pid), not a "
            "command", mode);
        return AMLRUN_EXIT_USAGE;
    }
    if (o->ncmd == 1 && !*o->cmd[0]) {
        msg("%s '': want a run id or an amlrun pid", mode);
        return AMLRUN_EXIT_USAGE;
    }
    return -1;
}

int options_parse(int argc, char **argv, struct amlrun_opts *o)
{
    options_init(o, argc > 0 ? argv[0] : "");
    unsigned char given[O_COUNT] = {0};
    /* Not an option of the table: the build's generator of the shell
     * completions reads the table through it (scripts/completion.sh). */
    if (argc == 2 && strcmp(argv[1], "--complete-spec") == 0) {
        opttable_print_spec(stdout);
        return 0;
    }
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
    if (o->version) {
        version_print(stdout, o->verbose ? o->python : NULL);
        return 0;
    }
    if (o->make_secret) {
        if (o->ncmd == 0)
            return -1;
        msg("--make-secret takes no command");
        return AMLRUN_EXIT_USAGE;
    }
    int rc = apply_pet_env(o, given);
    if (rc >= 0)
        return rc;
    const char *hang = getenv("AMLRUN_HANG_TIMEOUT");
    if (!given[O_HANG_TIMEOUT] && hang &&
        (rc = options_apply(o, "AMLRUN_HANG_TIMEOUT=", O_HANG_TIMEOUT,
                            hang)) >= 0)
        return rc;
    resolve(o);
    rc = check_combinations(o);
    if (rc >= 0)
        return rc;
    if (o->status || o->stacks)
        return query_check(o);
    if (o->ncmd == 0 && !o->topo && !headnode_wanted(&o->head)) {
        msg("no command given (see amlrun --help)");
        return AMLRUN_EXIT_USAGE;
    }
    return -1;
}
