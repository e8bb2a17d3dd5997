/*
 * amldist-nccl-check: NCCL collective bandwidth across every rank of the
 * job, printed as nccl-tests' *_perf programs print it, and optionally
 * judged against a figure or a named baseline (a health check before a long
 * job).  The layout comes from libamldist, the communicator from
 * amldist_nccl_comm_init(): it runs under amlrun, mpirun, torchrun or Slurm
 * alike, without MPI.  See amldist-nccl-check(1).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <amldist.h>

#include "nccl_check/check.h"

const char *prog = "amldist-nccl-check";

/* ---- the table --------------------------------------------------------
 * nccl-tests' layout: "%12li  %12li  %8s  %6s  %6i" for the row, then per
 * placement "  %7s  %6.2f  %6.2f  %5s", with the header cut to the same
 * widths.  Numbers that outgrow a column (an H100's 1500 GB/s in place on
 * one rank, for one) keep its width with fewer decimals. */

static void fit(char *buf, size_t size, int width, double v)
{
    snprintf(buf, size, "%*.2f", width, v);
    if ((int)strlen(buf) > width)
        snprintf(buf, size, "%*.1f", width, v);
    if ((int)strlen(buf) > width)
        snprintf(buf, size, "%*.0f", width, v);
    if ((int)strlen(buf) > width)
        snprintf(buf, size, "%*.0e", width, v);
}

