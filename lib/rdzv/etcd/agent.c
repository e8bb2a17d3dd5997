/*
 * The etcd backend's thread (etcd.h), every agent's: its lease kept, its
 * member key put (its JOIN), the decider key tried for whenever it is
 * free, the decider's action batches read from the watch and those for
 * this agent set in the sink (agent_frames.c, as the TCP backend does),
 * and what the caller queued (a FAIL, a DONE) written as its event keys;
 * when this agent holds the decider key, the decider's work (decider.c)
 * on the same thread; issue 20's plane over TCP to the decider (plane.c,
 * and plane_host.c while this agent decides), its sockets waited for in
 * the same wait as curl's.  The values are sealed here with the job's
 * secret.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "rdzv/etcd/etcd.h"

/* Seal (or mark plain) and put key, under the lease or not. */
static int put_sealed(amldist__rz_etcd_t *t, const char *key,
                      const unsigned char *p, size_t n, long long lease,
                      long long *rev)
{
    unsigned char *v;
    size_t vn;
    if (amldist__etcd_value(t, key, p, n, &v, &vn) < 0) {
        snprintf(t->c.err, sizeof t->c.err, "libcrypto failed");
        return -1;
    }
    int rc = amldist__etcd_put(&t->c, key, v, vn, lease, rev);
    free(v);
    return rc;
}

/* This agent's decider goes (deposed, or the handle closes): its plane
 * first (its agents find the next decider's), then the machine. */
static void decider_end(amldist__rz_etcd_t *t)
{
    amldist__etcd_phost_stop(t);
    amldist__etcd_decider_free(t);
}

void amldist__etcd_lost(amldist__rz_etcd_t *t, const char *why)
{
    pthread_mutex_lock(&t->s->mu);
    amldist__rz_set_lost(t->s, t->endpoint, "store", why);
    pthread_mutex_unlock(&t->s->mu);
}

/* One action for this agent, from a batch (decider.c's encoding). */
static void apply(amldist__rz_etcd_t *t, uint32_t type, uint32_t value,
                  const unsigned char *text, uint32_t tlen,
                  const unsigned char *assign, uint32_t alen)
{
    amldist__rz_sink_t *s = t->s;
    const char *why = NULL;
    if (type == AMLDIST__RZ_WAIT) {
        amldist__rz_note_wait(s, text, tlen);
        return;
    }
    unsigned char *p = malloc(4 + (size_t)tlen + alen);
    if (!p)
        return;
    uint32_t len;
    if (type == AMLDIST__RZ_ASSIGN) {
        if (alen < 12) {
            free(p);
            return;
        }
        memcpy(p, assign, alen);
        amldist__net_put_u32(p + 8, value);
        len = alen;
    } else {
        amldist__net_put_u32(p, value);
        if (tlen)
            memcpy(p + 4, text, tlen);
        len = 4 + tlen;
    }
    pthread_mutex_lock(&s->mu);
    /* A round once: a decider that took over never repeats what was
     * written, but a round already applied is not applied again. */
    if (type != AMLDIST__RZ_ASSIGN ||
        (long long)amldist__net_get_u32(assign) > t->last_round) {
        if (type == AMLDIST__RZ_ASSIGN)
            t->last_round = amldist__net_get_u32(assign);
        amldist__rz_agent_action(s, t->endpoint, t->cfg->token_source,
                                 t->c.peer_ip, type, p, len, &why);
    }
    pthread_mutex_unlock(&s->mu);
    free(p);
    if (why)
        amldist__etcd_lost(t, why);
}

/* A batch: groups | assign length | assign | for each group: type |
 * text length | text | count | count x (agent u64 | value); the actions
 * for this agent carried out. */
static void on_batch(amldist__rz_etcd_t *t, const unsigned char *p, size_t n)
{
    if (n < 8)
        return;
    uint32_t groups = amldist__net_get_u32(p), alen = amldist__net_get_u32(p + 4);
    if (alen > n - 8)
        return;
    const unsigned char *assign = p + 8, *q = p + 8 + alen, *e = p + n;
    for (uint32_t g = 0; g < groups && e - q >= 8; g++) {
        uint32_t type = amldist__net_get_u32(q);
        uint32_t tlen = amldist__net_get_u32(q + 4);
        if (tlen > (size_t)(e - q) - 8 || (size_t)(e - q) - 8 - tlen < 4)
            return;
        const unsigned char *text = q + 8;
        q += 8 + tlen;
        uint32_t count = amldist__net_get_u32(q);
        q += 4;
        if (count > (size_t)(e - q) / 12)
            return;
        for (uint32_t i = 0; i < count; i++, q += 12)
            if (amldist__rz_get_u64(q) == t->me.agent)
                apply(t, type, amldist__net_get_u32(q + 8), text, tlen,
                      assign, alen);
    }
}

