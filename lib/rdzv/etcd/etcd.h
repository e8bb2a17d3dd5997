/*
 * The etcd backend (backend.h; the registry's "etcd"): the agents meet in
 * an etcd v3 cluster, under one prefix per run id, through etcd's JSON
 * gateway over libcurl (curl.c, loaded when first needed).  Each agent
 * holds a lease and its member key under it; the agent that creates the
 * decider key runs the decider (host_sm.h) fed from the keys the agents
 * write (decider.c), and writes its actions as keys every agent watches
 * (agent.c).  Each handle has a thread of this backend's that owns every
 * curl handle and meets the caller only in the sink (agent_state.h) and
 * through curl's wake-up.  Keys, under P = PREFIX/<run id hash>:
 *   P/m/<agent>   the member: its JOIN (and its address), under its lease
 *   P/e/<agent>/<n>  its FAIL or DONE, until the decider consumed it
 *   P/b/lead      the decider's agent, under its lease
 *   P/b/plane     the decider's plane address (issue 20's frames go over
 *                 TCP to it: plane.c, plane_host.c), under its lease
 *   P/a/<agent>/<seq>  a batch of the decider's actions for one agent
 *   P/b/<seq>     a batch for several (ASSIGN, STOP, ...)
 *   P/z/<seq>     the decider's log: every event it decided on, and when
 * every value sealed with the job's secret when it has one (net/chan.h's
 * amldist__chan_value_seal, the key's name bound to it).
 */
#ifndef AMLDIST_RDZV_ETCD_H
#define AMLDIST_RDZV_ETCD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rdzv/agent_state.h"
#include "rdzv/backend.h"
#include "rdzv/plane_link.h"
#include "rdzv/rdzv_internal.h"

extern const struct amldist__rz_backend_ops amldist__rz_etcd_backend;

/* A key's event (type 0 PUT, 1 DELETE; the value decoded, the key's
 * name raw, its revisions), as watches and ranges hand them over. */
typedef void (*amldist__etcd_on_event)(void *arg, int type, const char *key,
                                       size_t klen, const unsigned char *v,
                                       size_t vlen, long long create_rev,
                                       long long mod_rev);

/* json.c: a value's text in a JSON document (a span, not copied), and
 * the readers of etcd's answers; base64 both ways. */
typedef struct {
    const char *p, *e;
} amldist__js_t;
/* Member `key` of object v: 0 with *out, or -1 (none, or v no object). */
int amldist__js_get(amldist__js_t v, const char *key, amldist__js_t *out);
/* The next element of the array whose rest is *it (start: the array
 * itself): 1 with *out, 0 at its end. */
int amldist__js_next(amldist__js_t *it, amldist__js_t *out);
/* A number, bare or quoted (etcd's int64s are strings); dflt if none. */
long long amldist__js_int(amldist__js_t v, long long dflt);
/* A string without escapes into out (NUL-terminated): 0, or -1. */
int amldist__js_str(amldist__js_t v, char *out, size_t size);
/* A path of members ("result.header.revision"): 0 with *out, or -1. */
int amldist__js_path(amldist__js_t v, const char *path, amldist__js_t *out);
/* base64 of n bytes into out (room for 4 * ((n + 2) / 3) + 1): its
 * length; decoded: its length, or -1. */
size_t amldist__b64_enc(const unsigned char *p, size_t n, char *out);
long amldist__b64_dec(const char *p, size_t n, unsigned char *out);
/* One of etcd's KeyValues (a range's, a watch event's) decoded and
 * handed to fn: its mod revision, or -1 (malformed: not handed). */
long long amldist__js_kv(amldist__js_t kv, int del, amldist__etcd_on_event fn,
                         void *arg);

/* curl.c: a client of the etcd cluster: its members' URLs (failed over in
 * turn), TLS and user auth, one easy handle for requests and a multi one
 * for the watch streams. */
