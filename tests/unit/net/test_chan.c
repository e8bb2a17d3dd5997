/*
 * The authenticated channel (lib/net/chan.c) on its own and under the
 * framed connection (lib/net/conn.c) over a socketpair: the handshake and
 * sealed frames both ways; a wrong secret on either side; a flipped byte,
 * reordered, replayed, truncated and injected frames; a recorded handshake
 * replayed into a new connection in both directions; a plain peer meeting
 * a sealed one; what crosses the wire.
 */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/chan.h"
#include "net/conn.h"
#include "test.h"

#define HDR AMLDIST__FRAME_HEADER_LEN
#define TAG AMLDIST__CHAN_TAG_LEN

static amldist__chan_keys_t keys(const char *secret, const char *label)
{
    amldist__chan_keys_t k;
    CHECK_INT_EQ(amldist__chan_keys(&k, label, secret, strlen(secret)), 0);
    return k;
}

/* A whole handshake between two fresh channels; 0 when both opened, else
 * which step failed (1: the client refused the server, 2: the server
 * refused the client). */
static int handshake(amldist__chan_t *c, amldist__chan_t *s)
{
    unsigned char a[AMLDIST__HS_SERVER_LEN], b[AMLDIST__HS_SERVER_LEN];
    unsigned ta, tb;
    uint32_t la, lb;
    const char *why;
    CHECK_INT_EQ(amldist__chan_start(c, &ta, a, &la, &why), 0);
    CHECK_INT_EQ(ta, AMLDIST__HS_HELLO);
    CHECK_INT_EQ(amldist__chan_handshake(s, ta, a, la, &tb, b, &lb, &why), 0);
    CHECK_INT_EQ(tb, AMLDIST__HS_SERVER);
    if (amldist__chan_handshake(c, tb, b, lb, &ta, a, &la, &why) < 0) {
        CHECK_STR_HAS(why, "did not prove the job's secret");
        return 1;
    }
    CHECK_INT_EQ(ta, AMLDIST__HS_CLIENT);
    if (amldist__chan_handshake(s, ta, a, la, &tb, b, &lb, &why) < 0) {
        CHECK_STR_HAS(why, "did not prove the job's secret");
        return 2;
    }
    CHECK_INT_EQ(tb, 0);
    CHECK_INT_EQ(amldist__chan_state(c), AMLDIST__CHAN_OPEN);
    CHECK_INT_EQ(amldist__chan_state(s), AMLDIST__CHAN_OPEN);
    return 0;
}

/* A sealed frame of `text` at f (header, ciphertext, tag); its length. */
static size_t seal(amldist__chan_t *ch, unsigned type, const char *text,
                   unsigned char *f)
{
    size_t n = strlen(text);
    amldist__frame_put_header(f, type, (uint32_t)(n + TAG));
    CHECK_INT_EQ(amldist__chan_seal(ch, f, (const unsigned char *)text, n,
                                    f + HDR),
                 0);
    return HDR + n + TAG;
}

/* Open a copy of frame f (n bytes); 0 with the text in out, or -1. */
static int open_copy(amldist__chan_t *ch, const unsigned char *f, size_t n,
                     char *out)
{
    unsigned char b[512];
    memcpy(b, f, n);
    if (amldist__chan_open(ch, b, b + HDR, n - HDR) < 0)
        return -1;
    memcpy(out, b + HDR, n - HDR - TAG);
    out[n - HDR - TAG] = '\0';
    return 0;
}

