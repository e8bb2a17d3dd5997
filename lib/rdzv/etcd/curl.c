/*
 * The etcd backend's client (etcd.h) on libcurl, loaded (dlopen) when an
 * etcd rendezvous first needs it, as lib/net/chan.c loads libcrypto: a
 * process that never meets etcd never maps it, and a container without
 * libcurl runs every other backend.  etcd 3.4's JSON gateway (HTTP/1.1,
 * "/v3/...") rather than gRPC: one well-kept library, plain requests and
 * one streamed answer per watch.  Requests are blocking on the backend's
 * thread, on one easy handle (its connection kept), under a timeout; the
 * watch streams run in a multi handle between them.  A member that cannot
 * be reached, or times out, hands over to the next of the endpoint's
 * list, and the watches start again there after the last revision seen.
 */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/etcd/etcd.h"
#include "util/dltable.h"

#define CURL_FUNCTIONS(X)                                                      \
    X(curl_global_init) X(curl_easy_init) X(curl_easy_setopt)                  \
    X(curl_easy_perform) X(curl_easy_getinfo) X(curl_easy_cleanup)             \
    X(curl_easy_strerror) X(curl_multi_init) X(curl_multi_add_handle)          \
    X(curl_multi_remove_handle) X(curl_multi_perform) X(curl_multi_poll)       \
    X(curl_multi_wakeup) X(curl_multi_info_read) X(curl_multi_cleanup)         \
    X(curl_slist_append) X(curl_slist_free_all)
#define FIELD(name) __typeof__(&name) name;
static struct {
    CURL_FUNCTIONS(FIELD)
} lc;
#undef FIELD
#define C(name) (lc.name)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char load_why[256];

