/* The framed connection (lib/net/conn.c) on its own, over a socketpair:
 * frames in pieces, malformed headers, a peer that closes, a full socket,
 * frames sent by reference, and the bounded receive loop. */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/conn.h"
#include "test.h"

enum { T_FIXED = 1, T_TEXT = 2, T_RANGE = 3, T_EMPTY = 4 };

static const amldist__frame_limit_t limits[] = {
    {T_FIXED, 4, 4},
    {T_TEXT, 0, 100},
    {T_RANGE, 2, 10},
    {T_EMPTY, 0, 0},
    {0, 0, 0},
};

#define HDR AMLDIST__FRAME_HEADER_LEN

/* A connection on one end of a socketpair; *peer is the other end. */
static void pair(amldist__conn_t *c, int *peer)
{
    int sv[2];
    CHECK_INT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    amldist__conn_init(c, sv[0], limits);
    *peer = sv[1];
}

static size_t frame(unsigned char *b, unsigned type, const char *payload,
                    uint32_t len)
{
    amldist__frame_put_header(b, type, len);
    memcpy(b + HDR, payload, len);
    return HDR + len;
}

static void put(int fd, const void *b, size_t n)
{
    CHECK_INT_EQ(send(fd, b, n, MSG_NOSIGNAL), (long long)n);
}

static int unread(int fd)
{
    int n = -1;
    CHECK_INT_EQ(ioctl(fd, FIONREAD, &n), 0);
    return n;
}

/* One amldist__conn_recv()'s results. */
struct got {
    unsigned type;
    const unsigned char *p;
    uint32_t len;
    const char *why;
};

static int get(amldist__conn_t *c, struct got *g)
{
    return amldist__conn_recv(c, &g->type, &g->p, &g->len, &g->why);
}

static void test_whole_frames(void)
{
    amldist__conn_t c;
    int peer;
    pair(&c, &peer);
    unsigned char b[256];
    struct got g;
    CHECK_INT_EQ(get(&c, &g), 0); /* nothing yet */
    /* Two frames in one write: one at a time, the second not taken early. */
    size_t n = frame(b, T_TEXT, "hello", 5);
    n += frame(b + n, T_EMPTY, "", 0);
    put(peer, b, n);
    c.last_rx = 0;
    CHECK_INT_EQ(get(&c, &g), 1);
    CHECK_INT_EQ(g.type, T_TEXT);
    CHECK_INT_EQ(g.len, 5);
    CHECK(!memcmp(g.p, "hello", 5));
    CHECK(c.last_rx > 0);
    CHECK_INT_EQ(unread(c.fd), HDR);
    CHECK_INT_EQ(get(&c, &g), 1);
    CHECK_INT_EQ(g.type, T_EMPTY);
    CHECK_INT_EQ(g.len, 0);
    CHECK_INT_EQ(get(&c, &g), 0);
    amldist__conn_close(&c);
    CHECK_INT_EQ(c.fd, -1);
    amldist__conn_close(&c); /* twice: nothing left to close */
    close(peer);
}

/* A frame that arrives a byte at a time: nothing until its last byte. */
static void test_split_over_reads(void)
{
    amldist__conn_t c;
    int peer;
    pair(&c, &peer);
    unsigned char b[64];
    struct got g;
    size_t n = frame(b, T_RANGE, "abcdefgh", 8);
    for (size_t i = 0; i + 1 < n; i++) {
        put(peer, b + i, 1);
        CHECK_INT_EQ(get(&c, &g), 0);
        CHECK(g.why == NULL);
    }
    put(peer, b + n - 1, 1);
    CHECK_INT_EQ(get(&c, &g), 1);
    CHECK_INT_EQ(g.type, T_RANGE);
    CHECK_INT_EQ(g.len, 8);
    CHECK(!memcmp(g.p, "abcdefgh", 8));
    /* The header whole, the payload in two pieces. */
    put(peer, b, HDR + 3);
    CHECK_INT_EQ(get(&c, &g), 0);
    put(peer, b + HDR + 3, 5);
    CHECK_INT_EQ(get(&c, &g), 1);
    CHECK(!memcmp(g.p, "abcdefgh", 8));
    amldist__conn_close(&c);
    close(peer);
}