static void test_round_trip(void)
{
    amldist__chan_keys_t k = keys("s3cret", "rdzv");
    amldist__chan_t *c = amldist__chan_new(&k, 0), *s = amldist__chan_new(&k, 1);
    unsigned char f[256];
    char out[256];
    CHECK_INT_EQ(handshake(c, s), 0);
    for (int i = 0; i < 3; i++) {
        size_t n = seal(c, 16, "JOIN from the client", f);
        CHECK(!memmem(f, n, "JOIN", 4)); /* encrypted */
        CHECK_INT_EQ(open_copy(s, f, n, out), 0);
        CHECK_STR_EQ(out, "JOIN from the client");
        n = seal(s, 18, "ASSIGN from the server", f);
        CHECK_INT_EQ(open_copy(c, f, n, out), 0);
        CHECK_STR_EQ(out, "ASSIGN from the server");
    }
    /* An empty frame (a heartbeat) is sealed too. */
    size_t n = seal(c, 23, "", f);
    CHECK_INT_EQ((long long)n, HDR + TAG);
    CHECK_INT_EQ(open_copy(s, f, n, out), 0);
    amldist__chan_free(c);
    amldist__chan_free(s);
    amldist__chan_keys_clear(&k);
}

/* Either side without the secret is refused at its first MAC. */
static void test_wrong_secret(void)
{
    amldist__chan_keys_t k = keys("s3cret", "rdzv"),
                         w = keys("another", "rdzv");
    amldist__chan_t *c = amldist__chan_new(&k, 0), *s = amldist__chan_new(&w, 1);
    CHECK_INT_EQ(handshake(c, s), 1); /* an impostor server */
    CHECK_INT_EQ(amldist__chan_state(c), AMLDIST__CHAN_FAILED);
    amldist__chan_free(c);
    amldist__chan_free(s);
    /* A client without the secret that goes on anyway (it cannot check
     * the server's MAC, and sends what it can). */
    c = amldist__chan_new(&w, 0);
    s = amldist__chan_new(&k, 1);
    unsigned char a[64], b[64];
    unsigned t;
    uint32_t l;
    const char *why;
    CHECK_INT_EQ(amldist__chan_start(c, &t, a, &l, &why), 0);
    CHECK_INT_EQ(amldist__chan_handshake(s, t, a, l, &t, b, &l, &why), 0);
    memset(a, 0x5a, AMLDIST__HS_CLIENT_LEN);
    CHECK_INT_EQ(amldist__chan_handshake(s, AMLDIST__HS_CLIENT, a,
                                         AMLDIST__HS_CLIENT_LEN, &t, b, &l,
                                         &why),
                 -1);
    CHECK_STR_HAS(why, "did not prove the job's secret");
    CHECK_INT_EQ(amldist__chan_state(s), AMLDIST__CHAN_FAILED);
    amldist__chan_free(c);
    amldist__chan_free(s);
    /* The same secret under another protocol's label is another key. */
    amldist__chan_keys_t bs = keys("s3cret", "bootstrap");
    c = amldist__chan_new(&k, 0);
    s = amldist__chan_new(&bs, 1);
    CHECK_INT_EQ(handshake(c, s), 1);
    amldist__chan_free(c);
    amldist__chan_free(s);
}

/* A fresh pair of open channels. */
static void open_pair(amldist__chan_t **c, amldist__chan_t **s)
{
    amldist__chan_keys_t k = keys("s3cret", "rdzv");
    *c = amldist__chan_new(&k, 0);
    *s = amldist__chan_new(&k, 1);
    CHECK_INT_EQ(handshake(*c, *s), 0);
}

static void test_flipped_byte(void)
{
    unsigned char f[256], g[256];
    char out[256];
    size_t n;
    /* Every byte of the frame, header included, is covered. */
    for (size_t at = 0;; at++) {
        amldist__chan_t *c, *s;
        open_pair(&c, &s);
        n = seal(c, 19, "FAIL rank 3 status 1", f);
        if (at >= n) {
            amldist__chan_free(c);
            amldist__chan_free(s);
            break;
        }
        memcpy(g, f, n);
        g[at] ^= 0x01;
        CHECK_INT_EQ(open_copy(s, g, n, out), -1);
        /* And the channel is no use after it. */
        CHECK_INT_EQ(amldist__chan_state(s), AMLDIST__CHAN_FAILED);
        CHECK_INT_EQ(open_copy(s, f, n, out), -1);
        amldist__chan_free(c);
        amldist__chan_free(s);
    }
}

