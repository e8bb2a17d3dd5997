/*
 * One framed connection over a non-blocking socket, the bootstrap server's
 * and the control plane's: frames queued and sent as the socket takes them,
 * and frames received in two steps, header then payload, the header checked
 * against the protocol's limits (net/frames.h) before a byte of payload is
 * buffered, and no byte of the next frame taken before this one is handed
 * out.  Nothing here blocks; the caller polls fd (POLLOUT while
 * amldist__conn_pending()).
 *
 * With the job's secret (amldist__conn_secure(), net/chan.h) the first
 * frames are the channel's handshake, taken here without the caller
 * seeing them; frames the caller sends meanwhile are held back, in order,
 * until the peer has proven the secret, and every frame after it is sealed
 * and opened here: the caller sees the same frames as without a secret.
 */
#ifndef AMLDIST_NET_CONN_H
#define AMLDIST_NET_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "net/chan.h"
#include "net/frames.h"

/* Bytes many connections send, refcounted (amldist__conn_send_shared):
 * freed when the last one has sent them, or closed. */
typedef struct {
    size_t refs, len;
    unsigned char data[];
} amldist__conn_shared_t;

typedef struct {
    int fd;
    const amldist__frame_limit_t *limits; /* the frames the peer may send */
    /* What came in: in_len bytes from the frame being received on (a
     * read takes what the socket has, up to in_cap, so that a burst of
     * small frames costs one recv, not two each and one more to find the
     * socket empty); in_used: the frame at in handed out last, to drop
     * before the next; in_dry: the last read came short (the socket was
     * empty), in_batch: within amldist__conn_read, which then reads no
     * more for a frame not whole. */
    unsigned char *in;
    size_t in_len, in_cap, in_used;
    int in_dry, in_batch;
    /* What waits to be sent: out[out_off .. out_len), in buf, or a frame
     * of the caller's (amldist__conn_send_ref). */
    const unsigned char *out;
    size_t out_off, out_len;
    unsigned char *buf;
    size_t buf_cap;
    /* After out: a shared tail, tail->data[tail_off .. tail->len). */
    amldist__conn_shared_t *tail;
    size_t tail_off;
    long long last_rx;       /* ms of amldist__now_ms(): last frame in */
    /* The channel (NULL: plain frames), and the caller's whole frames,
     * unsealed, held back until it opens. */
    amldist__chan_t *ch;
    unsigned char *held;
    size_t held_len, held_cap;
} amldist__conn_t;

/* amldist__conn_recv()'s and amldist__conn_read()'s answers beyond a frame
 * (1) and none yet (0). */
#define AMLDIST__CONN_EMALFORMED (-1) /* a malformed frame or beyond its limits */
#define AMLDIST__CONN_ECLOSED (-2)    /* end of file, or a socket error */
#define AMLDIST__CONN_EAUTH (-3)      /* the handshake failed: the peer did not
                                         prove the job's secret, or one side
                                         has a secret and the other none */
#define AMLDIST__CONN_EINTEGRITY (-4) /* a sealed frame failed authentication */
#define AMLDIST__CONN_ETIME (-5)      /* amldist__conn_wait(): the deadline */

/* Bytes a connection may queue unsent before its peer counts as stuck. */
#define AMLDIST__CONN_OUT_MAX (1u << 20)
/* Frames amldist__conn_read() hands out at most per call, so that one
 * chatty peer cannot starve the others. */
#define AMLDIST__CONN_READ_MAX 64
/* What amldist__conn_read asks the socket for at once, at the least. */
#define AMLDIST__CONN_READ_AHEAD 512

/* A connection on fd (owned from now on) whose peer sends the frames of
 * `limits`, a table that must outlive it. */
void amldist__conn_init(amldist__conn_t *c, int fd,
                        const amldist__frame_limit_t *limits);
/* Close fd and free the buffers; fd becomes -1.  Closing twice is fine. */
void amldist__conn_close(amldist__conn_t *c);
/* Speak through the channel of keys `k` (copied) from now on, as its
 * server or its client (which sends its first handshake frame now); 0, or
 * -1 when out of memory or on a write error. */
int amldist__conn_secure(amldist__conn_t *c, const amldist__chan_keys_t *k,
                         int server);
/* Whether the connection has a channel whose handshake failed: frames sent
 * now go out plain (a refusal that says only so). */
int amldist__conn_auth_failed(const amldist__conn_t *c);

/* Queue a frame (header added) and send what the socket takes now; -1 when
 * the peer is stuck (queue full), out of memory, or on a write error. */
int amldist__conn_send(amldist__conn_t *c, unsigned type, const void *p,
                       size_t len);
/* The same for a whole frame (header included) that the caller keeps, as
 * it is, until it is sent (amldist__conn_pending() is 0) or the connection
 * closed: one buffer serves many connections without a copy each.  Behind
 * frames already queued it is copied. */
int amldist__conn_send_ref(amldist__conn_t *c, const void *frame,
                           size_t len);
/* A shared block of len bytes (one reference: the caller's), and a
 * reference given up. */
amldist__conn_shared_t *amldist__conn_shared_new(size_t len);
void amldist__conn_shared_put(amldist__conn_shared_t *s);
/* A frame of `type` whose payload is head (head_len bytes, copied) and
 * then s->data[off ..] (referred to, not copied, on a plain connection
 * with nothing else in its way): a frame mostly the same for every peer,
 * the round's ASSIGN, held once for all.  As amldist__conn_send. */
int amldist__conn_send_shared(amldist__conn_t *c, unsigned type,
                              const void *head, size_t head_len,
                              amldist__conn_shared_t *s, size_t off);
/* Send what the socket takes now; -1 on a write error. */
int amldist__conn_flush(amldist__conn_t *c);
/* Whether bytes wait to be sent. */
int amldist__conn_pending(const amldist__conn_t *c);

/* Read what the socket has: 1 with a whole frame in *type, *payload and
 * *len (valid until the next call), 0 when none is complete yet (the
 * handshake's frames included), or one of AMLDIST__CONN_E* above with
 * *why saying what. */
int amldist__conn_recv(amldist__conn_t *c, unsigned *type,
                       const unsigned char **payload, uint32_t *len,
                       const char **why);

/* What to do with one frame: 0 reads on, anything else stops reading. */
typedef int amldist__conn_frame_fn(void *arg, unsigned type,
                                   const unsigned char *payload, uint32_t len);
/* Hand each whole frame the socket has to fn, those of
 * AMLDIST__CONN_READ_MAX reads at most (none is left whole behind them),
 * until fn says stop or closes the connection (fd -1).  0, or
 * amldist__conn_recv()'s error with *why. */
int amldist__conn_read(amldist__conn_t *c, amldist__conn_frame_fn *fn,
                       void *arg, const char **why);

/* For a blocking caller: poll until a whole frame is in (as
 * amldist__conn_recv()), sending what is queued meanwhile, until the
 * deadline (ms of amldist__now_ms()): AMLDIST__CONN_ETIME then. */
int amldist__conn_wait(amldist__conn_t *c, long long deadline, unsigned *type,
                       const unsigned char **payload, uint32_t *len,
                       const char **why);
/* For a blocking caller: send everything queued before the deadline; 0, or
 * -1 (a write error, or the deadline). */
int amldist__conn_drain(amldist__conn_t *c, long long deadline);

#endif /* AMLDIST_NET_CONN_H */
