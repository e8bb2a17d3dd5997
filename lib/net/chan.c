/* The authenticated channel (see chan.h), on libcrypto's HKDF, HMAC and
 * ChaCha20-Poly1305; the nonces from the kernel's CSPRNG (getrandom(2)),
 * which spares every process libcrypto's DRBG set-up (half a millisecond
 * at its first use).
 *
 * libcrypto.so.3 is loaded (dlopen) at the first key derivation, as NCCL
 * is (lib/nccl): a process that never meets a secret (amlrun without one,
 * every training rank that links the library) never maps it, and its
 * start costs what it did (loading libcrypto costs about 0.6 ms of CPU). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <sys/random.h>

#include "net/chan.h"
#include "net/frames.h"
#include "util/dltable.h"

#define VERSION "amldist-channel-v1"

struct amldist__chan {
    amldist__chan_keys_t k;
    int server, state;
    unsigned char nc[AMLDIST__CHAN_NONCE_LEN], ns[AMLDIST__CHAN_NONCE_LEN];
    EVP_CIPHER_CTX *tx, *rx;
    uint64_t tx_seq, rx_seq;
};

/* The libcrypto functions the channel calls, by name, with the types of
 * OpenSSL 3's own declarations. */
#define CRYPTO_FUNCTIONS(X)                                                    \
    X(EVP_KDF_fetch) X(EVP_KDF_CTX_new) X(EVP_KDF_CTX_free) X(EVP_KDF_derive)  \
    X(EVP_MAC_fetch) X(EVP_MAC_CTX_new) X(EVP_MAC_CTX_free) X(EVP_MAC_init)    \
    X(EVP_MAC_update) X(EVP_MAC_final) X(EVP_CIPHER_fetch)                     \
    X(EVP_CIPHER_CTX_new) X(EVP_CIPHER_CTX_free) X(EVP_CipherInit_ex)          \
    X(EVP_CipherUpdate) X(EVP_CipherFinal_ex) X(EVP_CIPHER_CTX_ctrl)           \
    X(CRYPTO_memcmp) X(OPENSSL_cleanse)
#define FIELD(name) __typeof__(&name) name;
static struct {
    CRYPTO_FUNCTIONS(FIELD)
} lc;
#define C(name) (lc.name)

/* Cleared without libcrypto (it may never be loaded): the compiler may
 * not drop it. */
static void cleanse(void *p, size_t n)
{
    explicit_bzero(p, n);
}

/* The algorithms, fetched once per process after libcrypto is loaded (a
 * fetch looks up libcrypto's store under a lock; the first one builds
 * it). */
static EVP_KDF *hkdf_alg;
static EVP_MAC *hmac_alg;
static EVP_CIPHER *aead_alg;
static pthread_once_t loaded = PTHREAD_ONCE_INIT;

static void load(void)
{
#define NAME(name) #name,
#define SLOT(name) (void **)&lc.name,
    static const char *const names[] = {CRYPTO_FUNCTIONS(NAME)};
    void **const slots[] = {CRYPTO_FUNCTIONS(SLOT)};
#undef NAME
#undef SLOT
    char why[256];
    if (!amldist__dl_table("libcrypto.so.3", "OpenSSL 3", RTLD_LOCAL, names,
                           slots, sizeof names / sizeof *names, why,
                           sizeof why))
        return; /* every caller says "libcrypto failed" in its own words */
    hkdf_alg = C(EVP_KDF_fetch)(NULL, "HKDF", NULL);
    hmac_alg = C(EVP_MAC_fetch)(NULL, "HMAC", NULL);
    aead_alg = C(EVP_CIPHER_fetch)(NULL, "ChaCha20-Poly1305", NULL);
}

/* 0 once libcrypto and the algorithms are there, else -1. */
static int algorithms(void)
{
    pthread_once(&loaded, load);
    return hkdf_alg && hmac_alg && aead_alg ? 0 : -1;
}

/* HKDF-SHA256 in `mode` (EVP_KDF_HKDF_MODE_*): key, salt and info to
 * out_len bytes at out. */
