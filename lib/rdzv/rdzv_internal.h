/*
 * The control plane below amldist_rdzv_*(): its frames and their
 * payloads, its connections (the decisions: host_sm.h; the agent's handle:
 * handle.h; its backends: backend.h, the frames' transport tcp/tcp.h).
 * Frames use net/frames.h's header (magic "AMLB", protocol, type, payload
 * length), shared with the bootstrap, with types of their own, on one
 * long-lived TCP connection per agent (net/conn.h), behind the channel's
 * handshake and each frame sealed when the job has a secret (net/chan.h;
 * the JOIN's token is then 0, or the options').  All integers are
 * big-endian; "text" is the rest of the payload, not NUL-terminated.
 *
 *   JOIN    agent -> host, first frame of a connection, or again after a
 *           DONE is answered with the next round's ASSIGN (not needed: the
 *           host re-forms the job from the DONEs):
 *           token u64 | agent id u64 | run id hash u64 | round u32 |
 *           nproc u32 | order u32 (0xffffffff: none) | min u32 | max u32 |
 *           max_restarts u32 | master port candidate u32 |
 *           keepalive ms u32 | keepalive misses u32 | last call ms u32 |
 *           join timeout ms u32 (the --rdzv-conf values, compared by the
 *           host) | machine u64 (0: none; agents of one machine that see
 *           the same GPUs split them) | local addr length u32 |
 *           protocol u32 (AMLDIST__RZ_PROTOCOL; a JOIN without it is
 *           protocol 1's, refused with a REFUSE that an agent of protocol
 *           1 reads) | local addr (its --local-addr, 0 .. 255 bytes)
 *   REFUSE  host -> agent, then the host closes: reason u32 | text
 *   ASSIGN  host -> agent: round u32 | restarts u32 | node rank u32 |
 *           nodes u32 | master port u32 | addr length u32 | flags u32
 *           (AMLDIST__RZ_F_*: where MASTER_ADDR/PORT come from) | last call
 *           ms u32 | join timeout ms u32 (the host's) | runs u32 | addr |
 *           the nodes: runs 0: for each node, nproc u32 | GPU offset u32
 *           (its machine's ranks before its own) | machine ranks u32 (of
 *           every node on its machine); else `runs` runs of nodes alike,
 *           each count u32 | nproc u32 | GPU offset u32 | machine ranks
 *           u32 (protocol 2: a uniform job's ASSIGN is of one run, 56
 *           bytes and the address, whatever its size; the host sends the
 *           shorter form)
 *   FAIL    agent -> host: round u32 | flags u32 | rank u32 (0xffffffff:
 *           none) | status u32 | text (the summary)
 *   STOP    host -> agent: round u32 | text (why, one line)
 *   DONE    agent -> host: round u32 | status u32 | master port candidate
 *           u32 (for the next round)
 *   FINISH  host -> agent: status u32 | text (the first failure, "" if none)
 *   BEAT    either way, empty: "still here"
 *   WAIT    host -> agent, while the round forms: text (one line: how
 *           many nodes are in and when the round forms)
 *
 * Issue 20's frames (clock.c, host_sm_watch.c, tcp/plane.c).  Times
 * "ns" are i64 nanoseconds on a clock named beside them: the agent's
 * (amldist__rz_clock_ns() of its process) or the host's.
 *   TIMEQ   agent -> host, once a heartbeat: t1 (agent ns, when sent)
 *   TIMEA   host -> agent, at once: t1 | t2 (host ns, TIMEQ read) | t3
 *           (host ns, TIMEA sent): the agent adds t4 and keeps the sample
 *           of least round trip of the last AMLDIST__RZ_CLOCK_SAMPLES
 *   VIEW    agent -> host, only while the agent watches for hangs: round
 *           u32 | hang timeout ms u32 | count u32 | for each rank: rank
 *           u32 | flags u32 (AMLDIST_RDZV_VIEW_*) | start ns | last
 *           progress ns | last line ns | end ns (host ns, 0: none)
 *   ASK     agent -> host: tag u32 (the asker's) | topic u32 | timeout
 *           ms u32 | arg (0 .. AMLDIST__RZ_ARG_MAX)
 *   QUERY   host -> every agent of the job: id u32 (the host's) | topic
 *           u32 | asker's node u32 (NONE: the host: a hang) | arg
 *   ANSWER  agent -> host: id u32 | flags u32 (AMLDIST__RZ_G_LAST) | a
 *           chunk of the answer (0 .. AMLDIST__RZ_CHUNK_MAX; the chunks
 *           of one answer at most AMLDIST__RZ_BLOB_MAX)
 *   RESULT  host -> the asker: tag u32 | topic u32 | index u32 (of the
 *           answering agent in the gather) | node u32 (NONE: not in a
 *           round) | flags u32 (AMLDIST__RZ_G_*) | data: a chunk of that
 *           agent's answer; MISSING: its address; END (index and node
 *           NONE, the gather is complete): the gather's arg
 *   MARKS   agent -> host, and host -> its own agent: node u32 (the
 *           host sets it) | count u32 | for each: rank u32 | step u64
 *           (as u32 pairs) | t ns (host ns)
 */