static void print_header(const coll_t *c)
{
    printf("#\n# %s\n", c->name);
    printf("#%54s%-32s%s\n", "", "out-of-place", "in-place");
    printf("#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop",
           "root");
    for (int k = 0; k < 2; k++)
        printf("  %7s  %6s  %6s %6s", "time", "algbw", "busbw", "#wrong");
    printf("\n#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
    for (int k = 0; k < 2; k++)
        printf("  %7s  %6s  %6s %6s", "(us)", "(GB/s)", "(GB/s)", "");
    printf("\n");
}

typedef struct {
    double us, algbw, busbw, wrong; /* wrong < 0: not checked */
    int done;
} cell_t;

static void print_cell(const cell_t *m)
{
    char t[16], a[16], b[16], w[16];
    if (!m->done) {
        printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
        return;
    }
    fit(t, sizeof t, 7, m->us);
    fit(a, sizeof a, 6, m->algbw);
    fit(b, sizeof b, 6, m->busbw);
    if (m->wrong < 0)
        snprintf(w, sizeof w, "%5s", "N/A");
    else
        snprintf(w, sizeof w, "%5.0f", m->wrong);
    printf("  %7s  %6s  %6s  %5s", t, a, b, w);
}

/* One line per rank, from every rank, as nccl-tests lists its devices. */
static int print_ranks(ctx_t *x)
{
    enum { LINE = 160 };
    char mine[LINE], host[64] = "?", bus[32] = "?";
    struct cudaDeviceProp prop;
    int dev = -1;
    cudaGetDevice(&dev);
    gethostname(host, sizeof host - 1);
    cudaDeviceGetPCIBusId(bus, sizeof bus, dev);
    if (cudaGetDeviceProperties(&prop, dev))
        strcpy(prop.name, "?");
    memset(mine, 0, sizeof mine);
    /* Bounded so that the line always fits LINE (a PCI bus id is 12
     * characters, device names about 30). */
    snprintf(mine, sizeof mine, "#  Rank %3d Pid %7d on %12.40s device %2d "
             "[%.16s] %.48s", x->rank, (int)getpid(), host, dev, bus, prop.name);
    /* The receive buffer is big enough for every rank's line: it holds at
     * least 32 MiB... unless -e is tiny, so check. */
    if ((size_t)LINE * x->world > x->cap) {
        if (x->rank == 0)
            printf("%s\n#  (%d ranks)\n", mine, x->world);
        return 0;
    }
    if (cudaMemcpy(x->send, mine, LINE, cudaMemcpyHostToDevice) ||
        ncclAllGather(x->send, x->recv, LINE, ncclChar, x->comm, x->stream) ||
        sync_stream(x, "listing the ranks") < 0)
        return -1;
    char *all = x->rank == 0 ? malloc((size_t)LINE * x->world) : NULL;
    if (x->rank == 0 && all &&
        !cudaMemcpy(all, x->recv, (size_t)LINE * x->world,
                    cudaMemcpyDeviceToHost))
        for (int i = 0; i < x->world; i++)
            printf("%.*s\n", LINE, all + (size_t)LINE * i);
    free(all);
    return 0;
}

/* ---- measuring --------------------------------------------------------- */

static int launch_n(ctx_t *x, const coll_t *c, const dtype_t *t,
                    const counts_t *n, int inplace, int times)
{
    for (int i = 0; i < times; i++) {
        ncclResult_t r = coll_launch(x, c, t, n, inplace);
        if (r != ncclSuccess) {
            fprintf(stderr, "%s: rank %d: %s: %s\n", prog, x->rank, c->name,
                    ncclGetErrorString(r));
            return -1;
        }
    }
    return 0;
}

/* One placement of one row: warm-up, timed operations, then one checked
 * operation on freshly filled buffers. */
static int measure(ctx_t *x, const opts_t *o, const coll_t *c,
                   const dtype_t *t, const counts_t *n, int inplace,
                   cell_t *m)
{
    char what[96];
    double zero = 0, bytes = (double)(n->total * t->size);
    snprintf(what, sizeof what, "%s of %zu bytes of %s%s", c->name,
             n->total * t->size, t->name, inplace ? ", in place" : "");
    if (launch_n(x, c, t, n, inplace, o->warmup) < 0 ||
        sync_stream(x, what) < 0)
        return -1;
    /* Start together: the reduction doubles as a barrier. */
    if (allreduce_double(x, &zero, ncclSum) < 0)
        return -1;
    double t0 = now_s();
    if (launch_n(x, c, t, n, inplace, o->iters) < 0 || sync_stream(x, what) < 0)
        return -1;
    m->us = (now_s() - t0) * 1e6 / o->iters;
    if (allreduce_double(x, &m->us, ncclSum) < 0)
        return -1;
    m->us /= x->world;
    m->algbw = bytes / (m->us * 1e-6) / 1e9;
    m->busbw = m->algbw * bus_factor(c, x->world);
    m->wrong = -1;
    m->done = 1;
    if (!o->check || !checkable(t, x->world))
        return 0;
    if (prepare(x, c, t, n, inplace) < 0 || launch_n(x, c, t, n, inplace, 1) < 0 ||
        sync_stream(x, what) < 0)
        return -1;
    long long w = count_wrong(x, c, t, n, inplace);
    if (w < 0)
        return -1;
    m->wrong = (double)w;
    return allreduce_double(x, &m->wrong, ncclSum);
}

/* The figure to reach at `bytes`, 0 when this size is not judged. */
static double threshold(const opts_t *o, size_t bytes, size_t largest,
                        char *why, size_t size)
{
    /* Below 32 MiB latency, not bandwidth, sets busbw: judge the sizes from
     * there on, or the largest one when the run stays below. */
    if (bytes < BASE_MIN && bytes != largest)
        return 0;
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
    if (k < 0)
        return 0;
    snprintf(why, size, "%.0f%% of %s's %.2f GB/s at %zu B", 100 - o->tolerance,
             o->base->name, o->base->busbw[k], BASE_MIN << k);
    return o->base->busbw[k] * (100 - o->tolerance) / 100;
}

typedef struct {
    double busbw_sum;
    int nbusbw, bad_rows, judged, failed;
    double wrong;
} tally_t;

/* The size after `b` in the run (-b, times -f, up to -e), or 0 after the
 * last; never overflows. */
static size_t next_size(const opts_t *o, size_t b)
{
    return b > o->maxbytes / (size_t)o->factor ? 0 : b * (size_t)o->factor;
}

static int run_table(ctx_t *x, const opts_t *o, const coll_t *c, tally_t *s)
{
    if (x->rank == 0)
        print_header(c);
    for (int ti = 0; ti < o->ntype; ti++) {
        const dtype_t *t = o->type[ti];
        size_t largest = o->minbytes;
        while (next_size(o, largest))
            largest = next_size(o, largest);
        if (o->check && !checkable(t, x->world) && x->rank == 0)
            printf("# note: %s sums over %d ranks are not exact: its values "
                   "are not checked\n", t->name, x->world);
        for (size_t bytes = o->minbytes; bytes; bytes = next_size(o, bytes)) {
            counts_t n = coll_counts(c, bytes, t->size, x->world);
            cell_t m[2];
            memset(m, 0, sizeof m);
            if (n.in > 0 && n.out > 0) {
                for (int inplace = 0; inplace < 2; inplace++)
                    if ((inplace == 0 || c->inplace_ok) &&
                        measure(x, o, c, t, &n, inplace, &m[inplace]) < 0)
                        return EXIT_ERROR;
                if (x->rank == 0) {
                    printf("%12zu  %12zu  %8s  %6s  %6d", n.total * t->size,
                           n.total, t->name, c->reduces ? "sum" : "none",
                           c->rooted ? 0 : -1);
                    print_cell(&m[0]);
                    print_cell(&m[1]);
                    printf("\n");
                    fflush(stdout);
                }
                for (int k = 0; k < 2; k++) {
                    if (!m[k].done)
                        continue;
                    s->busbw_sum += m[k].busbw;
                    s->nbusbw++;
                    if (m[k].wrong > 0) {
                        s->bad_rows++;
                        s->wrong += m[k].wrong;
                    }
                }
                char why[200];
                double need = threshold(o, bytes, largest, why, sizeof why);
                if (need > 0) {
                    s->judged++;
                    if (m[0].busbw < need) {
                        s->failed++;
                        if (x->rank == 0)
                            printf("# FAIL at %zu B: busbw %.2f GB/s < %.2f "
                                   "GB/s (%s)\n", bytes, m[0].busbw, need,
                                   why);
                    }
                }
            }
        }
    }
    return EXIT_PASS;
}

static int run(ctx_t *x, const opts_t *o)
{
    tally_t s;
    memset(&s, 0, sizeof s);
    if (x->rank == 0) {
        int v = 0;
        ncclGetVersion(&v);
        printf("# %s (libamldist %s, NCCL %d.%d.%d): %d ranks\n", prog,
               amldist_version_string(), v / 10000, v / 100 % 100, v % 100,
               x->world);
        printf("#  minBytes %zu maxBytes %zu step: %d(factor) warmup iters: "
               "%d iters: %d validation: %d timeout: %d s\n#\n",
               o->minbytes, o->maxbytes, o->factor, o->warmup, o->iters,
               o->check, o->timeout_s);
    }
    if (print_ranks(x) < 0)
        return EXIT_ERROR;
    for (int i = 0; i < o->ncoll; i++)
        if (run_table(x, o, o->coll[i], &s) != EXIT_PASS)
            return EXIT_ERROR;
    int status = EXIT_PASS;
    if (x->rank == 0) {
        /* As nccl-tests counts them: measurements (a size, a type, a
         * placement) with any wrong value; #wrong has the elements. */
        printf("#\n# Out of bounds values : %d %s\n", s.bad_rows,
               s.bad_rows ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g \n#\n",
               s.nbusbw ? s.busbw_sum / s.nbusbw : 0.0);
        if (o->base && x->world != o->base->ranks)
            printf("# note: %s was measured with %d ranks on %d nodes; this "
                   "job has %d ranks\n",
                   o->base->name, o->base->ranks, o->base->nodes, x->world);
    }
    if (s.bad_rows) {
        status = EXIT_FAIL;
        if (x->rank == 0)
            printf("# FAIL: %.0f wrong values in %d measurements\n", s.wrong,
                   s.bad_rows);
    }
    if (s.judged > 0) {
        if (s.failed)
            status = EXIT_FAIL;
        if (x->rank == 0)
            printf("# %s: busbw %s at %d of %d judged sizes\n",
                   s.failed ? "FAIL" : "PASS",
                   s.failed ? "fell short" : "reached the threshold",
                   s.failed ? s.failed : s.judged, s.judged);
    } else if (s.bad_rows == 0 && (o->expect > 0 || o->base)) {
        if (x->rank == 0)
            printf("# FAIL: no size was judged\n");
        status = EXIT_FAIL;
    }
    /* Every rank has the same verdict; none leaves before rank 0 has
     * printed it, since a launcher stops the job at the first rank that
     * exits with a failure. */
    fflush(stdout);
    double done = 0;
    if (allreduce_double(x, &done, ncclSum) < 0)
        return EXIT_ERROR;
    return status;
}

/* Every rank fails alike, and only rank 0 says why: a barrier after its
 * message, so that no rank exits first and has mpirun abort the job (and
 * drop rank 0's output) before the message is out. */
static void said_why(ctx_t *x)
{
    double none = 0;
    (void)allreduce_double(x, &none, ncclMin);
}

/* The largest size of the run that fits twice (send and receive) in the
 * smallest free memory of any rank, keeping some for NCCL's own buffers. */
static int fit_memory(ctx_t *x, opts_t *o)
{
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e) {
        fprintf(stderr, "%s: rank %d: cudaMemGetInfo: %s\n", prog, x->rank,
                cudaGetErrorString(e));
        return EXIT_ERROR;
    }
    double least = (double)free_b;
    if (allreduce_double(x, &least, ncclMin) < 0)
        return EXIT_ERROR;
    double keep = least / 10 > (double)(512u << 20) ? least / 10
                                                     : (double)(512u << 20);
    double usable = least - keep;
    size_t fits = 0;
    for (size_t b = o->minbytes; b; b = next_size(o, b))
        if (2.0 * (double)b <= usable)
            fits = b;
    /* The messages give what may be used: NCCL's own buffers need the
     * share kept back, so the free figure alone would look ample. */
    if (fits == 0) {
        if (x->rank == 0)
            fprintf(stderr, "%s: -b %zu needs 2 x %zu bytes per GPU; the "
                    "least free memory of any rank is %.0f bytes, of which "
                    "%.0f may be used (%.0f kept for NCCL)%s\n", prog,
                    o->minbytes, o->minbytes, least, usable > 0 ? usable : 0,
                    keep, o->base ? "; --baseline needs sizes of 32 MiB or "
                                    "more" : "");
        said_why(x);
        return EXIT_ERROR;
    }
    if (fits < o->maxbytes) {
        if (x->rank == 0)
            printf("# note: -e %zu needs 2 x %zu bytes per GPU; the least "
                   "free memory of any rank is %.0f bytes, of which %.0f may "
                   "be used: measuring up to %zu\n", o->maxbytes, o->maxbytes,
                   least, usable, fits);
        o->maxbytes = fits;
        if (o->base && o->maxbytes < BASE_MIN) {
            if (x->rank == 0)
                fprintf(stderr, "%s: --baseline %s needs sizes of %zu bytes "
                        "or more, and the GPUs hold no more than %zu\n", prog,
                        o->base->name, BASE_MIN, fits);
            said_why(x);
            return EXIT_ERROR;
        }
    }
    return EXIT_PASS;
}