static void test_reordered_replayed_truncated(void)
{
    unsigned char f1[256], f2[256];
    char out[256];
    amldist__chan_t *c, *s;
    open_pair(&c, &s);
    size_t n1 = seal(s, 20, "STOP round 1", f1);
    size_t n2 = seal(s, 22, "FINISH 0", f2);
    CHECK_INT_EQ(open_copy(c, f2, n2, out), -1); /* reordered */
    amldist__chan_free(c);
    amldist__chan_free(s);

    open_pair(&c, &s);
    n1 = seal(s, 20, "STOP round 1", f1);
    CHECK_INT_EQ(open_copy(c, f1, n1, out), 0);
    CHECK_INT_EQ(open_copy(c, f1, n1, out), -1); /* replayed */
    amldist__chan_free(c);
    amldist__chan_free(s);

    open_pair(&c, &s);
    n1 = seal(s, 20, "STOP round 1", f1);
    CHECK_INT_EQ(open_copy(c, f1, n1 - 1, out), -1); /* cut short */
    amldist__chan_free(c);
    amldist__chan_free(s);

    /* A frame dropped: the next one fails. */
    open_pair(&c, &s);
    seal(s, 20, "STOP round 1", f1);
    n2 = seal(s, 22, "FINISH 0", f2);
    CHECK_INT_EQ(open_copy(c, f2, n2, out), -1);
    amldist__chan_free(c);
    amldist__chan_free(s);
}

/* A frame injected after the handshake: one sealed by another session of
 * the same job (a recorded FINISH), or a plain one. */
static void test_injected(void)
{
    unsigned char f[256];
    char out[256];
    amldist__chan_t *c, *s, *c2, *s2;
    open_pair(&c, &s);
    open_pair(&c2, &s2);
    size_t n = seal(s2, 22, "FINISH 0", f);
    CHECK_INT_EQ(open_copy(c, f, n, out), -1);
    amldist__chan_free(c);
    amldist__chan_free(s);
    open_pair(&c, &s);
    amldist__frame_put_header(f, 22, 8 + TAG);
    memcpy(f + HDR, "FINISH 0", 8);
    memset(f + HDR + 8, 0, TAG);
    CHECK_INT_EQ(open_copy(c, f, HDR + 8 + TAG, out), -1);
    amldist__chan_free(c);
    amldist__chan_free(s);
    amldist__chan_free(c2);
    amldist__chan_free(s2);
}

/* A recorded handshake replayed into a new connection, both ways. */
static void test_replayed_handshake(void)
{
    amldist__chan_keys_t k = keys("s3cret", "rdzv");
    amldist__chan_t *c = amldist__chan_new(&k, 0), *s = amldist__chan_new(&k, 1);
    unsigned char hello[64], server[64], client[64], b[64];
    unsigned t;
    uint32_t l, lh, ls, lc;
    const char *why;
    CHECK_INT_EQ(amldist__chan_start(c, &t, hello, &lh, &why), 0);
    CHECK_INT_EQ(amldist__chan_handshake(s, AMLDIST__HS_HELLO, hello, lh, &t,
                                         server, &ls, &why),
                 0);
    CHECK_INT_EQ(amldist__chan_handshake(c, AMLDIST__HS_SERVER, server, ls,
                                         &t, client, &lc, &why),
                 0);
    CHECK_INT_EQ(amldist__chan_handshake(s, AMLDIST__HS_CLIENT, client, lc,
                                         &t, b, &l, &why),
                 0);
    amldist__chan_free(c);
    amldist__chan_free(s);
    /* The client's bytes to a new server: its nonce is new. */
    s = amldist__chan_new(&k, 1);
    CHECK_INT_EQ(amldist__chan_handshake(s, AMLDIST__HS_HELLO, hello, lh, &t,
                                         b, &l, &why),
                 0);
    CHECK(memcmp(b, server, AMLDIST__CHAN_NONCE_LEN) != 0);
    CHECK_INT_EQ(amldist__chan_handshake(s, AMLDIST__HS_CLIENT, client, lc,
                                         &t, b, &l, &why),
                 -1);
    CHECK_STR_HAS(why, "did not prove the job's secret");
    amldist__chan_free(s);
    /* The server's bytes to a new client: its nonce is new. */
    c = amldist__chan_new(&k, 0);
    CHECK_INT_EQ(amldist__chan_start(c, &t, b, &l, &why), 0);
    CHECK(memcmp(b, hello, AMLDIST__CHAN_NONCE_LEN) != 0);
    CHECK_INT_EQ(amldist__chan_handshake(c, AMLDIST__HS_SERVER, server, ls,
                                         &t, b, &l, &why),
                 -1);
    CHECK_STR_HAS(why, "did not prove the job's secret");
    amldist__chan_free(c);
    amldist__chan_keys_clear(&k);
}

