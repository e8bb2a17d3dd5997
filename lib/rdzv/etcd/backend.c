/*
 * The etcd backend's table (see etcd.h and backend.h): the endpoint's
 * form and its keys, joining (libcurl loaded, the client made, the thread
 * started), the caller's word to the thread (curl's wake-up), and leaving
 * (the thread told, waited for, its state freed).
 *
 * The endpoint: "HOST:PORT[,HOST:PORT...]" (torchrun's, etcd's members,
 * failed over in turn; PORT 2379 when none), then "?" and the
 * --rdzv-conf keys amlrun hands on ("key=value,..."); the ones read here
 * (others are amlrun's or ignored):
 *   etcd_prefix=P     the keys' prefix (torchrun's; /amldist)
 *   protocol=https    TLS to etcd (torchrun's; http)
 *   cacert=, cert=, key=  its CA, this agent's certificate and key
 *                     (torchrun's etcd names; ca_cert=, ssl_cert=,
 *                     ssl_cert_key= as its etcd-v2 backend's)
 *   username=U        etcd's user auth; the password from the file
 *                     password_file=PATH or $AMLDIST_ETCD_PASSWORD, never
 *                     the command line
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdzv/etcd/etcd.h"

struct conf {
    char prefix[100], protocol[8], cacert[512], cert[512], key[512];
    char user[128], password_file[512];
};

/* The value of `name` in "k=v,k=v" (blanks around both ignored): 1 with
 * it in out, 0 when absent, -1 when too long. */
static int conf_get(const char *conf, const char *name, char *out,
                    size_t size)
{
    size_t nl = strlen(name);
    int found = 0;
    for (const char *p = conf; p && *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *eq = strchr(p, '='), *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        if (eq && eq < end) {
            const char *k = p, *ke = eq;
            while (ke > k && ke[-1] == ' ')
                ke--;
            const char *v = eq + 1, *ve = end;
            while (*v == ' ' && v < ve)
                v++;
            while (ve > v && ve[-1] == ' ')
                ve--;
            if ((size_t)(ke - k) == nl && memcmp(k, name, nl) == 0) {
                if ((size_t)(ve - v) >= size)
                    return -1;
                memcpy(out, v, (size_t)(ve - v));
                out[ve - v] = '\0';
                found = 1; /* the last wins, as torchrun's */
            }
        }
        p = end;
    }
    return found;
}

static int conf_parse(const char *q, struct conf *c)
{
    static const struct {
        const char *name;
        size_t off, size;
    } keys[] = {
#define K(n, f) {n, offsetof(struct conf, f), sizeof ((struct conf *)0)->f}
        K("etcd_prefix", prefix), K("protocol", protocol),
        K("cacert", cacert), K("ca_cert", cacert), K("cert", cert),
        K("ssl_cert", cert), K("key", key), K("ssl_cert_key", key),
        K("username", user), K("password_file", password_file),
#undef K
    };
    memset(c, 0, sizeof *c);
    strcpy(c->prefix, "/amldist");
    strcpy(c->protocol, "http");
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (q && conf_get(q, keys[i].name, (char *)c + keys[i].off,
                          keys[i].size) < 0)
            return amldist__fail(AMLDIST_EINVAL, "rendezvous: --rdzv-conf "
                                 "%s: too long", keys[i].name);
    if (strcmp(c->protocol, "http") && strcmp(c->protocol, "https"))
        return amldist__fail(AMLDIST_EINVAL, "rendezvous: --rdzv-conf "
                             "protocol=%s: want http or https", c->protocol);
    if (c->prefix[0] != '/' || strpbrk(c->prefix, " \"\\"))
        return amldist__fail(AMLDIST_EINVAL, "rendezvous: --rdzv-conf "
                             "etcd_prefix=%s: want a path (/NAME...)",
                             c->prefix);
    size_t n = strlen(c->prefix);
    while (n > 1 && c->prefix[n - 1] == '/')
        c->prefix[--n] = '\0';
    if (strpbrk(c->user, "\"\\"))
        return amldist__fail(AMLDIST_EINVAL, "rendezvous: --rdzv-conf "
                             "username: no quote or backslash");
    return 0;
}

