/*
 * The bootstrap exchange, below the public amldist_bootstrap_bcast(): its
 * frames, the poll-based server on rank 0 and the retrying client, on the
 * sockets, frame header and connection of net/.  Split so that the tests
 * can drive each part with an explicit rank, world, address and port,
 * without a layout.
 *
 * Wire format (all integers big-endian), one request and one reply per
 * connection, behind the channel's handshake and each frame sealed when the
 * job has a secret (net/chan.h):
 *
 *     header   net/frames.h's: magic "AMLB" | protocol | type | length
 *     HELLO    rank u32 | world u32 | round u32 | blob length u32 | token u64
 *              (0 with the job's secret, when it would be its digest)
 *     BLOB     the blob (exactly the length both sides agreed on)
 *     REFUSE   reason u32 | the server's own value u32
 *     FAIL     HELLO | why (480 bytes, NUL-padded): a rank that cannot go
 *              on (barrier mode, below)
 *     PEER     failed rank u32 | its why (480 bytes): barrier mode's answer
 *              once a rank has failed
 *     ACK      (empty) the client has the whole BLOB or PEER answer; only
 *              then does rank 0 count it done, so that a connection its
 *              client gave up on (left in the backlog) is never taken for it
 */
#ifndef AMLDIST_BOOTSTRAP_INTERNAL_H
#define AMLDIST_BOOTSTRAP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "net/chan.h"
#include "net/frames.h"
#include "net/sockets.h"
#include "util/internal.h"

#define AMLDIST__BS_HELLO_LEN 24
#define AMLDIST__BS_REFUSE_LEN 8
#define AMLDIST__BS_WHY_LEN 480
#define AMLDIST__BS_FAIL_LEN (AMLDIST__BS_HELLO_LEN + AMLDIST__BS_WHY_LEN)
#define AMLDIST__BS_PEER_LEN (4 + AMLDIST__BS_WHY_LEN)

enum {
    AMLDIST__BS_HELLO = 1,
    AMLDIST__BS_BLOB = 2,
    AMLDIST__BS_REFUSE = 3,
    AMLDIST__BS_FAIL = 4,
    AMLDIST__BS_PEER = 5,
    AMLDIST__BS_ACK = 6
};

/* Why the server refused a HELLO; the value sent along is the server's. */
enum {
    AMLDIST__BS_R_TOKEN = 1,    /* another job's token */
    AMLDIST__BS_R_WORLD = 2,    /* world size differs (value: server's) */
    AMLDIST__BS_R_RANK = 3,     /* rank outside 1 .. world-1 */
    AMLDIST__BS_R_LENGTH = 4,   /* blob length differs (value: server's) */
    AMLDIST__BS_R_AHEAD = 5,    /* client is at a later call: retry */
    AMLDIST__BS_R_BEHIND = 6,   /* client is at an earlier call: fatal */
    AMLDIST__BS_R_WAIT = 7      /* barrier: not every rank is in yet: retry */
};

typedef struct {
    uint32_t rank, world, round, length;
    uint64_t token;
} amldist__bs_hello_t;

/* The bootstrap's frames (frames.c): every type with its payload limits,
 * and the header checked against them (0, or -1 with *why naming the
 * defect). */
extern const amldist__frame_limit_t amldist__bs_frames[];
int amldist__bs_get_header(const unsigned char *p, unsigned *type,
                           uint32_t *len, const char **why);
void amldist__bs_put_hello(unsigned char *p, const amldist__bs_hello_t *h);
void amldist__bs_get_hello(const unsigned char *p, amldist__bs_hello_t *h);
/* The limit a payload of `type` may have (all but BLOB: exact). */
uint32_t amldist__bs_max_payload(unsigned type);

/* What one exchange needs, whichever side this rank is on. */
typedef struct {
    int rank, world;
    char host[256]; /* MASTER_ADDR, without brackets */
    int port;
    int timeout_ms;
    uint64_t token;
    char token_source[320]; /* "AMLDIST_JOB_TOKEN", a path... for messages */
    uint32_t round;        /* the number of this call, same on all ranks */
    /* Barrier mode: rank 0 hands the blob out only once every rank has
     * checked in, and a rank that cannot go on checks in with FAIL, so that
     * every rank learns of it at once and none goes ahead alone (NCCL's
     * init would wait for the missing rank forever).  `failed`: this rank
     * is such a rank, and `why` its error, which every rank then reports. */
    int barrier, failed;
    char why[AMLDIST__BS_WHY_LEN];
    /* The job's secret (util/secret.h): every connection is the channel's
     * (net/chan.h), and HELLO's token is 0 where it would be the secret's
     * digest. */
    int secure;
    amldist__chan_keys_t keys;
    char secret_source[300];
} amldist__bs_params_t;

/* Parameters of the next call from the layout, the options and the
 * environment (bootstrap.c); also numbers the call. */
int amldist__bs_setup(const amldist_t *layout,
                      const amldist_bootstrap_options_t *opts,
                      amldist__bs_params_t *p);
/* The job's secret, if any, into p's keys (the secret cleared at once); 0,
 * or an error (a secret source refused, libcrypto). */
int amldist__bs_secure(amldist__bs_params_t *p);

/* Rank 0: serve `len` bytes to ranks 1 .. world-1, then close. */
int amldist__bs_serve(const amldist__bs_params_t *p, const void *blob,
                      size_t len);
/* Ranks > 0: fetch `len` bytes from rank 0. */
int amldist__bs_fetch(const amldist__bs_params_t *p, void *blob, size_t len);
/* Either, by p->rank. */
int amldist__bs_exchange(const amldist__bs_params_t *p, void *blob,
                         size_t len);

/* Configuration from options and the environment (getenv). */
/* FNV-1a of s continuing from h; a hash starts at AMLDIST__BS_HASH_START
 * (FNV's offset basis). */
#define AMLDIST__BS_HASH_START 0xcbf29ce484222325ull
uint64_t amldist__bs_hash(const char *s, uint64_t h);
int amldist__bs_token(const char *explicit_token, const char *host, int port,
                      int world, uint64_t *token, char *source,
                      size_t source_size);
int amldist__bs_port(int explicit_port, int master_port, int *port);
int amldist__bs_timeout(int explicit_ms, int *ms);

#endif /* AMLDIST_BOOTSTRAP_INTERNAL_H */