#ifndef AMLDIST_RDZV_INTERNAL_H
#define AMLDIST_RDZV_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/bootstrap_internal.h" /* its hash and timeout parsing */
#include "net/chan.h"
#include "net/conn.h"
#include "net/frames.h"
#include "net/sockets.h"
#include "util/parse.h"

enum {
    AMLDIST__RZ_JOIN = 16,
    AMLDIST__RZ_REFUSE = 17,
    AMLDIST__RZ_ASSIGN = 18,
    AMLDIST__RZ_FAIL = 19,
    AMLDIST__RZ_STOP = 20,
    AMLDIST__RZ_DONE = 21,
    AMLDIST__RZ_FINISH = 22,
    AMLDIST__RZ_BEAT = 23,
    AMLDIST__RZ_WAIT = 24,
    AMLDIST__RZ_TIMEQ = 25,
    AMLDIST__RZ_TIMEA = 26,
    AMLDIST__RZ_VIEW = 27,
    AMLDIST__RZ_ASK = 28,
    AMLDIST__RZ_QUERY = 29,
    AMLDIST__RZ_ANSWER = 30,
    AMLDIST__RZ_RESULT = 31,
    AMLDIST__RZ_MARKS = 32
};

/* Issue 20's frames' limits. */
#define AMLDIST__RZ_VIEW_HEAD 12
#define AMLDIST__RZ_VIEW_RANK 40
#define AMLDIST__RZ_VIEW_RANKS 4096 /* ranks of one node in a VIEW */
#define AMLDIST__RZ_ARG_MAX 4096
#define AMLDIST__RZ_CHUNK_MAX 65536
#define AMLDIST__RZ_BLOB_MAX (8u << 20)    /* one agent's answer */
#define AMLDIST__RZ_GATHER_MAX (64u << 20) /* one gather's answers */
#define AMLDIST__RZ_GATHERS_MAX 8          /* gathers open at once */
#define AMLDIST__RZ_GATHER_MS_MAX 60000    /* the longest a gather waits */
#define AMLDIST__RZ_RESULT_HEAD 20
#define AMLDIST__RZ_MARK_LEN 20
#define AMLDIST__RZ_MARKS_MAX 1024         /* marks in one MARKS */
#define AMLDIST__RZ_CLOCK_SAMPLES 8
/* RESULT and ANSWER flags. */
#define AMLDIST__RZ_G_LAST 1u    /* the last chunk of this agent's answer */
#define AMLDIST__RZ_G_MISSING 2u /* no answer in time (or its agent lost) */
#define AMLDIST__RZ_G_TOOBIG 4u  /* its answer went past the bound */
#define AMLDIST__RZ_G_END 8u     /* the gather is complete */
#define AMLDIST__RZ_G_REFUSED 16u /* END: the host would not gather */

/* How often a watching agent sends its view: an eighth of the timeout,
 * from 100 ms to 0.5 s; the host allows twice that, and 50 ms, for a view
 * on its way (AMLDIST__RZ_VIEW_SLACK_NS), so that a rank's progress the
 * host has not heard of yet never makes a hang. */
#define AMLDIST__RZ_VIEW_EVERY_MS(timeout_ms)                                  \
    ((timeout_ms) / 8 < 100 ? 100 : (timeout_ms) / 8 > 500 ? 500 : (timeout_ms) / 8)
#define AMLDIST__RZ_VIEW_SLACK_NS(timeout_ms)                                  \
    ((2 * (int64_t)AMLDIST__RZ_VIEW_EVERY_MS(timeout_ms) + 50) * 1000000)
