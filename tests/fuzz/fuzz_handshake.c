/*
 * libFuzzer target for the channel's untrusted inputs (lib/net/chan.c,
 * lib/net/conn.c with a secret): the input as handshake frames to a
 * server's and to a client's channel, as the stream a peer without the
 * secret sends to a connection of either side, and as sealed frames after
 * a real handshake.  Without the secret no input may ever open a channel
 * or be handed out as a frame, and nothing may crash or leak.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/chan.h"
#include "net/conn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                          \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_handshake: %s:%d: %s\n", __FILE__,          \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

static amldist__chan_keys_t keys;

static const amldist__frame_limit_t limits[] = {
    {16, 0, 256},
    {17, 4, 4},
    {0, 0, 0},
};

/* The input as a sequence of handshake frames (type u16 | length u8 |
 * payload) to a fresh channel of each side. */
static void steps(const uint8_t *data, size_t size)
{
    for (int server = 0; server < 2; server++) {
        amldist__chan_t *ch = amldist__chan_new(&keys, server);
        unsigned char out[AMLDIST__HS_SERVER_LEN];
        unsigned t;
        uint32_t l;
        const char *why;
        size_t at = 0;
        if (!ch)
            return;
        if (!server)
            REQUIRE(amldist__chan_start(ch, &t, out, &l, &why) == 0);
        while (at + 3 <= size) {
            unsigned type = (unsigned)data[at] << 8 | data[at + 1];
            size_t len = data[at + 2];
            at += 3;
            if (len > size - at)
                len = size - at;
            int rc = amldist__chan_handshake(ch, type, data + at,
                                             (uint32_t)len, &t, out, &l, &why);
            at += len;
            /* Without the secret no MAC is right: the channel never opens. */
            REQUIRE(amldist__chan_state(ch) != AMLDIST__CHAN_OPEN);
            if (rc < 0) {
                REQUIRE(why != NULL);
                REQUIRE(amldist__chan_state(ch) == AMLDIST__CHAN_FAILED);
            }
        }
        amldist__chan_free(ch);
    }
}

static int no_frame(void *arg, unsigned type, const unsigned char *p,
                    uint32_t len)
{
    (void)arg;
    (void)type;
    (void)p;
    (void)len;
    REQUIRE(!"a frame handed out from a peer without the secret");
    return 1;
}

/* The input as what a peer sent to a connection of either side. */
static void stream(const uint8_t *data, size_t size)
{
    for (int server = 0; server < 2; server++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0,
                       sv) < 0)
            return;
        amldist__conn_t c;
        amldist__conn_init(&c, sv[0], limits);
        REQUIRE(amldist__conn_secure(&c, &keys, server) == 0);
        if (size)
            REQUIRE(send(sv[1], data, size, MSG_DONTWAIT) == (ssize_t)size);
        shutdown(sv[1], SHUT_WR);
        const char *why;
        int rc;
        while ((rc = amldist__conn_read(&c, no_frame, NULL, &why)) == 0) {
        }
        REQUIRE(rc < 0 && why != NULL);
        amldist__conn_close(&c);
        close(sv[1]);
    }
}

/* The input as sealed frames (header | rest) after a real handshake: none
 * opens. */
static void sealed(const uint8_t *data, size_t size)
{
    amldist__chan_t *c = amldist__chan_new(&keys, 0),
                    *s = amldist__chan_new(&keys, 1);
    unsigned char a[AMLDIST__HS_SERVER_LEN], b[AMLDIST__HS_SERVER_LEN];
    unsigned ta, tb;
    uint32_t la, lb;
    const char *why;
    REQUIRE(c && s);
    REQUIRE(amldist__chan_start(c, &ta, a, &la, &why) == 0);
    REQUIRE(amldist__chan_handshake(s, ta, a, la, &tb, b, &lb, &why) == 0);
    REQUIRE(amldist__chan_handshake(c, tb, b, lb, &ta, a, &la, &why) == 0);
    REQUIRE(amldist__chan_handshake(s, ta, a, la, &tb, b, &lb, &why) == 0);
    if (size > AMLDIST__FRAME_HEADER_LEN) {
        unsigned char *buf = malloc(size);
        REQUIRE(buf);
        memcpy(buf, data, size);
        REQUIRE(amldist__chan_open(s, buf, buf + AMLDIST__FRAME_HEADER_LEN,
                                   size - AMLDIST__FRAME_HEADER_LEN) < 0);
        free(buf);
    }
    amldist__chan_free(c);
    amldist__chan_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!keys.label[0])
        REQUIRE(amldist__chan_keys(&keys, "fuzz", "the job's secret", 16) ==
                0);
    steps(data, size);
    stream(data, size);
    sealed(data, size);
    return 0;
}
