/*
 * The decider on the agent that holds the decider key (etcd.h): the one
 * state machine of host_sm.h, fed the events the agents write (a member
 * key put: its JOIN; gone: LOST; an event key: its FAIL or DONE) in the
 * store's order, its actions written back as batches every agent watches.
 * Every event it decided on goes to its log (P/z/) in the same txn as its
 * batch and the event key's delete, guarded by the decider key's create
 * revision: a deposed decider writes nothing, and the next one rebuilds
 * the machine by replaying the log (at the times logged, moved to now),
 * writes nothing it replays, and goes on with the events not consumed
 * yet.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/etcd/etcd.h"
#include "rdzv/etcd/decider.h"

struct emember *amldist__etcd_member(amldist__etcd_decider_t *d, uint64_t agent,
                              int make)
{
    for (int i = 0; i < d->nm; i++)
        if (d->m[i]->agent == agent)
            return d->m[i];
    if (!make)
        return NULL;
    if (d->nm == d->cap) {
        int cap = d->cap ? 2 * d->cap : 64;
        struct emember **m = realloc(d->m, (size_t)cap * sizeof *m);
        if (!m)
            return NULL;
        d->m = m;
        d->cap = cap;
    }
    struct emember *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->agent = agent;
    d->m[d->nm++] = e;
    return e;
}

static int bput(amldist__etcd_decider_t *d, const void *p, size_t n)
{
    if (!n)
        return 0;
    if (d->blen + n > d->bcap) {
        size_t cap = d->bcap ? 2 * d->bcap : 4096;
        while (cap < d->blen + n)
            cap *= 2;
        unsigned char *b = realloc(d->batch, cap);
        if (!b)
            return -1;
        d->batch = b;
        d->bcap = cap;
    }
    memcpy(d->batch + d->blen, p, n);
    d->blen += n;
    return 0;
}

/* One action for an agent, in the batch (agent.c reads it). */
static void bact(amldist__etcd_decider_t *d, uint64_t agent, uint32_t type,
                 uint32_t value, const void *text, size_t tlen)
{
    unsigned char h[12];
    /* The same action to several agents (a STOP, a FINISH, the round's
     * ASSIGNs) is one group: its type and text once, each target's agent
     * and value after (12 bytes an agent, not the text each time). */
    int same = d->bcount && d->gtype == type && d->gtlen == tlen &&
               memcmp(d->batch + d->gtext, text ? text : "", tlen) == 0;
    if (!same) {
        amldist__net_put_u32(h, type);
        amldist__net_put_u32(h + 4, (uint32_t)tlen);
        d->gtext = d->blen + 8;
        if (bput(d, h, 8) < 0 || bput(d, text, tlen) < 0)
            return;
        d->gcount = d->blen;
        amldist__net_put_u32(h, 0);
        if (bput(d, h, 4) < 0)
            return;
        d->gtype = type;
        d->gtlen = tlen;
        d->groups++;
    }
    amldist__rz_put_u64(h, agent);
    amldist__net_put_u32(h + 8, value);
    if (bput(d, h, 12) < 0)
        return;
    amldist__net_put_u32(d->batch + d->gcount,
                         amldist__net_get_u32(d->batch + d->gcount) + 1);
    /* One target: the batch goes to its own keys, read by it alone. */
    if (!d->bcount++)
        d->btarget = agent;
    else if (d->btarget != agent)
        d->btarget = 0;
}

/* A write queued (p taken: sealed into the op). */
static int queue_op(amldist__rz_etcd_t *t, const char *key,
                    const unsigned char *p, size_t n, int del)
{
    amldist__etcd_decider_t *d = t->d;
    if (d->nops == d->capops) {
        int cap = d->capops ? 2 * d->capops : 64;
        amldist__etcd_op_t *o = realloc(d->ops, (size_t)cap * sizeof *o);
        if (!o)
            return -1;
        d->ops = o;
        d->capops = cap;
    }
    amldist__etcd_op_t *o = &d->ops[d->nops];
    memset(o, 0, sizeof *o);
    snprintf(o->key, sizeof o->key, "%s", key);
    if (!del && amldist__etcd_value(t, key, p, n, &o->v, &o->vlen) < 0)
        return -1;
    d->nops++;
    return 0;
}