/* A node whose last view is older than twice that is late: its amlrun
 * (stopped, or blocked on a console that does not read) sends no fresh
 * view, and the host cannot tell its ranks stalled from unseen.  While
 * one is late the host decides nothing (its loss is its heartbeats'
 * business); when its views come again, the rule's clock restarts.  It
 * stays under the timeout, so that a node's ranks are never judged on
 * a view that late. */
#define AMLDIST__RZ_VIEW_LATE_NS(timeout_ms)                                   \
    (2 * AMLDIST__RZ_VIEW_SLACK_NS(timeout_ms))

/* One rank's view as the host keeps it (host ns; 0: none). */
typedef struct {
    uint32_t rank, flags;
    int64_t start_ns, progress_ns, line_ns, end_ns;
} amldist__rz_view_t;

/* The control plane's clock: CLOCK_MONOTONIC in ns, plus the test shift
 * AMLDIST_TEST_CLOCK_SHIFT_MS (tests only: it makes this process's clock
 * read that much ahead, as another machine's would) (clock.c). */
int64_t amldist__rz_clock_ns(void);
int64_t amldist__rz_clock_shift_ns(void);
/* Read the test shift again (amldist_rdzv_join()). */
void amldist__rz_clock_reload(void);

/* NTP's estimate of a peer's clock offset (clock.c), pure: the samples of
 * the last AMLDIST__RZ_CLOCK_SAMPLES exchanges. */
typedef struct {
    int64_t offset[AMLDIST__RZ_CLOCK_SAMPLES], delay[AMLDIST__RZ_CLOCK_SAMPLES];
    int n, next;
} amldist__rz_clock_t;
/* One exchange: t1 sent (ours), t2 received, t3 answered (theirs), t4
 * answer received (ours).  0, or -1 when the times are impossible (t4 <
 * t1, or a round trip shorter than the peer's own time on it). */
int amldist__rz_clock_add(amldist__rz_clock_t *c, int64_t t1, int64_t t2,
                          int64_t t3, int64_t t4);
/* theirs = ours + *offset, within *error (half the least round trip of
 * the samples kept); -1 when there is no sample yet. */
int amldist__rz_clock_best(const amldist__rz_clock_t *c, int64_t *offset,
                           int64_t *error);

void amldist__rz_put_u64(unsigned char *p, uint64_t v);
uint64_t amldist__rz_get_u64(const unsigned char *p);

/* The control plane's protocol, in the JOIN: 2 since the ASSIGN's runs
 * (issue 40).  A host refuses a JOIN of another, naming both (an agent of
 * protocol 1 sends one without the field, AMLDIST__RZ_JOIN_V1_LEN, and
 * reads the REFUSE); an agent refused by a host of protocol 1 hears "a
 * malformed JOIN", and says that the host may be of another version. */
#define AMLDIST__RZ_PROTOCOL 2u
/* A JOIN without a local address; the address adds its length. */
#define AMLDIST__RZ_JOIN_V1_LEN 80
#define AMLDIST__RZ_JOIN_LEN 84
#define AMLDIST__RZ_JOIN_MAX (AMLDIST__RZ_JOIN_LEN + AMLDIST__RZ_ADDR_MAX)
#define AMLDIST__RZ_TEXT_MAX 480      /* REFUSE and STOP texts */
#define AMLDIST__RZ_SUMMARY_MAX 8192  /* FAIL's summary */
#define AMLDIST__RZ_FINISH_MAX (4 + AMLDIST__RZ_SUMMARY_MAX + 512)
#define AMLDIST__RZ_ADDR_MAX 255
#define AMLDIST__RZ_ASSIGN_HEAD 40
#define AMLDIST__RZ_ASSIGN_NODE 12
#define AMLDIST__RZ_ASSIGN_RUN 16
#define AMLDIST__RZ_ASSIGN_MAX                                                 \
    (AMLDIST__RZ_ASSIGN_HEAD + AMLDIST__RZ_ADDR_MAX +                          \
     AMLDIST__RZ_ASSIGN_NODE * AMLDIST_RDZV_MAX_NODES)
/* ASSIGN flags: MASTER_ADDR is the host's option, else node 0's
 * --local-addr, else node 0's address as the host sees it, or the host's
 * own address as the other nodes reached it when node 0 came over
 * loopback and another node did not (ADDR_REACHED); MASTER_PORT is the
 * host's option, else node 0's pick. */