/* The same payload sealed twice never gives the same bytes (each frame
 * its own nonce), and frames out of turn in the handshake are refused. */
static void test_no_nonce_reuse(void)
{
    unsigned char f1[256], f2[256], b[64];
    amldist__chan_t *c, *s;
    open_pair(&c, &s);
    size_t n1 = seal(c, 23, "same", f1), n2 = seal(c, 23, "same", f2);
    CHECK_INT_EQ((long long)n1, (long long)n2);
    CHECK(memcmp(f1 + HDR, f2 + HDR, n1 - HDR) != 0);
    /* Another session of the same job: other keys. */
    amldist__chan_t *c2, *s2;
    open_pair(&c2, &s2);
    seal(c2, 23, "same", f2);
    CHECK(memcmp(f1 + HDR, f2 + HDR, n1 - HDR) != 0);
    /* No handshake frame once open. */
    unsigned t;
    uint32_t l;
    const char *why;
    CHECK_INT_EQ(amldist__chan_handshake(s, AMLDIST__HS_HELLO, b, 32, &t, b,
                                         &l, &why),
                 -1);
    amldist__chan_free(c);
    amldist__chan_free(s);
    amldist__chan_free(c2);
    amldist__chan_free(s2);
    /* Nothing is sealed before the channel opens. */
    amldist__chan_keys_t k = keys("s3cret", "rdzv");
    c = amldist__chan_new(&k, 0);
    amldist__frame_put_header(f1, 23, TAG);
    CHECK_INT_EQ(amldist__chan_seal(c, f1, NULL, 0, f1 + HDR), -1);
    amldist__chan_free(c);
}

/* ---------------- under the connection ---------------- */

enum { T_TEXT = 16, T_EMPTY = 17 };
static const amldist__frame_limit_t limits[] = {
    {T_TEXT, 0, 200},
    {T_EMPTY, 0, 0},
    {0, 0, 0},
};

static void conn_pair(amldist__conn_t *c, amldist__conn_t *s)
{
    int sv[2];
    CHECK_INT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    amldist__conn_init(c, sv[0], limits);
    amldist__conn_init(s, sv[1], limits);
}

/* A connected pair, the server's with keys sk and the client's with ck
 * (NULL: plain). */
static void sealed_pair(amldist__conn_t *c, amldist__conn_t *s,
                        const amldist__chan_keys_t *sk,
                        const amldist__chan_keys_t *ck)
{
    conn_pair(c, s);
    if (sk)
        CHECK_INT_EQ(amldist__conn_secure(s, sk, 1), 0);
    if (ck)
        CHECK_INT_EQ(amldist__conn_secure(c, ck, 0), 0);
}

/* Read c until a frame or an error (the peer's handshake answered by
 * pumping p meanwhile); the result of amldist__conn_recv. */