/* The agent's watches: P/a/<agent>/ (the batches for this agent alone)
 * and P/b/ (the batches for several, and the decider key). */
static void on_agent_event(void *arg, int del, const char *key, size_t klen,
                           const unsigned char *v, size_t vlen,
                           long long crev, long long mrev)
{
    amldist__rz_etcd_t *t = arg;
    char lead[AMLDIST__ETCD_KEY_MAX];
    unsigned char *p;
    size_t n;
    (void)crev;
    if (mrev > t->seen_rev)
        t->seen_rev = mrev;
    snprintf(lead, sizeof lead, "%s/b/plane", t->prefix);
    if (klen == strlen(lead) && memcmp(key, lead, klen) == 0) {
        if (del)
            amldist__etcd_plane_key(t, 1, NULL, 0, mrev);
        else if (amldist__etcd_open(t, key, klen, v, vlen, &p, &n) == 0) {
            amldist__etcd_plane_key(t, 0, p, n, mrev);
            free(p);
        }
        return;
    }
    snprintf(lead, sizeof lead, "%s/b/lead", t->prefix);
    if (klen == strlen(lead) && memcmp(key, lead, klen) == 0) {
        if (del && t->d) {
            amldist__etcd_lost(t, "this agent's decider key went (its lease "
                               "expired)");
            decider_end(t);
        } else if (del) {
            t->campaign = 1;
        }
        return;
    }
    if (del || amldist__etcd_open(t, key, klen, v, vlen, &p, &n) < 0)
        return;
    on_batch(t, p, n);
    free(p);
}

static void say(amldist__rz_etcd_t *t, const char *line)
{
    amldist__rz_note_wait(t->s, (const unsigned char *)line,
                          (uint32_t)strlen(line));
}

/* The lease, this agent's member key (its JOIN and its address), and the
 * watch of the decider's batches: 0, or -1 (c.err; tried again). */
static int join(amldist__rz_etcd_t *t)
{
    unsigned char buf[4 + AMLDIST__RZ_JOIN_MAX + 64];
    char key[AMLDIST__ETCD_KEY_MAX], end[AMLDIST__ETCD_KEY_MAX];
    long long rev;
    while (!t->lease_id) {
        uint64_t r;
        if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
            r = t->me.agent ^ (uint64_t)amldist__now_ms();
        t->lease_id = (long long)(r >> 1);
    }
    if (!t->lease && amldist__etcd_grant(&t->c, t->ttl_s, t->lease_id,
                                         &t->lease) < 0)
        return -1;
    amldist__rz_join_t j = t->me;
    j.port = (uint32_t)amldist__rz_free_port();
    size_t n = amldist__rz_put_join(buf + 4, &j);
    amldist__net_put_u32(buf, (uint32_t)n);
    size_t a = strnlen(t->c.local_ip, 63);
    memcpy(buf + 4 + n, t->c.local_ip, a);
    snprintf(key, sizeof key, "%s/m/%016llx", t->prefix,
             (unsigned long long)t->me.agent);
    if (put_sealed(t, key, buf, 4 + n + a, t->lease, &rev) < 0)
        return -1;
    snprintf(key, sizeof key, "%s/a/%016llx/", t->prefix,
             (unsigned long long)t->me.agent);
    snprintf(end, sizeof end, "%s/a/%016llx0", t->prefix,
             (unsigned long long)t->me.agent);
    if (amldist__etcd_watch(&t->c, 0, key, end, rev + 1, on_agent_event, t) < 0)
        return -1;
    snprintf(key, sizeof key, "%s/b/", t->prefix);
    snprintf(end, sizeof end, "%s/b0", t->prefix);
    if (amldist__etcd_watch(&t->c, 2, key, end, rev + 1, on_agent_event, t) < 0)
        return -1;
    /* The decider's plane published before the watch began (read again
     * by the watch when it changed since: the same address is no
     * change). */
    if (rev > t->seen_rev)
        t->seen_rev = rev;
    snprintf(key, sizeof key, "%s/b/plane", t->prefix);
    amldist__etcd_range_since(&t->c, key, t->seen_rev, on_agent_event, t);
    t->joined = 1;
    t->last_ok = amldist__now_ms();
    t->c.beat_lease = t->lease;
    /* Every keep_alive_interval, but no more often than a third of the
     * dead time (clientv3's TTL/3): each keep-alive through the gateway is
     * a request of its own (the gateway answers a stream only once its
     * body ends: no stream of keep-alives over HTTP/1.1), and renewing a
     * 5 s lease every second was most of an idle etcd's CPU.  Two more
     * tries still fit in the lease after one lost; the lease's TTL and the
     * agent's dead time are unchanged. */
    t->c.beat_every_ms = t->cfg->keepalive_ms > t->cfg->dead_ms / 3
                             ? t->cfg->keepalive_ms
                             : t->cfg->dead_ms / 3;
    t->c.beat_rng = (unsigned long long)t->lease_id | 1;
    t->c.beat_next = t->last_ok + amldist__etcd_beat_gap(&t->c);
    t->campaign = 1;
    pthread_mutex_lock(&t->s->mu);
    if (t->s->state == C_CONNECTING)
        t->s->state = C_JOINING;
    pthread_mutex_unlock(&t->s->mu);
    return 0;
}

