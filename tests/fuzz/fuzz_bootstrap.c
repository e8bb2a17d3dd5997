/*
 * libFuzzer target for the bootstrap's untrusted inputs: frame headers and
 * requests as a foreign peer could send them (lib/bootstrap/frames.c), and
 * AMLDIST_BOOTSTRAP_PORT / AMLDIST_BOOTSTRAP_TIMEOUT values
 * (lib/bootstrap/config.c).  An accepted header must re-encode to the same
 * bytes and respect its type's limit; an accepted value must lie in range.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap_internal.h"

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
    settings(data, size);
    return 0;
}
