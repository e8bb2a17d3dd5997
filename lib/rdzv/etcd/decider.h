/*
 * The decider's state (decider.c, takeover.c), the etcd backend's own:
 * the machine, its members as the store names them, the inputs waiting
 * their turn, the writes queued.
 */
#ifndef AMLDIST_RDZV_ETCD_DECIDER_H
#define AMLDIST_RDZV_ETCD_DECIDER_H

#include "rdzv/etcd/etcd.h"
#include "rdzv/host_sm.h"

/* The log's kinds (the machine's own events). */
/* K_HANG: a TICK's or a plane event's step that stopped a hung round (the
 * hang rule's last resort, decided on views the log does not keep): its
 * round and STOP text, replayed as the machine's EV_HUNG. */
enum { K_JOIN = 1, K_FAIL, K_DONE, K_LOST, K_TICK, K_HANG };

struct pconn;
struct emember {
    uint64_t agent;
    int admitted; /* ADMITted and not refused or lost */
    int live;     /* its member key is in the store */
    struct pconn *plane; /* its connection to our plane (plane_host.c) */
};

/* An event that came, waiting its turn. */
struct input {
    struct input *next;
    int kind;
    uint64_t agent;
    char key[AMLDIST__ETCD_KEY_MAX]; /* the event key to delete once consumed ("": none) */
    unsigned char *p;
    size_t n;
};

/* A txn's writes of one event: its log entry, its batch, its delete. */
#define OPS_PER_TXN 96
#define BYTES_PER_TXN (1u << 20)

struct amldist__etcd_decider {
    amldist__rz_sm_t *sm;
    amldist__rz_cfg_t cfg; /* the handle's, without the keys */
    long long epoch;       /* the machine's time 0 on our clock */
    uint64_t self;         /* the first decider's agent */
    uint64_t next_log, next_act;
    struct emember **m;
    int nm, cap;
    struct input *in, *in_tail;
    amldist__etcd_op_t *ops;
    int nops, capops;
    int stepped, replaying;
    int clean; /* drained: the prefix goes with the decider */
    long long over_at, ticked_at;
    /* The batch of the step being carried out. */
    unsigned char *batch;
    size_t blen, bcap;
    uint32_t bcount, groups;
    /* The group being written: its type, its text (offset, length), the
     * offset of its count. */
    uint32_t gtype;
    size_t gtext, gtlen, gcount;
    uint64_t btarget; /* its one target's agent, 0: several */
    /* The step stopped the round (a STOP in its batch): its round and
     * text (the machine's, valid until the next step). */
    int bstop;
    uint32_t bstop_round;
    const char *bstop_text;
    /* The machine's QUERY, RESULT and MARKS actions sent on its member's
     * plane connection, set by plane_host.c (above this file: it feeds
     * the plane's events in); NULL: dropped (the gather names the
     * member missing at its deadline). */
    void (*plane_send)(amldist__rz_etcd_t *t, struct emember *m,
                       const amldist__rz_action_t *a);
};

/* decider.c: the member of `agent` (made when `make`; NULL when out of
 * memory or unknown); an input queued (p copied); a key of the decider's
 * watch (P/e/ .. P/m/) as its input; one event for the machine at `now`
 * (1 when logged, its event key's delete with it; replayed: never). */
struct emember *amldist__etcd_member(amldist__etcd_decider_t *d,
                                     uint64_t agent, int make);
void amldist__etcd_push(amldist__etcd_decider_t *d, int kind, uint64_t agent,
                        const char *key, const unsigned char *p, size_t n);
void amldist__etcd_on_input(void *arg, int del, const char *key, size_t klen,
                            const unsigned char *v, size_t vlen,
                            long long crev, long long mrev);
int amldist__etcd_feed(amldist__rz_etcd_t *t, int kind, uint64_t agent,
                       const unsigned char *p, size_t n, long long now,
                       const char *ev_key);

/* decider.c: one of issue 20's events (a VIEW, ASK, ANSWER, MARKS from
 * the plane; its who and data set) for the machine, now: never logged
 * (a decider that takes over knows no views and no gathers), its plane
 * actions sent, and a batch it gives (the hang's last resort, a STOP)
 * written and logged as a TICK's. */
void amldist__etcd_plane_feed(amldist__rz_etcd_t *t, amldist__rz_event_t *ev);


#endif /* AMLDIST_RDZV_ETCD_DECIDER_H */