/* The machine's actions for one event: the members' admissions kept, the
 * agents' actions into the batch, issue 20's (QUERY, RESULT, MARKS) sent
 * on the plane (plane_host.c; never while replaying: they were for the
 * connections of the decider that logged them). */
static void carry(amldist__rz_etcd_t *t, const amldist__rz_action_t *a, int n)
{
    amldist__etcd_decider_t *d = t->d;
    unsigned char assign[AMLDIST__RZ_ASSIGN_MAX], head[8] = {0};
    size_t alen = 0;
    d->blen = 0;
    d->bcount = 0;
    d->groups = 0;
    d->bstop = 0;
    for (int i = 0; i < n; i++)
        if (a[i].type == AMLDIST__RZ_A_ASSIGN && !alen)
            alen = amldist__rz_put_assign(amldist__rz_sm_round(d->sm), assign);
    bput(d, head, sizeof head);
    bput(d, assign, alen);
    for (int i = 0; i < n; i++) {
        struct emember *m = a[i].who;
        const char *text = a[i].text ? a[i].text : "";
        switch (a[i].type) {
        case AMLDIST__RZ_A_ADMIT:
            m->admitted = 1;
            break;
        case AMLDIST__RZ_A_REFUSE:
            m->admitted = 0;
            bact(d, m->agent, AMLDIST__RZ_REFUSE, a[i].value, text,
                 strlen(text));
            break;
        case AMLDIST__RZ_A_ASSIGN:
            bact(d, m->agent, AMLDIST__RZ_ASSIGN, a[i].value, NULL, 0);
            break;
        case AMLDIST__RZ_A_STOP:
        case AMLDIST__RZ_A_FINISH: {
            size_t max = amldist__rz_max_payload(a[i].type == AMLDIST__RZ_A_STOP
                                                     ? AMLDIST__RZ_STOP
                                                     : AMLDIST__RZ_FINISH) - 4;
            size_t tl = strlen(text);
            if (a[i].type == AMLDIST__RZ_A_STOP) {
                d->bstop = 1;
                d->bstop_round = a[i].value;
                d->bstop_text = text;
            }
            bact(d, m->agent,
                 a[i].type == AMLDIST__RZ_A_STOP ? AMLDIST__RZ_STOP
                                                 : AMLDIST__RZ_FINISH,
                 a[i].value, text, tl < max ? tl : max);
            break;
        }
        case AMLDIST__RZ_A_WAIT:
            bact(d, m->agent, AMLDIST__RZ_WAIT, 0, text, strlen(text));
            break;
        default: /* QUERY, RESULT, MARKS */
            if (!d->replaying && d->plane_send)
                d->plane_send(t, m, &a[i]);
            break;
        }
    }
    if (d->blen >= 8) {
        amldist__net_put_u32(d->batch, d->groups);
        amldist__net_put_u32(d->batch + 4, (uint32_t)alen);
    }
}

/* The batch of the step just carried out, and its log entry (kind, from
 * agent, its payload, at now on the machine's clock), queued unless
 * replayed: 1 when they were (the event key's delete with them), else 0.
 * A TICK whose actions were all the plane's is not logged: a replay
 * knows no plane. */
static int commit(amldist__rz_etcd_t *t, int kind, uint64_t agent,
                  const unsigned char *p, size_t n, long long now,
                  const char *ev_key)
{
    amldist__etcd_decider_t *d = t->d;
    int batch = d->bcount > 0;
    if (d->replaying) {
        d->next_act += batch;
        return 0;
    }
    if (kind == K_TICK && !batch)
        return 0;
    /* The log entry: self | t | next_act after it | kind | agent | data. */
    unsigned char *e = malloc(36 + n);
    char key[AMLDIST__ETCD_KEY_MAX];
    if (!e)
        return 0;
    if (batch) {
        if (d->btarget)
            snprintf(key, sizeof key, "%s/a/%016llx/%016llx", t->prefix,
                     (unsigned long long)d->btarget,
                     (unsigned long long)d->next_act++);
        else
            snprintf(key, sizeof key, "%s/b/%016llx", t->prefix,
                     (unsigned long long)d->next_act++);
        queue_op(t, key, d->batch, d->blen, 0);
    }
    amldist__rz_put_u64(e, d->self);
    amldist__rz_put_u64(e + 8, (uint64_t)(now - d->epoch));
    amldist__rz_put_u64(e + 16, d->next_act);
    amldist__net_put_u32(e + 24, (uint32_t)kind);
    amldist__rz_put_u64(e + 28, agent);
    if (n)
        memcpy(e + 36, p, n);
    snprintf(key, sizeof key, "%s/z/%016llx", t->prefix,
             (unsigned long long)d->next_log++);
    queue_op(t, key, e, 36 + n, 0);
    free(e);
    if (ev_key && *ev_key)
        queue_op(t, ev_key, NULL, 0, 1);
    return 1;
}