#define AMLDIST__ETCD_URLS_MAX 16
/* The longest key name (a prefix of up to 99 bytes and the rest), and
 * its base64. */
#define AMLDIST__ETCD_KEY_MAX 256
#define AMLDIST__ETCD_KEY64_MAX (4 * (AMLDIST__ETCD_KEY_MAX + 2) / 3 + 1)
/* Watch slots: the agent's own batches, the decider's inputs, the
 * batches for several agents and the decider key. */
#define AMLDIST__ETCD_WATCHES 3
struct amldist__etcd_watch;
struct amldist__etcd_beat;
typedef struct amldist__etcd {
    char *url[AMLDIST__ETCD_URLS_MAX];
    int nurl, cur;
    char cacert[512], cert[512], key[512], user[128];
    char password[256], token[512]; /* never printed */
    /* A request's bound: the lease's calls (the keep-alive must not wait
     * past the dead time) and the others (a txn or range of a thousand
     * nodes on a busy etcd takes seconds). */
    long timeout_ms, slow_ms, now_ms;
    long beat_ms; /* the keep-alive's: half the lease */
    /* The lease's keep-alives, every beat_every_ms from beat_next: kept
     * by the client, so that they go on while a request waits (a put that
     * waits out etcd's 6 s after its leader died would outlive a lease of
     * 5 s); beat_lease 0: none.  alive_at: the last one answered alive. */
    long long beat_lease, beat_next, alive_at;
    long beat_every_ms;
    unsigned long long beat_rng; /* the gaps' jitter (curl.c) */
    void *easy, *multi;     /* CURL *, CURLM * */
    void *hdrs;             /* struct curl_slist * */
    char local_ip[64], peer_ip[64]; /* of the last request */
    long http_status;       /* of the last request's answer */
    struct amldist__etcd_watch *w[AMLDIST__ETCD_WATCHES];
    struct amldist__etcd_beat *beat;
    char err[300];          /* the last failure, in words */
    int refused;            /* etcd refused the user (not to retry) */
} amldist__etcd_t;

/* libcurl loaded (once a process): 0, or -1 with why. */
int amldist__etcd_load(char *why, size_t size);
int amldist__etcd_init(amldist__etcd_t *c);
void amldist__etcd_free(amldist__etcd_t *c);
/* POST body to path ("/v3/kv/put") on the current member, the next ones
 * when it cannot be reached: 0 with the answer in *resp (malloc'd,
 * NUL-terminated; an error of etcd's is a 0 too, its text in the
 * answer's "error"), or -1 with c->err (no member answered). */
int amldist__etcd_post(amldist__etcd_t *c, const char *path,
                       const char *body, char **resp);
/* The lease's keep-alive started, unless one is on its way (0, or -1:
 * out of memory); it goes on in the multi handle, beside the watches and
 * while a request waits.  Its result, once (then -1 again): -1 none yet,
 * 0 the lease is gone, 1 alive, 2 failed (c->err). */
int amldist__etcd_beat(amldist__etcd_t *c, long long lease);
int amldist__etcd_beat_result(amldist__etcd_t *c);
/* The next keep-alive's gap: beat_every_ms less a jitter of up to 15%. */
long long amldist__etcd_beat_gap(amldist__etcd_t *c);
/* The keep-alive of c->beat_lease started when it is due (beat_next);
 * -1: due and it could not start (none in flight). */
int amldist__etcd_beat_due(amldist__etcd_t *c, long long now);
/* The curl multi's wake-up (another thread: the caller's send()). */
void amldist__etcd_wakeup(amldist__etcd_t *c);

/* A watch stream of [key, end) from revision `from`: its events handed to
 * fn as they come, in revision order; restarted after the last revision
 * seen when the stream breaks (another member). */
int amldist__etcd_watch(amldist__etcd_t *c, int slot, const char *key,
                        const char *end, long long from,
                        amldist__etcd_on_event fn, void *arg);