static int hkdf(int mode, const void *key, size_t key_len, const void *salt,
                size_t salt_len, const char *info, unsigned char *out,
                size_t out_len)
{
    EVP_KDF_CTX *ctx =
        algorithms() == 0 ? C(EVP_KDF_CTX_new)(hkdf_alg) : NULL;
    OSSL_PARAM params[6], *p = params;
    int rc = -1;
    *p++ = (OSSL_PARAM)OSSL_PARAM_int(OSSL_KDF_PARAM_MODE, &mode);
    *p++ = (OSSL_PARAM)OSSL_PARAM_utf8_string(OSSL_KDF_PARAM_DIGEST,
                                              (char *)"SHA256", 6);
    *p++ = (OSSL_PARAM)OSSL_PARAM_octet_string(OSSL_KDF_PARAM_KEY,
                                               (void *)key, key_len);
    if (salt)
        *p++ = (OSSL_PARAM)OSSL_PARAM_octet_string(OSSL_KDF_PARAM_SALT,
                                                   (void *)salt, salt_len);
    if (info)
        *p++ = (OSSL_PARAM)OSSL_PARAM_octet_string(
            OSSL_KDF_PARAM_INFO, (void *)info, strlen(info));
    *p = (OSSL_PARAM)OSSL_PARAM_END;
    if (ctx && C(EVP_KDF_derive)(ctx, out, out_len, params) > 0)
        rc = 0;
    if (ctx)
        C(EVP_KDF_CTX_free)(ctx);
    return rc;
}

int amldist__chan_keys(amldist__chan_keys_t *k, const char *label,
                       const void *secret, size_t len)
{
    unsigned char prk[32];
    char info[96];
    int rc = 0;
    memset(k, 0, sizeof *k);
    snprintf(k->label, sizeof k->label, "%s", label);
    if (hkdf(EVP_KDF_HKDF_MODE_EXTRACT_ONLY, secret, len, VERSION,
             strlen(VERSION), NULL, prk, sizeof prk) < 0)
        return -1;
    snprintf(info, sizeof info, VERSION " %s auth", label);
    rc |= hkdf(EVP_KDF_HKDF_MODE_EXPAND_ONLY, prk, sizeof prk, NULL, 0, info,
               k->auth, sizeof k->auth);
    snprintf(info, sizeof info, VERSION " %s keys", label);
    rc |= hkdf(EVP_KDF_HKDF_MODE_EXPAND_ONLY, prk, sizeof prk, NULL, 0, info,
               k->master, sizeof k->master);
    cleanse(prk, sizeof prk);
    if (rc < 0)
        amldist__chan_keys_clear(k);
    return rc < 0 ? -1 : 0;
}

void amldist__chan_keys_clear(amldist__chan_keys_t *k)
{
    cleanse(k, sizeof *k);
}

amldist__chan_t *amldist__chan_new(const amldist__chan_keys_t *k, int server)
{
    amldist__chan_t *ch = calloc(1, sizeof *ch);
    if (!ch)
        return NULL;
    ch->k = *k;
    ch->server = server;
    ch->state = server ? AMLDIST__CHAN_HELLO : AMLDIST__CHAN_SERVER;
    return ch;
}

void amldist__chan_free(amldist__chan_t *ch)
{
    if (!ch)
        return;
    if (ch->tx)
        C(EVP_CIPHER_CTX_free)(ch->tx);
    if (ch->rx)
        C(EVP_CIPHER_CTX_free)(ch->rx);
    cleanse(ch, sizeof *ch);
    free(ch);
}

int amldist__chan_state(const amldist__chan_t *ch)
{
    return ch->state;
}

void amldist__chan_fail(amldist__chan_t *ch)
{
    ch->state = AMLDIST__CHAN_FAILED;
}