/* A bad header is refused before any of its payload is read. */
static void expect_refused(const unsigned char *hdr, size_t payload,
                           const char *what)
{
    amldist__conn_t c;
    int peer;
    pair(&c, &peer);
    unsigned char b[HDR + 64];
    memcpy(b, hdr, HDR);
    memset(b + HDR, 'x', payload);
    put(peer, b, HDR + payload);
    struct got g;
    CHECK_INT_EQ(get(&c, &g), -1);
    CHECK_STR_HAS(g.why, what);
    CHECK_INT_EQ(unread(c.fd), (long long)payload);
    amldist__conn_close(&c);
    close(peer);
}

static void test_bad_headers(void)
{
    unsigned char h[HDR];
    amldist__frame_put_header(h, T_TEXT, 5);
    h[0] = 'X';
    expect_refused(h, 5, "bad magic");
    amldist__frame_put_header(h, T_TEXT, 5);
    h[5] = 9;
    expect_refused(h, 5, "protocol version");
    amldist__frame_put_header(h, 99, 5);
    expect_refused(h, 5, "unknown frame type");
    amldist__frame_put_header(h, 0, 0); /* the table's end is no type */
    expect_refused(h, 0, "unknown frame type");
    amldist__frame_put_header(h, T_TEXT, 101);
    expect_refused(h, 8, "longer than its limit");
    amldist__frame_put_header(h, T_TEXT, 0xffffffffu); /* 4 GiB announced */
    expect_refused(h, 8, "longer than its limit");
    amldist__frame_put_header(h, T_RANGE, 1);
    expect_refused(h, 1, "shorter than its type needs");
    amldist__frame_put_header(h, T_FIXED, 3);
    expect_refused(h, 3, "fixed size");
    amldist__frame_put_header(h, T_FIXED, 5);
    expect_refused(h, 5, "longer than its limit");
    amldist__frame_put_header(h, T_EMPTY, 1);
    expect_refused(h, 1, "longer than its limit");
    expect_refused((const unsigned char *)"GET / HTTP/1.0\r\n", 0, "bad magic");
}

/* The peer closes: at a frame's end, in its header, in its payload. */
static void closed_after(size_t bytes)
{
    amldist__conn_t c;
    int peer;
    pair(&c, &peer);
    unsigned char b[64];
    size_t n = frame(b, T_TEXT, "0123456789", 10);
    put(peer, b, bytes < n ? bytes : n);
    close(peer);
    struct got g;
    int rc = get(&c, &g);
    if (bytes >= n) {
        CHECK_INT_EQ(rc, 1);
        rc = get(&c, &g);
    }
    CHECK_INT_EQ(rc, -2);
    CHECK_STR_HAS(g.why, "connection closed");
    amldist__conn_close(&c);
}

static void test_peer_closes(void)
{
    closed_after(0);
    closed_after(5);           /* mid-header */
    closed_after(HDR);         /* header only */
    closed_after(HDR + 4);     /* mid-payload */
    closed_after(HDR + 10);    /* after a whole frame */
}