/* The step stopped a hung round on its own (no member's event: the hang
 * rule's last resort, on views the log does not keep): logged as K_HANG,
 * its round and STOP text, which a replay repeats as such. */
static int hung(amldist__rz_etcd_t *t, long long now)
{
    amldist__etcd_decider_t *d = t->d;
    unsigned char b[4 + AMLDIST__RZ_TEXT_MAX];
    size_t tl = strlen(d->bstop_text);
    if (tl > AMLDIST__RZ_TEXT_MAX)
        tl = AMLDIST__RZ_TEXT_MAX;
    amldist__net_put_u32(b, d->bstop_round);
    memcpy(b + 4, d->bstop_text, tl);
    return commit(t, K_HANG, 0, b, 4 + tl, now, NULL);
}

/* One event for the machine (kind, from agent, its payload), at `now`
 * on the machine's clock; logged and its batch queued unless replayed:
 * 1 when it was (its event key's delete queued with it), else 0. */
int amldist__etcd_feed(amldist__rz_etcd_t *t, int kind, uint64_t agent,
                 const unsigned char *p, size_t n, long long now,
                 const char *ev_key)
{
    amldist__etcd_decider_t *d = t->d;
    amldist__rz_event_t ev = {.now = now > 0 ? now : 1,
                              .now_ns = amldist__rz_clock_ns()};
    int anon = kind == K_TICK || kind == K_HANG; /* no member's */
    struct emember *m = anon ? NULL : amldist__etcd_member(d, agent, kind == K_JOIN);
    char why[200] = "", addr[64];
    if (!anon && !m)
        return 0;
    ev.who = m;
    switch (kind) {
    case K_JOIN: {
        uint32_t jl = n >= 4 ? amldist__net_get_u32(p) : 0;
        if (m->admitted || n < 4 || jl > n - 4 ||
            amldist__rz_get_join(p + 4, jl, &ev.join) < 0)
            return 0;
        size_t al = n - 4 - jl < sizeof addr - 1 ? n - 4 - jl : sizeof addr - 1;
        memcpy(addr, p + 4 + jl, al);
        addr[al] = '\0';
        ev.type = AMLDIST__RZ_EV_JOIN;
        ev.addr = addr;
        m->live = 1;
        break;
    }
    case K_FAIL:
        if (!m->admitted || n < 16)
            return 0;
        ev.type = AMLDIST__RZ_EV_FAIL;
        ev.round = amldist__net_get_u32(p);
        ev.flags = amldist__net_get_u32(p + 4);
        ev.rank = amldist__net_get_u32(p + 8);
        ev.status = amldist__net_get_u32(p + 12);
        ev.text = p + 16;
        ev.text_len = n - 16 < AMLDIST__RZ_SUMMARY_MAX ? n - 16
                                                      : AMLDIST__RZ_SUMMARY_MAX;
        break;
    case K_DONE:
        if (!m->admitted || n != 12)
            return 0;
        ev.type = AMLDIST__RZ_EV_DONE;
        ev.round = amldist__net_get_u32(p);
        ev.status = amldist__net_get_u32(p + 4);
        ev.port = amldist__net_get_u32(p + 8);
        break;
    case K_LOST:
        m->live = 0;
        if (!m->admitted)
            return 0;
        m->admitted = 0;
        snprintf(why, sizeof why, "%.*s", (int)(n < 190 ? n : 190), p);
        ev.type = AMLDIST__RZ_EV_LOST;
        ev.why = why;
        break;
    case K_HANG:
        if (n < 4)
            return 0;
        ev.type = AMLDIST__RZ_EV_HUNG;
        ev.round = amldist__net_get_u32(p);
        ev.text = p + 4;
        ev.text_len = n - 4;
        break;
    default:
        ev.type = AMLDIST__RZ_EV_TICK;
    }
    const amldist__rz_action_t *acts;
    int na = amldist__rz_sm_step(d->sm, &ev, &acts);
    if (kind != K_TICK)
        d->stepped = 1;
    if (kind == K_TICK && na == 0)
        return 0;
    carry(t, acts, na);
    if (kind == K_TICK && d->bstop)
        return hung(t, ev.now);
    return commit(t, kind, agent, p, n, ev.now, ev_key);
}