static int setup(ctx_t *x, const opts_t *o)
{
    cudaError_t e;
    x->cap = o->maxbytes;
    if ((e = cudaMalloc(&x->send, x->cap)) ||
        (e = cudaMalloc(&x->recv, x->cap)) ||
        (e = cudaMallocHost(&x->host, CHUNK_BYTES))) {
        fprintf(stderr, "%s: rank %d: allocating 2 x %zu bytes: %s (a "
                "smaller -e helps)\n", prog, x->rank, x->cap,
                cudaGetErrorString(e));
        return EXIT_ERROR;
    }
    return EXIT_PASS;
}

static void teardown(ctx_t *x)
{
    if (x->host)
        cudaFreeHost(x->host);
    if (x->send)
        cudaFree(x->send);
    if (x->recv)
        cudaFree(x->recv);
    if (x->scratch)
        cudaFree(x->scratch);
    if (x->comm && !x->aborted)
        ncclCommDestroy(x->comm);
    if (x->stream)
        cudaStreamDestroy(x->stream);
}

int main(int argc, char **argv)
{
    opts_t o;
    ctx_t x;
    amldist_t *layout;
    int rc, ndev = 0;
    cudaError_t e;

    if ((rc = parse_args(argc, argv, &o)) >= 0)
        return rc;
    /* The same message under any launcher, or none.  A rank without a GPU
     * still takes part in forming the communicator, as a failed rank, so
     * that the others learn it at once instead of waiting for it. */
    e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess)
        ndev = 0;
    memset(&x, 0, sizeof x);
    if ((rc = amldist_init(&layout, 0)) < 0) {
        layout = NULL;
    } else {
        x.rank = amldist_rank(layout);
        x.world = amldist_world_size(layout);
        x.timeout_s = o.timeout_s;
        amldist_bootstrap_options_t bo = AMLDIST_BOOTSTRAP_OPTIONS_INIT;
        bo.timeout_ms = o.bootstrap_s * 1000;
        /* busbw moves nothing on one rank (its factor is 0): a threshold
         * on it could only fail.  Said before anything is started. */
        if (x.world == 1 && (o.expect > 0 || o.base)) {
            amldist_free(layout);
            return bad_usage("%s judges busbw, which is 0 with one rank: run "
                             "at least 2 ranks", o.base ? "--baseline"
                                                        : "--expect-busbw");
        }
        if (ndev > 0 || x.world > 1)
            rc = amldist_nccl_comm_init(layout, -1, &x.comm, &bo);
    }
    if (ndev == 0 || rc < 0) {
        if (ndev == 0)
            fprintf(stderr, "%s: no visible GPU: this check needs one CUDA "
                    "device per rank (cudaGetDeviceCount: %s)\n",
                    prog, e ? cudaGetErrorString(e) : "0 devices");
        else
            fprintf(stderr, "%s: %s\n", prog, amldist_last_error());
        amldist_free(layout);
        return ndev == 0 || rc == AMLDIST_ENOGPU ? EXIT_NOGPU : EXIT_ERROR;
    }
    /* A blocking stream: the plain cudaMemcpy/cudaMemset calls on the legacy
     * default stream are then ordered with the collectives. */
    rc = EXIT_ERROR;
    if (cudaStreamCreate(&x.stream) == cudaSuccess &&
        cudaMalloc((void **)&x.scratch, sizeof(double)) == cudaSuccess)
        rc = fit_memory(&x, &o);
    if (rc == EXIT_PASS && (rc = setup(&x, &o)) == EXIT_PASS)
        rc = run(&x, &o);
    teardown(&x);
    amldist_free(layout);
    return rc;
}