#define AMLDIST__RZ_F_ADDR_OPTION 1u
#define AMLDIST__RZ_F_ADDR_LOCAL 2u
#define AMLDIST__RZ_F_PORT_OPTION 4u
#define AMLDIST__RZ_F_ADDR_REACHED 8u
#define AMLDIST__RZ_F_ALL 15u
#define AMLDIST__RZ_NONE 0xffffffffu
/* Workers: of one node, and of the whole job (the sum over its nodes),
 * that an agent accepts in an ASSIGN: it numbers them in an int. */
#define AMLDIST__RZ_NPROC_MAX (1u << 20)
#define AMLDIST__RZ_WORLD_MAX INT32_MAX

/* REFUSE reasons. */
enum {
    AMLDIST__RZ_R_TOKEN = 1,    /* another job's token */
    AMLDIST__RZ_R_RUN = 2,      /* another run id */
    AMLDIST__RZ_R_OPTIONS = 3,  /* min/max nodes or max_restarts differ */
    AMLDIST__RZ_R_ORDER = 4,    /* order missing, or taken by another */
    AMLDIST__RZ_R_FULL = 5,     /* the job has its max nodes */
    AMLDIST__RZ_R_STALE = 6,    /* an agent of an earlier round, declared
                                   dead, or an agent id already joined */
    AMLDIST__RZ_R_OVER = 7,     /* the job is over */
    AMLDIST__RZ_R_TIMEOUT = 8,  /* the round did not form in time */
    AMLDIST__RZ_R_PROTO = 9     /* a malformed frame */
};

/* The round a JOIN asks for when its node cannot start (its command is
 * missing, say): it joins only to send its FAIL, which ends the job at
 * once for every node, instead of leaving them to the join timeout.  A
 * host of before it refuses such a JOIN as stale. */
#define AMLDIST__RZ_ROUND_FAILING 0xfffffffeu

/* How far apart the host's frames to an idle agent are, and how often
 * an agent asks the host's clock (TIMEQ, once its first samples are in):
 * two keepalives where the dead time is four or more (the default: 1 s
 * and 5), else one.  The host answers a TIMEQ with its next beat (the
 * TIMEA is that beat) and beats an agent it sent nothing since its last
 * beat: half the host's sends of an idle job (issue 40: at 4,096 agents
 * they were most of its steady cost).  An agent still beats each
 * keepalive (its TIMEQ one of them), so that an agent whose thread is
 * held up is given up no sooner than before; an agent gives the host up
 * after the dead time of silence, at least two keepalives beyond the
 * frame it waits for. */
#define AMLDIST__RZ_BEAT_MS(keepalive_ms, dead_ms)                             \
    ((long long)(dead_ms) >= 4LL * (keepalive_ms) ? 2LL * (keepalive_ms)       \
                                                  : (long long)(keepalive_ms))
/* The first TIMEQs of a connection, answered at once: the clock's offset
 * is known as soon as the workers start (tcp/plane.c asks them 50 ms
 * apart). */
#define AMLDIST__RZ_TIMEQ_QUICK 4

/* How often an agent or host that waits for the round says so (ms): no
 * silent wait is longer. */
#define AMLDIST__RZ_SAY_MS 10000

typedef struct {
    uint64_t token, agent, run;
    uint32_t protocol; /* AMLDIST__RZ_PROTOCOL (put_join sends it) */
    uint32_t round, nproc, order, min, max, max_restarts, port;
    uint32_t keepalive_ms, keepalive_misses, last_call_ms, join_timeout_ms;
    uint64_t machine;
    char local_addr[AMLDIST__RZ_ADDR_MAX + 1]; /* "": none */
} amldist__rz_join_t;

/* Encode *j at p (room for AMLDIST__RZ_JOIN_MAX): its length. */
size_t amldist__rz_put_join(unsigned char *p, const amldist__rz_join_t *j);
/* Decode a JOIN of len bytes: 0, -1 when its address's length is not
 * the rest of the frame or the address holds a NUL, or -2 when it is of
 * another protocol (j->protocol: which; 1 for a JOIN without the field). */
int amldist__rz_get_join(const unsigned char *p, uint32_t len,
                         amldist__rz_join_t *j);

