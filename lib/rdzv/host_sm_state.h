/*
 * The host state machine's own state, shared by its files only:
 * host_sm_step.c (the machine, its step, the end of a round) above
 * host_sm_join.c (who may join), host_sm_form.c (forming a round) and
 * host_sm_watch.c (views, gathers, marks), above host_sm.c (what they
 * share).  The I/O and the tests see the machine through host_sm.h alone,
 * so that its state stays its own.
 */
#ifndef AMLDIST_RDZV_HOST_SM_STATE_H
#define AMLDIST_RDZV_HOST_SM_STATE_H

#include "rdzv/host_sm.h"
#include "util/u64map.h"

enum {
    AMLDIST__RZ_M_JOINED,  /* waits for a round to form */
    AMLDIST__RZ_M_RUNNING, /* in the round, its workers may run */
    AMLDIST__RZ_M_DONE,    /* in the round, its workers are down */
    AMLDIST__RZ_M_GONE     /* refused or lost: forgotten after the step */
};

/* Agent ids declared dead, remembered to refuse them if they come back. */
#define AMLDIST__RZ_LOST_MAX 1024

struct amldist__rz_member {
    void *who;
    int state;
    uint64_t agent;
    int order;     /* -1: none */
    int nproc, port, seq;
    int node;      /* in the current round */
    int prev_node; /* in the last round it ran in, -1 */
    uint64_t machine; /* 0: shares its GPUs with no other node */
    char addr[INET6_ADDRSTRLEN];
    char reached[INET6_ADDRSTRLEN]; /* the host's address it reached, "" */
    char local_addr[AMLDIST__RZ_ADDR_MAX + 1]; /* its --local-addr, "" */
    /* Its last VIEW (malloc'd), of round view_round (-1: none). */
    amldist__rz_view_t *views;
    size_t nviews;
    int view_round;
    uint32_t view_timeout_ms;
    int64_t view_at_ns; /* when it came (host ns) */
    /* Joined only to say that it cannot start (its JOIN's round is
     * AMLDIST__RZ_ROUND_FAILING): never counted, never in a round; its
     * FAIL ends the job. */
    int failing;
    /* Its view summed up for the hang rule (host_sm_watch.c's sum_up), as
     * of hang_since_ns sum_since (sum_ok 0: to do again): its live ranks,
     * its latest sign of life, its oldest API progress of a live rank
     * (AMLDIST__HANG_NEVER: none). */
    int sum_ok;
    size_t sum_live;
    int64_t sum_since, sum_life, sum_oldest;
    int hdirty; /* in the list of sums to redo (sm->hdirty) */
};

/* The hang rule's sums over the members that watch (host_sm_watch.c): of
 * one member, or of a subtree of sm->hsum, a tree over the places in sm->m
 * (a leaf each, a node the sums of its two), so that a view costs the
 * rule its own ranks and a path of the tree, not every node's sums
 * (issue 40).  Ranks in views, live ranks; the latest sign of life, the
 * oldest API progress of a live rank (AMLDIST__HANG_NEVER: none), the
 * first time a view is late (INT64_MAX: none), the least timeout
 * (UINT32_MAX: none watches). */
struct amldist__rz_hsum {
    int64_t n, live, life, oldest, late_at;
    uint32_t timeout;
};

/* One agent asked in a gather. */
struct amldist__rz_gentry {
    void *who;
    uint32_t node;
    char addr[INET6_ADDRSTRLEN];
    size_t got;
    int over; /* answered whole, too big, or lost */
};

/* A gather in progress (host_sm_watch.c). */
struct amldist__rz_gather {
    int used;
    uint32_t id, tag, topic;
    void *asker;         /* NULL: nobody to tell any more */
    long long deadline;  /* ms */
    unsigned char arg[AMLDIST__RZ_ARG_MAX], end_arg[AMLDIST__RZ_ARG_MAX];
    size_t arg_len;
    struct amldist__rz_gentry *e;
    int n, nover; /* entries, those over */
    size_t total;
    /* Each entry by its agent's connection: an answer's chunk costs its
     * own bytes, not a walk of every entry (issue 40). */
    amldist__u64map_t by_who;
};