static void load(void)
{
#define NAME(name) #name,
#define SLOT(name) (void **)&lc.name,
    static const char *const names[] = {CURL_FUNCTIONS(NAME)};
    void **const slots[] = {CURL_FUNCTIONS(SLOT)};
#undef NAME
#undef SLOT
    if (!amldist__dl_table("libcurl.so.4", "libcurl", RTLD_LOCAL, names,
                           slots, sizeof names / sizeof *names, load_why,
                           sizeof load_why))
        return;
    loaded = C(curl_global_init)(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    if (!loaded)
        snprintf(load_why, sizeof load_why, "libcurl.so.4: curl_global_init "
                 "failed");
}

int amldist__etcd_load(char *why, size_t size)
{
    pthread_once(&once, load);
    if (!loaded)
        snprintf(why, size, "%s (install libcurl4)", load_why);
    return loaded ? 0 : -1;
}

struct buf {
    char *p;
    size_t len, cap;
};

static int buf_add(struct buf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return -1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    return buf_add(arg, p, size * n) < 0 ? 0 : size * n;
}

/* What a transfer of the multi handle is: its CURLOPT_PRIVATE points at
 * a struct whose first member is one of these. */
enum { T_WATCH = 1, T_BEAT, T_POST };
static const int post_kind = T_POST;

/* The lease's keep-alive, a transfer of the multi handle: it goes on
 * while a request waits (a slow txn never starves the lease). */
struct amldist__etcd_beat {
    int kind;
    CURL *h;
    int busy, result; /* -1 none, 0 the lease is gone, 1 alive, 2 failed */
    int url;          /* the member it went to */
    struct buf in;
    char body[64];
};

struct amldist__etcd_watch {
    int kind;
    int ended;        /* its transfer ended (taken out of the multi) */
    CURLcode end_rc;
    CURL *h;
    int url, live;
    char key[AMLDIST__ETCD_KEY_MAX], end[AMLDIST__ETCD_KEY_MAX];
    long long next_rev, retry_at;
    struct buf in;
    char *body;
    amldist__etcd_on_event fn;
    void *arg;
};

static int headers(amldist__etcd_t *c);

int amldist__etcd_init(amldist__etcd_t *c)
{
    if (!(c->easy = C(curl_easy_init)()) || !(c->multi = C(curl_multi_init)()))
        return -1;
    return headers(c);
}

static void watch_stop(amldist__etcd_t *c, struct amldist__etcd_watch *w)
{
    if (w->h) {
        C(curl_multi_remove_handle)(c->multi, w->h);
        C(curl_easy_cleanup)(w->h);
        w->h = NULL;
    }
    w->live = 0;
    w->in.len = 0;
}

void amldist__etcd_unwatch(amldist__etcd_t *c, int slot)
{
    struct amldist__etcd_watch *w = c->w[slot];
    if (!w)
        return;
    watch_stop(c, w);
    free(w->in.p);
    free(w->body);
    free(w);
    c->w[slot] = NULL;
}

void amldist__etcd_free(amldist__etcd_t *c)
{
    for (int i = 0; i < AMLDIST__ETCD_WATCHES; i++)
        amldist__etcd_unwatch(c, i);
    struct amldist__etcd_beat *b = c->beat;
    if (b) {
        if (b->h) {
            C(curl_multi_remove_handle)(c->multi, b->h);
            C(curl_easy_cleanup)(b->h);
        }
        free(b->in.p);
        free(b);
    }
    if (c->multi)
        C(curl_multi_cleanup)(c->multi);
    if (c->easy)
        C(curl_easy_cleanup)(c->easy);
    if (c->hdrs)
        C(curl_slist_free_all)(c->hdrs);
    for (int i = 0; i < c->nurl; i++)
        free(c->url[i]);
    explicit_bzero(c->password, sizeof c->password);
    explicit_bzero(c->token, sizeof c->token);
}

void amldist__etcd_wakeup(amldist__etcd_t *c)
{
    if (c->multi)
        C(curl_multi_wakeup)(c->multi);
}

/* The options every handle of c shares: TLS, the auth token's header. */
static void common(amldist__etcd_t *c, CURL *h)
{
    C(curl_easy_setopt)(h, CURLOPT_NOSIGNAL, 1L);
    C(curl_easy_setopt)(h, CURLOPT_HTTPHEADER, c->hdrs);
    C(curl_easy_setopt)(h, CURLOPT_CONNECTTIMEOUT_MS,
                        c->timeout_ms < 1000 ? c->timeout_ms : 1000L);
    if (c->cacert[0])
        C(curl_easy_setopt)(h, CURLOPT_CAINFO, c->cacert);
    if (c->cert[0])
        C(curl_easy_setopt)(h, CURLOPT_SSLCERT, c->cert);
    if (c->key[0])
        C(curl_easy_setopt)(h, CURLOPT_SSLKEY, c->key);
}

static void beat_done(amldist__etcd_t *c, struct amldist__etcd_beat *b,
                      CURLcode rc);

/* The transfers that ended: a watch's marked (read and started again in
 * amldist__etcd_run()), the keep-alive's result kept, a request's in
 * *done and *rc.  Each taken out of the multi. */
static void messages(amldist__etcd_t *c, int *done, CURLcode *rc)
{
    CURLMsg *m;
    int n;
    while ((m = C(curl_multi_info_read)(c->multi, &n))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        CURL *h = m->easy_handle;
        CURLcode r = m->data.result;
        int *kind = NULL;
        C(curl_easy_getinfo)(h, CURLINFO_PRIVATE, (char **)&kind);
        C(curl_multi_remove_handle)(c->multi, h); /* m is stale now */
        if (!kind)
            continue;
        if (*kind == T_WATCH) {
            struct amldist__etcd_watch *w = (void *)kind;
            w->ended = 1;
            w->end_rc = r;
        } else if (*kind == T_BEAT) {
            beat_done(c, (void *)kind, r);
        } else if (done) {
            *done = 1;
            *rc = r;
        }
    }
}

/* One POST to member i: the curl code, the answer in *b. */
static CURLcode post_once(amldist__etcd_t *c, int i, const char *path,
                          const char *body, struct buf *b)
{
    char url[600];
    CURL *h = c->easy;
    snprintf(url, sizeof url, "%s%s", c->url[i], path);
    b->len = 0;
    C(curl_easy_setopt)(h, CURLOPT_URL, url);
    C(curl_easy_setopt)(h, CURLOPT_POSTFIELDS, body);
    C(curl_easy_setopt)(h, CURLOPT_WRITEFUNCTION, on_data);
    C(curl_easy_setopt)(h, CURLOPT_WRITEDATA, b);
    C(curl_easy_setopt)(h, CURLOPT_TIMEOUT_MS,
                        c->now_ms ? c->now_ms : c->timeout_ms);
    common(c, h);
    C(curl_easy_setopt)(h, CURLOPT_PRIVATE, &post_kind);
    CURLcode rc = CURLE_OK;
    int done = 0, running = 0;
    if (C(curl_multi_add_handle)(c->multi, h) != CURLM_OK)
        return CURLE_OUT_OF_MEMORY;
    /* The keep-alive and the watches go on meanwhile (the watches'
     * events are read in amldist__etcd_run(), never in a request). */
    for (;;) {
        C(curl_multi_perform)(c->multi, &running);
        messages(c, &done, &rc);
        if (done)
            break;
        amldist__etcd_beat_due(c, amldist__now_ms());
        C(curl_multi_poll)(c->multi, NULL, 0, 100, NULL);
    }
    if (rc == CURLE_OK) {
        char *ip = NULL;
        c->http_status = 0;
        (void)C(curl_easy_getinfo)(h, CURLINFO_RESPONSE_CODE, &c->http_status);
        if (C(curl_easy_getinfo)(h, CURLINFO_LOCAL_IP, &ip) == CURLE_OK && ip)
            snprintf(c->local_ip, sizeof c->local_ip, "%s", ip);
        ip = NULL;
        if (C(curl_easy_getinfo)(h, CURLINFO_PRIMARY_IP, &ip) == CURLE_OK && ip)
            snprintf(c->peer_ip, sizeof c->peer_ip, "%s", ip);
        if (!b->p && buf_add(b, "", 0) < 0)
            rc = CURLE_OUT_OF_MEMORY;
    }
    return rc;
}

/* The headers every request carries: JSON, no "Expect: 100-continue" (a
 * second's wait for large bodies), and the user's token when there is
 * one.  0, or -1. */
static int headers(amldist__etcd_t *c)
{
    struct curl_slist *h = C(curl_slist_append)(NULL,
                                                "Content-Type: application/json");
    h = h ? C(curl_slist_append)(h, "Expect:") : NULL;
    if (h && c->token[0])
        h = C(curl_slist_append)(h, c->token);
    if (!h)
        return -1;
    /* The watches hold the old list: they start again on the new one. */
    for (int i = 0; i < AMLDIST__ETCD_WATCHES; i++)
        if (c->w[i])
            watch_stop(c, c->w[i]);
    if (c->hdrs)
        C(curl_slist_free_all)(c->hdrs);
    c->hdrs = h;
    return 0;
}

/* The user's token (etcd's auth) from member i, into the headers: 0, or
 * -1 with c->err.  The name and password were checked for JSON's quote
 * and backslash (backend.c). */
static int authenticate(amldist__etcd_t *c, int i)
{
    char body[900], tok[400];
    struct buf b = {0};
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"password\":\"%s\"}",
             c->user, c->password);
    c->token[0] = '\0';
    headers(c);
    CURLcode rc = post_once(c, i, "/v3/auth/authenticate", body, &b);
    explicit_bzero(body, sizeof body);
    amldist__js_t doc = {b.p, b.p ? b.p + b.len : NULL}, v;
    int ok = rc == CURLE_OK && amldist__js_get(doc, "token", &v) == 0 &&
             amldist__js_str(v, tok, sizeof tok) == 0;
    /* etcd answered, and said no: not a member to fail over from. */
    c->refused = rc == CURLE_OK && !ok;
    if (ok)
        snprintf(c->token, sizeof c->token, "Authorization: %s", tok);
    else if (c->refused)
        snprintf(c->err, sizeof c->err, "etcd at %s refused user %s: "
                 "authentication failed (its password_file or "
                 "AMLDIST_ETCD_PASSWORD)", c->url[i], c->user);
    else
        snprintf(c->err, sizeof c->err, "%s: %s", c->url[i],
                 C(curl_easy_strerror)(rc));
    explicit_bzero(tok, sizeof tok);
    if (b.p)
        explicit_bzero(b.p, b.len);
    free(b.p);
    return ok && headers(c) == 0 ? 0 : -1;
}

