/*
 * The authenticated channel under a framed connection (net/conn.h) when
 * the job has a secret (issue 21), from OpenSSL 3's libcrypto: no
 * primitive of our own.
 *
 * Keys.  From the secret S and a label per protocol L ("rdzv",
 * "bootstrap"):
 *     PRK      = HKDF-Extract(salt "amldist-channel-v1", S)
 *     K_auth   = HKDF-Expand(PRK, "amldist-channel-v1 " L " auth", 32)
 *     K_master = HKDF-Expand(PRK, "amldist-channel-v1 " L " keys", 32)
 * computed once per job and side (amldist__chan_keys), the secret cleared
 * right after.
 *
 * Handshake: the first frames of a connection, on net/frames.h's header
 * with types of their own (the same in every protocol), each of a fixed
 * size:
 *     HS_HELLO   client -> server: Nc (32 random bytes)
 *     HS_SERVER  server -> client: Ns (32 random bytes) |
 *                HMAC-SHA256(K_auth, "server" | Nc | Ns)
 *     HS_CLIENT  client -> server: HMAC-SHA256(K_auth, "client" | Nc | Ns)
 * The client checks the server's MAC before it sends anything else: a
 * peer without the secret (an impostor on the endpoint, a replay of a
 * recorded server, whose MAC is over another Nc) learns nothing and
 * directs nobody.  The server checks the client's before it reads a frame
 * of the protocol: a recorded client replayed meets another Ns.
 *
 * Then both directions' keys, fresh per connection:
 *     K_c2s | K_s2c = HKDF(K_master, salt Nc | Ns, "amldist-channel-v1 "
 *                          L " session", 64)
 * and every frame is sealed with ChaCha20-Poly1305:
 *     header (12 bytes, the length counting the tag) | ciphertext | tag (16)
 * the header as associated data, the nonce 4 zero bytes and the frame's
 * number in its direction (u64, big-endian), never sent: a frame replayed,
 * reordered, dropped, injected or cut short fails to open.
 */
#ifndef AMLDIST_NET_CHAN_H
#define AMLDIST_NET_CHAN_H

#include <stddef.h>
#include <stdint.h>

#define AMLDIST__CHAN_KEY_LEN 32
#define AMLDIST__CHAN_NONCE_LEN 32
#define AMLDIST__CHAN_MAC_LEN 32
#define AMLDIST__CHAN_TAG_LEN 16

/* The handshake's frame types: beyond every protocol's own. */
enum {
    AMLDIST__HS_HELLO = 0x7f01,
    AMLDIST__HS_SERVER = 0x7f02,
    AMLDIST__HS_CLIENT = 0x7f03
};
#define AMLDIST__HS_HELLO_LEN AMLDIST__CHAN_NONCE_LEN
#define AMLDIST__HS_SERVER_LEN (AMLDIST__CHAN_NONCE_LEN + AMLDIST__CHAN_MAC_LEN)
#define AMLDIST__HS_CLIENT_LEN AMLDIST__CHAN_MAC_LEN

/* The job's keys for one protocol (label). */
typedef struct {
    unsigned char auth[AMLDIST__CHAN_KEY_LEN];
    unsigned char master[AMLDIST__CHAN_KEY_LEN];
    char label[32];
} amldist__chan_keys_t;

/* Derive the keys of `label` from the secret; 0, or -1 (libcrypto.so.3,
 * loaded at the first call, is missing or failed). */
int amldist__chan_keys(amldist__chan_keys_t *k, const char *label,
                       const void *secret, size_t len);
void amldist__chan_keys_clear(amldist__chan_keys_t *k);

/* One connection's side of the channel. */
enum {
    AMLDIST__CHAN_HELLO,  /* server: waits for HS_HELLO */
    AMLDIST__CHAN_SERVER, /* client: HS_HELLO sent, waits for HS_SERVER */
    AMLDIST__CHAN_CLIENT, /* server: HS_SERVER sent, waits for HS_CLIENT */
    AMLDIST__CHAN_OPEN,   /* sealed frames both ways */
    AMLDIST__CHAN_FAILED  /* the handshake failed: nothing is sealed */
};

typedef struct amldist__chan amldist__chan_t;

/* A new channel (keys copied), NULL when out of memory. */
amldist__chan_t *amldist__chan_new(const amldist__chan_keys_t *k, int server);
/* Clears the keys and frees; NULL is fine. */
void amldist__chan_free(amldist__chan_t *ch);
int amldist__chan_state(const amldist__chan_t *ch);
/* The handshake failed outside the channel (the peer spoke plain). */
void amldist__chan_fail(amldist__chan_t *ch);

/* The handshake's steps.  Each writes the frame to send (its type in
 * *out_type, 0: none; its payload at out, room for AMLDIST__HS_SERVER_LEN)
 * and returns 0, or -1 with *why (the frame is not the one expected, or
 * the peer did not prove the secret; the channel is then FAILED). */
/* Client: the first frame. */
int amldist__chan_start(amldist__chan_t *ch, unsigned *out_type,
                        unsigned char *out, uint32_t *out_len,
                        const char **why);
/* Either side: one handshake frame received. */
int amldist__chan_handshake(amldist__chan_t *ch, unsigned type,
                            const unsigned char *p, uint32_t len,
                            unsigned *out_type, unsigned char *out,
                            uint32_t *out_len, const char **why);

/* Seal a payload of len bytes behind the header hdr (whose length says
 * len + AMLDIST__CHAN_TAG_LEN) into out (room for len + the tag; out may
 * be p); 0, or -1 (not open, libcrypto failed, or 2^64 frames sent). */
int amldist__chan_seal(amldist__chan_t *ch, const unsigned char *hdr,
                       const unsigned char *p, size_t len, unsigned char *out);
/* Open, in place, a sealed frame of len bytes (the tag included) behind
 * header hdr: 0 (the payload is the first len - the tag bytes), or -1 when
 * it fails authentication (the channel is no use any more). */
int amldist__chan_open(amldist__chan_t *ch, const unsigned char *hdr,
                       unsigned char *p, size_t len);

/* A value sealed at rest (a store's: the etcd backend's keys), apart from
 * any connection: under K_value = HKDF-Expand(K_master, "amldist-channel-v1
 * " L " value", 32), with ChaCha20-Poly1305, a random 12-byte nonce and
 * `ad` (the value's key in the store: a value moved to another key fails)
 * as associated data:
 *     nonce (12) | ciphertext | tag (16)
 * seal: len bytes of p into out (room for len + AMLDIST__CHAN_VALUE_OVER);
 * 0, or -1 (libcrypto failed).  open: len bytes of p into out (room for
 * len); the payload's length, or -1 when it fails authentication (another
 * secret's, or changed) or is too short. */
#define AMLDIST__CHAN_VALUE_OVER (12 + AMLDIST__CHAN_TAG_LEN)
int amldist__chan_value_seal(const amldist__chan_keys_t *k, const void *ad,
                             size_t ad_len, const unsigned char *p,
                             size_t len, unsigned char *out);
long amldist__chan_value_open(const amldist__chan_keys_t *k, const void *ad,
                              size_t ad_len, const unsigned char *p,
                              size_t len, unsigned char *out);

#endif /* AMLDIST_NET_CHAN_H */
