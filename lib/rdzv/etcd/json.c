/*
 * Just enough JSON to read etcd's gateway answers (etcd.h): a value is a
 * span of the document, found by member names and array elements, never
 * copied; numbers that etcd writes as strings read either way.  And
 * base64, which the gateway's keys and values travel in.
 */
#include <stdlib.h>
#include <string.h>

#include "rdzv/etcd/etcd.h"

static const char *ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

/* The end of the value at p (p itself when it is none). */
static const char *skip(const char *p, const char *e)
{
    p = ws(p, e);
    if (p >= e)
        return p;
    if (*p == '"') {
        for (p++; p < e; p++) {
            if (*p == '\\')
                p++;
            else if (*p == '"')
                return p + 1;
        }
        return e;
    }
    if (*p == '{' || *p == '[') {
        int depth = 0;
        for (; p < e; p++) {
            if (*p == '"') {
                p = skip(p, e) - 1;
            } else if (*p == '{' || *p == '[') {
                depth++;
            } else if (*p == '}' || *p == ']') {
                if (--depth == 0)
                    return p + 1;
            }
        }
        return e;
    }
    while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' &&
           *p != '\n')
        p++;
    return p;
}

int amldist__js_get(amldist__js_t v, const char *key, amldist__js_t *out)
{
    const char *p = ws(v.p, v.e), *e = v.e;
    size_t kl = strlen(key);
    if (p >= e || *p != '{')
        return -1;
    p++;
    for (;;) {
        p = ws(p, e);
        if (p >= e || *p != '"')
            return -1;
        const char *k = p + 1, *ke = skip(p, e) - 1;
        p = ws(ke + 1, e);
        if (p >= e || *p != ':')
            return -1;
        p = ws(p + 1, e);
        const char *ve = skip(p, e);
        if (ve == p)
            return -1;
        if ((size_t)(ke - k) == kl && memcmp(k, key, kl) == 0) {
            out->p = p;
            out->e = ve;
            return 0;
        }
        p = ws(ve, e);
        if (p >= e || *p != ',')
            return -1;
        p++;
    }
}

int amldist__js_path(amldist__js_t v, const char *path, amldist__js_t *out)
{
    char name[64];
    for (;;) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof name)
            return -1;
        memcpy(name, path, n);
        name[n] = '\0';
        if (amldist__js_get(v, name, &v) < 0)
            return -1;
        if (!dot) {
            *out = v;
            return 0;
        }
        path = dot + 1;
    }
}

int amldist__js_next(amldist__js_t *it, amldist__js_t *out)
{
    const char *p = ws(it->p, it->e);
    if (p < it->e && (*p == '[' || *p == ','))
        p = ws(p + 1, it->e);
    if (p >= it->e || *p == ']')
        return 0;
    const char *ve = skip(p, it->e);
    if (ve == p)
        return 0;
    out->p = p;
    out->e = ve;
    it->p = ve;
    return 1;
}

long long amldist__js_int(amldist__js_t v, long long dflt)
{
    char buf[32];
    const char *p = ws(v.p, v.e);
    if (p < v.e && *p == '"')
        p++;
    size_t n = 0;
    while (p + n < v.e && n < sizeof buf - 1 &&
           (p[n] == '-' || (p[n] >= '0' && p[n] <= '9')))
        n++;
    if (!n)
        return dflt;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return strtoll(buf, NULL, 10);
}

int amldist__js_str(amldist__js_t v, char *out, size_t size)
{
    const char *p = ws(v.p, v.e);
    if (p >= v.e || *p != '"' || v.e - p < 2)
        return -1;
    size_t n = (size_t)(v.e - p - 2);
    if (n >= size || memchr(p + 1, '\\', n))
        return -1;
    memcpy(out, p + 1, n);
    out[n] = '\0';
    return 0;
}

static const char B64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t amldist__b64_enc(const unsigned char *p, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        out[k++] = B64[v >> 18 & 63];
        out[k++] = B64[v >> 12 & 63];
        out[k++] = i + 1 < n ? B64[v >> 6 & 63] : '=';
        out[k++] = i + 2 < n ? B64[v & 63] : '=';
    }
    out[k] = '\0';
    return k;
}

long amldist__b64_dec(const char *p, size_t n, unsigned char *out)
{
    uint32_t acc = 0;
    int bits = 0;
    long k = 0;
    for (size_t i = 0; i < n && p[i] != '='; i++) {
        const char *c = memchr(B64, p[i], 64);
        if (!c || !p[i])
            return -1;
        acc = acc << 6 | (uint32_t)(c - B64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[k++] = (unsigned char)(acc >> bits);
        }
    }
    return k;
}

long long amldist__js_kv(amldist__js_t kv, int del, amldist__etcd_on_event fn,
                         void *arg)
{
    amldist__js_t v;
    char k64[AMLDIST__ETCD_KEY64_MAX];
    unsigned char key[AMLDIST__ETCD_KEY_MAX + 4]; /* 3/4 of k64 */
    if (amldist__js_get(kv, "key", &v) < 0 ||
        amldist__js_str(v, k64, sizeof k64) < 0)
        return -1;
    long kl = amldist__b64_dec(k64, strlen(k64), key);
    long long crev = amldist__js_get(kv, "create_revision", &v) == 0
                         ? amldist__js_int(v, 0) : 0;
    long long mrev = amldist__js_get(kv, "mod_revision", &v) == 0
                         ? amldist__js_int(v, 0) : 0;
    unsigned char *val = NULL;
    long vl = 0;
    if (!del && amldist__js_get(kv, "value", &v) == 0 && v.e - v.p >= 2) {
        val = malloc((size_t)(v.e - v.p));
        vl = val ? amldist__b64_dec(v.p + 1, (size_t)(v.e - v.p - 2), val) : -1;
    }
    if (kl >= 0 && vl >= 0)
        fn(arg, del, (const char *)key, (size_t)kl, val, (size_t)vl, crev,
           mrev);
    free(val);
    return kl >= 0 ? mrev : -1;
}
