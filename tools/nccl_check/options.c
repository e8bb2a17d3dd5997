/*
 * amldist-nccl-check's command line: the options, their checks, the usage,
 * and the published baselines that --baseline names.
 */
#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nccl_check/check.h"

/*
 * Out-of-place busbw (GB/s) of nccl-tests' all_reduce_perf, float sum, 32 MiB
 * .. 8 GiB, as published with azureml-examples cli/jobs/single-step/gpu_perf
 * and quoted in the Azure ML guide "Building and validating a training
 * environment" (shared/seeds/002_17327a56c0a52b7f.txt): 2 nodes of 8 GPUs,
 * 16 ranks.
 */
static const struct baseline baselines[] = {
    {"ND40rs_v2", "Standard_ND40rs_v2, 8x V100 32GB per node", 2, 16,
     {14.32, 15.07, 15.67, 15.99, 16.15, 16.23, 16.28, 16.30, 16.31}},
    {"ND96amsr_A100_v4", "Standard_ND96amsr_A100_v4, 8x A100 80GB per node",
     2, 16,
     {105.97, 139.09, 154.43, 167.99, 178.74, 182.36, 185.27, 187.97,
      187.91}},
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS] "
            "[-w WARMUP]\n"
            "       [-c 0|1] [-C COLLECTIVE|all] [-d TYPE|all] [-o sum] "
            "[-T SECONDS]\n"
            "       [--expect-busbw GBPS | --baseline NAME [--tolerance PCT]]\n"
            "       [--bootstrap-timeout SECONDS] [--list-baselines] [-h]\n"
            "Collectives: all_reduce (default), all_gather, reduce_scatter, "
            "broadcast,\n  reduce, alltoall.  Types: float (default), half, "
            "bfloat16, double, int8,\n  uint8, int32, uint32, int64, uint64.\n"
            "Run under a launcher (amlrun, mpirun, torchrun, srun), one rank "
            "per GPU.\n"
            "Exit: 0 ran (PASS), 1 FAIL or wrong results, 2 usage, 3 no "
            "visible GPU, 4 other error.\n",
            prog);
}

int bad_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    usage(stderr);
    return EXIT_USAGE;
}

/* "32M", "8G", "1048576": bytes, binary suffixes as in nccl-tests. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10), mul = 1;
    if (!isdigit((unsigned char)*s))
        return -1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1ull << 10; end++; break;
    case 'M': mul = 1ull << 20; end++; break;
    case 'G': mul = 1ull << 30; end++; break;
    case 'T': mul = 1ull << 40; end++; break;
    }
    if (*end || v == 0 || v > (1ull << 50) / mul)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

static int parse_int(const char *s, int min, int max, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!isdigit((unsigned char)*s) || *end || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

static const struct baseline *find_baseline(const char *name)
{
    if (!strncasecmp(name, "Standard_", 9))
        name += 9;
    for (size_t i = 0; i < sizeof baselines / sizeof *baselines; i++)
        if (!strcasecmp(name, baselines[i].name))
            return &baselines[i];
    return NULL;
}

static void list_baselines(void)
{
    printf("# nccl-tests all_reduce_perf, float sum, out-of-place busbw "
           "(GB/s), from\n# azureml-examples cli/jobs/single-step/gpu_perf "
           "(Azure ML guide \"Building and\n# validating a training "
           "environment\")\n");
    for (size_t i = 0; i < sizeof baselines / sizeof *baselines; i++) {
        const struct baseline *b = &baselines[i];
        printf("%s: %s, %d nodes, %d ranks\n", b->name, b->what, b->nodes,
               b->ranks);
        for (int k = 0; k < NBASE; k++)
            printf("  %12zu  %7.2f\n", BASE_MIN << k, b->busbw[k]);
    }
}

static int parse_collective(const char *arg, opts_t *o)
{
    o->ncoll = 0;
    if (!strcmp(arg, "all")) {
        for (int i = 0; i < ncolls; i++)
            o->coll[o->ncoll++] = &colls[i];
        return 0;
    }
    /* nccl-tests' program names work too: all_reduce_perf. */
    char name[32];
    snprintf(name, sizeof name, "%s", arg);
    char *perf = strstr(name, "_perf");
    if (perf && perf[5] == '\0')
        *perf = '\0';
    if (!(o->coll[0] = coll_by_name(name)))
        return -1;
    o->ncoll = 1;
    return 0;
}

static int parse_types(const char *arg, opts_t *o)
{
    o->ntype = 0;
    if (!strcmp(arg, "all")) {
        for (int i = 0; i < ndtypes; i++)
            o->type[o->ntype++] = &dtypes[i];
        return 0;
    }
    if (!(o->type[0] = dtype_by_name(arg)))
        return -1;
    o->ntype = 1;
    return 0;
}

/* The options that take an integer, where each goes and what it must be. */
static const struct int_option {
    int c, min, max;
    size_t at; /* offsetof(opts_t, field) */
    const char *name, *expected;
} int_options[] = {
    {'f', 2, 1024, offsetof(opts_t, factor), "-f", "a factor 2 .. 1024"},
    {'n', 1, 1000000, offsetof(opts_t, iters), "-n", "iterations >= 1"},
    {'w', 0, 1000000, offsetof(opts_t, warmup), "-w", "iterations >= 0"},
    {'c', 0, 1, offsetof(opts_t, check), "-c", "0 or 1"},
    {'T', 1, 86400, offsetof(opts_t, timeout_s), "-T", "seconds 1 .. 86400"},
    {'S', 1, 86400, offsetof(opts_t, bootstrap_s), "--bootstrap-timeout",
     "seconds"},
};