int amldist__etcd_post(amldist__etcd_t *c, const char *path,
                       const char *body, char **resp)
{
    struct buf b = {0};
    int reauth = 1;
    for (int k = 0; k < c->nurl; k++) {
        int i = (c->cur + k) % c->nurl;
        if (c->user[0] && !c->token[0] && authenticate(c, i) < 0) {
            if (c->refused)
                break;
            continue;
        }
        CURLcode rc = post_once(c, i, path, body, &b);
        /* etcd's Unauthenticated: the token expired; once more. */
        if (rc == CURLE_OK && c->user[0] && reauth &&
            strstr(b.p, "\"code\":16")) {
            reauth = 0;
            c->token[0] = '\0';
            k--;
            continue;
        }
        if (rc == CURLE_OK) {
            c->cur = i;
            *resp = b.p;
            return 0;
        }
        snprintf(c->err, sizeof c->err, "%s: %s", c->url[i],
                 C(curl_easy_strerror)(rc));
    }
    free(b.p);
    return -1;
}

/* The watch's stream started on the current member from w->next_rev. */
static int watch_start(amldist__etcd_t *c, struct amldist__etcd_watch *w)
{
    char k64[AMLDIST__ETCD_KEY64_MAX], e64[AMLDIST__ETCD_KEY64_MAX], url[600];
    amldist__b64_enc((const unsigned char *)w->key, strlen(w->key), k64);
    amldist__b64_enc((const unsigned char *)w->end, strlen(w->end), e64);
    free(w->body);
    w->body = malloc(1000);
    if (!w->body || !(w->h = C(curl_easy_init)()))
        return -1;
    snprintf(w->body, 1000, "{\"create_request\":{\"key\":\"%s\",\"range_end\":"
             "\"%s\",\"start_revision\":\"%lld\"}}", k64, e64, w->next_rev);
    w->url = c->cur;
    w->kind = T_WATCH;
    w->ended = 0;
    snprintf(url, sizeof url, "%s/v3/watch", c->url[c->cur]);
    C(curl_easy_setopt)(w->h, CURLOPT_URL, url);
    C(curl_easy_setopt)(w->h, CURLOPT_POSTFIELDS, w->body);
    C(curl_easy_setopt)(w->h, CURLOPT_WRITEFUNCTION, on_data);
    C(curl_easy_setopt)(w->h, CURLOPT_WRITEDATA, &w->in);
    C(curl_easy_setopt)(w->h, CURLOPT_PRIVATE, w);
    /* Without a total timeout; a member that no longer answers is found
     * by the requests (the lease's keep-alive), which move to another. */
    common(c, w->h);
    if (C(curl_multi_add_handle)(c->multi, w->h) != CURLM_OK)
        return -1;
    w->live = 1;
    return 0;
}