struct amldist__rz_sm {
    amldist__rz_cfg_t cfg;
    /* Admitted, in the order they joined; those GONE stay until a quarter
     * of the array is (host_sm.c's amldist__rz_sm_compact), so that a
     * step costs what it touches, not every member. */
    struct amldist__rz_member *m;
    int nm, ngone;
    /* Kept as members come, change state and go (host_sm.c), not counted
     * at each JOIN (issue 40: formation was O(N^2)): the members in the
     * job (GONE excepted) by state, those counted (in the job and not
     * failing), those with a node rank of their own, their workers; and
     * the index of each in m by connection, agent id and node rank (dups:
     * ids or ranks taken twice, which only failing members can do, when a
     * removal looks for another holder). */
    int nstate[4], ncounted, nordered, dups;
    long long nworkers;
    amldist__u64map_t by_who, by_agent, by_order;
    int phase, round, restarts, seq;
    long long now, started, min_at, over_at;
    /* When the forming round's last periodic line went out (ms). */
    long long said_at;
    /* The job ended before it formed, a node having failed first (its
     * reason in every later refusal); when that node is the host's own,
     * the host stays to tell the nodes still to come (told: the others
     * told so far). */
    int failed_early, host_stays, told;
    /* The round's stop: its first failure (failed), whether the job then
     * restarts, and whether that restart counts against max_restarts. */
    int failed, restart_wanted, counted, status;
    char failure[AMLDIST__RZ_FINISH_MAX];
    /* One text of each kind per step is all a step ever sends. */
    char stop_why[AMLDIST__RZ_TEXT_MAX + 1];
    char refusal[AMLDIST__RZ_TEXT_MAX + 1];
    char waiting[AMLDIST__RZ_TEXT_MAX + 1];
    uint64_t lost[AMLDIST__RZ_LOST_MAX];
    int nlost;
    amldist__rz_round_t rd;
    amldist__rz_action_t *acts;
    int nacts, cap;
    /* host_sm_watch.c: gathers, and the hang rule's verdict once a round
     * (hang_round), with the time the host ends the round itself if its
     * own node has not (hang_end, ms), and when the rule next decides. */
    struct amldist__rz_gather gathers[AMLDIST__RZ_GATHERS_MAX];
    /* The entries of gathers that ended in the last step, freed at the
     * next (host_sm_step.c). */
    struct amldist__rz_gentry *spent[AMLDIST__RZ_GATHERS_MAX];
    int nspent;
    uint32_t next_gather;
    int64_t now_ns, hang_next_ns;
    /* The rule's clock restarted (host ns): a node's views came again
     * after a gap (AMLDIST__RZ_VIEW_LATE_NS), and what the host could not
     * see of its ranks, nor of the ranks that waited for them, is not
     * time without progress.  Every live rank's start is taken as at
     * least this. */
    int64_t hang_since_ns;
    int hang_round;
    long long hang_end;
    /* The agent the host's own gather (a hang) and the marks go to: the
     * host's own (cfg.self_agent), or the agent that decides now where
     * the decider moved (etcd: the log's self_agent stays the first's,
     * for the replay's node order). */
    uint64_t plane_agent;
    /* The sums' tree (hsum_leaves leaves; 1 the root), whole (hsum_ok)
     * as of round hsum_round and the clock's restart hsum_since but for
     * the members listed in hdirty (their places in m). */
    struct amldist__rz_hsum *hsum;
    int hsum_leaves, hsum_ok, hsum_round;
    int64_t hsum_since;
    int *hdirty;
    int nhdirty;
};

static inline int amldist__rz_in_job(const struct amldist__rz_member *m)
{
    return m->state != AMLDIST__RZ_M_GONE;
}

/* host_sm.c: the member of connection `who`, of agent id `agent`, of node
 * rank `order` in the job (GONE excepted), or NULL; member m admitted at
 * the end of the array (its place, or NULL: no room), m moved to state `state`
 * (GONE: out of the job, of the counts and of the index); the array
 * compacted (all: whatever the number GONE), the index rebuilt. */
struct amldist__rz_member *amldist__rz_sm_by_who(const amldist__rz_sm_t *sm,
                                                 const void *who);
struct amldist__rz_member *amldist__rz_sm_by_agent(const amldist__rz_sm_t *sm,
                                                   uint64_t agent);