/* Option c of int_options into o: 0, EXIT_USAGE, or -1 when c is none. */
static int take_int(int c, const char *arg, opts_t *o)
{
    for (size_t i = 0; i < sizeof int_options / sizeof *int_options; i++) {
        const struct int_option *t = &int_options[i];
        if (t->c != c)
            continue;
        if (parse_int(arg, t->min, t->max, (int *)((char *)o + t->at)))
            return bad_usage("%s %s: expected %s", t->name, arg, t->expected);
        return 0;
    }
    return -1;
}

/* One option from getopt_long into o (got_b, got_e: -b, -e given): 0, or
 * the exit status of a usage error.  -h and --list-baselines exit here. */
static int take_option(int c, const char *arg, opts_t *o, int *got_b,
                       int *got_e)
{
    char *end;
    switch (c) {
    case 'b':
        *got_b = 1;
        return parse_size(arg, &o->minbytes)
                   ? bad_usage("-b %s: expected a size such as 32M", arg)
                   : 0;
    case 'e':
        *got_e = 1;
        return parse_size(arg, &o->maxbytes)
                   ? bad_usage("-e %s: expected a size such as 8G", arg)
                   : 0;
    case 'd':
        return parse_types(arg, o)
                   ? bad_usage("-d %s: unknown type (float, half, bfloat16, "
                               "double, int8, uint8, int32, uint32, int64, "
                               "uint64, all)", arg)
                   : 0;
    case 'o':
        return strcmp(arg, "sum")
                   ? bad_usage("-o %s: only sum is measured", arg) : 0;
    case 'C':
        return parse_collective(arg, o)
                   ? bad_usage("-C %s: unknown collective (all_reduce, "
                               "all_gather, reduce_scatter, broadcast, "
                               "reduce, alltoall, all)", arg)
                   : 0;
    case 'E':
        o->expect = strtod(arg, &end);
        if (!isdigit((unsigned char)*arg) || *end || !(o->expect > 0))
            return bad_usage("--expect-busbw %s: expected GB/s > 0", arg);
        return 0;
    case 'B':
        return (o->base = find_baseline(arg)) == NULL
                   ? bad_usage("--baseline %s: unknown (see "
                               "--list-baselines)", arg)
                   : 0;
    case 't':
        o->tolerance = strtod(arg, &end);
        if (!isdigit((unsigned char)*arg) || *end ||
            !(o->tolerance >= 0 && o->tolerance < 100))
            return bad_usage("--tolerance %s: expected a percentage "
                             "0 .. 99", arg);
        return 0;
    case 'L':
        list_baselines();
        exit(EXIT_PASS);
    case 'h':
        usage(stdout);
        exit(EXIT_PASS);
    }
    int rc = take_int(c, arg, o);
    if (rc != -1)
        return rc;
    usage(stderr); /* getopt_long's '?': it said why */
    return EXIT_USAGE;
}

/* The options together, once all are read: -1, or the exit status of a
 * usage error. */
static int check_options(opts_t *o, int got_b, int got_e)
{
    /* One bound given: the other follows it rather than contradict it. */
    if (got_e && !got_b && o->minbytes > o->maxbytes)
        o->minbytes = o->maxbytes;
    if (got_b && !got_e && o->maxbytes < o->minbytes)
        o->maxbytes = o->minbytes;
    if (o->minbytes > o->maxbytes)
        return bad_usage("-b larger than -e");
    if (o->expect > 0 && o->base)
        return bad_usage("--expect-busbw and --baseline exclude each other");
    if (o->base && (o->ncoll != 1 || strcmp(o->coll[0]->name, "all_reduce") ||
                    o->ntype != 1 || strcmp(o->type[0]->name, "float")))
        return bad_usage("--baseline %s: the baselines are all_reduce of "
                         "float; measure -C all_reduce -d float",
                         o->base->name);
    if (o->base && o->maxbytes < BASE_MIN)
        return bad_usage("--baseline %s: its figures start at %zu bytes; "
                         "-e %zu measures nothing it can judge",
                         o->base->name, BASE_MIN, o->maxbytes);
    return -1;
}

int parse_args(int argc, char **argv, opts_t *o)
{
    static const struct option longs[] = {
        {"minbytes", 1, 0, 'b'},      {"maxbytes", 1, 0, 'e'},
        {"stepfactor", 1, 0, 'f'},    {"iters", 1, 0, 'n'},
        {"warmup_iters", 1, 0, 'w'},  {"check", 1, 0, 'c'},
        {"datatype", 1, 0, 'd'},      {"op", 1, 0, 'o'},
        {"collective", 1, 0, 'C'},    {"timeout", 1, 0, 'T'},
        {"expect-busbw", 1, 0, 'E'},  {"baseline", 1, 0, 'B'},
        {"tolerance", 1, 0, 't'},     {"bootstrap-timeout", 1, 0, 'S'},
        {"list-baselines", 0, 0, 'L'}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    int c, rc, got_b = 0, got_e = 0;
    /* nccl-tests' defaults: 32 MiB, one size. */
    *o = (opts_t){.minbytes = BASE_MIN, .maxbytes = BASE_MIN, .factor = 2,
                  .iters = 20, .warmup = 5, .check = 1, .tolerance = 10,
                  .timeout_s = 300, .coll = {&colls[0]}, .ncoll = 1,
                  .type = {dtype_by_name("float")}, .ntype = 1};
    while ((c = getopt_long(argc, argv, "b:e:f:n:w:c:d:o:C:T:h", longs,
                            NULL)) != -1)
        if ((rc = take_option(c, optarg, o, &got_b, &got_e)) != 0)
            return rc;
    if (optind < argc)
        return bad_usage("unexpected argument %s", argv[optind]);
    return check_options(o, got_b, got_e);
}
