/*
 * libFuzzer target for the bootstrap's untrusted inputs: frame headers and
 * requests as a foreign peer could send them (lib/bootstrap/frames.c), the
 * same bytes as a stream on a connection (lib/net/conn.c), and
 * AMLDIST_BOOTSTRAP_PORT / AMLDIST_BOOTSTRAP_TIMEOUT values
 * (lib/bootstrap/config.c).  An accepted header must re-encode to the same
 * bytes and respect its type's limit; a frame the connection hands out must
 * be one the stream holds; an accepted value must lie in range.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "net/conn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                          \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_bootstrap: %s:%d: %s\n", __FILE__,          \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

static void frames(const uint8_t *data, size_t size)
{
    unsigned char hdr[AMLDIST__FRAME_HEADER_LEN], again[AMLDIST__FRAME_HEADER_LEN];
    unsigned type = 0;
    uint32_t len = 0;
    const char *why = NULL;
    if (size < AMLDIST__FRAME_HEADER_LEN)
        return;
    memcpy(hdr, data, sizeof hdr);
    if (amldist__bs_get_header(hdr, &type, &len, &why) < 0) {
        REQUIRE(why != NULL);
        return;
    }
    REQUIRE(len <= amldist__bs_max_payload(type));
    REQUIRE(type == AMLDIST__BS_BLOB || len == amldist__bs_max_payload(type));
    amldist__frame_put_header(again, type, len);
    REQUIRE(!memcmp(hdr, again, sizeof hdr));
    if (type == AMLDIST__BS_HELLO &&
        size >= AMLDIST__FRAME_HEADER_LEN + AMLDIST__BS_HELLO_LEN) {
        amldist__bs_hello_t h;
        unsigned char b[AMLDIST__BS_HELLO_LEN];
        amldist__bs_get_hello(data + AMLDIST__FRAME_HEADER_LEN, &h);
        amldist__bs_put_hello(b, &h);
        REQUIRE(!memcmp(b, data + AMLDIST__FRAME_HEADER_LEN, sizeof b));
    }
}

struct stream {
    const uint8_t *data;
    size_t size, at; /* where the next frame starts */
};

static int frame_in_stream(void *arg, unsigned type,
                           const unsigned char *payload, uint32_t len)
{
    struct stream *st = arg;
    const amldist__frame_limit_t *lim =
        amldist__frame_limit(amldist__bs_frames, type);
    REQUIRE(lim && len >= lim->min && len <= lim->max);
    REQUIRE(st->at + AMLDIST__FRAME_HEADER_LEN + len <= st->size);
    REQUIRE(!memcmp(payload, st->data + st->at + AMLDIST__FRAME_HEADER_LEN,
                    len));
    st->at += AMLDIST__FRAME_HEADER_LEN + len;
    return 0;
}

/* The input as what a peer sent on a connection, then closed. */
static void stream(const uint8_t *data, size_t size)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return;
    REQUIRE(send(sv[1], data, size, MSG_DONTWAIT) == (ssize_t)size);
    close(sv[1]);
    amldist__conn_t c;
    struct stream st = {data, size, 0};
    const char *why;
    int rc;
    amldist__conn_init(&c, sv[0], amldist__bs_frames);
    while ((rc = amldist__conn_read(&c, frame_in_stream, &st, &why)) == 0) {
    }
    REQUIRE(why != NULL);
    /* The end of the stream, or a header the frames' check refuses. */
    /* (or a handshake's first frame, which a connection without the
     * job's secret refuses as such) */
    REQUIRE(rc == AMLDIST__CONN_ECLOSED || rc == AMLDIST__CONN_EMALFORMED ||
            rc == AMLDIST__CONN_EAUTH);
    amldist__conn_close(&c);
}

static void settings(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    int port = 0, ms = 0;
    if (!s)
        return;
    memcpy(s, data, size);
    s[size] = '\0';
    setenv("AMLDIST_BOOTSTRAP_PORT", s, 1);
    if (amldist__bs_port(0, 29500, &port) == 0) {
        REQUIRE(port >= 1 && port <= 65535);
        REQUIRE(*s == '\0' || (unsigned)(*s - '0') < 10);
    }
    setenv("AMLDIST_BOOTSTRAP_TIMEOUT", s, 1);
    if (amldist__bs_timeout(0, &ms) == 0)
        REQUIRE(ms >= 1 && ms <= 7 * 86400 * 1000 + 999);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frames(data, size);
    stream(data, size);
    settings(data, size);
    return 0;
}
