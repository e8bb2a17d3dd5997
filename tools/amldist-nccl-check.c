/*
 * amldist-nccl-check: NCCL all-reduce bandwidth across every rank of the job,
 * printed as nccl-tests' all_reduce_perf prints it, and optionally judged
 * against a figure or a named baseline (a health check before a long job).
 * The layout comes from libamldist, the communicator from
 * amldist_nccl_comm_init(): it runs under amlrun, mpirun, torchrun or Slurm
 * alike, without MPI.  See amldist-nccl-check(1).
 */
#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <amldist.h>
/* nccl.h declares a few functions with () instead of (void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#include <nccl.h>
#pragma GCC diagnostic pop

enum { EXIT_PASS = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_NOGPU = 3,
       EXIT_ERROR = 4 };

/*
 * Out-of-place busbw (GB/s) of nccl-tests' all_reduce_perf, float sum, 32 MiB
 * .. 8 GiB, as published with azureml-examples cli/jobs/single-step/gpu_perf
 * and quoted in the Azure ML guide "Building and validating a training
 * environment" (shared/seeds/002_17327a56c0a52b7f.txt): 2 nodes of 8 GPUs,
 * 16 ranks.
 */
#define NBASE 9
static const struct baseline {
    const char *name, *what;
    int nodes, ranks;
    double busbw[NBASE];
} baselines[] = {
    {"ND40rs_v2", "Standard_ND40rs_v2, 8x V100 32GB per node", 2, 16,
     {14.32, 15.07, 15.67, 15.99, 16.15, 16.23, 16.28, 16.30, 16.31}},
    {"ND96amsr_A100_v4", "Standard_ND96amsr_A100_v4, 8x A100 80GB per node",
     2, 16,
     {105.97, 139.09, 154.43, 167.99, 178.74, 182.36, 185.27, 187.97,
      187.91}},
};
#define BASE_MIN ((size_t)32 << 20) /* the tables' first size; then doubling */

typedef struct {
    size_t minbytes, maxbytes;
    int factor, iters, warmup, check;
    double expect, tolerance;
    const struct baseline *base;
    int timeout_s;
} opts_t;

static const char *prog = "amldist-nccl-check";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS] "
            "[-w WARMUP]\n"
            "       [-c 0|1] [-d float] [--expect-busbw GBPS | --baseline NAME "
            "[--tolerance PCT]]\n"
            "       [--bootstrap-timeout SECONDS] [--list-baselines] [-h]\n"
            "Run under a launcher (amlrun, mpirun, torchrun, srun), one rank "
            "per GPU.\n"
            "Exit: 0 ran (PASS), 1 FAIL or wrong results, 2 usage, 3 no "
            "visible GPU, 4 other error.\n",
            prog);
}

static int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad_usage(const char *fmt, ...)
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