/* The frames of the control plane with their payload limits, and a
 * connection (net/conn.h) whose peer sends them. */
extern const amldist__frame_limit_t amldist__rz_frames[];
/* The largest payload a frame of `type` may carry (JOIN: exactly). */
uint32_t amldist__rz_max_payload(unsigned type);
void amldist__rz_conn_init(amldist__conn_t *c, int fd);

/* What every agent of a job shares, and the host enforces. */
typedef struct {
    uint64_t token, run, self_agent; /* self_agent: the host's own agent */
    int min, max, max_restarts;
    int join_timeout_ms, last_call_ms, keepalive_ms, keepalive_misses,
        dead_ms;
    int master_port;                  /* > 0: fixed */
    char master_addr[AMLDIST__HOST_MAX]; /* "": node 0's address */
    char token_source[320];
    char endpoint[300]; /* as given, for the forming round's lines */
    /* The job's secret (util/secret.h): every connection is the channel's
     * (net/chan.h), and the JOIN's token never derives from the secret. */
    int secure;
    amldist__chan_keys_t keys;
    char secret_source[300];
} amldist__rz_cfg_t;

/* A round as an ASSIGN describes it. */
typedef struct {
    int round, restarts, node, nnodes, master_port;
    unsigned flags;                  /* AMLDIST__RZ_F_* */
    int last_call_ms, join_timeout_ms; /* the host's */
    char master_addr[AMLDIST__HOST_MAX];
    /* nnodes entries each, malloc'd (one block, nproc first): workers,
     * and the GPU share of each node among the nodes of its machine (the
     * machine's ranks before the node's own, and all of them). */
    int *nproc, *gpu_first, *machine_ranks;
} amldist__rz_round_t;

/* The three arrays of a round of n nodes, in one block at rd->nproc;
 * 0, or -1 when out of memory (rd unchanged). */
int amldist__rz_round_alloc(amldist__rz_round_t *rd, int n);
/* Each node's GPU share in round *rd (nnodes and nproc set) among the
 * nodes of its machine (machine[i], 0: none) (share.c). */
void amldist__rz_share_gpus(amldist__rz_round_t *rd, const uint64_t *machine);

/* Encode round *rd as an ASSIGN for its node rd->node at p (room for
 * AMLDIST__RZ_ASSIGN_MAX); its length. */
size_t amldist__rz_put_assign(const amldist__rz_round_t *rd, unsigned char *p);
/* Decode an ASSIGN into *out (its nproc array replaced); 0 or -1 with *why. */
int amldist__rz_get_assign(const unsigned char *p, uint32_t len,
                           amldist__rz_round_t *out, const char **why);

/* master.c: whether `addr` (numeric, or a name of RFC 6761's localhost)
 * is a loopback address; where a round's MASTER_ADDR came from, in words
 * (its AMLDIST__RZ_F_* flags); and the check of an ASSIGN on the node it
 * is for: 1 with the refusal in msg when the round's MASTER_ADDR is
 * loopback while this node is not node 0 and reached the host at
 * `reached`, not a loopback address ("" or NULL: not known); else 0. */
int amldist__rz_addr_loopback(const char *addr);
const char *amldist__rz_addr_source(unsigned flags);
int amldist__rz_master_unreachable(const amldist__rz_round_t *rd,
                                   const char *reached, char *msg,
                                   size_t size);

/* The layout of worker `index` of this node in round *rd (layout.c). */
int amldist__rz_layout(const amldist__rz_round_t *rd, int index,
                       amldist_t **out);

/* A port nobody listens on now (the kernel's pick), a master port
 * candidate; 0 when none (share.c). */
int amldist__rz_free_port(void);

/* The token both sides expect: the options', else with the job's secret
 * (`secure`; the caller loaded it) 0, since the channel proves the secret,
 * else one derived from the endpoint.  0 (always, today). */
int amldist__rz_token(const char *explicit_token, const char *endpoint,
                      int secure, uint64_t *token, char *source, size_t size);
/* A connection (net/conn.h) of the control plane on fd, the channel's
 * when the job has a secret; 0, or -1 (fd closed). */
int amldist__rz_conn_open(amldist__conn_t *c, int fd,
                          const amldist__rz_cfg_t *cfg, int server);

#endif /* AMLDIST_RDZV_INTERNAL_H */