struct amldist__rz_member *amldist__rz_sm_by_order(const amldist__rz_sm_t *sm,
                                                   int order);
struct amldist__rz_member *
amldist__rz_sm_add(amldist__rz_sm_t *sm, const struct amldist__rz_member *m);
void amldist__rz_sm_set_state(amldist__rz_sm_t *sm,
                              struct amldist__rz_member *m, int state);
void amldist__rz_sm_compact(amldist__rz_sm_t *sm, int all);
/* host_sm.c: member m's sums to redo before the rule reads the tree; the
 * tree's leaf i set (the nodes above it not yet), the nodes above leaf i
 * (i < 0: every node) made the sums of theirs. */
void amldist__rz_sm_hang_touch(amldist__rz_sm_t *sm,
                               struct amldist__rz_member *m);
void amldist__rz_sm_hsum_leaf(amldist__rz_sm_t *sm, int i,
                              const struct amldist__rz_hsum *s);
void amldist__rz_sm_hsum_fix(amldist__rz_sm_t *sm, int i);
extern const struct amldist__rz_hsum amldist__rz_hsum_none;

/* host_sm.c: queue an action (texts stay valid until the next step). */
void amldist__rz_sm_emit(amldist__rz_sm_t *sm, int type, void *who,
                         uint32_t value, const char *text);
int amldist__rz_sm_count_in_job(const amldist__rz_sm_t *sm);
/* host_sm.c: refuse `who` (a member, or a joiner when m is NULL): it
 * leaves. */
void amldist__rz_sm_refuse(amldist__rz_sm_t *sm, void *who,
                           struct amldist__rz_member *m, uint32_t reason,
                           const char *fmt, ...) AMLDIST__PRINTF(5, 6);
/* host_sm.c: tell every running node to stop, why in fmt. */
void amldist__rz_sm_stop_all(amldist__rz_sm_t *sm, const char *fmt, ...)
    AMLDIST__PRINTF(2, 3);
/* host_sm_join.c: a JOIN from a connection that is no member yet. */
void amldist__rz_sm_on_join(amldist__rz_sm_t *sm,
                            const amldist__rz_event_t *ev);
/* host_sm_form.c: close the round: every JOINED or DONE member gets a node
 * rank; the WAIT lines of the last call (who: NULL, to every member); time
 * passing while the round forms. */
void amldist__rz_sm_form_round(amldist__rz_sm_t *sm);
void amldist__rz_sm_say_waiting(amldist__rz_sm_t *sm, void *who);
void amldist__rz_sm_on_tick(amldist__rz_sm_t *sm);

/* host_sm.c: the round's first failure (text: what it says), every node
 * told to stop; or only the failure kept: its status, whether it is final
 * (no restart) and whether a restart after it counts. */
void amldist__rz_sm_first_failure(amldist__rz_sm_t *sm, int status,
                                  int final, int counts, const char *text);
void amldist__rz_sm_round_fails(amldist__rz_sm_t *sm, int status,
                                const char *text);
/* host_sm_watch.c: a VIEW, an ASK, an ANSWER, MARKS from member m; time
 * passing (gathers' deadlines, the hang rule); m leaves (its gathers'
 * entries, its own gathers); its memory. */
void amldist__rz_sm_on_view(amldist__rz_sm_t *sm, struct amldist__rz_member *m,
                            const amldist__rz_event_t *ev);
void amldist__rz_sm_on_ask(amldist__rz_sm_t *sm, struct amldist__rz_member *m,
                           const amldist__rz_event_t *ev);
void amldist__rz_sm_on_answer(amldist__rz_sm_t *sm,
                              struct amldist__rz_member *m,
                              const amldist__rz_event_t *ev);
void amldist__rz_sm_on_marks(amldist__rz_sm_t *sm, struct amldist__rz_member *m,
                             const amldist__rz_event_t *ev);
void amldist__rz_sm_watch_tick(amldist__rz_sm_t *sm);
void amldist__rz_sm_watch_lost(amldist__rz_sm_t *sm, void *who);
long long amldist__rz_sm_watch_deadline(const amldist__rz_sm_t *sm);

#endif /* AMLDIST_RDZV_HOST_SM_STATE_H */
