/*
 * One framed connection over a non-blocking socket, the bootstrap server's
 * and the control plane's: frames queued and sent as the socket takes them,
 * and frames received in two steps, header then payload, the header checked
 * against the protocol's limits (net/frames.h) before a byte of payload is
 * buffered, and no byte of the next frame taken before this one is handed
 * out.  Nothing here blocks; the caller polls fd (POLLOUT while
 * amldist__conn_pending()).
 */
#ifndef AMLDIST_NET_CONN_H
#define AMLDIST_NET_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "net/frames.h"

typedef struct {
    int fd;
    const amldist__frame_limit_t *limits; /* the frames the peer may send */
    unsigned char *in;       /* the frame being received */
    size_t in_len, in_cap;
    /* What waits to be sent: out[out_off .. out_len), in buf, or a frame
     * of the caller's (amldist__conn_send_ref). */
    const unsigned char *out;
    size_t out_off, out_len;
    unsigned char *buf;
    size_t buf_cap;
    long long last_rx;       /* ms of amldist__now_ms(): last frame in */
} amldist__conn_t;

/* Bytes a connection may queue unsent before its peer counts as stuck. */
#define AMLDIST__CONN_OUT_MAX (1u << 20)
/* Frames amldist__conn_read() hands out at most per call, so that one
 * chatty peer cannot starve the others. */
#define AMLDIST__CONN_READ_MAX 64

/* A connection on fd (owned from now on) whose peer sends the frames of
 * `limits`, a table that must outlive it. */
void amldist__conn_init(amldist__conn_t *c, int fd,
                        const amldist__frame_limit_t *limits);
/* Close fd and free the buffers; fd becomes -1.  Closing twice is fine. */
void amldist__conn_close(amldist__conn_t *c);

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
/* Send what the socket takes now; -1 on a write error. */
int amldist__conn_flush(amldist__conn_t *c);
/* Whether bytes wait to be sent. */
int amldist__conn_pending(const amldist__conn_t *c);

/* Read what the socket has: 1 with a whole frame in *type, *payload and
 * *len (valid until the next call), 0 when none is complete yet, -1 on a
 * malformed frame or one outside its type's limits, -2 at end of file or
 * on a socket error (*why says which). */
int amldist__conn_recv(amldist__conn_t *c, unsigned *type,
                       const unsigned char **payload, uint32_t *len,
                       const char **why);

/* What to do with one frame: 0 reads on, anything else stops reading. */
typedef int amldist__conn_frame_fn(void *arg, unsigned type,
                                   const unsigned char *payload, uint32_t len);
/* Hand each whole frame the socket has to fn, AMLDIST__CONN_READ_MAX at
 * most, until fn says stop or closes the connection (fd -1).  0, or
 * amldist__conn_recv()'s -1 or -2 with *why. */
int amldist__conn_read(amldist__conn_t *c, amldist__conn_frame_fn *fn,
                       void *arg, const char **why);

#endif /* AMLDIST_NET_CONN_H */
