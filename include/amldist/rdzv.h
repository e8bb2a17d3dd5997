/*
 * libamldist: the node agents' control plane (see amldist_rdzv(3)).
 * Included by <amldist.h>.
 *
 * The per-node agents of one job (amlrun, one per node) meet at a
 * rendezvous endpoint, get node ranks, learn every node's worker count,
 * then stay connected while their workers run: the first failure anywhere
 * stops every node's workers, restarts are rounds of the whole job, and an
 * agent that stops answering is declared dead.  The agent whose process
 * can listen on the endpoint's address hosts it (the first to bind it, when
 * several can); every agent, the host's own included, is a client of it.
 * The network work runs on a thread of the handle: the caller only polls
 * amldist_rdzv_fd() beside its own descriptors.
 *
 * Threads: every function of one handle is the caller's, to be called from
 * one thread at a time (they share the caller's view of the round without
 * a lock); the handle's own thread never runs the caller's code.
 */
#ifndef AMLDIST_RDZV_H
#define AMLDIST_RDZV_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct amldist_rdzv amldist_rdzv_t;

/* Defaults of the options below (milliseconds). */
#define AMLDIST_RDZV_LAST_CALL_MS 30000  /* torchrun's last_call_timeout */
#define AMLDIST_RDZV_KEEPALIVE_MS 1000
#define AMLDIST_RDZV_KEEPALIVE_MISSES 5
/* The most nodes one job may have. */
#define AMLDIST_RDZV_MAX_NODES 4096
/* The job's exit status when a node (or the host) was lost: no worker's
 * status stands for it (amlrun's own "could not do its job"). */
#define AMLDIST_RDZV_STATUS_LOST 125

/*
 * Initialise with AMLDIST_RDZV_OPTIONS_INIT so that fields added later keep
 * their defaults.  Every agent of a job must give the same endpoint, run
 * id, min/max nodes and max_restarts (an agent that differs is refused,
 * naming the value).
 */
#define AMLDIST_RDZV_OPTIONS_VERSION 2
typedef struct {
    unsigned version;     /* AMLDIST_RDZV_OPTIONS_VERSION */
    const char *endpoint; /* "HOST:PORT" or "[v6addr]:PORT" (required);
                             PORT 0 with max_nodes 1: a free port here */
    const char *run_id;   /* NULL: "none" */
    int min_nodes;        /* 1 <= min_nodes <= max_nodes */
    int max_nodes;        /* <= AMLDIST_RDZV_MAX_NODES */
    int nproc;            /* this node's workers, >= 1 */
    /* >= 0: this node's rank as an outer launcher or --node-rank gives it;
     * the nodes are then ordered by it (every agent must give one, all
     * distinct).  < 0: the host's own agent is node 0, the others follow
     * in the order they joined; in later rounds the nodes that stay keep
     * their order and newcomers follow. */
    int order;
    int max_restarts;     /* restarts of the whole job after a failure */
    /* NULL: AMLDIST_JOB_TOKEN, else one derived from the endpoint.  A peer
     * with another token is refused. */
    const char *token;
    /* <= 0: AMLDIST_BOOTSTRAP_TIMEOUT (seconds), else 300 s: how long
     * amldist_rdzv_join() waits for the host and for the round to form. */
    int join_timeout_ms;
    /* < 0: AMLDIST_RDZV_LAST_CALL_MS.  Once min_nodes have joined (and
     * fewer than max_nodes), the round waits this long for more. */
    int last_call_ms;
    /* <= 0: the defaults.  Host and agents send a heartbeat every
     * keepalive_ms; one that is silent for keepalive_ms * keepalive_misses
     * is declared dead.  Every agent must give the host's values (an agent
     * that differs is refused, naming both). */
    int keepalive_ms;
    int keepalive_misses;
    /* > 0: MASTER_PORT in every round; else node 0's agent picks a free
     * port for each round (PyTorch's store of the new round binds it). */
    int master_port;
    /* Non-NULL: MASTER_ADDR in every round (the host's counts; another
     * agent's is named by amldist_rdzv_warnings()); else node 0's
     * local_addr, else node 0's address as the host sees its connection. */
    const char *master_addr;
    /* Since version 2. */
    /* Non-NULL: the address this node is known by in the rendezvous
     * (torchrun's --local-addr): node 0's becomes MASTER_ADDR. */
    const char *local_addr;
    /* Non-NULL: the GPUs this agent's workers may use, as text that
     * names them (PCI bus ids).  Agents of one machine (one boot of one
     * kernel, so network namespaces and containers of one host count as
     * one) that give the same text split those GPUs among them
     * (amldist_rdzv_gpu_share()).  NULL: this agent shares with none. */
    const char *gpu_ids;
    /* >= 0: while the round forms, lines on it (how many nodes are in,
     * when it forms) are written to this descriptor, each after
     * note_prefix (NULL: none).  < 0: none. */
    int note_fd;
    const char *note_prefix;
} amldist_rdzv_options_t;
#define AMLDIST_RDZV_OPTIONS_INIT                                              \
    { AMLDIST_RDZV_OPTIONS_VERSION, NULL, NULL, 1, 1, 1, -1, 0, NULL, 0, -1,   \
      0, 0, 0, NULL, NULL, NULL, -1, NULL }

