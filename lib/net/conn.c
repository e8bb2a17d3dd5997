/* The framed connection (see conn.h). */
#include <errno.h>
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
}

void amldist__conn_close(amldist__conn_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    free(c->buf);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

int amldist__conn_pending(const amldist__conn_t *c)
{
    return c->out_off < c->out_len;
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
    size_t queued = c->out_len - c->out_off, need = queued + more;
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
    return 0;
}

int amldist__conn_send(amldist__conn_t *c, unsigned type, const void *p,
                       size_t len)
{
    if (reserve_out(c, AMLDIST__FRAME_HEADER_LEN + len) < 0)
        return -1;
    amldist__frame_put_header(c->buf + c->out_len, type, (uint32_t)len);
    if (len)
        memcpy(c->buf + c->out_len + AMLDIST__FRAME_HEADER_LEN, p, len);
    c->out_len += AMLDIST__FRAME_HEADER_LEN + len;
    return amldist__conn_flush(c);
}

int amldist__conn_send_ref(amldist__conn_t *c, const void *frame,
                           size_t len)
{
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

int amldist__conn_flush(amldist__conn_t *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0)
            c->out_off += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        else
            return -1;
    }
    /* All out: a caller's frame is no longer referred to. */
    c->out = c->buf;
    c->out_off = c->out_len = 0;
    return 0;
}

int amldist__conn_recv(amldist__conn_t *c, unsigned *type,
                       const unsigned char **payload, uint32_t *len,
                       const char **why)
{
    *why = NULL;
    /* The last call's frame was handed out: start the next one. */
    if (c->in_len >= AMLDIST__FRAME_HEADER_LEN &&
        c->in_len == AMLDIST__FRAME_HEADER_LEN +
                         (size_t)amldist__net_get_u32(c->in + 8))
        c->in_len = 0;
    for (;;) {
        size_t want = AMLDIST__FRAME_HEADER_LEN;
        if (c->in_len >= AMLDIST__FRAME_HEADER_LEN) {
            if (amldist__frame_get_header(c->in, c->limits, type, len, why) <
                0)
                return -1;
            want += *len;
            if (c->in_len == want) {
                *payload = c->in + AMLDIST__FRAME_HEADER_LEN;
                c->last_rx = amldist__now_ms();
                return 1;
            }
        }
        if (grow(&c->in, &c->in_cap, want) < 0) {
            *why = "out of memory";
            return -1;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, want - c->in_len,
                         MSG_DONTWAIT);
        if (n > 0) {
            c->in_len += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        *why = n == 0 ? "connection closed" : strerror(errno);
        return -2;
    }
}

int amldist__conn_read(amldist__conn_t *c, amldist__conn_frame_fn *fn,
                       void *arg, const char **why)
{
    *why = NULL;
    for (int k = 0; k < AMLDIST__CONN_READ_MAX && c->fd >= 0; k++) {
        unsigned type;
        const unsigned char *p;
        uint32_t len;
        int rc = amldist__conn_recv(c, &type, &p, &len, why);
        if (rc <= 0)
            return rc;
        if (fn(arg, type, p, len))
            return 0;
    }
    return 0;
}