static int pump(amldist__conn_t *c, amldist__conn_t *p, unsigned *type,
                char *text, const char **why)
{
    for (int i = 0; i < 100; i++) {
        const unsigned char *pl;
        uint32_t len;
        unsigned pt;
        const char *pw;
        int rc = amldist__conn_recv(c, type, &pl, &len, why);
        if (rc == 1 && text) {
            memcpy(text, pl, len);
            text[len] = '\0';
        }
        if (rc != 0)
            return rc;
        if (p && p->fd >= 0 &&
            amldist__conn_recv(p, &pt, &pl, &len, &pw) < 0)
            p = NULL;
    }
    return 0;
}

static void test_conn_sealed(void)
{
    amldist__chan_keys_t k = keys("s3cret", "rdzv");
    amldist__conn_t c, s;
    unsigned type;
    char text[256];
    const char *why;
    sealed_pair(&c, &s, &k, &k);
    /* Sent before the server is proven: held back, then sealed. */
    CHECK_INT_EQ(amldist__conn_send(&c, T_TEXT, "hello there", 11), 0);
    CHECK_INT_EQ(amldist__conn_send(&c, T_EMPTY, NULL, 0), 0);
    CHECK_INT_EQ(pump(&s, &c, &type, text, &why), 1);
    CHECK_INT_EQ(type, T_TEXT);
    CHECK_STR_EQ(text, "hello there");
    CHECK_INT_EQ(pump(&s, &c, &type, text, &why), 1);
    CHECK_INT_EQ(type, T_EMPTY);
    CHECK_INT_EQ(amldist__conn_send(&s, T_TEXT, "and back", 8), 0);
    CHECK_INT_EQ(pump(&c, &s, &type, text, &why), 1);
    CHECK_STR_EQ(text, "and back");
    /* A byte flipped on the wire: an integrity error, never the frame. */
    unsigned char f[64];
    amldist__frame_put_header(f, T_TEXT, 4 + TAG);
    memset(f + HDR, 'x', 4 + TAG);
    CHECK_INT_EQ(send(s.fd, f, HDR + 4 + TAG, 0), HDR + 4 + TAG);
    CHECK_INT_EQ(pump(&c, NULL, &type, text, &why),
                 AMLDIST__CONN_EINTEGRITY);
    CHECK_STR_HAS(why, "integrity error");
    amldist__conn_close(&c);
    amldist__conn_close(&s);
    /* A sealed header beyond its type's limits is refused before its
     * payload: altered on the way. */
    sealed_pair(&c, &s, &k, &k);
    CHECK_INT_EQ(amldist__conn_send(&c, T_TEXT, "x", 1), 0);
    CHECK_INT_EQ(pump(&s, &c, &type, text, &why), 1);
    amldist__frame_put_header(f, T_EMPTY, 1 + TAG);
    CHECK_INT_EQ(send(s.fd, f, HDR, 0), HDR);
    CHECK_INT_EQ(pump(&c, NULL, &type, text, &why), AMLDIST__CONN_EINTEGRITY);
    amldist__conn_close(&c);
    amldist__conn_close(&s);
    amldist__chan_keys_clear(&k);
}