void amldist__etcd_unwatch(amldist__etcd_t *c, int slot);
/* Run the watches for at most wait_ms (woken by _wakeup, or by extra_fd
 * readable: the plane's sockets, -1 none); their events handed over.
 * 0, or -1 when a stream broke and cannot be started again yet
 * (c->err). */
int amldist__etcd_run(amldist__etcd_t *c, int wait_ms, int extra_fd);

/* kv.c: etcd's calls in JSON.  Keys and values raw bytes (base64 here).
 * Each 0 on success, or -1 with c->err. */
/* The lease of ID `id` (the agent's pick: a grant sent again after a
 * timeout is the same lease, never a second one). */
int amldist__etcd_grant(amldist__etcd_t *c, int ttl_s, long long id,
                        long long *lease);
int amldist__etcd_revoke(amldist__etcd_t *c, long long lease);
int amldist__etcd_put(amldist__etcd_t *c, const char *key,
                      const unsigned char *v, size_t vlen, long long lease,
                      long long *rev);
int amldist__etcd_delete(amldist__etcd_t *c, const char *key,
                         const char *end);
/* Keys [key, end) (end NULL: key alone) by create revision: each handed
 * to fn as a PUT; the store's revision in *rev. */
int amldist__etcd_range(amldist__etcd_t *c, const char *key, const char *end,
                        long long *rev, amldist__etcd_on_event fn, void *arg);
/* Key alone, read from the member's own store (serializable: no round of
 * the leader's, no wait for etcd's apply to catch up with its log) when
 * that store has revision min_rev (what this agent wrote or watched
 * last), else linearizably.  A watch from after min_rev brings what
 * changed since: the two agree. */
int amldist__etcd_range_since(amldist__etcd_t *c, const char *key,
                              long long min_rev, amldist__etcd_on_event fn,
                              void *arg);
/* Create key (its create revision 0) under lease, else read it (handed to
 * fn): 1 created, 0 it was there, -1. */
int amldist__etcd_create(amldist__etcd_t *c, const char *key,
                         const unsigned char *v, size_t vlen, long long lease,
                         long long *create_rev, amldist__etcd_on_event fn,
                         void *arg);
/* A txn: puts of the ops given (key, value) and deletes (value NULL)
 * while `guard`'s create revision is guard_rev: 1 done, 0 the guard
 * failed, -1. */
typedef struct {
    char key[AMLDIST__ETCD_KEY_MAX];
    unsigned char *v; /* NULL: delete key */
    size_t vlen;
} amldist__etcd_op_t;
int amldist__etcd_txn(amldist__etcd_t *c, const char *guard,
                      long long guard_rev, const amldist__etcd_op_t *ops,
                      int nops);

/* The decider's state (decider.c), the agent's that won the key. */
typedef struct amldist__etcd_decider amldist__etcd_decider_t;
/* The decider's plane: its listener and the agents' connections
 * (plane_host.c). */
typedef struct amldist__etcd_phost amldist__etcd_phost_t;

/* This agent's connection to the decider's plane (plane.c). */
struct amldist__etcd_plane {
    struct amldist__loop *loop; /* the plane's sockets, this thread's */
    amldist__conn_t c;          /* to the decider's plane; fd -1: none */
    amldist__rz_link_t link;    /* issue 20's state on it (plane_link.h) */
    /* The address P/b/plane publishes ("": none now), and the decider
     * key's create revision it was published under. */
    char addr[64];
    int port;
    long long rev;
    int connecting;             /* c.fd: a connect in progress */
    long long next_try, said_at;
    char why[200];              /* why the last connection failed */
};

