/* The framed connection (see conn.h). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/conn.h"
#include "net/loop.h"

void amldist__conn_init(amldist__conn_t *c, int fd,
                        const amldist__frame_limit_t *limits)
{
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->limits = limits;
    c->last_rx = amldist__now_ms();
    /* Every frame goes out in whole writes, often two small ones back to
     * back (an answer and a heartbeat's clock, a handshake and its first
     * sealed frame): with Nagle's algorithm the second waits for the
     * peer's delayed ACK, 40 ms a time.  Not TCP (a socketpair): no-op. */
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void amldist__conn_close(amldist__conn_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    amldist__chan_free(c->ch);
    free(c->in);
    free(c->buf);
    free(c->held);
    amldist__conn_shared_put(c->tail);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

int amldist__conn_pending(const amldist__conn_t *c)
{
    return c->out_off < c->out_len || c->tail;
}

amldist__conn_shared_t *amldist__conn_shared_new(size_t len)
{
    amldist__conn_shared_t *s = malloc(sizeof *s + len);
    if (s) {
        s->refs = 1;
        s->len = len;
    }
    return s;
}

void amldist__conn_shared_put(amldist__conn_shared_t *s)
{
    if (s && --s->refs == 0)
        free(s);
}

/* Grow a buffer of *cap bytes to hold `need`. */
static int grow(unsigned char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    unsigned char *b = realloc(*buf, n);
    if (!b)
        return -1;
    *buf = b;
    *cap = n;
    return 0;
}

/* Room for `more` bytes behind what is queued, all of it in buf from its
 * start on (a caller's frame still unsent is copied there). */
static int reserve_out(amldist__conn_t *c, size_t more)
{
    /* A shared tail still unsent goes first: copied behind what is queued
     * (the frames keep their order), the reference given up. */
    size_t rest = c->tail ? c->tail->len - c->tail_off : 0;
    size_t queued = c->out_len - c->out_off, need = queued + rest + more;
    if (need > AMLDIST__CONN_OUT_MAX)
        return -1;
    int in_buf = c->out == c->buf; /* not a caller's frame */
    if (grow(&c->buf, &c->buf_cap, need) < 0)
        return -1;
    if (in_buf)
        c->out = c->buf; /* realloc may have moved it */
    if (queued > 0 && (c->out != c->buf || c->out_off > 0))
        memmove(c->buf, c->out + c->out_off, queued);
    c->out = c->buf;
    c->out_off = 0;
    c->out_len = queued;
    if (c->tail) {
        memcpy(c->buf + c->out_len, c->tail->data + c->tail_off, rest);
        c->out_len += rest;
        amldist__conn_shared_put(c->tail);
        c->tail = NULL;
    }
    return 0;
}

/* Whether frames go out plain: no channel, or one whose handshake failed
 * (a refusal that says only so). */
static int plain(const amldist__conn_t *c)
{
    return !c->ch || amldist__chan_state(c->ch) == AMLDIST__CHAN_FAILED;
}

/* Queue one frame as it is (plain, or the handshake's). */
static int queue_plain(amldist__conn_t *c, unsigned type, const void *p,
                       size_t len)
{
    const size_t h = AMLDIST__FRAME_HEADER_LEN;
    if (reserve_out(c, h + len) < 0)
        return -1;
    amldist__frame_put_header(c->buf + c->out_len, type, (uint32_t)len);
    if (len)
        memcpy(c->buf + c->out_len + h, p, len);
    c->out_len += h + len;
    return 0;
}

/* Queue one frame: plain, sealed, or held back until the channel opens. */
static int queue(amldist__conn_t *c, unsigned type, const void *p, size_t len)
{
    const size_t h = AMLDIST__FRAME_HEADER_LEN;
    if (plain(c)) {
        return queue_plain(c, type, p, len);
    } else if (amldist__chan_state(c->ch) != AMLDIST__CHAN_OPEN) {
        if (c->held_len + h + len > AMLDIST__CONN_OUT_MAX ||
            grow(&c->held, &c->held_cap, c->held_len + h + len) < 0)
            return -1;
        amldist__frame_put_header(c->held + c->held_len, type, (uint32_t)len);
        if (len)
            memcpy(c->held + c->held_len + h, p, len);
        c->held_len += h + len;
    } else {
        if (len > UINT32_MAX - AMLDIST__CHAN_TAG_LEN ||
            reserve_out(c, h + len + AMLDIST__CHAN_TAG_LEN) < 0)
            return -1;
        unsigned char *f = c->buf + c->out_len;
        amldist__frame_put_header(f, type,
                                  (uint32_t)(len + AMLDIST__CHAN_TAG_LEN));
        if (amldist__chan_seal(c->ch, f, p, len, f + h) < 0)
            return -1;
        c->out_len += h + len + AMLDIST__CHAN_TAG_LEN;
    }
    return 0;
}

int amldist__conn_send(amldist__conn_t *c, unsigned type, const void *p,
                       size_t len)
{
    if (queue(c, type, p, len) < 0)
        return -1;
    return amldist__conn_flush(c);
}

int amldist__conn_send_ref(amldist__conn_t *c, const void *frame,
                           size_t len)
{
    /* Sealed, a frame is this connection's own: queued as a copy. */
    if (!plain(c)) {
        const unsigned char *f = frame;
        if (len < AMLDIST__FRAME_HEADER_LEN)
            return -1;
        return amldist__conn_send(c, (unsigned)f[6] << 8 | f[7],
                                  f + AMLDIST__FRAME_HEADER_LEN,
                                  len - AMLDIST__FRAME_HEADER_LEN);
    }
    if (amldist__conn_pending(c)) {
        if (reserve_out(c, len) < 0)
            return -1;
        memcpy(c->buf + c->out_len, frame, len);
        c->out_len += len;
    } else {
        if (len > AMLDIST__CONN_OUT_MAX)
            return -1;
        c->out = frame;
        c->out_off = 0;
        c->out_len = len;
    }
    return amldist__conn_flush(c);
}

/* Send p[*off .. len): 1 when all of it went, 0 when the socket is full,
 * -1 on an error. */
static int send_from(int fd, const unsigned char *p, size_t *off, size_t len)
{
    while (*off < len) {
        ssize_t n = send(fd, p + *off, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0)
            *off += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        else
            return -1;
    }
    return 1;
}

int amldist__conn_flush(amldist__conn_t *c)
{
    int rc = send_from(c->fd, c->out, &c->out_off, c->out_len);
    if (rc <= 0)
        return rc;
    /* All out: a caller's frame is no longer referred to. */
    c->out = c->buf;
    c->out_off = c->out_len = 0;
    if (!c->tail)
        return 0;
    rc = send_from(c->fd, c->tail->data, &c->tail_off, c->tail->len);
    if (rc <= 0)
        return rc;
    amldist__conn_shared_put(c->tail);
    c->tail = NULL;
    return 0;
}

int amldist__conn_send_shared(amldist__conn_t *c, unsigned type,
                              const void *head, size_t head_len,
                              amldist__conn_shared_t *s, size_t off)
{
    size_t rest = s->len - off, h = AMLDIST__FRAME_HEADER_LEN;
    if (!plain(c) || amldist__conn_pending(c) || head_len + rest > UINT32_MAX) {
        /* In the way of a tail: the whole frame, copied. */
        unsigned char *p = malloc(head_len + rest ? head_len + rest : 1);
        if (!p)
            return -1;
        memcpy(p, head, head_len);
        memcpy(p + head_len, s->data + off, rest);
        int rc = amldist__conn_send(c, type, p, head_len + rest);
        free(p);
        return rc;
    }
    if (h + head_len + rest > AMLDIST__CONN_OUT_MAX ||
        reserve_out(c, h + head_len) < 0)
        return -1;
    amldist__frame_put_header(c->buf + c->out_len, type,
                              (uint32_t)(head_len + rest));
    memcpy(c->buf + c->out_len + h, head, head_len);
    c->out_len += h + head_len;
    s->refs++;
    c->tail = s;
    c->tail_off = off;
    return amldist__conn_flush(c);
}

int amldist__conn_secure(amldist__conn_t *c, const amldist__chan_keys_t *k,
                         int server)
{
    unsigned char out[AMLDIST__HS_SERVER_LEN];
    unsigned type;
    uint32_t len;
    const char *why;
    amldist__chan_free(c->ch);
    if (!(c->ch = amldist__chan_new(k, server)))
        return -1;
    if (server)
        return 0;
    if (amldist__chan_start(c->ch, &type, out, &len, &why) < 0 ||
        queue_plain(c, type, out, len) < 0)
        return -1;
    return amldist__conn_flush(c);
}

int amldist__conn_auth_failed(const amldist__conn_t *c)
{
    return c->ch && amldist__chan_state(c->ch) == AMLDIST__CHAN_FAILED;
}

/* The frames a channel takes before it opens. */
static const amldist__frame_limit_t handshake[] = {
    {AMLDIST__HS_HELLO, AMLDIST__HS_HELLO_LEN, AMLDIST__HS_HELLO_LEN},
    {AMLDIST__HS_SERVER, AMLDIST__HS_SERVER_LEN, AMLDIST__HS_SERVER_LEN},
    {AMLDIST__HS_CLIENT, AMLDIST__HS_CLIENT_LEN, AMLDIST__HS_CLIENT_LEN},
    {0, 0, 0},
};

/* The channel opened: the frames held back go out sealed, in order. */
static int release_held(amldist__conn_t *c)
{
    size_t at = 0;
    int rc = 0;
    while (rc == 0 && at + AMLDIST__FRAME_HEADER_LEN <= c->held_len) {
        const unsigned char *f = c->held + at;
        uint32_t len = amldist__net_get_u32(f + 8);
        rc = queue(c, (unsigned)f[6] << 8 | f[7],
                   f + AMLDIST__FRAME_HEADER_LEN, len);
        at += AMLDIST__FRAME_HEADER_LEN + len;
    }
    free(c->held);
    c->held = NULL;
    c->held_len = c->held_cap = 0;
    return rc < 0 ? -1 : amldist__conn_flush(c);
}

/* A whole handshake frame came: answer it, and open when it is the last. */
static int on_handshake(amldist__conn_t *c, unsigned type,
                        const unsigned char *p, uint32_t len, const char **why)
{
    unsigned char out[AMLDIST__HS_SERVER_LEN];
    unsigned out_type;
    uint32_t out_len;
    if (amldist__chan_handshake(c->ch, type, p, len, &out_type, out,
                                &out_len, why) < 0)
        return AMLDIST__CONN_EAUTH;
    /* The reply goes out before anything sealed behind it. */
    if (out_type && queue_plain(c, out_type, out, out_len) < 0) {
        *why = "cannot queue the handshake";
        return AMLDIST__CONN_ECLOSED;
    }
    if (amldist__chan_state(c->ch) == AMLDIST__CHAN_OPEN && release_held(c) < 0) {
        *why = "cannot send";
        return AMLDIST__CONN_ECLOSED;
    }
    if (amldist__conn_flush(c) < 0) {
        *why = strerror(errno);
        return AMLDIST__CONN_ECLOSED;
    }
    return 0;
}

/* Check the header at c->in as what may come now: 0 with the payload's
 * length, the bytes that follow the header in *wire, or an error. */
static int check_header(amldist__conn_t *c, unsigned *type, uint32_t *len,
                        size_t *wire, const char **why)
{
    int st = c->ch ? amldist__chan_state(c->ch) : -1;
    if (st == AMLDIST__CHAN_OPEN) {
        /* A sealed frame's header is checked before its tag: one that
         * fails was altered or cut short on the way. */
        if (amldist__frame_get_header_sealed(c->in, c->limits,
                                             AMLDIST__CHAN_TAG_LEN, type, len,
                                             why) < 0) {
            *why = "integrity error: a sealed frame's header is malformed "
                   "(altered or cut short)";
            return AMLDIST__CONN_EINTEGRITY;
        }
        *wire = (size_t)*len + AMLDIST__CHAN_TAG_LEN;
        return 0;
    }
    if (st == AMLDIST__CHAN_FAILED) {
        *why = "the handshake failed";
        return AMLDIST__CONN_EAUTH;
    }
    if (c->ch) {
        if (amldist__frame_get_header(c->in, handshake, type, len, why) == 0) {
            *wire = *len;
            return 0;
        }
        /* A frame of the protocol itself, plain: the peer has no secret. */
        if (amldist__frame_get_header(c->in, c->limits, type, len, why) == 0) {
            *why = "the peer has no secret (it sent a plain frame)";
            amldist__chan_fail(c->ch);
            return AMLDIST__CONN_EAUTH;
        }
        return AMLDIST__CONN_EMALFORMED;
    }
    if (amldist__frame_get_header(c->in, c->limits, type, len, why) == 0) {
        *wire = *len;
        return 0;
    }
    if (((unsigned)c->in[6] << 8 | c->in[7]) == AMLDIST__HS_HELLO) {
        *why = "the peer has a secret and this side none";
        return AMLDIST__CONN_EAUTH;
    }
    return AMLDIST__CONN_EMALFORMED;
}

int amldist__conn_recv(amldist__conn_t *c, unsigned *type,
                       const unsigned char **payload, uint32_t *len,
                       const char **why)
{
    *why = NULL;
    for (;;) {
        /* The last frame was handed out (or was the handshake's): the
         * bytes after it begin the next. */
        if (c->in_used) {
            c->in_len -= c->in_used;
            if (c->in_len)
                memmove(c->in, c->in + c->in_used, c->in_len);
            c->in_used = 0;
        }
        size_t want = AMLDIST__FRAME_HEADER_LEN, wire = 0;
        if (c->in_len >= AMLDIST__FRAME_HEADER_LEN) {
            int rc = check_header(c, type, len, &wire, why);
            if (rc < 0)
                return rc;
            want += wire;
            if (c->in_len >= want) {
                unsigned char *p = c->in + AMLDIST__FRAME_HEADER_LEN;
                int st = c->ch ? amldist__chan_state(c->ch) : -1;
                c->in_used = want;
                if (st == AMLDIST__CHAN_OPEN) {
                    if (amldist__chan_open(c->ch, c->in, p, wire) < 0) {
                        *why = "integrity error: a frame failed "
                               "authentication (altered, replayed, "
                               "reordered, injected or cut short)";
                        return AMLDIST__CONN_EINTEGRITY;
                    }
                } else if (c->ch) {
                    if ((rc = on_handshake(c, *type, p, *len, why)) < 0)
                        return rc;
                    continue;
                }
                *payload = p;
                c->last_rx = amldist__now_ms();
                return 1;
            }
        }
        /* Within one amldist__conn_read, a short read said the socket
         * was empty: no recv only to hear EAGAIN. */
        if (c->in_batch && c->in_dry)
            return 0;
        /* amldist__conn_read's reads take what follows too (a few frames
         * at most, which it hands out before it returns: none is left
         * whole in the buffer with the socket quiet); a caller's own
         * loop, no more than the frame. */
        size_t end = c->in_batch && want < AMLDIST__CONN_READ_AHEAD
                         ? AMLDIST__CONN_READ_AHEAD
                         : want;
        if (grow(&c->in, &c->in_cap, end) < 0) {
            *why = "out of memory";
            return AMLDIST__CONN_EMALFORMED;
        }
        size_t room = end - c->in_len;
        ssize_t n = recv(c->fd, c->in + c->in_len, room, MSG_DONTWAIT);
        if (n > 0) {
            c->in_len += (size_t)n;
            c->in_dry = (size_t)n < room;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        *why = n == 0 ? "connection closed" : strerror(errno);
        return AMLDIST__CONN_ECLOSED;
    }
}

int amldist__conn_read(amldist__conn_t *c, amldist__conn_frame_fn *fn,
                       void *arg, const char **why)
{
    *why = NULL;
    c->in_dry = 0;
    c->in_batch = 1;
    int rc = 0;
    for (int k = 0; c->fd >= 0; k++) {
        unsigned type;
        /* Enough for one turn: the frames already read, and no more. */
        if (k == AMLDIST__CONN_READ_MAX)
            c->in_dry = 1;
        const unsigned char *p;
        uint32_t len;
        if ((rc = amldist__conn_recv(c, &type, &p, &len, why)) <= 0)
            break;
        rc = 0;
        if (fn(arg, type, p, len))
            break;
    }
    c->in_batch = 0;
    return rc;
}

int amldist__conn_wait(amldist__conn_t *c, long long deadline, unsigned *type,
                       const unsigned char **payload, uint32_t *len,
                       const char **why)
{
    for (;;) {
        int rc = amldist__conn_recv(c, type, payload, len, why);
        if (rc != 0)
            return rc;
        if (amldist__conn_flush(c) < 0) {
            *why = strerror(errno);
            return AMLDIST__CONN_ECLOSED;
        }
        long long left = deadline - amldist__now_ms();
        if (left <= 0) {
            *why = "timed out";
            return AMLDIST__CONN_ETIME;
        }
        struct pollfd pfd = {c->fd, (short)(POLLIN | (amldist__conn_pending(c)
                                                          ? POLLOUT : 0)), 0};
        if (poll(&pfd, 1, left > 1000 ? 1000 : (int)left) < 0 &&
            errno != EINTR) {
            *why = strerror(errno);
            return AMLDIST__CONN_ECLOSED;
        }
    }
}

int amldist__conn_drain(amldist__conn_t *c, long long deadline)
{
    while (amldist__conn_pending(c)) {
        if (amldist__conn_flush(c) < 0)
            return -1;
        if (!amldist__conn_pending(c))
            break;
        long long left = deadline - amldist__now_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pfd = {c->fd, POLLOUT, 0};
        if (poll(&pfd, 1, left > 1000 ? 1000 : (int)left) < 0 &&
            errno != EINTR)
            return -1;
    }
    return 0;
}