/* Flags of amldist_rdzv_fail(). */
enum {
    /* Not a worker's failure (a signal to the agent, a worker that could not
     * start): the job ends, whatever restarts are left. */
    AMLDIST_RDZV_FINAL = 1u << 0
};

/* amldist_rdzv_state() */
typedef enum {
    AMLDIST_RDZV_RUNNING = 0, /* workers of this round may run */
    AMLDIST_RDZV_STOP = 1     /* stop this node's workers now */
} amldist_rdzv_state_t;

/*
 * Join the job: connect to (or host) the endpoint, retrying until the host
 * listens, and wait until the first round has formed.  Returns 0 with a
 * handle, or AMLDIST_ETIMEDOUT (no host, or too few nodes, within the join
 * timeout), AMLDIST_EDENIED (refused: another job's token or run id, the
 * job is full or over, a stale agent), AMLDIST_EPROTO (options differ from
 * the host's), AMLDIST_ECONFLICT (two agents give the same order),
 * AMLDIST_EINVAL, AMLDIST_ESYS; amldist_last_error() says which and names
 * the peer.
 */
AMLDIST_API int amldist_rdzv_join(const amldist_rdzv_options_t *opts,
                                  amldist_rdzv_t **out);

/*
 * Since AMLDIST_1.4: this node cannot take part (its workers cannot
 * start: a missing command, say), and the job has not formed yet.  Join
 * with opts only to say so: the host ends the job at once with `status`
 * (0..255) and `summary` (lines, each with its own margin), which every
 * node that joined hears from amldist_rdzv_join() (AMLDIST_EDENIED, the
 * summary in amldist_last_error()), as does every node that joins later,
 * instead of waiting for this one until the join timeout.  When this
 * agent hosts the endpoint it stays until the job's other nodes have
 * been told, or the join timeout.  Returns 0 when the host heard it, or an
 * error as amldist_rdzv_join()'s (a round already runs: AMLDIST_EDENIED).
 */
AMLDIST_API int amldist_rdzv_join_failed(const amldist_rdzv_options_t *opts,
                                         int status, const char *summary);

/*
 * Since AMLDIST_1.5: after amldist_rdzv_join() failed with AMLDIST_EDENIED
 * because the job ended before this node got a round (another node's
 * amldist_rdzv_join_failed(), or a job that ended without it), the job's
 * exit status (0..255), so that a launcher exits with the first failure's
 * status; -1 after any other return of this thread's last
 * amldist_rdzv_join().  Per thread, as amldist_last_error().
 */
AMLDIST_API int amldist_rdzv_join_status(void);

/* The current round: its number (0, 1, ...), the restarts after failures
 * so far (TORCHELASTIC_RESTART_COUNT), this node's rank, the node count,
 * node `node`'s worker count, and whether this agent hosts the endpoint. */
AMLDIST_API int amldist_rdzv_round(const amldist_rdzv_t *r);
AMLDIST_API int amldist_rdzv_restart_count(const amldist_rdzv_t *r);
AMLDIST_API int amldist_rdzv_node_rank(const amldist_rdzv_t *r);
AMLDIST_API int amldist_rdzv_num_nodes(const amldist_rdzv_t *r);
AMLDIST_API int amldist_rdzv_node_nproc(const amldist_rdzv_t *r, int node);
AMLDIST_API int amldist_rdzv_is_host(const amldist_rdzv_t *r);

/*
 * The layout of this node's worker `index` in the current round, numbered
 * as torchrun numbers workers of nodes with different worker counts: RANK
 * = the workers of the nodes before this one + index, WORLD_SIZE = every
 * node's workers, LOCAL_RANK = index, LOCAL_WORLD_SIZE = this node's
 * count, NODE_RANK (GROUP_RANK) and the node count, and the round's
 * MASTER_ADDR and MASTER_PORT.  Free it with amldist_free().
 */