void amldist__etcd_plane_feed(amldist__rz_etcd_t *t, amldist__rz_event_t *ev)
{
    amldist__etcd_decider_t *d = t->d;
    const amldist__rz_action_t *acts;
    ev->now = amldist__now_ms();
    ev->now_ns = amldist__rz_clock_ns();
    int na = amldist__rz_sm_step(d->sm, ev, &acts);
    d->stepped = 1; /* a TICK follows, as after every event */
    carry(t, acts, na);
    if (d->bstop)
        hung(t, ev->now);
    else
        commit(t, K_TICK, 0, NULL, 0, ev->now, NULL);
}
/* An input waits its turn (p copied). */
void amldist__etcd_push(amldist__etcd_decider_t *d, int kind, uint64_t agent,
                 const char *key, const unsigned char *p, size_t n)
{
    struct input *in = calloc(1, sizeof *in);
    if (!in || (n && !(in->p = malloc(n)))) {
        free(in);
        return;
    }
    in->kind = kind;
    in->agent = agent;
    snprintf(in->key, sizeof in->key, "%s", key ? key : "");
    if (n)
        memcpy(in->p, p, n);
    in->n = n;
    if (d->in_tail)
        d->in_tail->next = in;
    else
        d->in = in;
    d->in_tail = in;
}

/* A key of the decider's watch (P/e/ .. P/m/): its input. */
void amldist__etcd_on_input(void *arg, int del, const char *key, size_t klen,
                     const unsigned char *v, size_t vlen, long long crev,
                     long long mrev)
{
    amldist__rz_etcd_t *t = arg;
    amldist__etcd_decider_t *d = t->d;
    size_t pl = strlen(t->prefix);
    char name[AMLDIST__ETCD_KEY_MAX];
    (void)crev;
    (void)mrev;
    if (!d || klen < pl + 3 + 16 || klen >= sizeof name)
        return;
    memcpy(name, key, klen);
    name[klen] = '\0';
    uint64_t agent = strtoull(name + pl + 3, NULL, 16);
    char kind = name[pl + 1];
    if (kind == 'm' && del) {
        amldist__etcd_push(d, K_LOST, agent, NULL, (const unsigned char *)"its lease "
             "expired", 17);
        return;
    }
    if (del)
        return;
    unsigned char *p;
    size_t n;
    /* A value that does not open is another secret's: not this job's. */
    if (amldist__etcd_open(t, name, klen, v, vlen, &p, &n) < 0)
        return;
    if (kind == 'm') {
        amldist__etcd_push(d, K_JOIN, agent, NULL, p, n);
    } else if (kind == 'e' && n >= 4) {
        uint32_t type = amldist__net_get_u32(p);
        amldist__etcd_push(d, type == AMLDIST__RZ_FAIL ? K_FAIL : K_DONE, agent, name,
             p + 4, n - 4);
    }
    free(p);
}

/* The queued writes, in txns of whole events, guarded by our decider
 * key: 0 (written, or to try again), or -1 (deposed). */