int amldist__etcd_watch(amldist__etcd_t *c, int slot, const char *key,
                        const char *end, long long from,
                        amldist__etcd_on_event fn, void *arg)
{
    amldist__etcd_unwatch(c, slot);
    struct amldist__etcd_watch *w = calloc(1, sizeof *w);
    if (!w)
        return -1;
    snprintf(w->key, sizeof w->key, "%s", key);
    snprintf(w->end, sizeof w->end, "%s", end);
    w->next_rev = from;
    w->fn = fn;
    w->arg = arg;
    c->w[slot] = w;
    return watch_start(c, w);
}

/* One line of the stream: its events handed over. */
static void watch_line(struct amldist__etcd_watch *w, const char *p,
                       const char *e)
{
    amldist__js_t doc = {p, e}, evs, ev, kv, v;
    if (amldist__js_path(doc, "result.events", &evs) < 0)
        return;
    while (amldist__js_next(&evs, &ev)) {
        int del = amldist__js_get(ev, "type", &v) == 0 &&
                  v.e - v.p == 8 && memcmp(v.p, "\"DELETE\"", 8) == 0;
        if (amldist__js_get(ev, "kv", &kv) < 0)
            continue;
        long long mrev = amldist__js_kv(kv, del, w->fn, w->arg);
        if (mrev >= w->next_rev)
            w->next_rev = mrev + 1;
    }
}

static void watch_read(struct amldist__etcd_watch *w)
{
    char *p = w->in.p, *nl;
    size_t used = 0;
    while (p && (nl = memchr(p + used, '\n', w->in.len - used))) {
        watch_line(w, p + used, nl);
        used = (size_t)(nl - p) + 1;
    }
    if (used) {
        memmove(p, p + used, w->in.len - used);
        w->in.len -= used;
    }
}

int amldist__etcd_run(amldist__etcd_t *c, int wait_ms, int extra_fd)
{
    struct curl_waitfd x = {.fd = extra_fd, .events = CURL_WAIT_POLLIN};
    int running = 0, bad = 0;
    long long now = amldist__now_ms();
    for (int i = 0; i < AMLDIST__ETCD_WATCHES; i++) {
        struct amldist__etcd_watch *w = c->w[i];
        if (!w)
            continue;
        /* A request moved to another member: the watch follows it. */
        if (w->live && !w->ended && w->url != c->cur)
            watch_stop(c, w);
        if (!w->live && now >= w->retry_at && watch_start(c, w) < 0)
            bad = 1;
    }
    C(curl_multi_poll)(c->multi, extra_fd >= 0 ? &x : NULL,
                       extra_fd >= 0 ? 1 : 0, wait_ms, NULL);
    C(curl_multi_perform)(c->multi, &running);
    messages(c, NULL, NULL);
    for (int i = 0; i < AMLDIST__ETCD_WATCHES; i++) {
        struct amldist__etcd_watch *w = c->w[i];
        if (!w)
            continue;
        if (w->in.len)
            watch_read(w);
        /* A callback may have ended this watch, or its slot's. */
        if ((w = c->w[i]) == NULL || !w->ended)
            continue;
        /* Broken: another member, after a pause. */
        snprintf(c->err, sizeof c->err, "%s: the watch ended: %s",
                 c->url[w->url], C(curl_easy_strerror)(w->end_rc));
        if (c->cur == w->url)
            c->cur = (c->cur + 1) % c->nurl;
        watch_stop(c, w);
        w->retry_at = now + 100;
        bad = 1;
    }
    return bad ? -1 : 0;
}