AMLDIST_API int amldist_rdzv_worker_layout(const amldist_rdzv_t *r,
                                           int index, amldist_t **out);

/*
 * While the workers run: amldist_rdzv_fd() becomes readable when the job's
 * state changes; amldist_rdzv_state() then says whether to stop this node's
 * workers (another node failed, was lost, or was stopped by a signal; or a
 * node joined an elastic job), and amldist_rdzv_stop_reason() says why in
 * one line ("" while running).  The descriptor stays readable while the
 * state is AMLDIST_RDZV_STOP, until amldist_rdzv_wait() reads it.
 * amldist_rdzv_stop_reason() returns the handle's copy of the reason as it
 * was at the call: it stays so, whatever the job does meanwhile, until the
 * next amldist_rdzv_stop_reason() or amldist_rdzv_close() on the handle.
 */
AMLDIST_API int amldist_rdzv_fd(const amldist_rdzv_t *r);
AMLDIST_API int amldist_rdzv_state(amldist_rdzv_t *r);
AMLDIST_API const char *amldist_rdzv_stop_reason(amldist_rdzv_t *r);

/*
 * This node's first failure in the round: worker `rank` (negative: not a
 * worker) ended with `status` (an exit status, 128+N for signal N), and
 * `summary` (at most 8 KiB are sent: its host, status, last lines, root
 * cause) is what node 0 prints if it is the job's first failure.  The host
 * orders every node to stop.  With AMLDIST_RDZV_FINAL the job ends, even
 * after amldist_rdzv_done().  Returns 0 or an error.
 */
AMLDIST_API int amldist_rdzv_fail(amldist_rdzv_t *r, unsigned flags, int rank,
                                  int status, const char *summary);

/*
 * After this node's workers have all ended: amldist_rdzv_done() tells the
 * host (`status` 0: all succeeded, else this node's failure, which counts
 * as one even without amldist_rdzv_fail(); after a stop the host ordered,
 * the status is not a failure), without waiting.  amldist_rdzv_wait() then waits up to `timeout_ms` (< 0: for
 * ever; 0: not at all) for the rest of the job, amldist_rdzv_fd() becoming
 * readable when there is an answer.  It returns 1 when a new round has
 * formed (a restart, or an elastic job re-forming: the handle now describes
 * it), 0 when the job is over (amldist_rdzv_exit_status() is its status,
 * the same on every node; AMLDIST_RDZV_STATUS_LOST when the host was lost),
 * or AMLDIST_ETIMEDOUT when neither yet.  amldist_rdzv_next() is the two
 * in one call, waiting for ever.
 */
AMLDIST_API int amldist_rdzv_done(amldist_rdzv_t *r, int status);
AMLDIST_API int amldist_rdzv_wait(amldist_rdzv_t *r, int timeout_ms);
AMLDIST_API int amldist_rdzv_next(amldist_rdzv_t *r, int status);

/*
 * This node's part of its machine's GPUs in the current round.  The
 * agents of one machine that gave the same gpu_ids are numbered as if one
 * launcher started all their workers: *machine_ranks is their workers in
 * all, *first those of the machine's nodes before this one, so that this
 * node's local rank r takes GPU (first + r) mod the GPUs (the plan's
 * gpu_first and machine_ranks, amldist_topo(3)).  A node alone on its
 * machine gets 0 and its own worker count.  Returns 0 or AMLDIST_EINVAL.
 * Since AMLDIST_1.1.
 */
AMLDIST_API int amldist_rdzv_gpu_share(const amldist_rdzv_t *r, int *first,
                                       int *machine_ranks);

/* What this agent asked for that the round does not do, one line each
 * ("" when none), valid until the next round or amldist_rdzv_close(): its
 * master_addr or master_port where the host's or node 0's won, its
 * join_timeout_ms or last_call_ms where the host's differ (the host's are
 * the ones that apply).  Since AMLDIST_1.1. */
AMLDIST_API const char *amldist_rdzv_warnings(const amldist_rdzv_t *r);

/* The job's exit status: 0, or its first failure's status. */
AMLDIST_API int amldist_rdzv_exit_status(const amldist_rdzv_t *r);
/* The job's first failure in words ("" if none): which node and rank, its
 * status and the summary that node gave.  Set once the job is over, it
 * stays valid until amldist_rdzv_close(). */
AMLDIST_API const char *amldist_rdzv_failure(const amldist_rdzv_t *r);

