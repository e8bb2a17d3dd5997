/*
 * The bootstrap exchange, below the public amldist_bootstrap_bcast(): frames,
 * sockets, the poll-based server on rank 0 and the retrying client.  Split so
 * that the tests can drive each part with an explicit rank, world, address
 * and port, without a layout.
 *
 * Wire format (all integers big-endian), one request and one reply per
 * connection:
 *
 *     header   magic "AMLB" u32 | protocol u16 | type u16 | payload length u32
 *     HELLO    rank u32 | world u32 | round u32 | blob length u32 | token u64
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

#include "util/internal.h"

#define AMLDIST__BS_MAGIC 0x414d4c42u /* "AMLB" */
#define AMLDIST__BS_PROTOCOL 2u
#define AMLDIST__BS_HEADER_LEN 12
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

/* Frames.  get_header returns 0, or -1 with *why naming the defect. */
void amldist__bs_put_header(unsigned char *p, unsigned type, uint32_t len);
int amldist__bs_get_header(const unsigned char *p, unsigned *type,
                           uint32_t *len, const char **why);
void amldist__bs_put_hello(unsigned char *p, const amldist__bs_hello_t *h);
void amldist__bs_get_hello(const unsigned char *p, amldist__bs_hello_t *h);
void amldist__bs_put_u32(unsigned char *p, uint32_t v);
uint32_t amldist__bs_get_u32(const unsigned char *p);
/* The limit a payload of `type` may have (HELLO and REFUSE: exact). */
uint32_t amldist__bs_max_payload(unsigned type);

/* What one exchange needs, whichever side this rank is on. */
typedef struct {
    int rank, world;
    char host[256]; /* MASTER_ADDR, without brackets */
    int port;
    int timeout_ms;
    uint64_t token;
    char token_source[64]; /* "AMLDIST_JOB_TOKEN", ... for messages */
    uint32_t round;        /* the number of this call, same on all ranks */
    /* Barrier mode: rank 0 hands the blob out only once every rank has
     * checked in, and a rank that cannot go on checks in with FAIL, so that
     * every rank learns of it at once and none goes ahead alone (NCCL's
     * init would wait for the missing rank forever).  `failed`: this rank
     * is such a rank, and `why` its error, which every rank then reports. */
    int barrier, failed;
    char why[AMLDIST__BS_WHY_LEN];
} amldist__bs_params_t;

/* Parameters of the next call from the layout, the options and the
 * environment (bootstrap.c); also numbers the call. */
int amldist__bs_setup(const amldist_t *layout,
                      const amldist_bootstrap_options_t *opts,
                      amldist__bs_params_t *p);

/* Rank 0: serve `len` bytes to ranks 1 .. world-1, then close. */
int amldist__bs_serve(const amldist__bs_params_t *p, const void *blob,
                      size_t len);
/* Ranks > 0: fetch `len` bytes from rank 0. */
int amldist__bs_fetch(const amldist__bs_params_t *p, void *blob, size_t len);
/* Either, by p->rank. */
int amldist__bs_exchange(const amldist__bs_params_t *p, void *blob,
                         size_t len);

/* Configuration from options and the environment (getenv). */
uint64_t amldist__bs_hash(const char *s, uint64_t h);
int amldist__bs_token(const char *explicit_token, const char *host, int port,
                      int world, uint64_t *token, char *source,
                      size_t source_size);
int amldist__bs_port(int explicit_port, int master_port, int *port);
int amldist__bs_timeout(int explicit_ms, int *ms);

/* Sockets and time. */
long long amldist__bs_now_ms(void);
/* "10.0.0.4:29501" or "[fe80::1]:29501". */
void amldist__bs_format_addr(const char *host, int port, char *buf,
                             size_t size);
/* Listening, non-blocking, close-on-exec sockets on every address `host`
 * resolves to (or the wildcard when none of them is local). */
int amldist__bs_listen(const char *host, int port, int *fds, int max_fds,
                       int *nfds);
/* Listening sockets on the addresses `host` resolves to that are this
 * machine's, never the wildcard: 0 with *nfds 0 when none is local or the
 * port is taken (*err says which), -1 on other errors. */
int amldist__bs_listen_local(const char *host, int port, int *fds,
                             int max_fds, int *nfds, int *err);
struct addrinfo;
/* getaddrinfo for a client; -1 with the reason in err. */
int amldist__bs_resolve(const char *host, int port, struct addrinfo **out,
                        char *err, size_t errsize);
/* A connected non-blocking socket, or -1 with errno (ETIMEDOUT at the
 * deadline, in ms of amldist__bs_now_ms()). */
int amldist__bs_connect(const struct addrinfo *ai, long long deadline);
/* Send or receive exactly len bytes before the deadline; 0, or -1 with errno
 * (ECONNRESET when the peer closed first). */
int amldist__bs_io(int fd, void *buf, size_t len, int writing,
                   long long deadline);

#endif /* AMLDIST_BOOTSTRAP_INTERNAL_H */
