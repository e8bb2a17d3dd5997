/*
 * etcd's v3 calls as its JSON gateway takes them (etcd.h): leases, puts,
 * ranges, deletes and the txns of the election and of the decider's
 * writes, their keys and values in base64, their answers read with
 * json.c.  An answer with etcd's "error" is a failure said in its words.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/etcd/etcd.h"

/* A growing request body. */
struct body {
    char *p;
    size_t len, cap;
    int bad;
};

static void add(struct body *b, const char *s, size_t n)
{
    if (b->bad)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->bad = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void adds(struct body *b, const char *s)
{
    add(b, s, strlen(s));
}

/* "NAME":"base64 of n bytes of p" */
static void add64(struct body *b, const char *name, const void *p, size_t n)
{
    char *e = malloc(4 * ((n + 2) / 3) + 1);
    if (!e) {
        b->bad = 1;
        return;
    }
    size_t k = amldist__b64_enc(p, n, e);
    adds(b, "\"");
    adds(b, name);
    adds(b, "\":\"");
    add(b, e, k);
    adds(b, "\"");
    free(e);
}

/* POST b to path: 0 with the answer's document in *doc (*resp to free),
 * or -1 with c->err (no member answered, or etcd's error). */
static int call(amldist__etcd_t *c, const char *path, struct body *b,
                char **resp, amldist__js_t *doc)
{
    *resp = NULL;
    if (b->bad) {
        free(b->p);
        snprintf(c->err, sizeof c->err, "out of memory");
        return -1;
    }
    /* Only the lease's calls under the short bound; not its grant, which
     * no lease waits for (a thousand agents granting at once on a busy
     * etcd take seconds: each grant given up and sent again was one more
     * write of etcd's log). */
    c->now_ms = strncmp(path, "/v3/lease/", 10) == 0 &&
                        strcmp(path, "/v3/lease/grant") != 0
                    ? c->timeout_ms
                    : c->slow_ms;
    int rc = amldist__etcd_post(c, path, b->p, resp);
    c->now_ms = 0;
    free(b->p);
    if (rc < 0)
        return -1;
    doc->p = *resp;
    doc->e = *resp + strlen(*resp);
    /* Not JSON: something else answers there (a web server's 404), which
     * the callers would read as an answer without its fields, and say
     * nothing of. */
    const char *first = *resp + strspn(*resp, " \t\r\n");
    if (*first && *first != '{') {
        snprintf(c->err, sizeof c->err, "%s answered in another protocol "
                 "(HTTP status %ld, not etcd's JSON gateway)",
                 c->url[c->cur], c->http_status);
        free(*resp);
        *resp = NULL;
        return -1;
    }
    amldist__js_t v;
    if (amldist__js_get(*doc, "error", &v) == 0 ||
        amldist__js_get(*doc, "message", &v) == 0) {
        char text[200] = "";
        amldist__js_str(v, text, sizeof text);
        snprintf(c->err, sizeof c->err, "%s: %s", c->url[c->cur],
                 text[0] ? text : "an error");
        free(*resp);
        *resp = NULL;
        return -1;
    }
    return 0;
}

int amldist__etcd_grant(amldist__etcd_t *c, int ttl_s, long long id,
                        long long *lease)
{
    struct body b = {0};
    char s[96];
    char *resp;
    amldist__js_t doc, v;
    snprintf(s, sizeof s, "{\"TTL\":%d,\"ID\":\"%lld\"}", ttl_s, id);
    adds(&b, s);
    if (call(c, "/v3/lease/grant", &b, &resp, &doc) < 0) {
        /* A grant that timed out here and was granted there: ours. */
        if (!strstr(c->err, "lease already exists"))
            return -1;
        *lease = id;
        return 0;
    }
    *lease = amldist__js_get(doc, "ID", &v) == 0 ? amldist__js_int(v, 0) : 0;
    free(resp);
    return *lease == id ? 0 : -1;
}

int amldist__etcd_revoke(amldist__etcd_t *c, long long lease)
{
    struct body b = {0};
    char s[64];
    char *resp;
    amldist__js_t doc;
    snprintf(s, sizeof s, "{\"ID\":\"%lld\"}", lease);
    adds(&b, s);
    if (call(c, "/v3/lease/revoke", &b, &resp, &doc) < 0)
        return -1;
    free(resp);
    return 0;
}

/* A put's fields: "key":..,"value":..[,"lease":..] */
static void put_fields(struct body *b, const char *key,
                       const unsigned char *v, size_t vlen, long long lease)
{
    char s[64];
    add64(b, "key", key, strlen(key));
    adds(b, ",");
    add64(b, "value", v, vlen);
    if (lease) {
        snprintf(s, sizeof s, ",\"lease\":\"%lld\"", lease);
        adds(b, s);
    }
}

static long long revision(amldist__js_t doc)
{
    amldist__js_t v;
    return amldist__js_path(doc, "header.revision", &v) == 0
               ? amldist__js_int(v, 0) : 0;
}

int amldist__etcd_put(amldist__etcd_t *c, const char *key,
                      const unsigned char *v, size_t vlen, long long lease,
                      long long *rev)
{
    struct body b = {0};
    char *resp;
    amldist__js_t doc;
    adds(&b, "{");
    put_fields(&b, key, v, vlen, lease);
    adds(&b, "}");
    if (call(c, "/v3/kv/put", &b, &resp, &doc) < 0)
        return -1;
    if (rev)
        *rev = revision(doc);
    free(resp);
    return 0;
}

int amldist__etcd_delete(amldist__etcd_t *c, const char *key,
                         const char *end)
{
    struct body b = {0};
    char *resp;
    amldist__js_t doc;
    adds(&b, "{");
    add64(&b, "key", key, strlen(key));
    if (end) {
        adds(&b, ",");
        add64(&b, "range_end", end, strlen(end));
    }
    adds(&b, "}");
    if (call(c, "/v3/kv/deleterange", &b, &resp, &doc) < 0)
        return -1;
    free(resp);
    return 0;
}

/* The kvs of a range answer handed to fn. */
static void each_kv(amldist__js_t kvs, amldist__etcd_on_event fn, void *arg)
{
    amldist__js_t kv;
    while (amldist__js_next(&kvs, &kv))
        amldist__js_kv(kv, 0, fn, arg);
}

/* A range; serializable when min_rev > 0, and then read again
 * linearizably if the member's store is older than min_rev. */
static int range(amldist__etcd_t *c, const char *key, const char *end,
                 long long *rev, amldist__etcd_on_event fn, void *arg,
                 long long min_rev)
{
    struct body b = {0};
    char *resp;
    amldist__js_t doc, kvs;
    adds(&b, "{");
    add64(&b, "key", key, strlen(key));
    if (end) {
        adds(&b, ",");
        add64(&b, "range_end", end, strlen(end));
    }
    adds(&b, ",\"sort_order\":\"ASCEND\",\"sort_target\":\"CREATE\"");
    adds(&b, min_rev > 0 ? ",\"serializable\":true}" : "}");
    if (call(c, "/v3/kv/range", &b, &resp, &doc) < 0)
        return -1;
    long long r = revision(doc);
    if (min_rev > 0 && r < min_rev) {
        free(resp);
        return range(c, key, end, rev, fn, arg, 0);
    }
    if (rev)
        *rev = r;
    if (amldist__js_get(doc, "kvs", &kvs) == 0)
        each_kv(kvs, fn, arg);
    free(resp);
    return 0;
}

int amldist__etcd_range(amldist__etcd_t *c, const char *key, const char *end,
                        long long *rev, amldist__etcd_on_event fn, void *arg)
{
    return range(c, key, end, rev, fn, arg, 0);
}

int amldist__etcd_range_since(amldist__etcd_t *c, const char *key,
                              long long min_rev, amldist__etcd_on_event fn,
                              void *arg)
{
    return range(c, key, NULL, NULL, fn, arg, min_rev > 0 ? min_rev : 1);
}

int amldist__etcd_create(amldist__etcd_t *c, const char *key,
                         const unsigned char *v, size_t vlen, long long lease,
                         long long *create_rev, amldist__etcd_on_event fn,
                         void *arg)
{
    struct body b = {0};
    char *resp;
    amldist__js_t doc, x, r, kvs;
    adds(&b, "{\"compare\":[{\"target\":\"CREATE\",");
    add64(&b, "key", key, strlen(key));
    adds(&b, ",\"create_revision\":\"0\",\"result\":\"EQUAL\"}],"
             "\"success\":[{\"request_put\":{");
    put_fields(&b, key, v, vlen, lease);
    adds(&b, "}}],\"failure\":[{\"request_range\":{");
    add64(&b, "key", key, strlen(key));
    adds(&b, "}}]}");
    if (call(c, "/v3/kv/txn", &b, &resp, &doc) < 0)
        return -1;
    int won = amldist__js_get(doc, "succeeded", &x) == 0 && *x.p == 't';
    if (won) {
        *create_rev = revision(doc);
    } else if (amldist__js_get(doc, "responses", &x) == 0 &&
               amldist__js_next(&x, &r) &&
               amldist__js_path(r, "response_range.kvs", &kvs) == 0) {
        each_kv(kvs, fn, arg);
    }
    free(resp);
    return won;
}

int amldist__etcd_txn(amldist__etcd_t *c, const char *guard,
                      long long guard_rev, const amldist__etcd_op_t *ops,
                      int nops)
{
    struct body b = {0};
    char *resp, s[64];
    amldist__js_t doc, x;
    adds(&b, "{\"compare\":[{\"target\":\"CREATE\",");
    add64(&b, "key", guard, strlen(guard));
    snprintf(s, sizeof s, ",\"create_revision\":\"%lld\"", guard_rev);
    adds(&b, s);
    adds(&b, ",\"result\":\"EQUAL\"}],\"success\":[");
    for (int i = 0; i < nops; i++) {
        adds(&b, i ? ",{" : "{");
        if (ops[i].v) {
            adds(&b, "\"request_put\":{");
            put_fields(&b, ops[i].key, ops[i].v, ops[i].vlen, 0);
        } else {
            adds(&b, "\"request_delete_range\":{");
            add64(&b, "key", ops[i].key, strlen(ops[i].key));
        }
        adds(&b, "}}");
    }
    adds(&b, "]}");
    if (call(c, "/v3/kv/txn", &b, &resp, &doc) < 0)
        return -1;
    int done = amldist__js_get(doc, "succeeded", &x) == 0 && *x.p == 't';
    free(resp);
    return done;
}