/* Leave the job and free the handle.  The host waits (at most the
 * keepalive's dead time) for the other agents to have heard the end. */
AMLDIST_API void amldist_rdzv_close(amldist_rdzv_t *r);


/*
 * Since AMLDIST_1.2: what crosses nodes while the workers run (amlrun's
 * --hang-timeout, --status and --stacks of issue 20), every piece of it
 * carried by the handle's thread, which never waits for the caller.
 */

/* The job's exit status when the host found it hung (as timeout(1)). */
#define AMLDIST_RDZV_STATUS_HANG 124

/*
 * This node's clock against the host's, estimated as NTP does from the
 * round trips of a time request sent once a heartbeat (the least round
 * trip of the last 8 is kept): the host's clock reads this node's plus
 * *offset_ns, within *error_ns (half that round trip).  This node's clock
 * is CLOCK_MONOTONIC as this process reads it; on the host's node the
 * offset is 0 within 0.  Returns 0, or AMLDIST_EUNKNOWN before the first
 * answer, AMLDIST_EINVAL.
 *
 * For tests only: AMLDIST_TEST_CLOCK_SHIFT_MS=N in a process's environment
 * makes the control plane read its clock N ms ahead (N < 0: behind), as
 * another machine's clock would be; amldist_rdzv_host_time_ns() takes it
 * into account, so that a test sees the estimate find it.
 */
AMLDIST_API int amldist_rdzv_clock_offset_ns(const amldist_rdzv_t *r,
                                             long long *offset_ns,
                                             long long *error_ns);
/* A time of this node (CLOCK_MONOTONIC, ns) on the host's clock, with the
 * current estimate (the time itself, shifted as above, before one). */
AMLDIST_API long long amldist_rdzv_host_time_ns(const amldist_rdzv_t *r,
                                                long long monotonic_ns);

/*
 * Hangs across nodes.  amldist_rdzv_watch() with timeout_ms > 0 makes this
 * node send its ranks' view to the host: the latest one that
 * amldist_rdzv_set_view() gave, every timeout_ms / 8 (at most every 0.5
 * s, at least every 100 ms), its times put on the host's clock; 0 stops it
 * (nothing is sent unless watching).  The host decides from every node's
 * view, with the least timeout the nodes give, as of twice that interval
 * and 50 ms ago (a view on its way is no hang), by amlrun's own rule: where
 * some rank uses the progress API, every live rank whose last call (its
 * start, before one) is older than the timeout has stalled; else the job
 * is hung when no rank anywhere has shown a sign of life (its start, an
 * output line, its end) for the timeout.  Then it asks every
 * node for a gather of topic AMLDIST_RDZV_TOPIC_HANG (below), whose
 * answers reach the host's own node, and the job ends (or restarts) with
 * that node's amldist_rdzv_fail() (status AMLDIST_RDZV_STATUS_HANG); if
 * none comes by the gather's end and 10 s more, the host ends the round
 * itself, as a failure of that status.  Once a round.
 */
enum {
    AMLDIST_RDZV_VIEW_ALIVE = 1u << 0, /* the rank runs */
    AMLDIST_RDZV_VIEW_API = 1u << 1    /* it called the progress API */
};
typedef struct {
    int rank;           /* the job's rank */
    unsigned flags;     /* AMLDIST_RDZV_VIEW_* */
    /* CLOCK_MONOTONIC ns of this node, 0: none: its start (this round),
     * its last progress call, its last output line, its end. */
    long long start_ns, progress_ns, line_ns, end_ns;
} amldist_rdzv_view_t;
AMLDIST_API int amldist_rdzv_watch(amldist_rdzv_t *r, int timeout_ms);
/* This node's ranks (n <= 4096, copied).  0, AMLDIST_EINVAL, ENOMEM. */
AMLDIST_API int amldist_rdzv_set_view(amldist_rdzv_t *r,
                                      const amldist_rdzv_view_t *v, int n);

/*
 * Gathers: one node asks, every node of the job (the asker too) answers
 * with an opaque blob (at most 8 MiB a node), and the answers reach the
 * asker, with the nodes that did not answer in time named.  The host
 * relays both ways, at most 8 gathers at once.
 *
 * amldist_rdzv_events_fd() is readable while a request waits to be
 * answered or a gather is complete here: poll it beside
 * amldist_rdzv_fd(), then take them until none is left.
 */