/* Each member "HOST[:PORT]" of the list into url (NULL: only checked):
 * their count, or -1. */
static int members(const char *list, size_t len, const char *scheme,
                   char **url)
{
    int n = 0;
    const char *p = list, *e = list + len;
    while (p < e) {
        const char *c = memchr(p, ',', (size_t)(e - p));
        if (!c)
            c = e;
        char m[300];
        size_t ml = (size_t)(c - p);
        if (ml == 0 || ml >= sizeof m || n == AMLDIST__ETCD_URLS_MAX)
            return -1;
        memcpy(m, p, ml);
        m[ml] = '\0';
        if (strpbrk(m, " /?#@\"\\"))
            return -1;
        const char *colon = m[0] == '[' ? strstr(m, "]:") : strrchr(m, ':');
        if (colon && m[0] == '[')
            colon++;
        int port = 2379;
        if (colon && m[0] != '[' && strchr(m, ':') != colon)
            return -1; /* a bare IPv6 address: want [ADDR]:PORT */
        if (colon) {
            char *end;
            long v = strtol(colon + 1, &end, 10);
            if (*end || v < 1 || v > 65535)
                return -1;
            port = (int)v;
        }
        if (url) {
            size_t hl = colon ? (size_t)(colon - m) : ml;
            char u[400];
            snprintf(u, sizeof u, "%s://%.*s:%d", scheme, (int)hl, m, port);
            if (!(url[n] = strdup(u)))
                return -1;
        }
        n++;
        p = c + 1;
    }
    return n;
}

static int etcd_check(const char *endpoint, int max_nodes)
{
    (void)max_nodes;
    const char *q = strchr(endpoint, '?');
    size_t len = q ? (size_t)(q - endpoint) : strlen(endpoint);
    struct conf c;
    if (members(endpoint, len, "http", NULL) < 1)
        return amldist__fail(AMLDIST_EINVAL, "rendezvous endpoint 'etcd://%.*s': "
                             "want HOST:PORT[,HOST:PORT...] (etcd's members)",
                             (int)len, endpoint);
    return conf_parse(q ? q + 1 : NULL, &c);
}

/* The password: from password_file, else $AMLDIST_ETCD_PASSWORD. */
static int password(const struct conf *cf, char *out, size_t size)
{
    out[0] = '\0';
    if (cf->password_file[0]) {
        FILE *f = fopen(cf->password_file, "re");
        if (!f)
            return amldist__fail(AMLDIST_EINVAL, "rendezvous: --rdzv-conf "
                                 "password_file=%s: %s", cf->password_file,
                                 strerror(errno));
        size_t n = fread(out, 1, size - 1, f);
        fclose(f);
        out[n] = '\0';
        while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
            out[--n] = '\0';
    } else if (getenv("AMLDIST_ETCD_PASSWORD")) {
        snprintf(out, size, "%s", getenv("AMLDIST_ETCD_PASSWORD"));
    }
    if (strpbrk(out, "\"\\")) {
        explicit_bzero(out, size);
        return amldist__fail(AMLDIST_EINVAL, "rendezvous: the etcd password "
                             "holds a quote or a backslash");
    }
    return 0;
}

static void etcd_free(amldist__rz_etcd_t *t)
{
    amldist__etcd_plane_free(t);
    amldist__etcd_free(&t->c);
    free(t);
}

/* The client of the endpoint's members, its TLS and auth: 0, or an
 * error (message set). */