static int flush(amldist__rz_etcd_t *t)
{
    amldist__etcd_decider_t *d = t->d;
    char guard[AMLDIST__ETCD_KEY_MAX];
    snprintf(guard, sizeof guard, "%s/b/lead", t->prefix);
    int done = 0;
    while (done < d->nops) {
        int k = 0;
        size_t bytes = 0;
        /* Whole events: an entry of the log (P/z/) ends each. */
        int cut = done;
        for (int i = done; i < d->nops && k < OPS_PER_TXN &&
                           bytes < BYTES_PER_TXN; i++, k++) {
            bytes += d->ops[i].vlen + 200;
            size_t pl = strlen(t->prefix);
            if (d->ops[i].v && d->ops[i].key[pl + 1] == 'z')
                cut = i + 1;
            if (!d->ops[i].v && i == cut)
                cut = i + 1; /* its delete follows its entry */
        }
        if (cut == done)
            cut = done + (k ? k : 1);
        int rc = amldist__etcd_txn(&t->c, guard, t->lead_rev, d->ops + done,
                                   cut - done);
        if (rc < 0)
            break;
        if (rc == 0)
            return -1;
        for (int i = done; i < cut; i++)
            free(d->ops[i].v);
        done = cut;
    }
    memmove(d->ops, d->ops + done, (size_t)(d->nops - done) * sizeof *d->ops);
    d->nops -= done;
    return 0;
}

int amldist__etcd_decider_run(amldist__rz_etcd_t *t)
{
    amldist__etcd_decider_t *d = t->d;
    long long now = amldist__now_ms();
    while (d->in) {
        struct input *in = d->in;
        d->in = in->next;
        if (!d->in)
            d->in_tail = NULL;
        /* An event the machine does not hear (a member's not in the
         * job) is consumed all the same. */
        if (!amldist__etcd_feed(t, in->kind, in->agent, in->p, in->n, now, in->key) &&
            in->key[0])
            queue_op(t, in->key, NULL, 0, 1);
        free(in->p);
        free(in);
    }
    long long dl = amldist__rz_sm_next_deadline(d->sm);
    if (d->stepped || (dl >= 0 && now >= dl) ||
        now - d->ticked_at >= t->cfg->keepalive_ms) {
        d->stepped = 0;
        d->ticked_at = now;
        amldist__etcd_feed(t, K_TICK, 0, NULL, 0, now, NULL);
    }
    if (amldist__rz_sm_phase(d->sm) == AMLDIST__RZ_P_OVER && !d->over_at)
        d->over_at = now;
    return d->nops ? flush(t) : 0;
}

long long amldist__etcd_decider_wake(const amldist__rz_etcd_t *t)
{
    const amldist__etcd_decider_t *d = t->d;
    long long w = d->ticked_at + t->cfg->keepalive_ms;
    long long dl = amldist__rz_sm_next_deadline(d->sm);
    if (d->in || d->nops)
        return amldist__now_ms();
    return dl >= 0 && dl < w ? dl : w;
}

/* Whether the job is over here and its agents gone (then the prefix
 * goes when the decider is freed). */
static int drained(const amldist__rz_etcd_t *t)
{
    const amldist__etcd_decider_t *d = t->d;
    long long now = amldist__now_ms();
    if (d->nops)
        return 0;
    if (amldist__rz_sm_drained(d->sm, now))
        return 1;
    if (!d->over_at)
        return 0;
    for (int i = 0; i < d->nm; i++)
        if (d->m[i]->admitted && d->m[i]->agent != t->me.agent)
            return now - d->over_at > t->cfg->dead_ms;
    return 1;
}

int amldist__etcd_decider_drained(const amldist__rz_etcd_t *t)
{
    int yes = drained(t);
    if (yes)
        t->d->clean = 1;
    return yes;
}

void amldist__etcd_decider_free(amldist__rz_etcd_t *t)
{
    amldist__etcd_decider_t *d = t->d;
    if (!d)
        return;
    amldist__etcd_unwatch(&t->c, 1);
    /* The job over here and every agent gone: nothing of it stays. */
    if (d->clean) {
        char a[AMLDIST__ETCD_KEY_MAX], b[AMLDIST__ETCD_KEY_MAX];
        snprintf(a, sizeof a, "%s/", t->prefix);
        snprintf(b, sizeof b, "%s0", t->prefix);
        amldist__etcd_delete(&t->c, a, b);
    }
    __atomic_store_n(&t->d, NULL, __ATOMIC_RELEASE);
    amldist__rz_sm_free(d->sm);
    for (int i = 0; i < d->nm; i++)
        free(d->m[i]);
    free(d->m);
    while (d->in) {
        struct input *in = d->in;
        d->in = in->next;
        free(in->p);
        free(in);
    }
    for (int i = 0; i < d->nops; i++)
        free(d->ops[i].v);
    free(d->ops);
    free(d->batch);
    free(d);
}