/* The decider key's holder, as another's value shows: whether it opens
 * with this job's secret. */
struct holder {
    amldist__rz_etcd_t *t;
    int seen, opens;
};

static void on_holder(void *arg, int del, const char *key, size_t klen,
                      const unsigned char *v, size_t vlen, long long crev,
                      long long mrev)
{
    struct holder *h = arg;
    unsigned char *p;
    size_t n;
    (void)del;
    (void)crev;
    (void)mrev;
    h->seen = 1;
    if (amldist__etcd_open(h->t, key, klen, v, vlen, &p, &n) == 0) {
        h->opens = 1;
        free(p);
    }
}

/* This agent holds the decider key: the decider starts, or is tried
 * again at the next round (etcd busy), until the dead time. */
static void start_decider(amldist__rz_etcd_t *t)
{
    long long now = amldist__now_ms();
    if (!t->starting)
        t->starting = now;
    if (amldist__etcd_decider_start(t) == 0) {
        t->starting = 0;
        return;
    }
    if (now - t->starting > t->cfg->dead_ms) {
        char why[400];
        snprintf(why, sizeof why, "this agent holds the decider key but "
                 "could not read the job's log: %s", t->c.err);
        t->starting = 0;
        amldist__etcd_lost(t, why);
    }
}

/* Try for the decider key: won, this agent runs the decider; else the
 * holder's value must be this job's. */
static void campaign(amldist__rz_etcd_t *t)
{
    unsigned char id[8], *v;
    size_t vn;
    char key[AMLDIST__ETCD_KEY_MAX];
    struct holder h = {t, 0, 0};
    snprintf(key, sizeof key, "%s/b/lead", t->prefix);
    /* A read first: a thousand agents joining at once try the txn (a
     * write of etcd's log) only while nobody holds the key; of the
     * member's own store (no wait for etcd's apply), as new as our join
     * and the last delete watched: a holder read that has left since is
     * a delete the watch brings, and the txn is guarded anyway. */
    if (amldist__etcd_range_since(&t->c, key, t->seen_rev, on_holder, &h) < 0)
        return; /* tried again */
    int won = 0;
    long long rev = 0;
    if (!h.seen) {
        amldist__rz_put_u64(id, t->me.agent);
        if (amldist__etcd_value(t, key, id, sizeof id, &v, &vn) < 0)
            return;
        won = amldist__etcd_create(&t->c, key, v, vn, t->lease, &rev,
                                   on_holder, &h);
        free(v);
    }
    if (won < 0)
        return; /* tried again */
    t->campaign = 0;
    if (won) {
        t->lead_rev = rev;
        start_decider(t);
        return;
    }
    if (h.seen && !h.opens) {
        amldist__rz_sink_t *s = t->s;
        pthread_mutex_lock(&s->mu);
        s->err = AMLDIST_EDENIED;
        snprintf(s->errmsg, sizeof s->errmsg,
                 "rendezvous at %s refused this node: the job under %s is "
                 "%s, and this node %s", t->endpoint, t->prefix,
                 t->cfg->secure ? "another job's, or sealed with another "
                                  "secret"
                                : "sealed with a secret",
                 t->cfg->secure ? "has another secret" : "has none");
        if (t->cfg->secure)
            snprintf(s->errmsg + strlen(s->errmsg),
                     sizeof s->errmsg - strlen(s->errmsg), " (from %s)",
                     t->cfg->secret_source);
        amldist__rz_set_over(s, AMLDIST_RDZV_STATUS_LOST, s->errmsg);
        pthread_mutex_unlock(&s->mu);
    }
}