static int parse_args(int argc, char **argv, opts_t *o)
{
    static const struct option longs[] = {
        {"minbytes", 1, 0, 'b'},      {"maxbytes", 1, 0, 'e'},
        {"stepfactor", 1, 0, 'f'},    {"iters", 1, 0, 'n'},
        {"warmup_iters", 1, 0, 'w'},  {"check", 1, 0, 'c'},
        {"datatype", 1, 0, 'd'},      {"expect-busbw", 1, 0, 'E'},
        {"baseline", 1, 0, 'B'},      {"tolerance", 1, 0, 't'},
        {"bootstrap-timeout", 1, 0, 'T'}, {"list-baselines", 0, 0, 'L'},
        {"help", 0, 0, 'h'},          {0, 0, 0, 0}};
    int c;
    char *end;
    *o = (opts_t){BASE_MIN, (size_t)8 << 30, 2, 20, 5, 1, 0, 10, NULL, 0};
    while ((c = getopt_long(argc, argv, "b:e:f:n:w:c:d:h", longs, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (parse_size(optarg, &o->minbytes))
                return bad_usage("-b %s: expected a size such as 32M", optarg);
            break;
        case 'e':
            if (parse_size(optarg, &o->maxbytes))
                return bad_usage("-e %s: expected a size such as 8G", optarg);
            break;
        case 'f':
            if (parse_int(optarg, 2, 1024, &o->factor))
                return bad_usage("-f %s: expected a factor 2 .. 1024", optarg);
            break;
        case 'n':
            if (parse_int(optarg, 1, 1000000, &o->iters))
                return bad_usage("-n %s: expected iterations >= 1", optarg);
            break;
        case 'w':
            if (parse_int(optarg, 0, 1000000, &o->warmup))
                return bad_usage("-w %s: expected iterations >= 0", optarg);
            break;
        case 'c':
            if (parse_int(optarg, 0, 1, &o->check))
                return bad_usage("-c %s: expected 0 or 1", optarg);
            break;
        case 'd':
            if (strcmp(optarg, "float"))
                return bad_usage("-d %s: only float is supported", optarg);
            break;
        case 'E':
            o->expect = strtod(optarg, &end);
            if (!isdigit((unsigned char)*optarg) || *end || !(o->expect > 0))
                return bad_usage("--expect-busbw %s: expected GB/s > 0",
                                 optarg);
            break;
        case 'B':
            if (!(o->base = find_baseline(optarg)))
                return bad_usage("--baseline %s: unknown (see "
                                 "--list-baselines)", optarg);
            break;
        case 't':
            o->tolerance = strtod(optarg, &end);
            if (!isdigit((unsigned char)*optarg) || *end ||
                !(o->tolerance >= 0 && o->tolerance < 100))
                return bad_usage("--tolerance %s: expected a percentage "
                                 "0 .. 99", optarg);
            break;
        case 'T':
            if (parse_int(optarg, 1, 86400, &o->timeout_s))
                return bad_usage("--bootstrap-timeout %s: expected seconds",
                                 optarg);
            break;
        case 'L':
            list_baselines();
            exit(EXIT_PASS);
        case 'h':
            usage(stdout);
            exit(EXIT_PASS);
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc)
        return bad_usage("unexpected argument %s", argv[optind]);
    if (o->minbytes > o->maxbytes)
        return bad_usage("-b larger than -e");
    if (o->expect > 0 && o->base)
        return bad_usage("--expect-busbw and --baseline exclude each other");
    return -1;
}

/* Everything a measurement needs, on this rank. */
typedef struct {
    ncclComm_t comm;
    cudaStream_t stream;
    float *send, *recv, *host; /* host: one pattern chunk, pinned */
    double *scratch;           /* device: 1 double for reductions */
    int rank, world;
} ctx_t;

/* The data check: element i of rank r holds (7i + 3r) mod 17, small whole
 * numbers whose sum over any realistic world is exact in float.  The pattern
 * repeats every 17 elements, so one host chunk (a multiple of 17) fills any
 * buffer. */
#define CHUNK ((size_t)17 * 65536 * 4)

static float pattern(size_t i, int r)
{
    return (float)((i * 7 + (size_t)r * 3) % 17);
}

static int fail_cuda(const char *what, cudaError_t e)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, cudaGetErrorString(e));
    return -1;
}

static int fail_nccl(const char *what, ncclResult_t r)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, ncclGetErrorString(r));
    return -1;
}

static int fill(ctx_t *c, float *dev, size_t count)
{
    for (size_t i = 0; i < CHUNK; i++)
        c->host[i] = pattern(i, c->rank);
    for (size_t off = 0; off < count; off += CHUNK) {
        size_t n = count - off < CHUNK ? count - off : CHUNK;
        cudaError_t e = cudaMemcpy(dev + off, c->host, n * sizeof(float),
                                   cudaMemcpyHostToDevice);
        if (e)
            return fail_cuda("cudaMemcpy to the GPU", e);
    }
    return 0;
}

static long long count_wrong(ctx_t *c, const float *dev, size_t count)
{
    float want[17];
    long long wrong = 0;
    for (int k = 0; k < 17; k++) {
        want[k] = 0;
        for (int r = 0; r < c->world; r++)
            want[k] += pattern((size_t)k, r);
    }
    for (size_t off = 0; off < count; off += CHUNK) {
        size_t n = count - off < CHUNK ? count - off : CHUNK;
        cudaError_t e = cudaMemcpy(c->host, dev + off, n * sizeof(float),
                                   cudaMemcpyDeviceToHost);
        if (e)
            return fail_cuda("cudaMemcpy from the GPU", e);
        for (size_t i = 0; i < n; i++)
            wrong += c->host[i] != want[(off + i) % 17];
    }
    return wrong;
}