static int client(amldist__rz_etcd_t *t, const char *endpoint)
{
    char why[300];
    struct conf cf;
    const char *q = strchr(endpoint, '?');
    size_t len = q ? (size_t)(q - endpoint) : strlen(endpoint);
    int rc = conf_parse(q ? q + 1 : NULL, &cf);
    if (rc < 0)
        return rc;
    if (amldist__etcd_load(why, sizeof why) < 0)
        return amldist__fail(AMLDIST_ESYS, "rendezvous: the etcd backend "
                             "needs libcurl: %s", why);
    snprintf(t->endpoint, sizeof t->endpoint, "etcd://%.*s", (int)len,
             endpoint);
    snprintf(t->prefix, sizeof t->prefix, "%s/%016llx", cf.prefix,
             (unsigned long long)t->cfg->run);
    if ((t->c.nurl = members(endpoint, len, cf.protocol, t->c.url)) < 1)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    snprintf(t->c.cacert, sizeof t->c.cacert, "%s", cf.cacert);
    snprintf(t->c.cert, sizeof t->c.cert, "%s", cf.cert);
    snprintf(t->c.key, sizeof t->c.key, "%s", cf.key);
    snprintf(t->c.user, sizeof t->c.user, "%s", cf.user);
    if (cf.user[0] && (rc = password(&cf, t->c.password,
                                     sizeof t->c.password)) < 0)
        return rc;
    long ms = 2L * t->cfg->keepalive_ms;
    t->c.timeout_ms = ms < 500 ? 500 : ms > 5000 ? 5000 : ms;
    t->c.slow_ms = 10000;
    t->c.beat_ms = t->cfg->dead_ms / 2 > t->c.timeout_ms ? t->cfg->dead_ms / 2
                                                         : t->c.timeout_ms;
    /* etcd's leases are whole seconds: the dead time, rounded up. */
    t->ttl_s = (t->cfg->dead_ms + 999) / 1000;
    if (t->ttl_s < 2)
        t->ttl_s = 2;
    if (amldist__etcd_init(&t->c) < 0)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    return 0;
}

static int etcd_open(const char *endpoint, const amldist__rz_cfg_t *cfg,
                     const amldist__rz_join_t *me, amldist__rz_sink_t *s,
                     void **be)
{
    amldist__rz_etcd_t *t = calloc(1, sizeof *t);
    if (!t)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    t->cfg = cfg;
    t->me = *me;
    t->s = s;
    t->last_round = -1;
    int rc = amldist__etcd_plane_init(t) < 0
                 ? amldist__fail(AMLDIST_ENOMEM, "out of memory")
                 : client(t, endpoint);
    if (rc < 0) {
        etcd_free(t);
        return rc;
    }
    t->join_deadline = amldist__now_ms() + cfg->join_timeout_ms;
    /* The thread takes no signal: the caller's signalfd must see them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&t->thread, NULL, amldist__etcd_thread, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
        rc = amldist__fail(AMLDIST_ESYS, "rendezvous: thread: %s", strerror(e));
        etcd_free(t);
        return rc;
    }
    *be = t;
    return 0;
}

static void etcd_send(void *be)
{
    amldist__rz_etcd_t *t = be;
    amldist__etcd_wakeup(&t->c);
}

static int etcd_hosts(const void *be)
{
    const amldist__rz_etcd_t *t = be;
    return __atomic_load_n(&t->d, __ATOMIC_ACQUIRE) != NULL;
}

static void etcd_close(void *be)
{
    amldist__rz_etcd_t *t = be;
    pthread_mutex_lock(&t->s->mu);
    t->closing = 1;
    pthread_mutex_unlock(&t->s->mu);
    etcd_send(t);
    pthread_join(t->thread, NULL);
    etcd_free(t);
}

const struct amldist__rz_backend_ops amldist__rz_etcd_backend = {
    .scheme = "etcd",
    .check = etcd_check,
    .open = etcd_open,
    .send = etcd_send,
    .hosts = etcd_hosts,
    .close = etcd_close,
};