/* What the caller queued: a FAIL, a DONE, each an event key of its own. */
static void send_queued(amldist__rz_etcd_t *t)
{
    amldist__rz_sink_t *s = t->s;
    unsigned char ev[4 + 16 + AMLDIST__RZ_SUMMARY_MAX], done[16];
    char key[AMLDIST__ETCD_KEY_MAX];
    t->retry = 0;
    pthread_mutex_lock(&s->mu);
    struct amldist__rz_fail *fail = s->fail;
    int have_done = s->done;
    s->fail = NULL;
    s->done = 0;
    amldist__net_put_u32(done, AMLDIST__RZ_DONE);
    amldist__net_put_u32(done + 4, (uint32_t)s->next.round);
    amldist__net_put_u32(done + 8, (uint32_t)s->done_status);
    amldist__net_put_u32(done + 12, (uint32_t)s->done_port);
    pthread_mutex_unlock(&s->mu);
    /* A put that fails is tried again at the next round, under the same
     * key; the store is lost only when the lease's keep-alive says so. */
    if (fail) {
        amldist__net_put_u32(ev, AMLDIST__RZ_FAIL);
        amldist__net_put_u32(ev + 4, fail->round);
        amldist__net_put_u32(ev + 8, fail->flags);
        amldist__net_put_u32(ev + 12, fail->rank);
        amldist__net_put_u32(ev + 16, fail->status);
        memcpy(ev + 20, fail->text, fail->len);
        snprintf(key, sizeof key, "%s/e/%016llx/%08x", t->prefix,
                 (unsigned long long)t->me.agent, t->next_ev);
        if (put_sealed(t, key, ev, 20 + fail->len, 0, NULL) == 0) {
            t->next_ev++;
            free(fail);
            fail = NULL;
        }
    }
    if (have_done && !fail) {
        snprintf(key, sizeof key, "%s/e/%016llx/%08x", t->prefix,
                 (unsigned long long)t->me.agent, t->next_ev);
        if (put_sealed(t, key, done, sizeof done, 0, NULL) == 0) {
            t->next_ev++;
            have_done = 0;
        }
    }
    if (fail || have_done) {
        pthread_mutex_lock(&s->mu);
        if (fail && !s->fail)
            s->fail = fail;
        else
            free(fail);
        s->done |= have_done;
        pthread_mutex_unlock(&s->mu);
        t->retry = 1;
    }
}

/* The lease kept alive (its keep-alive in the multi handle, beside
 * whatever this thread waits for); etcd unreachable for the dead time, or
 * the lease gone, loses the store.  Unreachable only once a keep-alive
 * failed since the last answer: a process stopped (SIGSTOP) or left
 * unscheduled past the dead time asked nobody meanwhile, and the next
 * keep-alive's answer says what became of its lease (it blamed etcd: "no
 * etcd member answered ... (last: )"). */
static void beat(amldist__rz_etcd_t *t, long long now)
{
    int rc = amldist__etcd_beat_result(&t->c);
    if (rc == 2)
        t->beat_failed = 1;
    /* One answered alive during a request counts, whatever came after. */
    if (t->c.alive_at > t->last_ok)
        t->last_ok = t->c.alive_at;
    if (rc == 1) {
        t->last_ok = now;
        t->beat_failed = 0;
    } else if (rc == 0) {
        char why[200];
        snprintf(why, sizeof why, "this agent's lease expired (etcd heard "
                 "nothing from it for %d s)", t->ttl_s);
        amldist__etcd_lost(t, why);
        return;
    } else if (t->beat_failed && now - t->last_ok > t->cfg->dead_ms) {
        char why[500];
        snprintf(why, sizeof why, "no etcd member answered for %.1f s (last: "
                 "%s)", t->cfg->dead_ms / 1000.0, t->c.err);
        amldist__etcd_lost(t, why);
        return;
    }
    if (amldist__etcd_beat_due(&t->c, now) < 0)
        t->beat_failed = 1; /* none in flight: none will answer */
}