/* Sum of one double over all ranks (times, wrong counts). */
static int allsum(ctx_t *c, double *v)
{
    ncclResult_t r;
    cudaError_t e;
    if ((e = cudaMemcpy(c->scratch, v, sizeof *v, cudaMemcpyHostToDevice)))
        return fail_cuda("cudaMemcpy", e);
    if ((r = ncclAllReduce(c->scratch, c->scratch, 1, ncclDouble, ncclSum,
                           c->comm, c->stream)))
        return fail_nccl("ncclAllReduce", r);
    if ((e = cudaStreamSynchronize(c->stream)) ||
        (e = cudaMemcpy(v, c->scratch, sizeof *v, cudaMemcpyDeviceToHost)))
        return fail_cuda("cudaMemcpy", e);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One column group: warm-up, timed iterations, then a checked run.  *us is
 * the time per all-reduce averaged over the ranks, *wrong summed. */
static int measure(ctx_t *c, const opts_t *o, size_t count, int inplace,
                   double *us, double *wrong)
{
    float *in = inplace ? c->recv : c->send, *out = c->recv;
    ncclResult_t r = ncclSuccess;
    cudaError_t e;
    double zero = 0;
    for (int i = 0; i < o->warmup && !r; i++)
        r = ncclAllReduce(in, out, count, ncclFloat, ncclSum, c->comm,
                          c->stream);
    if (r)
        return fail_nccl("ncclAllReduce", r);
    if ((e = cudaStreamSynchronize(c->stream)))
        return fail_cuda("cudaStreamSynchronize", e);
    /* Start together: the reduction doubles as a barrier. */
    if (allsum(c, &zero) < 0)
        return -1;
    double t0 = now_s();
    for (int i = 0; i < o->iters && !r; i++)
        r = ncclAllReduce(in, out, count, ncclFloat, ncclSum, c->comm,
                          c->stream);
    if (r)
        return fail_nccl("ncclAllReduce", r);
    if ((e = cudaStreamSynchronize(c->stream)))
        return fail_cuda("cudaStreamSynchronize", e);
    *us = (now_s() - t0) * 1e6 / o->iters;
    if (allsum(c, us) < 0)
        return -1;
    *us /= c->world;
    *wrong = 0;
    if (!o->check)
        return 0;
    /* Timed in-place runs summed the buffer into itself: start afresh. */
    if (fill(c, in, count) < 0)
        return -1;
    if (!inplace && (e = cudaMemset(out, 0, count * sizeof(float))))
        return fail_cuda("cudaMemset", e);
    if ((r = ncclAllReduce(in, out, count, ncclFloat, ncclSum, c->comm,
                           c->stream)))
        return fail_nccl("ncclAllReduce", r);
    if ((e = cudaStreamSynchronize(c->stream)))
        return fail_cuda("cudaStreamSynchronize", e);
    long long w = count_wrong(c, out, count);
    if (w < 0)
        return -1;
    *wrong = (double)w;
    return allsum(c, wrong);
}

static void format_time(char *buf, size_t size, double us)
{
    snprintf(buf, size, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f",
             us);
}

static double bus_bw(double bytes, double us, int world)
{
    return bytes / (us * 1e-6) / 1e9 * 2.0 * (world - 1) / world;
}

static void print_cols(double bytes, double us, double wrong, int world,
                       int check)
{
    char t[32], w[32];
    format_time(t, sizeof t, us);
    snprintf(w, sizeof w, check ? "%6.0f" : "   N/A", wrong);
    printf("  %7s  %6.2f  %6.2f  %6s", t, bytes / (us * 1e-6) / 1e9,
           bus_bw(bytes, us, world), w);
}

/* One line per rank, from every rank, as nccl-tests lists its devices. */
static int print_ranks(ctx_t *c)
{
    enum { LINE = 160 };
    char mine[LINE], host[64] = "?", bus[32] = "?";
    struct cudaDeviceProp prop;
    int dev = -1;
    char *all;
    cudaGetDevice(&dev);
    gethostname(host, sizeof host - 1);
    cudaDeviceGetPCIBusId(bus, sizeof bus, dev);
    if (cudaGetDeviceProperties(&prop, dev))
        strcpy(prop.name, "?");
    snprintf(mine, sizeof mine, "#  Rank %3d Pid %7d on %12s device %2d [%s] "
             "%s", c->rank, (int)getpid(), host, dev, bus, prop.name);
    if (cudaMalloc((void **)&all, (size_t)LINE * c->world))
        return -1;
    cudaMemcpy(all + (size_t)LINE * c->rank, mine, LINE, cudaMemcpyHostToDevice);
    ncclResult_t r = ncclAllGather(all + (size_t)LINE * c->rank, all, LINE,
                                   ncclChar, c->comm, c->stream);
    char *h = malloc((size_t)LINE * c->world);
    if (!r && h && !cudaStreamSynchronize(c->stream) &&
        !cudaMemcpy(h, all, (size_t)LINE * c->world, cudaMemcpyDeviceToHost) &&
        c->rank == 0)
        for (int i = 0; i < c->world; i++)
            printf("%.*s\n", LINE, h + (size_t)LINE * i);
    free(h);
    cudaFree(all);
    return r ? fail_nccl("ncclAllGather", r) : 0;
}

/* The figure to reach at `bytes`, and a description of where it comes from;
 * 0 when there is no health check. */
static double threshold(const opts_t *o, size_t bytes, char *why, size_t size)
{
    if (o->expect > 0) {
        snprintf(why, size, "--expect-busbw %.2f", o->expect);
        return o->expect;
    }
    if (!o->base)
        return 0;
    int k = -1;
    for (int i = 0; i < NBASE; i++)
        if ((BASE_MIN << i) <= bytes)
            k = i;
    if (k < 0) {
        snprintf(why, size, "%s has no figure at or below %zu bytes "
                 "(its sizes start at %zu)", o->base->name, bytes, BASE_MIN);
        return -1;
    }
    snprintf(why, size, "%.0f%% of %s's %.2f GB/s at %zu B", 100 - o->tolerance,
             o->base->name, o->base->busbw[k], BASE_MIN << k);
    return o->base->busbw[k] * (100 - o->tolerance) / 100;
}

static int run(ctx_t *c, const opts_t *o)
{
    double sum_busbw = 0, last_busbw = 0, total_wrong = 0;
    size_t last = 0;
    int nsizes = 0;
    if (c->rank == 0) {
        int v = 0;
        ncclGetVersion(&v);
        printf("# %s (libamldist %s, NCCL %d.%d.%d): all_reduce, %d ranks\n",
               prog, amldist_version_string(), v / 10000, v / 100 % 100,
               v % 100, c->world);
        printf("#  minBytes %zu maxBytes %zu step: %d(factor) warmup iters: "
               "%d iters: %d validation: %d\n#\n",
               o->minbytes, o->maxbytes, o->factor, o->warmup, o->iters,
               o->check);
    }
    if (print_ranks(c) < 0)
        return EXIT_ERROR;
    if (c->rank == 0)
        printf("#\n#%54s%-34s%s\n"
               "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  "
               "%6s  %6s\n"
               "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  "
               "%6s  %6s\n",
               "", "out-of-place", "in-place", "size", "count", "type",
               "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
               "algbw", "busbw", "#wrong", "(B)", "(elements)", "", "", "",
               "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    for (size_t bytes = o->minbytes; bytes <= o->maxbytes;
         bytes = bytes * (size_t)o->factor) {
        size_t count = bytes / sizeof(float);
        double us[2], wrong[2], busbw[2];
        if (count == 0)
            continue;
        for (int inplace = 0; inplace < 2; inplace++)
            if (measure(c, o, count, inplace, &us[inplace], &wrong[inplace]) <
                0)
                return EXIT_ERROR;
        double b = (double)(count * sizeof(float));
        busbw[0] = bus_bw(b, us[0], c->world);
        busbw[1] = bus_bw(b, us[1], c->world);
        if (c->rank == 0) {
            printf("%12zu  %12zu  %8s  %6s  %6d", count * sizeof(float), count,
                   "float", "sum", -1);
            print_cols(b, us[0], wrong[0], c->world, o->check);
            print_cols(b, us[1], wrong[1], c->world, o->check);
            printf("\n");
            fflush(stdout);
        }
        sum_busbw += busbw[0] + busbw[1];
        last_busbw = busbw[0];
        last = count * sizeof(float);
        total_wrong += wrong[0] + wrong[1];
        nsizes++;
        if (bytes > o->maxbytes / (size_t)o->factor)
            break;
    }
    int status = EXIT_PASS;
    char why[200];
    double need = threshold(o, last, why, sizeof why);
    if (c->rank == 0) {
        printf("# Out of bounds values : %.0f %s\n", total_wrong,
               total_wrong ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g \n#\n",
               nsizes ? sum_busbw / (2.0 * nsizes) : 0.0);
        if (o->base && c->world != o->base->ranks)
            printf("# note: %s was measured with %d ranks on %d nodes; this "
                   "job has %d ranks\n",
                   o->base->name, o->base->ranks, o->base->nodes, c->world);
    }
    if (total_wrong > 0) {
        status = EXIT_FAIL;
        if (c->rank == 0)
            printf("# FAIL: %.0f wrong values in the results\n", total_wrong);
    }
    if (need < 0) {
        status = EXIT_USAGE;
        if (c->rank == 0)
            fprintf(stderr, "%s: %s\n", prog, why);
    } else if (need > 0) {
        int ok = last_busbw >= need;
        if (!ok)
            status = EXIT_FAIL;
        if (c->rank == 0)
            printf("# %s: busbw %.2f GB/s at %zu B %s %.2f GB/s (%s)\n",
                   ok ? "PASS" : "FAIL", last_busbw, last,
                   ok ? ">=" : "<", need, why);
    }
    return status;
}

int main(int argc, char **argv)
{
    opts_t o;
    ctx_t c;
    amldist_t *layout;
    int rc, ndev = 0;
    cudaError_t e;

    if ((rc = parse_args(argc, argv, &o)) >= 0)
        return rc;
    /* Before anything else, so that the message is the same under any
     * launcher, or none. */
    if ((e = cudaGetDeviceCount(&ndev)) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "%s: no visible GPU: this check needs one CUDA device "
                "per rank (cudaGetDeviceCount: %s)\n",
                prog, e ? cudaGetErrorString(e) : "0 devices");
        return EXIT_NOGPU;
    }
    if ((rc = amldist_init(&layout, 0)) < 0) {
        fprintf(stderr, "%s: %s\n", prog, amldist_last_error());
        return EXIT_ERROR;
    }
    memset(&c, 0, sizeof c);
    c.rank = amldist_rank(layout);
    c.world = amldist_world_size(layout);
    amldist_bootstrap_options_t bo = AMLDIST_BOOTSTRAP_OPTIONS_INIT;
    bo.timeout_ms = o.timeout_s * 1000;
    if ((rc = amldist_nccl_comm_init(layout, -1, &c.comm, &bo)) < 0) {
        fprintf(stderr, "%s: %s\n", prog, amldist_last_error());
        amldist_free(layout);
        return rc == AMLDIST_ENOGPU ? EXIT_NOGPU : EXIT_ERROR;
    }
    size_t count = o.maxbytes / sizeof(float);
    /* A blocking stream: the plain cudaMemcpy/cudaMemset calls on the legacy
     * default stream are then ordered with the all-reduces. */
    if ((e = cudaStreamCreate(&c.stream)) ||
        (e = cudaMalloc((void **)&c.send, count * sizeof(float))) ||
        (e = cudaMalloc((void **)&c.recv, count * sizeof(float))) ||
        (e = cudaMalloc((void **)&c.scratch, sizeof(double))) ||
        (e = cudaMallocHost((void **)&c.host, CHUNK * sizeof(float)))) {
        fprintf(stderr, "%s: rank %d: allocating 2 x %zu bytes: %s (a smaller "
                "-e helps)\n", prog, c.rank, count * sizeof(float),
                cudaGetErrorString(e));
        return EXIT_ERROR;
    }
    rc = EXIT_ERROR;
    if (fill(&c, c.send, count) == 0 && fill(&c, c.recv, count) == 0)
        rc = run(&c, &o);
    cudaFreeHost(c.host);
    cudaFree(c.send);
    cudaFree(c.recv);
    cudaFree(c.scratch);
    ncclCommDestroy(c.comm);
    amldist_free(layout);
    return rc;
}