static void test_conn_mismatch(void)
{
    amldist__chan_keys_t k = keys("s3cret", "rdzv"), w = keys("x", "rdzv");
    amldist__conn_t c, s;
    unsigned type;
    const char *why;
    /* A plain client at a sealed server: the server says so, plain. */
    sealed_pair(&c, &s, &k, NULL);
    CHECK_INT_EQ(amldist__conn_send(&c, T_TEXT, "JOIN", 4), 0);
    CHECK_INT_EQ(pump(&s, NULL, &type, NULL, &why), AMLDIST__CONN_EAUTH);
    CHECK_STR_HAS(why, "no secret");
    CHECK(amldist__conn_auth_failed(&s));
    CHECK_INT_EQ(amldist__conn_send(&s, T_TEXT, "refused", 7), 0);
    char text[64];
    CHECK_INT_EQ(pump(&c, NULL, &type, text, &why), 1);
    CHECK_STR_EQ(text, "refused");
    amldist__conn_close(&c);
    amldist__conn_close(&s);
    /* A sealed client at a plain server. */
    sealed_pair(&c, &s, NULL, &k);
    CHECK_INT_EQ(pump(&s, NULL, &type, NULL, &why), AMLDIST__CONN_EAUTH);
    CHECK_STR_HAS(why, "has a secret");
    /* ... whose plain answer the client takes for no proof. */
    CHECK_INT_EQ(amldist__conn_send(&s, T_TEXT, "refused", 7), 0);
    CHECK_INT_EQ(pump(&c, NULL, &type, NULL, &why), AMLDIST__CONN_EAUTH);
    amldist__conn_close(&c);
    amldist__conn_close(&s);
    /* Another secret: the client refuses the server, and sent nothing of
     * its own. */
    sealed_pair(&c, &s, &w, &k);
    CHECK_INT_EQ(amldist__conn_send(&c, T_TEXT, "JOIN secret stuff", 17), 0);
    CHECK_INT_EQ(pump(&c, &s, &type, NULL, &why), AMLDIST__CONN_EAUTH);
    CHECK_STR_HAS(why, "did not prove the job's secret");
    amldist__conn_close(&c);
    char wire[512];
    ssize_t n = recv(s.fd, wire, sizeof wire, MSG_DONTWAIT);
    CHECK(n <= 0 || !memmem(wire, (size_t)n, "JOIN", 4));
    amldist__conn_close(&s);
    amldist__chan_keys_clear(&k);
    amldist__chan_keys_clear(&w);
}

/* A value sealed at rest (the etcd backend's): it opens under its key
 * with the same secret, and not under another key, another secret, or
 * with one byte changed; two seals of one value differ (random nonces). */
static void test_value_seal(void)
{
    amldist__chan_keys_t k = keys("a-secret-of-the-job-long-enough-32", "rdzv");
    amldist__chan_keys_t o = keys("another-secret-of-another-job-xx32", "rdzv");
    const unsigned char v[] = "127.0.0.1 node 0's JOIN";
    unsigned char a[64], b[64], out[64];
    size_t n = sizeof v;
    CHECK_INT_EQ(amldist__chan_value_seal(&k, "/p/m/1", 6, v, n, a), 0);
    CHECK_INT_EQ(amldist__chan_value_seal(&k, "/p/m/1", 6, v, n, b), 0);
    CHECK(memcmp(a, b, n + AMLDIST__CHAN_VALUE_OVER) != 0);
    CHECK(memmem(a, n + AMLDIST__CHAN_VALUE_OVER, "127.0.0.1", 9) == NULL);
    CHECK_INT_EQ(amldist__chan_value_open(&k, "/p/m/1", 6, a,
                                          n + AMLDIST__CHAN_VALUE_OVER, out),
                 (long)n);
    CHECK(memcmp(out, v, n) == 0);
    CHECK_INT_EQ(amldist__chan_value_open(&k, "/p/m/2", 6, a,
                                          n + AMLDIST__CHAN_VALUE_OVER, out), -1);
    CHECK_INT_EQ(amldist__chan_value_open(&o, "/p/m/1", 6, a,
                                          n + AMLDIST__CHAN_VALUE_OVER, out), -1);
    a[20] ^= 1;
    CHECK_INT_EQ(amldist__chan_value_open(&k, "/p/m/1", 6, a,
                                          n + AMLDIST__CHAN_VALUE_OVER, out), -1);
    CHECK_INT_EQ(amldist__chan_value_open(&k, "/p/m/1", 6, a, 10, out), -1);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_warm(test_round_trip);
    RUN(test_round_trip);
    RUN(test_wrong_secret);
    RUN(test_flipped_byte);
    RUN(test_reordered_replayed_truncated);
    RUN(test_injected);
    RUN(test_replayed_handshake);
    RUN(test_no_nonce_reuse);
    RUN(test_conn_sealed);
    RUN(test_conn_mismatch);
    RUN(test_value_seal);
    return test_summary();
}