/* Before the member key is in: tried until the join deadline, said every
 * AMLDIST__RZ_SAY_MS. */
static void try_join(amldist__rz_etcd_t *t, long long now)
{
    if (now < t->next_try)
        return;
    if (join(t) == 0)
        return;
    if (t->c.refused) {
        pthread_mutex_lock(&t->s->mu);
        t->s->err = AMLDIST_EDENIED;
        snprintf(t->s->errmsg, sizeof t->s->errmsg, "rendezvous at %.250s: "
                 "%.300s", t->endpoint, t->c.err);
        amldist__rz_set_over(t->s, AMLDIST_RDZV_STATUS_LOST, t->s->errmsg);
        pthread_mutex_unlock(&t->s->mu);
        return;
    }
    long long start = t->join_deadline - t->cfg->join_timeout_ms;
    if (now >= t->join_deadline) {
        char why[500];
        snprintf(why, sizeof why, "no etcd member answered within %.0f s "
                 "(last: %s)", t->cfg->join_timeout_ms / 1000.0, t->c.err);
        amldist__etcd_lost(t, why);
        return;
    }
    t->next_try = now + 200;
    if (now - (t->said_at ? t->said_at : start) >= AMLDIST__RZ_SAY_MS) {
        char line[1000];
        t->said_at = now;
        snprintf(line, sizeof line, "waiting for etcd at %s (%s), %lld s of "
                 "%.0f s (join timeout)", t->endpoint, t->c.err,
                 (now - start) / 1000, t->cfg->join_timeout_ms / 1000.0);
        say(t, line);
    }
}

/* The handle closes: this agent leaves (its lease revoked: its member
 * key goes, the decider hears it lost), the decider once drained. */
static void leave(amldist__rz_etcd_t *t)
{
    if (t->d)
        decider_end(t);
    t->c.beat_lease = 0; /* no keep-alive of a lease being revoked */
    if (t->lease)
        amldist__etcd_revoke(&t->c, t->lease);
}

void *amldist__etcd_thread(void *arg)
{
    amldist__rz_etcd_t *t = arg;
    for (;;) {
        long long now = amldist__now_ms();
        pthread_mutex_lock(&t->s->mu);
        int closing = t->closing, state = t->s->state;
        pthread_mutex_unlock(&t->s->mu);
        if (closing && (!t->d || amldist__etcd_decider_drained(t)))
            break;
        if (!t->joined && state == C_CONNECTING)
            try_join(t, now);
        if (t->joined) {
            beat(t, now);
            if (t->campaign && state != C_OVER && !closing)
                campaign(t);
            else if (t->starting)
                start_decider(t);
            /* Issue 20's first: the marks a node had go before its
             * DONE, as on c10d (on another channel here, the plane's). */
            amldist__etcd_plane_run(t);
            send_queued(t);
            if (t->d && amldist__etcd_decider_run(t) < 0) {
                amldist__etcd_lost(t, "another agent holds the decider key");
                decider_end(t);
            }
            if (t->d)
                amldist__etcd_phost_run(t);
            if (state == C_JOINING &&
                now > t->join_deadline + t->cfg->dead_ms) {
                char why[200];
                snprintf(why, sizeof why, "no round formed within %.0f s",
                         t->cfg->join_timeout_ms / 1000.0);
                amldist__etcd_lost(t, why);
            }
        }
        long long w = t->joined ? t->c.beat_next : t->next_try;
        if ((t->retry || t->starting) && now + 100 < w)
            w = now + 100;
        if (t->d) {
            long long d = amldist__etcd_decider_wake(t);
            if (d < w)
                w = d;
        }
        long long pw = t->joined ? amldist__etcd_plane_wake(t) : -1;
        if (pw >= 0 && pw < w)
            w = pw;
        now = amldist__now_ms();
        int ms = w <= now ? 0 : w - now > 1000 ? 1000 : (int)(w - now);
        amldist__etcd_run(&t->c, ms, amldist__etcd_plane_fd(t));
    }
    leave(t);
    return NULL;
}
