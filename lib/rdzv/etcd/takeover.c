/*
 * A decider taking over (etcd.h): the agent that won the decider key
 * reads the job's log (P/z/), replays it into a new machine at the times
 * logged (moved so that its last entry is now: the time between the last
 * decider's end and this one's start is not counted), writing nothing it
 * replays (the batches were written with their entries), then queues what
 * came since: the members in the store the log never saw join, the log's
 * members whose keys are gone (lost), the event keys not consumed; and
 * watches for the rest from that revision on.  The first decider's start
 * is the same with an empty log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/etcd/decider.h"

/* The log as read at the start: its entries in order. */
struct log {
    amldist__rz_etcd_t *t;
    unsigned char **e;
    size_t *n;
    int count, cap;
    uint64_t last_seq;
};

static void on_log(void *arg, int del, const char *key, size_t klen,
                   const unsigned char *v, size_t vlen, long long crev,
                   long long mrev)
{
    struct log *l = arg;
    unsigned char *p;
    size_t n;
    char name[AMLDIST__ETCD_KEY_MAX];
    (void)del;
    (void)crev;
    (void)mrev;
    if (klen >= sizeof name)
        return;
    memcpy(name, key, klen);
    name[klen] = '\0';
    if (amldist__etcd_open(l->t, name, klen, v, vlen, &p, &n) < 0 || n < 36) {
        if (n < 36)
            free(p);
        return;
    }
    if (l->count == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        unsigned char **e = realloc(l->e, (size_t)cap * sizeof *e);
        size_t *ns = e ? realloc(l->n, (size_t)cap * sizeof *ns) : NULL;
        if (e)
            l->e = e;
        if (!ns) {
            free(p);
            return;
        }
        l->n = ns;
        l->cap = cap;
    }
    l->e[l->count] = p;
    l->n[l->count++] = n;
    l->last_seq = strtoull(name + strlen(l->t->prefix) + 3, NULL, 16);
}

/* The machine rebuilt from the log: replayed at its times, moved so that
 * its last entry is now. */
static int replay(amldist__rz_etcd_t *t, struct log *l)
{
    amldist__etcd_decider_t *d = t->d;
    long long now = amldist__now_ms();
    long long last = l->count ? (long long)amldist__rz_get_u64(l->e[l->count - 1] + 8)
                              : 0;
    d->self = l->count ? amldist__rz_get_u64(l->e[0]) : t->me.agent;
    d->epoch = now - last;
    d->cfg = *t->cfg;
    amldist__chan_keys_clear(&d->cfg.keys);
    d->cfg.self_agent = d->self;
    if (!(d->sm = amldist__rz_sm_new(&d->cfg, d->epoch > 0 ? d->epoch : 1)))
        return -1;
    d->replaying = 1;
    for (int i = 0; i < l->count; i++) {
        const unsigned char *e = l->e[i];
        amldist__etcd_feed(t, (int)amldist__net_get_u32(e + 24), amldist__rz_get_u64(e + 28),
             e + 36, l->n[i] - 36,
             d->epoch + (long long)amldist__rz_get_u64(e + 8), NULL);
    }
    d->replaying = 0;
    if (l->count) {
        d->next_act = amldist__rz_get_u64(l->e[l->count - 1] + 16);
        d->next_log = l->last_seq + 1;
    }
    return 0;
}

/* The inputs not consumed yet: members in the store that the log has not
 * seen join, the log's members whose keys are gone, the event keys. */
struct pending {
    amldist__rz_etcd_t *t;
};

static void on_pending(void *arg, int del, const char *key, size_t klen,
                       const unsigned char *v, size_t vlen, long long crev,
                       long long mrev)
{
    struct pending *pd = arg;
    amldist__rz_etcd_t *t = pd->t;
    size_t pl = strlen(t->prefix);
    if (klen >= pl + 3 + 16 && key[pl + 1] == 'm') {
        char hex[17];
        memcpy(hex, key + pl + 3, 16); /* the key is not a C string */
        hex[16] = '\0';
        uint64_t agent = strtoull(hex, NULL, 16);
        struct emember *m = amldist__etcd_member(t->d, agent, 0);
        if (m) {
            m->live = 2; /* seen in the store now */
            return;
        }
    }
    amldist__etcd_on_input(t, del, key, klen, v, vlen, crev, mrev);
}

int amldist__etcd_decider_start(amldist__rz_etcd_t *t)
{
    char a[AMLDIST__ETCD_KEY_MAX], b[AMLDIST__ETCD_KEY_MAX];
    long long rev;
    struct log l = {t, NULL, NULL, 0, 0, 0};
    amldist__etcd_decider_t *d = calloc(1, sizeof *d);
    if (!d)
        return -1;
    __atomic_store_n(&t->d, d, __ATOMIC_RELEASE);
    snprintf(a, sizeof a, "%s/z/", t->prefix);
    snprintf(b, sizeof b, "%s/z0", t->prefix);
    int rc = amldist__etcd_range(&t->c, a, b, NULL, on_log, &l);
    if (rc == 0)
        rc = replay(t, &l);
    for (int i = 0; i < l.count; i++)
        free(l.e[i]);
    free(l.e);
    free(l.n);
    if (rc < 0)
        goto fail;
    /* What came since, from one revision: the watch goes on from it. */
    struct pending pd = {t};
    snprintf(a, sizeof a, "%s/e/", t->prefix);
    snprintf(b, sizeof b, "%s/n", t->prefix);
    if (amldist__etcd_range(&t->c, a, b, &rev, on_pending, &pd) < 0)
        goto fail;
    for (int i = 0; i < d->nm; i++) {
        if (d->m[i]->live == 1 && d->m[i]->admitted)
            amldist__etcd_push(d, K_LOST, d->m[i]->agent, NULL,
                 (const unsigned char *)"its lease expired", 17);
        else if (d->m[i]->live == 2)
            d->m[i]->live = 1;
    }
    if (amldist__etcd_watch(&t->c, 1, a, b, rev + 1, amldist__etcd_on_input, t) < 0)
        goto fail;
    return 0;
fail:
    amldist__etcd_decider_free(t);
    return -1;
}

