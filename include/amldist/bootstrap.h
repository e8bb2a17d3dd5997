/*
 * libamldist: bootstrap API (see amldist_bootstrap(3)).  Included by
 * <amldist.h>.
 *
 * Rank 0 of a job hands a small blob (an ncclUniqueId, or any bytes) to
 * every other rank over TCP, without MPI: rank 0 listens on the bootstrap
 * port of MASTER_ADDR, the other ranks connect, retrying with backoff until
 * it listens, and fetch the blob.  Every call is collective: all ranks of the
 * layout make the same sequence of calls with the same length.
 */
#ifndef AMLDIST_BOOTSTRAP_H
#define AMLDIST_BOOTSTRAP_H

#ifdef __cplusplus
extern "C" {
#endif

/* The largest blob one call carries, in bytes. */
#define AMLDIST_BOOTSTRAP_MAX_LEN 65536
/* Default overall timeout, in milliseconds, when neither the options nor
 * AMLDIST_BOOTSTRAP_TIMEOUT (seconds) set one. */
#define AMLDIST_BOOTSTRAP_TIMEOUT_MS 300000

/*
 * Options; NULL means all defaults.  Initialise with
 * AMLDIST_BOOTSTRAP_OPTIONS_INIT so that fields added later keep their
 * defaults.
 */
#define AMLDIST_BOOTSTRAP_OPTIONS_VERSION 1
typedef struct {
    unsigned version; /* AMLDIST_BOOTSTRAP_OPTIONS_VERSION */
    /* > 0: overall timeout; <= 0: AMLDIST_BOOTSTRAP_TIMEOUT (seconds, e.g.
     * "30" or "2.5"), else AMLDIST_BOOTSTRAP_TIMEOUT_MS. */
    int timeout_ms;
    /* > 0: TCP port; <= 0: AMLDIST_BOOTSTRAP_PORT, else MASTER_PORT + 1
     * (MASTER_PORT - 1 when MASTER_PORT is 65535), leaving MASTER_PORT to
     * PyTorch's TCPStore. */
    int port;
    /* Non-NULL: the job token; NULL: AMLDIST_JOB_TOKEN, else one derived
     * from per-job variables (see amldist_bootstrap(3)).  A connection
     * carrying another token is refused. */
    const char *token;
} amldist_bootstrap_options_t;
#define AMLDIST_BOOTSTRAP_OPTIONS_INIT                                         \
    { AMLDIST_BOOTSTRAP_OPTIONS_VERSION, 0, 0, NULL }

/*
 * Broadcast `len` bytes (1 .. AMLDIST_BOOTSTRAP_MAX_LEN) from rank 0's `buf`
 * into every other rank's `buf`.  Rank 0 returns once all ranks fetched it
 * and its listening socket is closed.  Returns 0, or AMLDIST_ETIMEDOUT (rank
 * 0 never answered, or some rank never came), AMLDIST_EDENIED (the server
 * holds another job's token), AMLDIST_EPROTO (a peer disagrees on the world
 * size, the length or the call sequence), AMLDIST_ESYS, AMLDIST_EINVAL, with
 * amldist_last_error() naming the rank and the address.  A world of one
 * rank returns 0 at once.
 */
AMLDIST_API int amldist_bootstrap_bcast(const amldist_t *layout, void *buf,
                                        size_t len,
                                        const amldist_bootstrap_options_t *opts);

/*
 * Check that every rank of `layout` holds the same `value` as rank 0 (amlrun's
 * node agents: the number of workers on each node, from which every worker's
 * RANK is computed) before anything depends on it.  Collective, like
 * amldist_bootstrap_bcast(), whose port, token and timeout it uses (two
 * calls' worth).  Every rank returns the same verdict: 0 when all agree; on
 * a rank whose value differs AMLDIST_ECONFLICT, and on every other rank
 * AMLDIST_EPEER, with amldist_last_error() naming `what`, that rank and both
 * values ("workers per node: rank 1 has 2, rank 0 has 1"); or an error of
 * amldist_bootstrap_bcast().  A world of one rank returns 0 at once.
 */
AMLDIST_API int amldist_bootstrap_agree(const amldist_t *layout, int value,
                                        const char *what,
                                        const amldist_bootstrap_options_t *opts);

/*
 * Create this rank's NCCL communicator over the whole layout: select the
 * device (`device` >= 0, else the PCI bus id in AMLDIST_GPU, else the local
 * rank modulo the visible device count), get an ncclUniqueId on rank 0,
 * broadcast it with amldist_bootstrap_bcast() and call ncclCommInitRank.
 * `comm_out` points to an ncclComm_t.  NCCL and the CUDA runtime are loaded
 * with dlopen at the first call, so a program that never calls this never
 * loads them.  Returns 0, AMLDIST_ENOTSUP (built without NCCL, or the
 * libraries cannot be loaded), AMLDIST_ENOGPU, AMLDIST_ECUDA, AMLDIST_ENCCL,
 * or an error of amldist_bootstrap_bcast().
 */
AMLDIST_API int amldist_nccl_comm_init(const amldist_t *layout, int device,
                                       void *comm_out,
                                       const amldist_bootstrap_options_t *opts);

#ifdef __cplusplus
}
#endif

#endif /* AMLDIST_BOOTSTRAP_H */