/* A pair whose socket buffers are small, to fill them quickly. */
static void small_pair(amldist__conn_t *c, int *peer)
{
    int small = 4096;
    pair(c, peer);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(*peer, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
}

/* The peer reads (and drops) while c sends what it queued. */
static void empty_queue(amldist__conn_t *c, int peer)
{
    unsigned char scratch[1 << 16];
    do {
        CHECK_INT_EQ(amldist__conn_flush(c), 0);
        while (recv(peer, scratch, sizeof scratch, MSG_DONTWAIT) > 0) {
        }
    } while (amldist__conn_pending(c));
}

/* A socket that takes nothing more: frames wait in the queue, and go out
 * whole and in order once the peer reads. */
static void test_full_socket(void)
{
    amldist__conn_t c;
    int peer;
    small_pair(&c, &peer);
    char payload[100];
    int sent = 0;
    while (!amldist__conn_pending(&c) && sent < 100000) {
        memset(payload, 'a' + sent % 26, sizeof payload);
        CHECK_INT_EQ(amldist__conn_send(&c, T_TEXT, payload, sizeof payload),
                     0);
        sent++;
    }
    CHECK(amldist__conn_pending(&c));
    for (int i = 0; i < 50; i++, sent++) {
        memset(payload, 'a' + sent % 26, sizeof payload);
        CHECK_INT_EQ(amldist__conn_send(&c, T_TEXT, payload, sizeof payload),
                     0);
    }
    CHECK_INT_EQ(amldist__conn_flush(&c), 0); /* still full: no error */
    CHECK(amldist__conn_pending(&c));
    /* The peer reads; every frame arrives whole and in order. */
    amldist__conn_t r;
    amldist__conn_init(&r, peer, limits);
    int got = 0;
    for (int round = 0; round < 100000 && got < sent; round++) {
        CHECK_INT_EQ(amldist__conn_flush(&c), 0);
        struct got g;
        int rc;
        while ((rc = get(&r, &g)) == 1) {
            CHECK_INT_EQ(g.type, T_TEXT);
            CHECK_INT_EQ(g.len, sizeof payload);
            CHECK_INT_EQ(g.p[0], 'a' + got % 26);
            CHECK_INT_EQ(g.p[g.len - 1], 'a' + got % 26);
            got++;
        }
        CHECK_INT_EQ(rc, 0);
    }
    CHECK_INT_EQ(got, sent);
    CHECK(!amldist__conn_pending(&c));
    amldist__conn_close(&r);
    amldist__conn_close(&c);
}

/* A peer that never reads: the queue stops at AMLDIST__CONN_OUT_MAX. */
static void test_stuck_peer(void)
{
    amldist__conn_t c;
    int peer;
    pair(&c, &peer);
    /* Frames of half the room the queue has left, down to 100 bytes: it
     * fills in a few dozen sends rather than 10,000 of 100 bytes (each
     * send() has valgrind check the whole queue it is handed: 8 s of CPU
     * in all); the last frames, the refused one too, are of 100. */
    static char payload[AMLDIST__CONN_OUT_MAX / 2];
    size_t queued = 0;
    int rc = 0;
    while (queued < 2 * AMLDIST__CONN_OUT_MAX && rc == 0) {
        size_t held = c.out_len - c.out_off;
        size_t room = AMLDIST__CONN_OUT_MAX > held + HDR
                          ? AMLDIST__CONN_OUT_MAX - held - HDR : 0;
        size_t len = room / 2 > 100 ? room / 2 : 100;
        if ((rc = amldist__conn_send(&c, T_TEXT, payload, len)) == 0)
            queued += HDR + len;
    }
    CHECK_INT_EQ(rc, -1);
    CHECK(queued > AMLDIST__CONN_OUT_MAX - HDR - 100);
    CHECK(c.out_len - c.out_off <= AMLDIST__CONN_OUT_MAX);
    amldist__conn_close(&c);
    close(peer);
}

/* A write error, not a signal: the peer is gone. */
static void test_write_error(void)
{
    amldist__conn_t c;
    int peer;
    pair(&c, &peer);
    close(peer);
    signal(SIGPIPE, SIG_DFL);
    CHECK_INT_EQ(amldist__conn_send(&c, T_EMPTY, NULL, 0), -1);
    amldist__conn_close(&c);
}

/* A frame sent by reference is not copied while it is all that is
 * queued; behind queued bytes it is, so the caller may reuse its buffer. */
static void test_send_ref(void)
{
    amldist__conn_t c;
    int peer;
    small_pair(&c, &peer);
    static unsigned char shared[HDR + 100], filler[100];
    amldist__frame_put_header(shared, T_TEXT, 100);
    memset(shared + HDR, 's', 100);
    /* Fill the socket, then hand the shared frame over: it is copied. */
    while (!amldist__conn_pending(&c))
        CHECK_INT_EQ(amldist__conn_send(&c, T_TEXT, filler, 100), 0);
    CHECK_INT_EQ(amldist__conn_send_ref(&c, shared, sizeof shared), 0);
    CHECK(c.out == c.buf);
    empty_queue(&c, peer);
    /* Nothing queued: the frame itself is referred to until sent. */
    int refs = 0, waiting = 0;
    while (refs < 1000 && !waiting) {
        CHECK_INT_EQ(amldist__conn_send_ref(&c, shared, sizeof shared), 0);
        refs++;
        waiting = amldist__conn_pending(&c) && c.out == shared;
    }
    CHECK(waiting);
    /* A frame queued behind the reference takes its unsent rest along. */
    CHECK_INT_EQ(amldist__conn_send(&c, T_EMPTY, NULL, 0), 0);
    CHECK(c.out == c.buf);
    memset(shared + HDR, 'z', 100); /* the caller's buffer is free again */
    amldist__conn_t r;
    amldist__conn_init(&r, peer, limits);
    struct got g;
    int empties = 0, shared_seen = 0;
    for (int round = 0; round < 100000 && !empties; round++) {
        CHECK_INT_EQ(amldist__conn_flush(&c), 0);
        while (get(&r, &g) == 1) {
            if (g.type == T_EMPTY) {
                empties++;
                continue;
            }
            /* Either a filler of zeros or the shared frame, whole. */
            CHECK_INT_EQ(g.len, 100);
            shared_seen += g.p[0] == 's';
            CHECK(g.p[0] == 's' || g.p[0] == 0);
            CHECK(!memcmp(g.p, g.p + 1, g.len - 1));
        }
    }
    CHECK_INT_EQ(empties, 1);
    CHECK_INT_EQ(shared_seen, refs);
    amldist__conn_close(&r);
    amldist__conn_close(&c);
}

/* A frame of its own head and a shared tail: the tail referred to (one
 * reference more) until sent; a frame queued behind takes its unsent rest
 * along (the reference given up), in order; a connection closed gives up
 * its reference. */
static void test_send_shared(void)
{
    amldist__conn_t c, d;
    int peer, peer2;
    small_pair(&c, &peer);
    amldist__conn_shared_t *sh = amldist__conn_shared_new(96);
    CHECK(sh != NULL);
    memset(sh->data, 's', 96);
    int sent = 0;
    while (!(amldist__conn_pending(&c) && c.tail == sh) && sent < 1000) {
        CHECK_INT_EQ(amldist__conn_send_shared(&c, T_TEXT, "AAAA", 4, sh, 0), 0);
        sent++;
    }
    CHECK(c.tail == sh);
    CHECK_INT_EQ((long long)sh->refs, 2);
    /* Another shared frame now is in the way of the tail: copied whole. */
    CHECK_INT_EQ(amldist__conn_send_shared(&c, T_TEXT, "AAAA", 4, sh, 0), 0);
    sent++;
    CHECK(c.tail == NULL);
    CHECK_INT_EQ((long long)sh->refs, 1);
    CHECK_INT_EQ(amldist__conn_send(&c, T_EMPTY, NULL, 0), 0);
    memset(sh->data, 'z', 96); /* no connection refers to it any more */
    amldist__conn_t r;
    amldist__conn_init(&r, peer, limits);
    struct got g;
    int texts = 0, empties = 0;
    for (int round = 0; round < 100000 && !empties; round++) {
        CHECK_INT_EQ(amldist__conn_flush(&c), 0);
        while (get(&r, &g) == 1) {
            if (g.type == T_EMPTY) {
                empties++;
                continue;
            }
            CHECK_INT_EQ(g.len, 100);
            CHECK(!memcmp(g.p, "AAAA", 4));
            CHECK(g.p[4] == 's' && !memcmp(g.p + 4, g.p + 5, 95));
            texts++;
        }
    }
    CHECK_INT_EQ(empties, 1);
    CHECK_INT_EQ(texts, sent);
    amldist__conn_close(&r);
    amldist__conn_close(&c);
    /* Closed with a tail unsent: its reference given up. */
    memset(sh->data, 's', 96);
    small_pair(&d, &peer2);
    while (d.tail != sh)
        CHECK_INT_EQ(amldist__conn_send_shared(&d, T_TEXT, "BBBB", 4, sh, 0), 0);
    CHECK_INT_EQ((long long)sh->refs, 2);
    amldist__conn_close(&d);
    CHECK_INT_EQ((long long)sh->refs, 1);
    close(peer2);
    amldist__conn_shared_put(sh);
}

struct seen {
    amldist__conn_t *c;
    int frames, stop_at, close_at;
};

static int on_frame(void *arg, unsigned type, const unsigned char *p,
                    uint32_t len)
{
    struct seen *s = arg;
    (void)p;
    CHECK_INT_EQ(type, T_EMPTY);
    CHECK_INT_EQ(len, 0);
    s->frames++;
    if (s->frames == s->close_at)
        amldist__conn_close(s->c);
    return s->frames == s->stop_at;
}

static void send_empties(int fd, int n)
{
    unsigned char b[HDR];
    amldist__frame_put_header(b, T_EMPTY, 0);
    for (int i = 0; i < n; i++)
        put(fd, b, sizeof b);
}

/* The frames of AMLDIST__CONN_READ_MAX reads at most a call, none left
 * whole behind them (the socket quiet, nothing would call again); the
 * handler may stop the loop, or close the connection under it. */
static void test_read_loop(void)
{
    amldist__conn_t c;
    int peer;
    pair(&c, &peer);
    const char *why;
    struct seen s = {&c, 0, -1, -1};
    enum { MANY = 3 * (AMLDIST__CONN_READ_MAX + AMLDIST__CONN_READ_AHEAD / HDR) };
    static unsigned char many[MANY * HDR]; /* in one send: a unix
                                              socket's room is per send */
    for (int i = 0; i < MANY; i++)
        amldist__frame_put_header(many + i * HDR, T_EMPTY, 0);
    put(peer, many, sizeof many);
    CHECK_INT_EQ(amldist__conn_read(&c, on_frame, &s, &why), 0);
    CHECK(s.frames >= AMLDIST__CONN_READ_MAX);
    CHECK(s.frames <= AMLDIST__CONN_READ_MAX + AMLDIST__CONN_READ_AHEAD / HDR);
    /* what the reads brought was handed out whole: the bytes left start a
     * frame and are less than one */
    CHECK(c.in_len - c.in_used < HDR);
    while (s.frames < MANY &&
           amldist__conn_read(&c, on_frame, &s, &why) == 0 && why == NULL) {
    }
    CHECK_INT_EQ(s.frames, MANY);
    CHECK(why == NULL);
    /* a few frames: one read, and none to find the socket empty */
    s.frames = 0;
    send_empties(peer, 6);
    CHECK_INT_EQ(amldist__conn_read(&c, on_frame, &s, &why), 0);
    CHECK_INT_EQ(s.frames, 6);
    CHECK_INT_EQ(c.in_dry, 1);

    s.frames = 0;
    s.stop_at = 2;
    send_empties(peer, 5);
    CHECK_INT_EQ(amldist__conn_read(&c, on_frame, &s, &why), 0);
    CHECK_INT_EQ(s.frames, 2);
    s.stop_at = -1;
    CHECK_INT_EQ(amldist__conn_read(&c, on_frame, &s, &why), 0);
    CHECK_INT_EQ(s.frames, 5);

    /* A bad frame behind good ones: those first, then the error. */
    unsigned char b[HDR];
    send_empties(peer, 2);
    amldist__frame_put_header(b, 77, 0);
    put(peer, b, sizeof b);
    s.frames = 0;
    CHECK_INT_EQ(amldist__conn_read(&c, on_frame, &s, &why), -1);
    CHECK_INT_EQ(s.frames, 2);
    CHECK_STR_HAS(why, "unknown frame type");
    amldist__conn_close(&c);
    close(peer);

    pair(&c, &peer);
    s = (struct seen){&c, 0, -1, 3};
    send_empties(peer, 10);
    CHECK_INT_EQ(amldist__conn_read(&c, on_frame, &s, &why), 0);
    CHECK_INT_EQ(s.frames, 3);
    CHECK_INT_EQ(c.fd, -1);
    close(peer);

    pair(&c, &peer);
    s = (struct seen){&c, 0, -1, -1};
    send_empties(peer, 1);
    close(peer);
    /* the frame, then (the socket readable still) the end */
    CHECK_INT_EQ(amldist__conn_read(&c, on_frame, &s, &why), 0);
    CHECK_INT_EQ(s.frames, 1);
    CHECK_INT_EQ(amldist__conn_read(&c, on_frame, &s, &why), -2);
    CHECK_INT_EQ(s.frames, 1);
    CHECK_STR_HAS(why, "connection closed");
    amldist__conn_close(&c);
}

int main(void)
{
    RUN(test_whole_frames);
    RUN(test_split_over_reads);
    RUN(test_bad_headers);
    RUN(test_peer_closes);
    RUN(test_full_socket);
    RUN(test_stuck_peer);
    RUN(test_write_error);
    RUN(test_send_ref);
    RUN(test_send_shared);
    RUN(test_read_loop);
    return test_summary();
}