enum {
    AMLDIST_RDZV_TOPIC_HANG = 1,   /* the host found the job hung (its
                                      requests only): this node's stacks */
    AMLDIST_RDZV_TOPIC_STACKS = 2, /* amlrun --stacks */
    AMLDIST_RDZV_TOPIC_STATUS = 3, /* amlrun --status */
    AMLDIST_RDZV_TOPIC_USER = 256  /* and above: the caller's own */
};
typedef struct {
    unsigned id;            /* for amldist_rdzv_answer() */
    unsigned topic;
    int asker;              /* the asking node's rank; -1: the host */
    const unsigned char *arg; /* what the asker gave (arg_len bytes) */
    size_t arg_len;
    /* AMLDIST_RDZV_TOPIC_HANG: the host's timeout, and the ranks that
     * stopped progressing (per rank; none: the whole job stopped). */
    int hang_timeout_ms;
    const int *stalled;
    int nstalled;
} amldist_rdzv_request_t;
typedef struct {
    int node;               /* its node rank, -1: in no round now */
    int status;             /* 0: answered; AMLDIST_ETIMEDOUT: no answer
                               in time, or its agent was lost;
                               AMLDIST_ERANGE: its answer was too large */
    char addr[64];          /* its address as the host sees it ("" when
                               it answered) */
    const unsigned char *blob; /* its answer, len bytes */
    size_t len;
} amldist_rdzv_answer_t;
typedef struct {
    unsigned tag;           /* amldist_rdzv_gather()'s; 0: the host's */
    unsigned topic;
    int refused;            /* the host would not gather (too many at once,
                               or this node is in no round) */
    /* The request as every node got it (for a hang: the host's timeout
     * and stalled ranks, as in amldist_rdzv_request_t). */
    const unsigned char *arg;
    size_t arg_len;
    int hang_timeout_ms;
    const int *stalled;
    int nstalled;
    amldist_rdzv_answer_t *answers; /* one a node asked */
    int n;
} amldist_rdzv_gather_t;

AMLDIST_API int amldist_rdzv_events_fd(const amldist_rdzv_t *r);
/* Ask every node: `topic`, `arg` (at most 4 KiB), answers awaited at most
 * timeout_ms (<= 0: 5 s; at most 60 s).  *tag names the gather. */
AMLDIST_API int amldist_rdzv_gather(amldist_rdzv_t *r, unsigned topic,
                                    const void *arg, size_t arg_len,
                                    int timeout_ms, unsigned *tag);
/* The next request to answer: 1 with *out (free it with
 * amldist_rdzv_request_free()), 0 when none waits. */
AMLDIST_API int amldist_rdzv_next_request(amldist_rdzv_t *r,
                                          amldist_rdzv_request_t **out);
AMLDIST_API void amldist_rdzv_request_free(amldist_rdzv_request_t *q);
/* Answer request `id` (the blob is copied; at most 8 MiB, else
 * AMLDIST_ERANGE).  Answering late, or twice, is harmless. */
AMLDIST_API int amldist_rdzv_answer(amldist_rdzv_t *r, unsigned id,
                                    const void *blob, size_t len);
/* The next complete gather: 1 with *out (free it with
 * amldist_rdzv_gather_free()), 0 when none. */
AMLDIST_API int amldist_rdzv_next_gather(amldist_rdzv_t *r,
                                         amldist_rdzv_gather_t **out);
AMLDIST_API void amldist_rdzv_gather_free(amldist_rdzv_gather_t *g);

/*
 * Stragglers across nodes: each node hands its ranks' per-step marks
 * (CLOCK_MONOTONIC ns of this node), and the host's own node takes every
 * node's, on the host's clock.  Sampled: a node sends at most 1024 marks
 * a second, those of steps that are multiples of a power of two that it
 * doubles while it has more (and halves while it has far fewer), so the
 * nodes' samples share the steps of the coarsest.  Returns 0 or an error.
 */
typedef struct {
    int node;               /* amldist_rdzv_take_marks(): whose */
    int rank;
    unsigned long long step;
    long long t_ns;
} amldist_rdzv_mark_t;
AMLDIST_API int amldist_rdzv_put_marks(amldist_rdzv_t *r,
                                       const amldist_rdzv_mark_t *m, int n);
/* On the host's node: up to max marks received (oldest first; the oldest
 * are dropped beyond 65536 unread); the count. */
AMLDIST_API int amldist_rdzv_take_marks(amldist_rdzv_t *r,
                                        amldist_rdzv_mark_t *out, int max);

#ifdef __cplusplus
}
#endif

#endif /* AMLDIST_RDZV_H */