/* HMAC-SHA256(K_auth, role | Nc | Ns). */
static int mac(const amldist__chan_t *ch, const char *role,
               unsigned char out[AMLDIST__CHAN_MAC_LEN])
{
    OSSL_PARAM params[] = {
        OSSL_PARAM_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 6),
        OSSL_PARAM_END};
    EVP_MAC_CTX *ctx =
        algorithms() == 0 ? C(EVP_MAC_CTX_new)(hmac_alg) : NULL;
    size_t n = 0;
    int ok = ctx &&
             C(EVP_MAC_init)(ctx, ch->k.auth, sizeof ch->k.auth, params) > 0 &&
             C(EVP_MAC_update)(ctx, (const unsigned char *)role,
                               strlen(role)) > 0 &&
             C(EVP_MAC_update)(ctx, ch->nc, sizeof ch->nc) > 0 &&
             C(EVP_MAC_update)(ctx, ch->ns, sizeof ch->ns) > 0 &&
             C(EVP_MAC_final)(ctx, out, &n, AMLDIST__CHAN_MAC_LEN) > 0 &&
             n == AMLDIST__CHAN_MAC_LEN;
    if (ctx)
        C(EVP_MAC_CTX_free)(ctx);
    return ok ? 0 : -1;
}

static EVP_CIPHER_CTX *aead(const unsigned char *key, int enc)
{
    if (algorithms() < 0)
        return NULL;
    EVP_CIPHER_CTX *c = C(EVP_CIPHER_CTX_new)();
    if (c && C(EVP_CipherInit_ex)(c, aead_alg, NULL, key, NULL, enc) > 0)
        return c;
    if (c)
        C(EVP_CIPHER_CTX_free)(c);
    return NULL;
}

/* Both nonces known and the peer proven: the session keys. */
static int open_session(amldist__chan_t *ch)
{
    unsigned char salt[2 * AMLDIST__CHAN_NONCE_LEN], keys[64];
    char info[96];
    memcpy(salt, ch->nc, sizeof ch->nc);
    memcpy(salt + sizeof ch->nc, ch->ns, sizeof ch->ns);
    snprintf(info, sizeof info, VERSION " %s session", ch->k.label);
    if (hkdf(EVP_KDF_HKDF_MODE_EXTRACT_AND_EXPAND, ch->k.master,
             sizeof ch->k.master, salt, sizeof salt, info, keys,
             sizeof keys) < 0)
        return -1;
    const unsigned char *c2s = keys, *s2c = keys + 32;
    ch->tx = aead(ch->server ? s2c : c2s, 1);
    ch->rx = aead(ch->server ? c2s : s2c, 0);
    cleanse(keys, sizeof keys);
    if (!ch->tx || !ch->rx)
        return -1;
    ch->state = AMLDIST__CHAN_OPEN;
    return 0;
}