/* A handle's backend state (its `be`). */
typedef struct amldist__rz_etcd {
    const amldist__rz_cfg_t *cfg; /* the handle's */
    amldist__rz_join_t me;
    amldist__rz_sink_t *s;
    char endpoint[300];  /* "etcd://HOST:PORT,...", for messages */
    char prefix[128];    /* P, without the '/' after it */
    int ttl_s;
    amldist__etcd_t c;

    pthread_t thread;
    int closing;         /* under s->mu */
    long long lease, lead_rev; /* lead_rev: our decider key's, 0 */
    long long lease_id;  /* the lease's ID, picked once (random, > 0) */
    long long join_deadline, last_ok, said_at, next_try;
    int joined;          /* our member key is in */
    int beat_failed;     /* a keep-alive failed since the last answered */
    long long last_round;  /* the last ASSIGN's round applied, -1 */
    long long seen_rev;    /* the newest revision written or watched */
    uint32_t next_ev;      /* our P/e/ keys' numbers */
    int campaign;          /* the decider key is free: try for it */
    int retry;             /* a FAIL or DONE to put again */
    long long starting;    /* the decider key held, the decider not started
                              yet (since), 0 */
    amldist__etcd_decider_t *d;
    struct amldist__etcd_plane pl;
    amldist__etcd_phost_t *ph; /* while this agent decides */
} amldist__rz_etcd_t;

/* agent.c: the thread's body. */
void *amldist__etcd_thread(void *arg);
/* seal.c: a value for key (sealed, or marked plain), and a value of key
 * opened: 0 with *out (malloc'd), or -1 (libcrypto failed; the value is
 * another secret's, changed, or broken). */
int amldist__etcd_value(const amldist__rz_etcd_t *t, const char *key,
                        const unsigned char *p, size_t n, unsigned char **out,
                        size_t *outn);
int amldist__etcd_open(const amldist__rz_etcd_t *t, const char *key,
                       size_t klen, const unsigned char *p, size_t n,
                       unsigned char **out, size_t *outn);
/* The store is lost to this agent (why). */
void amldist__etcd_lost(amldist__rz_etcd_t *t, const char *why);

/* decider.c: this agent won the decider key: the decider rebuilt from
 * the log and the stored inputs, its watch started (0, or -1 with c.err);
 * its work each loop round (0, or -1: it was deposed); when it next must
 * run (ms); whether it is done (the job over and its agents gone: the
 * prefix is then deleted); freed. */
int amldist__etcd_decider_start(amldist__rz_etcd_t *t);
int amldist__etcd_decider_run(amldist__rz_etcd_t *t);
long long amldist__etcd_decider_wake(const amldist__rz_etcd_t *t);
int amldist__etcd_decider_drained(const amldist__rz_etcd_t *t);
void amldist__etcd_decider_free(amldist__rz_etcd_t *t);

/* plane.c, every agent's: issue 20's plane over TCP to the decider's
 * address (P/b/plane): made (0, or -1: out of memory); that key's put
 * or delete (from the watch of P/b/, or the read at the join); its work
 * each loop round (connect, what is due, its frames); the descriptor the
 * thread's wait adds (-1: none); when it next must run (ms, -1: not by
 * time); freed. */
int amldist__etcd_plane_init(amldist__rz_etcd_t *t);
void amldist__etcd_plane_key(amldist__rz_etcd_t *t, int del,
                             const unsigned char *v, size_t n,
                             long long mod_rev);
void amldist__etcd_plane_run(amldist__rz_etcd_t *t);
int amldist__etcd_plane_fd(const amldist__rz_etcd_t *t);
long long amldist__etcd_plane_wake(const amldist__rz_etcd_t *t);
void amldist__etcd_plane_free(amldist__rz_etcd_t *t);

/* plane_host.c, the decider's plane (decider.h: what the decider hands
 * it): served each loop round while this agent decides (its listener
 * made and its address published at the first, again while that fails);
 * stopped (listener and connections closed) when the decider goes. */
void amldist__etcd_phost_run(amldist__rz_etcd_t *t);
void amldist__etcd_phost_stop(amldist__rz_etcd_t *t);

#endif /* AMLDIST_RDZV_ETCD_H */
