/*
 * amldist-nccl-check's parts: data types and the check pattern (data.c), the
 * collectives and the polling synchronisation (coll.c), the command line and
 * the baselines (options.c), the table and the verdict
 * (amldist-nccl-check.c).
 */
#ifndef NCCL_CHECK_H
#define NCCL_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* nccl.h declares a few functions with () instead of (void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#include <nccl.h>
#pragma GCC diagnostic pop

enum { EXIT_PASS = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_NOGPU = 3,
       EXIT_ERROR = 4 };

extern const char *prog;

/* ---- data.c ---------------------------------------------------------- */

typedef enum { K_INT, K_UINT, K_F16, K_BF16, K_F32, K_F64 } kind_t;

typedef struct {
    const char *name; /* nccl-tests' spelling */
    ncclDataType_t nccl;
    size_t size;
    kind_t kind;
    int modulus;       /* the pattern's values are 0 .. modulus-1 */
    long long exact;   /* sums up to this are exact (floating types) */
} dtype_t;

extern const dtype_t dtypes[];
extern const int ndtypes;
const dtype_t *dtype_by_name(const char *name);

/* Element i of rank r's input: small whole numbers, so every reduction over
 * a realistic world is exact and the expected result is known. */
long long pattern(const dtype_t *t, size_t i, int r);
/* Store v (a whole number) as one element of type t; integer types wrap as
 * NCCL's sums do. */
void encode(const dtype_t *t, long long v, void *out);
/* Whether a check of sums over `world` ranks is exact for this type. */
int checkable(const dtype_t *t, int world);

/* ---- coll.c ---------------------------------------------------------- */

typedef struct ctx ctx_t;

typedef struct {
    const char *name;   /* nccl-tests' test name */
    double bus_factor_n; /* busbw = algbw * factor(n): see bus_factor() */
    int rooted;          /* broadcast, reduce: the root column is 0 */
    int reduces;         /* the redop column: "sum", else "none" */
    int inplace_ok;      /* alltoall has no in-place form */
} coll_t;

extern const coll_t colls[];
extern const int ncolls;
const coll_t *coll_by_name(const char *name);
double bus_factor(const coll_t *c, int world);

/* The element counts of one row, as nccl-tests' getCollByteCount makes
 * them: `total` is what the size column shows (the larger buffer), `in`
 * and `out` the send and receive counts per rank. */
typedef struct {
    size_t total, in, out;
} counts_t;
counts_t coll_counts(const coll_t *c, size_t bytes, size_t elt, int world);

struct ctx {
    ncclComm_t comm;
    cudaStream_t stream;
    void *send, *recv; /* device buffers of `cap` bytes each */
    void *host;        /* pinned, CHUNK_BYTES */
    double *scratch;   /* device, one double */
    size_t cap;
    int rank, world, timeout_s;
    int aborted;       /* the communicator was aborted: do not destroy it */
};

#define CHUNK_ELEMS ((size_t)51 * 16384) /* a multiple of every modulus */
#define CHUNK_BYTES (CHUNK_ELEMS * 8)

/* Start one operation of `c` on `n` (counts) elements of `t`. */
ncclResult_t coll_launch(ctx_t *x, const coll_t *c, const dtype_t *t,
                         const counts_t *n, int inplace);
/* Wait for the stream as nccl-tests does: poll it and NCCL's async error,
 * abort the communicator on an error or after the timeout.  0, or -1 after
 * printing why. */
int sync_stream(ctx_t *x, const char *what);
/* Seconds on the monotonic clock. */
double now_s(void);
/* One double reduced over all ranks (sum or min). */
int allreduce_double(ctx_t *x, double *v, ncclRedOp_t op);
/* Fill a device buffer with rank r's pattern, and count the elements of
 * one result that differ from what `c` must give. */
int fill(ctx_t *x, const dtype_t *t, void *dev, size_t count, int r);
/* Output poisoned, input filled: ready for a checked operation. */
int prepare(ctx_t *x, const coll_t *c, const dtype_t *t, const counts_t *n,
            int inplace);
long long count_wrong(ctx_t *x, const coll_t *c, const dtype_t *t,
                      const counts_t *n, int inplace);

/* ---- options.c ------------------------------------------------------- */

/* A published busbw table: NBASE sizes from BASE_MIN, doubling. */
#define NBASE 9
#define BASE_MIN ((size_t)32 << 20) /* the tables' first size; then doubling */
struct baseline {
    const char *name, *what;
    int nodes, ranks;
    double busbw[NBASE];
};

typedef struct {
    size_t minbytes, maxbytes;
    int factor, iters, warmup, check;
    double expect, tolerance;
    const struct baseline *base;
    int bootstrap_s, timeout_s;
    const coll_t *coll[8];  /* the collectives to measure, in order */
    const dtype_t *type[16]; /* the data types */
    int ncoll, ntype;
} opts_t;

/* The command line into o: -1, or the exit status of a usage error (-h and
 * --list-baselines print and exit). */
int parse_args(int argc, char **argv, opts_t *o);
/* "prog: " and the message, then the usage, on stderr: EXIT_USAGE. */
int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