/* n random bytes; 0, or -1 when the kernel has none. */
static int random_bytes(unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = getrandom(p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int failed(amldist__chan_t *ch, const char **why, const char *text)
{
    ch->state = AMLDIST__CHAN_FAILED;
    *why = text;
    return -1;
}

int amldist__chan_start(amldist__chan_t *ch, unsigned *out_type,
                        unsigned char *out, uint32_t *out_len,
                        const char **why)
{
    *out_type = 0;
    if (ch->server || ch->state != AMLDIST__CHAN_SERVER)
        return failed(ch, why, "the handshake started twice");
    if (random_bytes(ch->nc, sizeof ch->nc) < 0)
        return failed(ch, why, "no random bytes for the handshake");
    memcpy(out, ch->nc, sizeof ch->nc);
    *out_type = AMLDIST__HS_HELLO;
    *out_len = AMLDIST__HS_HELLO_LEN;
    return 0;
}

int amldist__chan_handshake(amldist__chan_t *ch, unsigned type,
                            const unsigned char *p, uint32_t len,
                            unsigned *out_type, unsigned char *out,
                            uint32_t *out_len, const char **why)
{
    unsigned char want[AMLDIST__CHAN_MAC_LEN];
    *out_type = 0;
    *out_len = 0;
    switch (ch->state) {
    case AMLDIST__CHAN_HELLO:
        if (type != AMLDIST__HS_HELLO || len != AMLDIST__HS_HELLO_LEN)
            return failed(ch, why, "the handshake did not start with a hello");
        memcpy(ch->nc, p, sizeof ch->nc);
        if (random_bytes(ch->ns, sizeof ch->ns) < 0)
            return failed(ch, why, "no random bytes for the handshake");
        memcpy(out, ch->ns, sizeof ch->ns);
        if (mac(ch, "server", out + sizeof ch->ns) < 0)
            return failed(ch, why, "HMAC failed");
        *out_type = AMLDIST__HS_SERVER;
        *out_len = AMLDIST__HS_SERVER_LEN;
        ch->state = AMLDIST__CHAN_CLIENT;
        return 0;
    case AMLDIST__CHAN_SERVER:
        if (type != AMLDIST__HS_SERVER || len != AMLDIST__HS_SERVER_LEN)
            return failed(ch, why, "the peer did not answer the handshake");
        memcpy(ch->ns, p, sizeof ch->ns);
        if (mac(ch, "server", want) < 0)
            return failed(ch, why, "HMAC failed");
        if (C(CRYPTO_memcmp)(want, p + sizeof ch->ns, sizeof want))
            return failed(ch, why, "the peer did not prove the job's secret");
        if (mac(ch, "client", out) < 0 || open_session(ch) < 0)
            return failed(ch, why, "libcrypto failed");
        *out_type = AMLDIST__HS_CLIENT;
        *out_len = AMLDIST__HS_CLIENT_LEN;
        return 0;
    case AMLDIST__CHAN_CLIENT:
        if (type != AMLDIST__HS_CLIENT || len != AMLDIST__HS_CLIENT_LEN)
            return failed(ch, why, "the peer did not finish the handshake");
        if (mac(ch, "client", want) < 0)
            return failed(ch, why, "HMAC failed");
        if (C(CRYPTO_memcmp)(want, p, sizeof want))
            return failed(ch, why, "the peer did not prove the job's secret");
        if (open_session(ch) < 0)
            return failed(ch, why, "libcrypto failed");
        return 0;
    default:
        return failed(ch, why, "a handshake frame out of turn");
    }
}

static void nonce(uint64_t seq, unsigned char iv[12])
{
    memset(iv, 0, 4);
    amldist__net_put_u32(iv + 4, (uint32_t)(seq >> 32));
    amldist__net_put_u32(iv + 8, (uint32_t)seq);
}

int amldist__chan_seal(amldist__chan_t *ch, const unsigned char *hdr,
                       const unsigned char *p, size_t len, unsigned char *out)
{
    unsigned char iv[12];
    int n = 0, m = 0;
    if (ch->state != AMLDIST__CHAN_OPEN || ch->tx_seq == UINT64_MAX ||
        len > INT32_MAX)
        return -1;
    nonce(ch->tx_seq, iv);
    if (C(EVP_CipherInit_ex)(ch->tx, NULL, NULL, NULL, iv, 1) <= 0 ||
        C(EVP_CipherUpdate)(ch->tx, NULL, &n, hdr,
                            AMLDIST__FRAME_HEADER_LEN) <= 0 ||
        (len && C(EVP_CipherUpdate)(ch->tx, out, &n, p, (int)len) <= 0) ||
        C(EVP_CipherFinal_ex)(ch->tx, out + (len ? n : 0), &m) <= 0 ||
        C(EVP_CIPHER_CTX_ctrl)(ch->tx, EVP_CTRL_AEAD_GET_TAG,
                               AMLDIST__CHAN_TAG_LEN, out + len) <= 0)
        return -1;
    ch->tx_seq++;
    return 0;
}

int amldist__chan_open(amldist__chan_t *ch, const unsigned char *hdr,
                       unsigned char *p, size_t len)
{
    unsigned char iv[12];
    int n = 0, m = 0;
    if (ch->state != AMLDIST__CHAN_OPEN || len < AMLDIST__CHAN_TAG_LEN ||
        len > INT32_MAX || ch->rx_seq == UINT64_MAX)
        return -1;
    size_t plen = len - AMLDIST__CHAN_TAG_LEN;
    nonce(ch->rx_seq, iv);
    if (C(EVP_CipherInit_ex)(ch->rx, NULL, NULL, NULL, iv, 0) <= 0 ||
        C(EVP_CipherUpdate)(ch->rx, NULL, &n, hdr,
                            AMLDIST__FRAME_HEADER_LEN) <= 0 ||
        (plen && C(EVP_CipherUpdate)(ch->rx, p, &n, p, (int)plen) <= 0) ||
        C(EVP_CIPHER_CTX_ctrl)(ch->rx, EVP_CTRL_AEAD_SET_TAG,
                               AMLDIST__CHAN_TAG_LEN, p + plen) <= 0 ||
        C(EVP_CipherFinal_ex)(ch->rx, p + (plen ? n : 0), &m) <= 0) {
        /* Once a frame failed, nothing after it can be trusted. */
        cleanse(p, plen);
        ch->state = AMLDIST__CHAN_FAILED;
        return -1;
    }
    ch->rx_seq++;
    return 0;
}

/* K_value of the keys (chan.h), into a cipher context for enc. */
static EVP_CIPHER_CTX *value_ctx(const amldist__chan_keys_t *k, int enc)
{
    unsigned char key[32];
    char info[96];
    snprintf(info, sizeof info, VERSION " %s value", k->label);
    if (hkdf(EVP_KDF_HKDF_MODE_EXPAND_ONLY, k->master, sizeof k->master, NULL,
             0, info, key, sizeof key) < 0)
        return NULL;
    EVP_CIPHER_CTX *c = aead(key, enc);
    cleanse(key, sizeof key);
    return c;
}

int amldist__chan_value_seal(const amldist__chan_keys_t *k, const void *ad,
                             size_t ad_len, const unsigned char *p,
                             size_t len, unsigned char *out)
{
    int n = 0, m = 0, ok = 0;
    if (len > INT32_MAX || ad_len > INT32_MAX || random_bytes(out, 12) < 0)
        return -1;
    EVP_CIPHER_CTX *c = value_ctx(k, 1);
    unsigned char *ct = out + 12;
    ok = c && C(EVP_CipherInit_ex)(c, NULL, NULL, NULL, out, 1) > 0 &&
         C(EVP_CipherUpdate)(c, NULL, &n, ad, (int)ad_len) > 0 &&
         (!len || C(EVP_CipherUpdate)(c, ct, &n, p, (int)len) > 0) &&
         C(EVP_CipherFinal_ex)(c, ct + (len ? n : 0), &m) > 0 &&
         C(EVP_CIPHER_CTX_ctrl)(c, EVP_CTRL_AEAD_GET_TAG,
                                AMLDIST__CHAN_TAG_LEN, ct + len) > 0;
    if (c)
        C(EVP_CIPHER_CTX_free)(c);
    return ok ? 0 : -1;
}

long amldist__chan_value_open(const amldist__chan_keys_t *k, const void *ad,
                              size_t ad_len, const unsigned char *p,
                              size_t len, unsigned char *out)
{
    int n = 0, m = 0, ok = 0;
    if (len < AMLDIST__CHAN_VALUE_OVER || len > INT32_MAX ||
        ad_len > INT32_MAX)
        return -1;
    size_t plen = len - AMLDIST__CHAN_VALUE_OVER;
    unsigned char tag[AMLDIST__CHAN_TAG_LEN];
    memcpy(tag, p + 12 + plen, sizeof tag);
    EVP_CIPHER_CTX *c = value_ctx(k, 0);
    ok = c && C(EVP_CipherInit_ex)(c, NULL, NULL, NULL, p, 0) > 0 &&
         C(EVP_CipherUpdate)(c, NULL, &n, ad, (int)ad_len) > 0 &&
         (!plen || C(EVP_CipherUpdate)(c, out, &n, p + 12, (int)plen) > 0) &&
         C(EVP_CIPHER_CTX_ctrl)(c, EVP_CTRL_AEAD_SET_TAG,
                                AMLDIST__CHAN_TAG_LEN, tag) > 0 &&
         C(EVP_CipherFinal_ex)(c, out + (plen ? n : 0), &m) > 0;
    if (c)
        C(EVP_CIPHER_CTX_free)(c);
    if (!ok) {
        cleanse(out, plen);
        return -1;
    }
    return (long)plen;
}
