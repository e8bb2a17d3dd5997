/*
 * The etcd backend's values (etcd.h): with the job's secret each sealed
 * (net/chan.h's amldist__chan_value_seal: ChaCha20-Poly1305 under a key
 * derived from the secret, the value's key name bound to it, so that a
 * value moved to another key, changed, or of another secret does not
 * open); without one, marked plain, so that a job with a secret never
 * takes a plain value and one without never takes a sealed one.
 */
#include <stdlib.h>
#include <string.h>

#include "rdzv/etcd/etcd.h"

/* A value without the secret starts with this mark; a sealed one with
 * its random nonce (a job with a secret refuses a value so marked). */
#define PLAIN_MARK "amldist-plain1"
#define PLAIN_LEN 14

static int seal(const amldist__rz_etcd_t *t, const char *key,
                const unsigned char *p, size_t n, unsigned char **out,
                size_t *outn)
{
    size_t m = n + (t->cfg->secure ? AMLDIST__CHAN_VALUE_OVER : 0);
    *out = malloc(m ? m : 1);
    if (!*out)
        return -1;
    *outn = m;
    if (!t->cfg->secure) {
        if (n)
            memcpy(*out, p, n);
        return 0;
    }
    if (amldist__chan_value_seal(&t->cfg->keys, key, strlen(key), p, n,
                                 *out) < 0) {
        free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

int amldist__etcd_open(const amldist__rz_etcd_t *t, const char *key,
                       size_t klen, const unsigned char *p, size_t n,
                       unsigned char **out, size_t *outn)
{
    *out = malloc(n ? n : 1);
    if (!*out)
        return -1;
    long k;
    if (!t->cfg->secure) {
        k = n >= PLAIN_LEN && memcmp(p, PLAIN_MARK, PLAIN_LEN) == 0
                ? (long)(n - PLAIN_LEN) : -1;
        if (k > 0)
            memcpy(*out, p + PLAIN_LEN, (size_t)k);
    } else {
        k = amldist__chan_value_open(&t->cfg->keys, key, klen, p, n, *out);
    }
    if (k < 0) {
        free(*out);
        *out = NULL;
        return -1;
    }
    *outn = (size_t)k;
    return 0;
}

int amldist__etcd_value(const amldist__rz_etcd_t *t, const char *key,
                        const unsigned char *p, size_t n, unsigned char **out,
                        size_t *outn)
{
    unsigned char *plain = NULL;
    if (!t->cfg->secure) {
        if (!(plain = malloc(PLAIN_LEN + n)))
            return -1;
        memcpy(plain, PLAIN_MARK, PLAIN_LEN);
        if (n)
            memcpy(plain + PLAIN_LEN, p, n);
        p = plain;
        n += PLAIN_LEN;
    }
    int rc = seal(t, key, p, n, out, outn);
    free(plain);
    return rc;
}