static void beat_done(amldist__etcd_t *c, struct amldist__etcd_beat *b,
                      CURLcode rc)
{
    b->busy = 0;
    if (rc != CURLE_OK) {
        snprintf(c->err, sizeof c->err, "%s: %s", c->url[b->url],
                 C(curl_easy_strerror)(rc));
        /* The next one next time, unless a watch or a request moved on
         * already (moving again would come back round to a dead one). */
        if (c->cur == b->url)
            c->cur = (c->cur + 1) % c->nurl;
        if (b->result != 0)
            b->result = 2;
        return;
    }
    /* A lease that is gone answers without a TTL (or 0). */
    amldist__js_t doc = {b->in.p, b->in.p ? b->in.p + b->in.len : NULL}, v;
    int r = b->in.p && amldist__js_path(doc, "result.TTL", &v) == 0 &&
            amldist__js_int(v, 0) > 0;
    if (!r && b->in.p && amldist__js_get(doc, "error", &v) == 0) {
        char text[200] = "";
        /* A stream's error is an object (grpc-gateway's): its message. */
        amldist__js_t m;
        if (amldist__js_str(v, text, sizeof text) < 0 &&
            amldist__js_get(v, "message", &m) == 0)
            amldist__js_str(m, text, sizeof text);
        snprintf(c->err, sizeof c->err, "%s: %s", c->url[b->url], text);
        r = 2; /* etcd's error (no leader yet): not the lease's */
    }
    if (r == 1)
        c->alive_at = amldist__now_ms();
    /* Several may end before the agent reads one (during a request): a
     * lease found gone stays so. */
    if (b->result != 0)
        b->result = r;
}

long long amldist__etcd_beat_gap(amldist__etcd_t *c)
{
    /* xorshift64, seeded by the agent (its lease's ID): agents that
     * joined in the same instant drift apart instead of knocking at once
     * every period (4,096 renewals in one burst queue up in etcd). */
    unsigned long long x = c->beat_rng ? c->beat_rng : 0x9e3779b97f4a7c15ULL;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c->beat_rng = x;
    /* 85% to 100% of the period: never later, so that the margin before
     * the lease's end stays the period's. */
    return c->beat_every_ms - (long long)(x % (unsigned long long)
                                          (c->beat_every_ms * 15 / 100 + 1));
}

int amldist__etcd_beat_due(amldist__etcd_t *c, long long now)
{
    if (!c->beat_lease || now < c->beat_next)
        return 0;
    c->beat_next = now + amldist__etcd_beat_gap(c);
    return amldist__etcd_beat(c, c->beat_lease);
}

int amldist__etcd_beat(amldist__etcd_t *c, long long lease)
{
    struct amldist__etcd_beat *b = c->beat;
    if (!b) {
        if (!(b = c->beat = calloc(1, sizeof *b)))
            return -1;
        b->result = -1;
    }
    if (b->busy)
        return 0;
    if (!b->h && !(b->h = C(curl_easy_init)()))
        return -1;
    char url[600];
    b->kind = T_BEAT;
    b->in.len = 0;
    snprintf(b->body, sizeof b->body, "{\"ID\":\"%lld\"}", lease);
    b->url = c->cur;
    snprintf(url, sizeof url, "%s/v3/lease/keepalive", c->url[c->cur]);
    C(curl_easy_setopt)(b->h, CURLOPT_URL, url);
    C(curl_easy_setopt)(b->h, CURLOPT_POSTFIELDS, b->body);
    C(curl_easy_setopt)(b->h, CURLOPT_WRITEFUNCTION, on_data);
    C(curl_easy_setopt)(b->h, CURLOPT_WRITEDATA, &b->in);
    /* It blocks nothing: it may take the busy etcd's time. */
    C(curl_easy_setopt)(b->h, CURLOPT_TIMEOUT_MS, c->beat_ms);
    C(curl_easy_setopt)(b->h, CURLOPT_PRIVATE, b);
    common(c, b->h);
    if (C(curl_multi_add_handle)(c->multi, b->h) != CURLM_OK)
        return -1;
    b->busy = 1;
    return 0;
}

int amldist__etcd_beat_result(amldist__etcd_t *c)
{
    struct amldist__etcd_beat *b = c->beat;
    if (!b)
        return -1;
    int r = b->result;
    b->result = -1;
    return r;
}
