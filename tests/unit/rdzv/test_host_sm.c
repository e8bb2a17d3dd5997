/*
 * The rendezvous host's state machine (lib/rdzv/host_sm.c) driven by
 * events alone: no socket, no thread, no clock.  Members are the entries
 * of `mb[]`; agent i has agent id 100 + i, address 10.0.0.i and offers
 * master port 30000 + i; agent 0 is the host's own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/host_sm.h"
#include "test.h"

#define NM 16
#define SELF 100u
#define TOKEN 0x70c3e11ull
#define RUN_ID 0x5eedull

static int mb[NM];
static char addrs[NM][32];
static amldist__rz_sm_t *sm;
static const amldist__rz_action_t *act;
static int nact;
static long long now = 1000;

static amldist__rz_cfg_t config(int min, int max, int restarts)
{
    amldist__rz_cfg_t c;
    memset(&c, 0, sizeof c);
    c.token = TOKEN;
    c.run = RUN_ID;
    c.self_agent = SELF;
    c.min = min;
    c.max = max;
    c.max_restarts = restarts;
    c.join_timeout_ms = 60000;
    c.last_call_ms = 1000;
    c.keepalive_ms = 1000;
    c.keepalive_misses = 5;
    c.dead_ms = 5000;
    snprintf(c.token_source, sizeof c.token_source, "the options");
    return c;
}

/* What each node last sent: its amlrun sends it again (made anew, the
 * same) while the test's clock runs (pass()), unless it stopped. */
static struct {
    amldist__rz_view_t v[8];
    int n, round, sending;
    int moving; /* its ranks call the API at each view (pass()) */
    uint32_t timeout_ms;
} sent[NM];

static void start_cfg(const amldist__rz_cfg_t *c)
{
    memset(sent, 0, sizeof sent);
    now = 1000;
    sm = amldist__rz_sm_new(c, now);
    CHECK(sm != NULL);
    for (int i = 0; i < NM; i++)
        snprintf(addrs[i], sizeof addrs[i], "10.0.0.%d", i);
}

static void start(int min, int max, int restarts)
{
    amldist__rz_cfg_t c = config(min, max, restarts);
    start_cfg(&c);
}

/* QUERY actions of any step since the test set it 0, the time of the
 * first and the first stalled rank it names. */
static int queries;
static long long query_at;
static uint32_t query_rank;

static void step(amldist__rz_event_t ev)
{
    ev.now = now;
    ev.now_ns = now * 1000000LL; /* the host's clock, views' times */
    nact = amldist__rz_sm_step(sm, &ev, &act);
    for (int k = 0; k < nact; k++)
        if (act[k].type == AMLDIST__RZ_A_QUERY && queries++ == 0) {
            query_at = now;
            query_rank = act[k].len >= 12 ? amldist__net_get_u32(act[k].data + 8)
                                          : AMLDIST__RZ_NONE;
        }
}

static amldist__rz_join_t join_frame(int i, int order, int nproc)
{
    amldist__rz_join_t j = {
        .token = TOKEN, .agent = SELF + (uint64_t)i, .run = RUN_ID, .round = 0,
        .nproc = (uint32_t)nproc,
        .order = order < 0 ? AMLDIST__RZ_NONE : (uint32_t)order,
        .min = 0, .max = 0, .max_restarts = 0,
        .port = 30000 + (uint32_t)i, .keepalive_ms = 1000,
        .keepalive_misses = 5, .last_call_ms = 1000,
        .join_timeout_ms = 60000};
    return j;
}

/* JOIN as the options of start() say (min, max and restarts copied). */
static void join_j(int i, amldist__rz_join_t j)
{
    step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_JOIN, .who = &mb[i],
                               .join = j, .addr = addrs[i]});
}

static amldist__rz_join_t job_join(int i, int order, int nproc, int min,
                                   int max, int restarts)
{
    amldist__rz_join_t j = join_frame(i, order, nproc);
    j.min = (uint32_t)min;
    j.max = (uint32_t)max;
    j.max_restarts = (uint32_t)restarts;
    return j;
}

static int g_min, g_max, g_restarts; /* the job's, for join() */

static void job(int min, int max, int restarts)
{
    g_min = min;
    g_max = max;
    g_restarts = restarts;
    start(min, max, restarts);
}

static void join(int i, int order, int nproc)
{
    join_j(i, job_join(i, order, nproc, g_min, g_max, g_restarts));
}

static void tick(void) { step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_TICK}); }

static void fail(int i, int round, unsigned flags, int rank, int status,
                 const char *summary)
{
    step((amldist__rz_event_t){
        .type = AMLDIST__RZ_EV_FAIL, .who = &mb[i], .round = (uint32_t)round,
        .flags = flags, .rank = rank < 0 ? AMLDIST__RZ_NONE : (uint32_t)rank,
        .status = (uint32_t)status, .text = (const unsigned char *)summary,
        .text_len = strlen(summary)});
}

static void done(int i, int round, int status)
{
    step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_DONE, .who = &mb[i],
                               .round = (uint32_t)round,
                               .status = (uint32_t)status,
                               .port = 31000 + (uint32_t)i});
}

static void lost(int i, const char *why)
{
    step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_LOST, .who = &mb[i],
                               .why = why});
}

/* The last step's action of `type` for member i, or NULL. */
static const amldist__rz_action_t *action(int type, int i)
{
    for (int k = 0; k < nact; k++)
        if (act[k].type == type && act[k].who == &mb[i])
            return &act[k];
    return NULL;
}

static int count(int type)
{
    int n = 0;
    for (int k = 0; k < nact; k++)
        n += act[k].type == type;
    return n;
}

/* Member i was refused for `reason` with a text that has `words`. */
#define CHECK_REFUSED(i, reason, words)                                        \
    do {                                                                       \
        const amldist__rz_action_t *a_ = action(AMLDIST__RZ_A_REFUSE, i);      \
        CHECK(a_ != NULL);                                                     \
        if (a_) {                                                              \
            CHECK_INT_EQ(a_->value, reason);                                   \
            CHECK_STR_HAS(a_->text, words);                                    \
        }                                                                      \
        CHECK(action(AMLDIST__RZ_A_ADMIT, i) == NULL);                         \
    } while (0)

/* Node rank of member i in the last step's ASSIGNs (-1: none). */
static int node_of(int i)
{
    const amldist__rz_action_t *a = action(AMLDIST__RZ_A_ASSIGN, i);
    return a ? (int)a->value : -1;
}

/* Agents 0..n-1 join unordered with nproc 1 + i; the round forms (after
 * the last call, when n is below max). */
static void form(int n)
{
    for (int i = 0; i < n; i++) {
        join(i, -1, 1 + i);
        CHECK(action(AMLDIST__RZ_A_ADMIT, i) != NULL);
    }
    now += 1000;
    tick();
    CHECK_INT_EQ(count(AMLDIST__RZ_A_ASSIGN), n);
}

/* ---- forming ---- */

static void test_forms_when_max_joined(void)
{
    job(3, 3, 0);
    join(0, -1, 2);
    CHECK_INT_EQ(nact, 1);
    CHECK_INT_EQ(act[0].type, AMLDIST__RZ_A_ADMIT);
    join(1, -1, 2);
    tick();
    CHECK_INT_EQ(nact, 0);
    CHECK_INT_EQ(amldist__rz_sm_phase(sm), AMLDIST__RZ_P_FORMING);
    join(2, -1, 2);
    tick();
    CHECK_INT_EQ(count(AMLDIST__RZ_A_ASSIGN), 3);
    CHECK_INT_EQ(amldist__rz_sm_phase(sm), AMLDIST__RZ_P_RUNNING);
    const amldist__rz_round_t *rd = amldist__rz_sm_round(sm);
    CHECK_INT_EQ(rd->round, 0);
    CHECK_INT_EQ(rd->restarts, 0);
    CHECK_INT_EQ(rd->nnodes, 3);
    amldist__rz_sm_free(sm);
}

/* Issue 38: never a silent wait.  While the round forms, each waiting
 * member is told every AMLDIST__RZ_SAY_MS what is awaited; a node that
 * cannot start joins only to fail (its JOIN's round
 * AMLDIST__RZ_ROUND_FAILING), is never counted, and its FAIL ends the
 * forming job at once with its status and reason. */
static void test_forming_says_and_ends_on_early_failure(void)
{
    job(3, 3, 0);
    join(0, -1, 1);
    now += AMLDIST__RZ_SAY_MS - 1;
    tick();
    CHECK_INT_EQ(count(AMLDIST__RZ_A_WAIT), 0);
    now += 1;
    tick();
    CHECK_INT_EQ(count(AMLDIST__RZ_A_WAIT), 1);
    const amldist__rz_action_t *w = action(AMLDIST__RZ_A_WAIT, 0);
    CHECK(w && w->text && strstr(w->text, "waiting for 2 of 3 nodes"));
    join(1, -1, 1);
    amldist__rz_join_t jf = job_join(2, -1, 1, g_min, g_max, g_restarts);
    jf.round = AMLDIST__RZ_ROUND_FAILING;
    join_j(2, jf);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_ASSIGN), 0); /* not counted: no round */
    fail(2, 0, 0, -1, 127, "amlrun: ./typo: No such file or directory");
    CHECK_INT_EQ(amldist__rz_sm_phase(sm), AMLDIST__RZ_P_OVER);
    /* the two waiting are told (and the failing one, which then goes) */
    int told = 0;
    for (int j = 0; j < nact; j++)
        told += act[j].type == AMLDIST__RZ_A_FINISH &&
                (act[j].who == &mb[0] || act[j].who == &mb[1]);
    CHECK_INT_EQ(told, 2);
    const amldist__rz_action_t *f = action(AMLDIST__RZ_A_FINISH, 0);
    CHECK(f && f->value == 127 && f->text &&
          strstr(f->text, "could not start, exit status 127: ./typo"));
    /* a node that joins later is told alike: the status and the reason,
     * not a refusal without the status */
    join(3, -1, 1);
    CHECK(action(AMLDIST__RZ_A_REFUSE, 3) == NULL);
    f = action(AMLDIST__RZ_A_FINISH, 3);
    CHECK(f && f->value == 127 && f->text &&
          strstr(f->text, "could not start, exit status 127: ./typo"));
    amldist__rz_sm_free(sm);
}

static void test_forms_after_last_call(void)
{
    job(2, 4, 0);
    join(0, -1, 1);
    /* the next "waiting for" line comes before the join timeout */
    CHECK_INT_EQ(amldist__rz_sm_next_deadline(sm), 1000 + AMLDIST__RZ_SAY_MS);
    now = 1200;
    join(1, -1, 1);
    /* min reached at 1200: the last call ends 1000 ms later. */
    CHECK_INT_EQ(amldist__rz_sm_next_deadline(sm), 2200);
    now = 2199;
    tick();
    CHECK_INT_EQ(nact, 0);
    now = 2200;
    tick();
    CHECK_INT_EQ(count(AMLDIST__RZ_A_ASSIGN), 2);
    CHECK_INT_EQ(amldist__rz_sm_next_deadline(sm), -1);
    amldist__rz_sm_free(sm);
}

static void test_last_call_restarts_below_min(void)
{
    job(2, 4, 0);
    join(0, -1, 1);
    join(1, -1, 1);
    now = 1500;
    lost(1, "connection closed"); /* below min: the last call is off */
    CHECK_INT_EQ(nact, 0);
    join(2, -1, 1);
    CHECK_INT_EQ(amldist__rz_sm_next_deadline(sm), 2500);
    now = 2000;
    tick();
    CHECK_INT_EQ(nact, 0);
    now = 2500;
    tick();
    CHECK_INT_EQ(count(AMLDIST__RZ_A_ASSIGN), 2);
    CHECK_INT_EQ(node_of(2), 1);
    amldist__rz_sm_free(sm);
}

static void test_join_timeout(void)
{
    job(3, 3, 0);
    join(0, -1, 1);
    join(1, -1, 1);
    now = 1000 + 60000;
    tick();
    CHECK_INT_EQ(count(AMLDIST__RZ_A_REFUSE), 2);
    CHECK_REFUSED(0, AMLDIST__RZ_R_TIMEOUT, "only 2 of the 3 nodes needed "
                  "joined within 60 s");
    CHECK_REFUSED(1, AMLDIST__RZ_R_TIMEOUT, "joined within");
    CHECK_INT_EQ(amldist__rz_sm_phase(sm), AMLDIST__RZ_P_OVER);
    CHECK(amldist__rz_sm_drained(sm, now));
    join(2, -1, 1);
    CHECK_REFUSED(2, AMLDIST__RZ_R_OVER, "the job is over");
    amldist__rz_sm_free(sm);
}

/* ---- node order and numbering ---- */

static void test_order_by_arrival(void)
{
    job(4, 4, 0);
    /* The host's own agent (0) is node 0 wherever it arrives; the others
     * follow in the order they joined. */
    join(3, -1, 1);
    join(1, -1, 1);
    join(0, -1, 1);
    join(2, -1, 1);
    tick();
    CHECK_INT_EQ(node_of(0), 0);
    CHECK_INT_EQ(node_of(3), 1);
    CHECK_INT_EQ(node_of(1), 2);
    CHECK_INT_EQ(node_of(2), 3);
    amldist__rz_sm_free(sm);
}

static void test_order_by_given_rank(void)
{
    job(3, 3, 0);
    join(0, 2, 4);
    join(1, 0, 2);
    join(2, 1, 8);
    tick();
    CHECK_INT_EQ(node_of(0), 2);
    CHECK_INT_EQ(node_of(1), 0);
    CHECK_INT_EQ(node_of(2), 1);
    const amldist__rz_round_t *rd = amldist__rz_sm_round(sm);
    CHECK_INT_EQ(rd->nproc[0], 2);
    CHECK_INT_EQ(rd->nproc[1], 8);
    CHECK_INT_EQ(rd->nproc[2], 4);
    /* Node 0's address and offered port are the round's master. */
    CHECK_STR_EQ(rd->master_addr, "10.0.0.1");
    CHECK_INT_EQ(rd->master_port, 30001);
    amldist__rz_sm_free(sm);
}

static void test_numbering_and_given_master(void)
{
    amldist__rz_cfg_t c = config(2, 2, 0);
    c.master_port = 29400;
    snprintf(c.master_addr, sizeof c.master_addr, "head.example");
    g_min = g_max = 2;
    g_restarts = 0;
    start_cfg(&c);
    join(0, -1, 3);
    join(1, -1, 5);
    tick();
    const amldist__rz_round_t *rd = amldist__rz_sm_round(sm);
    CHECK_STR_EQ(rd->master_addr, "head.example");
    CHECK_INT_EQ(rd->master_port, 29400);
    CHECK_INT_EQ(rd->nnodes, 2);
    CHECK_INT_EQ(rd->nproc[0], 3);
    CHECK_INT_EQ(rd->nproc[1], 5);
    /* The round encodes and decodes as an agent reads it. */
    unsigned char buf[AMLDIST__RZ_ASSIGN_MAX];
    amldist__rz_round_t copy = *rd, back = {0};
    copy.node = 1;
    size_t len = amldist__rz_put_assign(&copy, buf);
    const char *why = NULL;
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), 0);
    CHECK_INT_EQ(back.node, 1);
    CHECK_INT_EQ(back.nnodes, 2);
    CHECK_INT_EQ(back.nproc[1], 5);
    CHECK_STR_EQ(back.master_addr, "head.example");
    free(back.nproc);
    amldist__rz_sm_free(sm);
}

static void test_no_port_offered(void)
{
    job(1, 1, 0);
    amldist__rz_join_t j = job_join(0, -1, 1, 1, 1, 0);
    j.port = 0;
    join_j(0, j);
    tick();
    CHECK_INT_EQ(amldist__rz_sm_round(sm)->master_port, 29500);
    amldist__rz_sm_free(sm);
}

/* An ASSIGN's nodes in runs of nodes alike when that is shorter (issue
 * 40): a uniform job's is one run, of the same size at 4,096 nodes as at
 * 2; a job of two kinds of nodes two runs; every node decodes as it was;
 * and runs that do not add up to the nodes are no ASSIGN an agent takes. */
static void test_assign_runs(void)
{
    enum { N = 4096 };
    static unsigned char buf[AMLDIST__RZ_ASSIGN_MAX];
    amldist__rz_round_t rd = {.round = 1, .node = N - 1, .nnodes = N,
                              .master_port = 29500}, back = {0};
    snprintf(rd.master_addr, sizeof rd.master_addr, "10.0.0.1");
    CHECK_INT_EQ(amldist__rz_round_alloc(&rd, N), 0);
    for (int i = 0; i < N; i++) {
        rd.nproc[i] = 8;
        rd.machine_ranks[i] = 8;
    }
    const char *why = NULL;
    size_t len = amldist__rz_put_assign(&rd, buf);
    CHECK_INT_EQ((int)len, AMLDIST__RZ_ASSIGN_HEAD + 8 + AMLDIST__RZ_ASSIGN_RUN);
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), 0);
    CHECK_INT_EQ(back.nnodes, N);
    CHECK_INT_EQ(back.node, N - 1);
    CHECK_INT_EQ(back.nproc[0], 8);
    CHECK_INT_EQ(back.nproc[N - 1], 8);
    CHECK_INT_EQ(back.machine_ranks[N / 2], 8);
    /* Two kinds: the first 100 nodes of 4 workers, then 8. */
    for (int i = 0; i < 100; i++)
        rd.nproc[i] = rd.machine_ranks[i] = 4;
    len = amldist__rz_put_assign(&rd, buf);
    CHECK_INT_EQ((int)len, AMLDIST__RZ_ASSIGN_HEAD + 8 + 2 * AMLDIST__RZ_ASSIGN_RUN);
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), 0);
    CHECK_INT_EQ(back.nproc[99], 4);
    CHECK_INT_EQ(back.nproc[100], 8);
    CHECK_INT_EQ(back.machine_ranks[99], 4);
    /* Runs one short of the nodes, one beyond them, of none. */
    unsigned char *run2 = buf + AMLDIST__RZ_ASSIGN_HEAD + 8 + AMLDIST__RZ_ASSIGN_RUN;
    amldist__net_put_u32(run2, N - 101);
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), -1);
    CHECK_STR_HAS(why, "run of nodes");
    amldist__net_put_u32(run2, N - 99);
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), -1);
    amldist__net_put_u32(run2 - AMLDIST__RZ_ASSIGN_RUN, 0);
    amldist__net_put_u32(run2, N - 100);
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), -1);
    /* The first run all the nodes: the second is not read, and refused. */
    amldist__net_put_u32(run2 - AMLDIST__RZ_ASSIGN_RUN, N);
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), -1);
    /* Every node different: the list, 12 bytes a node, as before. */
    for (int i = 0; i < N; i++)
        rd.nproc[i] = rd.machine_ranks[i] = 1 + i % 2;
    len = amldist__rz_put_assign(&rd, buf);
    CHECK_INT_EQ((int)len, AMLDIST__RZ_ASSIGN_HEAD + 8 + AMLDIST__RZ_ASSIGN_NODE * N);
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), 0);
    CHECK_INT_EQ(back.nproc[N - 1], 2);
    free(back.nproc);
    free(rd.nproc);
}

/* Agent i joins on machine `machine` (0: none) with nproc workers and
 * local address `local` (NULL: none). */
static void join_on(int i, uint64_t machine, int nproc, const char *local)
{
    amldist__rz_join_t j = job_join(i, -1, nproc, g_min, g_max, g_restarts);
    j.machine = machine;
    if (local)
        snprintf(j.local_addr, sizeof j.local_addr, "%s", local);
    join_j(i, j);
}

/* Nodes of one machine split its GPUs in node order, as one launcher's
 * local ranks would; a node of another machine, or of none, has its
 * machine alone.  The shares travel in ASSIGN. */
static void test_gpu_shares_by_machine(void)
{
    job(5, 5, 0);
    join_on(0, 7, 2, NULL);
    join_on(1, 7, 3, NULL);
    join_on(2, 9, 2, NULL);
    join_on(3, 0, 1, NULL);
    join_on(4, 7, 1, NULL);
    tick();
    CHECK_INT_EQ(count(AMLDIST__RZ_A_ASSIGN), 5);
    const amldist__rz_round_t *rd = amldist__rz_sm_round(sm);
    int first[5] = {0, 2, 0, 0, 5}, all[5] = {6, 6, 2, 1, 6};
    for (int i = 0; i < 5; i++) {
        int node = node_of(i);
        CHECK_INT_EQ(rd->gpu_first[node], first[i]);
        CHECK_INT_EQ(rd->machine_ranks[node], all[i]);
    }
    unsigned char buf[AMLDIST__RZ_ASSIGN_MAX];
    amldist__rz_round_t copy = *rd, back = {0};
    copy.node = node_of(4);
    size_t len = amldist__rz_put_assign(&copy, buf);
    const char *why = NULL;
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), 0);
    CHECK_INT_EQ(back.gpu_first[back.node], 5);
    CHECK_INT_EQ(back.machine_ranks[back.node], 6);
    CHECK_INT_EQ(back.last_call_ms, 1000);
    CHECK_INT_EQ(back.join_timeout_ms, 60000);
    /* A share beyond its machine's ranks, or ranks beyond the job's, is
     * no ASSIGN an agent takes. */
    unsigned char *node4 = buf + AMLDIST__RZ_ASSIGN_HEAD +
                           strlen(rd->master_addr) +
                           AMLDIST__RZ_ASSIGN_NODE * (size_t)back.node;
    amldist__net_put_u32(node4 + 4, 6);
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), -1);
    CHECK_STR_HAS(why, "GPU share");
    amldist__net_put_u32(node4 + 4, 0);
    amldist__net_put_u32(node4 + 8, 100);
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), -1);
    free(back.nproc);
    amldist__rz_sm_free(sm);
}

/* MASTER_ADDR: node 0's --local-addr, unless the host's options give one;
 * the flags say which won. */
static void test_local_addr_is_master(void)
{
    job(2, 2, 0);
    join_on(0, 0, 1, "node0.example");
    join_on(1, 0, 1, "node1.example");
    tick();
    const amldist__rz_round_t *rd = amldist__rz_sm_round(sm);
    CHECK_STR_EQ(rd->master_addr, "node0.example");
    CHECK_INT_EQ(rd->flags, AMLDIST__RZ_F_ADDR_LOCAL);
    amldist__rz_sm_free(sm);
    job(2, 2, 0);
    join_on(0, 0, 1, NULL);
    join_on(1, 0, 1, "node1.example");
    tick();
    CHECK_STR_EQ(amldist__rz_sm_round(sm)->master_addr, "10.0.0.0");
    CHECK_INT_EQ(amldist__rz_sm_round(sm)->flags, 0);
    amldist__rz_sm_free(sm);
    amldist__rz_cfg_t c = config(2, 2, 0);
    snprintf(c.master_addr, sizeof c.master_addr, "head.example");
    c.master_port = 29400;
    start_cfg(&c);
    join_on(0, 0, 1, "node0.example");
    join_on(1, 0, 1, NULL);
    tick();
    CHECK_STR_EQ(amldist__rz_sm_round(sm)->master_addr, "head.example");
    CHECK_INT_EQ(amldist__rz_sm_round(sm)->flags,
                 AMLDIST__RZ_F_ADDR_OPTION | AMLDIST__RZ_F_PORT_OPTION);
    amldist__rz_sm_free(sm);
}

/* Agent i joins from `addr`, having reached the host at `reached` (NULL:
 * not known), with local address `local` (NULL: none). */
static void join_from(int i, const char *addr, const char *reached,
                      const char *local)
{
    amldist__rz_join_t j = job_join(i, -1, 1, g_min, g_max, g_restarts);
    if (local)
        snprintf(j.local_addr, sizeof j.local_addr, "%s", local);
    snprintf(addrs[i], sizeof addrs[i], "%s", addr);
    step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_JOIN, .who = &mb[i],
                               .join = j, .addr = addrs[i],
                               .local = reached});
}

/* Issue 38: node 0's agent on the host's machine came over loopback
 * (Debian's "127.0.1.1 <hostname>"): the other nodes' workers get the
 * host's address as they reached it, never 127.0.0.1; every node on
 * loopback keeps loopback; the options still win. */
static void test_master_never_loopback_for_remote_nodes(void)
{
    job(3, 3, 0);
    join_from(0, "127.0.0.1", "127.0.1.1", NULL);
    join_from(1, "10.231.0.11", "10.231.0.10", NULL);
    join_from(2, "10.231.0.12", "10.231.0.10", NULL);
    tick();
    const amldist__rz_round_t *rd = amldist__rz_sm_round(sm);
    CHECK_INT_EQ(node_of(0), 0);
    CHECK_STR_EQ(rd->master_addr, "10.231.0.10");
    CHECK_INT_EQ(rd->flags, AMLDIST__RZ_F_ADDR_REACHED);
    CHECK_STR_HAS(amldist__rz_addr_source(rd->flags), "reached");
    amldist__rz_sm_free(sm);
    /* The first node not on loopback decides; one of the host's machine
     * (::1) and one that never said how it came are passed over. */
    job(4, 4, 0);
    join_from(0, "::1", "::1", NULL);
    join_from(1, "::1", "::1", NULL);
    join_from(2, "10.0.0.2", NULL, NULL);
    join_from(3, "fd00::3", "fd00::10", NULL);
    tick();
    CHECK_STR_EQ(amldist__rz_sm_round(sm)->master_addr, "fd00::10");
    amldist__rz_sm_free(sm);
    /* Every node on one machine: loopback it is. */
    job(2, 2, 0);
    join_from(0, "127.0.0.1", "127.0.0.1", NULL);
    join_from(1, "127.0.0.1", "127.0.0.1", NULL);
    tick();
    CHECK_STR_EQ(amldist__rz_sm_round(sm)->master_addr, "127.0.0.1");
    CHECK_INT_EQ(amldist__rz_sm_round(sm)->flags, 0);
    amldist__rz_sm_free(sm);
    /* Node 0 (by --node-rank) not on the host's machine, whose own agent
     * came over loopback: node 0's address, as before. */
    job(2, 2, 0);
    snprintf(addrs[0], sizeof addrs[0], "127.0.0.1");
    step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_JOIN, .who = &mb[0],
                               .join = job_join(0, 1, 1, 2, 2, 0),
                               .addr = addrs[0], .local = "127.0.1.1"});
    step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_JOIN, .who = &mb[1],
                               .join = job_join(1, 0, 1, 2, 2, 0),
                               .addr = addrs[1], .local = "10.0.0.0"});
    tick();
    CHECK_INT_EQ(node_of(1), 0);
    CHECK_STR_EQ(amldist__rz_sm_round(sm)->master_addr, "10.0.0.1");
    CHECK_INT_EQ(amldist__rz_sm_round(sm)->flags, 0);
    amldist__rz_sm_free(sm);
    /* --local-addr of node 0 and the host's --master-addr still win,
     * loopback or not (the agents check those: below). */
    job(2, 2, 0);
    join_from(0, "127.0.0.1", "127.0.1.1", "127.0.0.1");
    join_from(1, "10.231.0.11", "10.231.0.10", NULL);
    tick();
    CHECK_STR_EQ(amldist__rz_sm_round(sm)->master_addr, "127.0.0.1");
    CHECK_INT_EQ(amldist__rz_sm_round(sm)->flags, AMLDIST__RZ_F_ADDR_LOCAL);
    amldist__rz_sm_free(sm);
    amldist__rz_cfg_t c = config(2, 2, 0);
    snprintf(c.master_addr, sizeof c.master_addr, "localhost");
    start_cfg(&c);
    join_from(0, "127.0.0.1", "127.0.1.1", NULL);
    join_from(1, "10.231.0.11", "10.231.0.10", NULL);
    tick();
    CHECK_STR_EQ(amldist__rz_sm_round(sm)->master_addr, "localhost");
    CHECK_INT_EQ(amldist__rz_sm_round(sm)->flags, AMLDIST__RZ_F_ADDR_OPTION);
    /* The flag travels in ASSIGN; bits beyond the known ones do not. */
    unsigned char buf[AMLDIST__RZ_ASSIGN_MAX];
    amldist__rz_round_t copy = *amldist__rz_sm_round(sm), back = {0};
    copy.flags = AMLDIST__RZ_F_ADDR_REACHED;
    size_t len = amldist__rz_put_assign(&copy, buf);
    const char *why = NULL;
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), 0);
    CHECK_INT_EQ(back.flags, AMLDIST__RZ_F_ADDR_REACHED);
    amldist__net_put_u32(buf + 24, AMLDIST__RZ_F_ALL + 1);
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), -1);
    free(back.nproc);
    amldist__rz_sm_free(sm);
}

/* The agent's check of an ASSIGN (master.c): what is loopback, and a
 * loopback MASTER_ADDR refused on a node that came over the network,
 * with the address, where it came from and the fix named. */
static void test_master_check_on_assign(void)
{
    const char *loop[] = {"127.0.0.1", "127.0.1.1", "127.255.0.9", "::1",
                          "::ffff:127.0.0.1", "localhost", "LOCALHOST.",
                          "a.localhost"};
    const char *not_loop[] = {"10.231.0.10", "128.0.0.1", "::", "fe80::1",
                              "::ffff:10.0.0.1", "n0", "localhost.example",
                              "xlocalhost", "", "0.0.0.0"};
    for (size_t i = 0; i < sizeof loop / sizeof *loop; i++)
        CHECK(amldist__rz_addr_loopback(loop[i]));
    for (size_t i = 0; i < sizeof not_loop / sizeof *not_loop; i++)
        CHECK(!amldist__rz_addr_loopback(not_loop[i]));
    CHECK(!amldist__rz_addr_loopback(NULL));
    amldist__rz_round_t rd = {.node = 1, .nnodes = 2,
                              .flags = AMLDIST__RZ_F_ADDR_OPTION};
    snprintf(rd.master_addr, sizeof rd.master_addr, "127.0.0.1");
    char msg[600] = "";
    CHECK_INT_EQ(amldist__rz_master_unreachable(&rd, "10.231.0.10", msg,
                                                sizeof msg), 1);
    CHECK_STR_HAS(msg, "MASTER_ADDR=127.0.0.1");
    CHECK_STR_HAS(msg, "the rendezvous host's --master-addr");
    CHECK_STR_HAS(msg, "10.231.0.10");
    CHECK_STR_HAS(msg, "--local-addr");
    CHECK_STR_HAS(msg, "wait there for ever");
    /* Node 0, a node on the host's machine, an address not known, or a
     * master address that is not loopback: nothing to refuse. */
    CHECK_INT_EQ(amldist__rz_master_unreachable(&rd, "127.0.0.1", msg,
                                                sizeof msg), 0);
    CHECK_INT_EQ(amldist__rz_master_unreachable(&rd, "", msg, sizeof msg), 0);
    CHECK_INT_EQ(amldist__rz_master_unreachable(&rd, NULL, msg, sizeof msg),
                 0);
    rd.node = 0;
    CHECK_INT_EQ(amldist__rz_master_unreachable(&rd, "10.231.0.10", msg,
                                                sizeof msg), 0);
    rd.node = 1;
    snprintf(rd.master_addr, sizeof rd.master_addr, "n0");
    CHECK_INT_EQ(amldist__rz_master_unreachable(&rd, "10.231.0.10", msg,
                                                sizeof msg), 0);
}

/* Once min nodes are in and the last call runs, every member hears how
 * many are in and when the round forms, and a node that joins during it
 * hears it alone: one line for each agent; not before min, not at max. */
static void test_waiting_line(void)
{
    job(2, 4, 0);
    join(0, -1, 1);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_WAIT), 0);
    join(1, -1, 1);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_WAIT), 2);
    const amldist__rz_action_t *w = action(AMLDIST__RZ_A_WAIT, 0);
    CHECK(w != NULL);
    if (w) {
        CHECK_STR_HAS(w->text, "2 nodes of 2:4 in");
        CHECK_STR_HAS(w->text, "forms in 1 s");
        CHECK_STR_HAS(w->text, "if 2 more join");
    }
    now += 400;
    join(2, -1, 1);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_WAIT), 1);
    w = action(AMLDIST__RZ_A_WAIT, 2);
    CHECK(w != NULL);
    if (w)
        CHECK_STR_HAS(w->text, "3 nodes of 2:4 in; the round forms in 0.6 s");
    join(3, -1, 1);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_WAIT), 0);
    amldist__rz_sm_free(sm);
    job(1, 2, 0);
    join(0, -1, 1);
    w = action(AMLDIST__RZ_A_WAIT, 0);
    CHECK(w != NULL);
    if (w)
        CHECK_STR_HAS(w->text, "1 node of 1:2 in; the round forms in 1 s "
                               "(last_call_timeout), or at once if 1 more "
                               "joins");
    amldist__rz_sm_free(sm);
}

/* A node whose keepalive differs is refused at JOIN, naming both values:
 * each side would declare the other dead by its own. */
static void test_refuse_keepalive_mismatch(void)
{
    job(2, 2, 0);
    join(0, -1, 1);
    amldist__rz_join_t j = job_join(1, -1, 1, 2, 2, 0);
    j.keepalive_ms = 30000;
    join_j(1, j);
    CHECK_REFUSED(1, AMLDIST__RZ_R_OPTIONS,
                  "keep_alive_interval=30,keep_alive_max_attempt=5 differ "
                  "from the job's keep_alive_interval=1,"
                  "keep_alive_max_attempt=5");
    j = job_join(2, -1, 1, 2, 2, 0);
    j.keepalive_misses = 3;
    join_j(2, j);
    CHECK_REFUSED(2, AMLDIST__RZ_R_OPTIONS, "keep_alive_max_attempt=3 differ");
    /* Other timeouts differ without a refusal: the host's apply. */
    j = job_join(3, -1, 1, 2, 2, 0);
    j.last_call_ms = 5;
    j.join_timeout_ms = 7;
    join_j(3, j);
    CHECK(action(AMLDIST__RZ_A_ADMIT, 3) != NULL);
    amldist__rz_sm_free(sm);
}

/* ---- refusals ---- */

static void test_refusals(void)
{
    job(2, 3, 1);
    join(0, -1, 1);
    amldist__rz_join_t j = job_join(1, -1, 1, 2, 3, 1);
    j.token = 1;
    join_j(1, j);
    CHECK_REFUSED(1, AMLDIST__RZ_R_TOKEN, "another job's token (this job's "
                  "comes from the options)");
    j = job_join(1, -1, 1, 2, 3, 1);
    j.run = 7;
    join_j(1, j);
    CHECK_REFUSED(1, AMLDIST__RZ_R_RUN, "another run id");
    join_j(1, job_join(1, -1, 1, 1, 3, 1));
    CHECK_REFUSED(1, AMLDIST__RZ_R_OPTIONS, "--nnodes 1:3 and --max-restarts "
                  "1 differ from the job's 2:3 and 1");
    join_j(1, job_join(1, -1, 1, 2, 4, 1));
    CHECK_REFUSED(1, AMLDIST__RZ_R_OPTIONS, "differ");
    join_j(1, job_join(1, -1, 1, 2, 3, 0));
    CHECK_REFUSED(1, AMLDIST__RZ_R_OPTIONS, "--max-restarts 0");
    join_j(1, job_join(1, -1, 0, 2, 3, 1));
    CHECK_REFUSED(1, AMLDIST__RZ_R_PROTO, "worker count 0");
    j = job_join(1, -1, 1, 2, 3, 1);
    j.round = 2;
    join_j(1, j);
    CHECK_REFUSED(1, AMLDIST__RZ_R_STALE, "asks for round 2");
    /* Agent 0's id again, from another connection: a replay. */
    j = job_join(1, -1, 1, 2, 3, 1);
    j.agent = SELF;
    join_j(1, j);
    CHECK_REFUSED(1, AMLDIST__RZ_R_STALE, "a replayed JOIN");
    join(1, 0, 1);
    CHECK_REFUSED(1, AMLDIST__RZ_R_ORDER, "this node's rank comes from a "
                  "launcher");
    join(1, -1, 1);
    CHECK(action(AMLDIST__RZ_A_ADMIT, 1) != NULL);
    amldist__rz_sm_free(sm);
}

static void test_refuse_rank_taken_and_mixed(void)
{
    job(3, 3, 0);
    join(0, 1, 1);
    join(1, 1, 1);
    CHECK_REFUSED(1, AMLDIST__RZ_R_ORDER, "node rank 1 is already "
                  "10.0.0.0's");
    join(2, -1, 1);
    CHECK_REFUSED(2, AMLDIST__RZ_R_ORDER, "the other nodes' ranks come from "
                  "a launcher");
    join(1, 0, 1);
    CHECK(action(AMLDIST__RZ_A_ADMIT, 1) != NULL);
    amldist__rz_sm_free(sm);
}

static void test_refuse_full_and_fixed_running(void)
{
    job(2, 2, 0);
    join(0, -1, 1);
    join(1, -1, 1);
    join(2, -1, 1);
    CHECK_REFUSED(2, AMLDIST__RZ_R_FULL, "the job has its 2 nodes (round 0)");
    tick();
    /* A fixed-size job takes nobody once it runs, even with room. */
    lost(1, "connection closed");
    join(3, -1, 1);
    CHECK_REFUSED(3, AMLDIST__RZ_R_FULL, "the job has its 2 nodes");
    amldist__rz_sm_free(sm);
}

static void test_refuse_lost_agent(void)
{
    job(2, 3, 0);
    form(3);
    lost(2, "no heartbeat for 5.0 s");
    /* Agent 2 comes back on a new connection (mb[5] stands for it). */
    amldist__rz_join_t j = job_join(5, -1, 1, 2, 3, 0);
    j.agent = SELF + 2;
    step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_JOIN, .who = &mb[5],
                               .join = j, .addr = addrs[2]});
    CHECK_REFUSED(5, AMLDIST__RZ_R_STALE, "this job declared it lost");
    amldist__rz_sm_free(sm);
}

/* Every agent numbers the job's workers in an int: a JOIN that would make
 * them more is refused, and the largest job admitted decodes. */
static void test_refuse_too_many_workers(void)
{
    enum { N = 2048, PER = 1 << 20 };
    static int many[N];
    job(1, 4096, 0);
    for (int i = 0; i < N; i++) {
        amldist__rz_join_t j = job_join(0, -1, PER, 1, 4096, 0);
        j.agent = SELF + 1000 + (uint64_t)i;
        step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_JOIN,
                                   .who = &many[i], .join = j,
                                   .addr = "10.1.0.1"});
        if (i < N - 1)
            CHECK_INT_EQ(act[0].type, AMLDIST__RZ_A_ADMIT);
    }
    CHECK_INT_EQ(nact, 1);
    CHECK_INT_EQ(act[0].type, AMLDIST__RZ_A_REFUSE);
    CHECK_INT_EQ(act[0].value, AMLDIST__RZ_R_FULL);
    CHECK_STR_HAS(act[0].text, "1048576 workers would make the job's "
                  "2147483648, more than the 2147483647 that its agents can "
                  "number");
    now += 1000;
    tick();
    CHECK_INT_EQ(count(AMLDIST__RZ_A_ASSIGN), N - 1);
    static unsigned char buf[AMLDIST__RZ_ASSIGN_MAX];
    size_t len = amldist__rz_put_assign(amldist__rz_sm_round(sm), buf);
    amldist__rz_round_t back = {0};
    const char *why = "";
    CHECK_INT_EQ(amldist__rz_get_assign(buf, (uint32_t)len, &back, &why), 0);
    CHECK_STR_EQ(why, "");
    CHECK_INT_EQ(back.nnodes, N - 1);
    free(back.nproc);
    amldist__rz_sm_free(sm);
}

/* ---- failures, stops and the end ---- */

static void test_success_finishes(void)
{
    job(2, 2, 0);
    form(2);
    done(1, 0, 0);
    CHECK_INT_EQ(nact, 0);
    done(0, 0, 0);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_FINISH), 2);
    CHECK_INT_EQ(action(AMLDIST__RZ_A_FINISH, 0)->value, 0);
    CHECK_STR_EQ(action(AMLDIST__RZ_A_FINISH, 1)->text, "");
    CHECK_INT_EQ(amldist__rz_sm_phase(sm), AMLDIST__RZ_P_OVER);
    /* The host waits for agent 1 to hear the end, not for itself. */
    CHECK(!amldist__rz_sm_drained(sm, now));
    lost(1, "connection closed");
    CHECK(amldist__rz_sm_drained(sm, now));
    amldist__rz_sm_free(sm);
}

static void test_drained_after_dead_time(void)
{
    job(2, 2, 0);
    form(2);
    done(0, 0, 0);
    done(1, 0, 0);
    CHECK(!amldist__rz_sm_drained(sm, now + 5000));
    CHECK(amldist__rz_sm_drained(sm, now + 5001));
    amldist__rz_sm_free(sm);
}

static void test_first_failure_stops_all(void)
{
    job(3, 3, 0);
    form(3);
    fail(2, 0, 0, 5, 1, "Traceback: boom");
    CHECK_INT_EQ(count(AMLDIST__RZ_A_STOP), 3);
    const amldist__rz_action_t *a = action(AMLDIST__RZ_A_STOP, 0);
    CHECK(a != NULL);
    if (a) {
        CHECK_INT_EQ(a->value, 0);
        CHECK_STR_EQ(a->text, "node 2 (10.0.0.2), a worker, failed with exit "
                              "status 1");
    }
    CHECK_INT_EQ(amldist__rz_sm_phase(sm), AMLDIST__RZ_P_STOPPING);
    /* A second failure is no news; a FAIL of an older round neither. */
    fail(1, 0, 0, 3, 9, "later");
    CHECK_INT_EQ(nact, 0);
    fail(1, 7, 0, 3, 9, "stale");
    CHECK_INT_EQ(nact, 0);
    done(0, 0, 143);
    done(1, 0, 143);
    CHECK_INT_EQ(nact, 0);
    done(2, 0, 1);
    /* No restart left: the job ends with the first failure's status. */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_FINISH), 3);
    a = action(AMLDIST__RZ_A_FINISH, 1);
    CHECK(a != NULL);
    if (a) {
        CHECK_INT_EQ(a->value, 1);
        CHECK_STR_EQ(a->text, "node 2 (10.0.0.2), rank 5: exit status 1\n"
                              "Traceback: boom");
    }
    amldist__rz_sm_free(sm);
}

static void test_stop_names_the_node_words(void)
{
    job(2, 2, 3);
    form(2);
    fail(1, 0, AMLDIST_RDZV_FINAL, -1, 130,
         "amlrun: host n1: SIGINT received: the job stops\nmore");
    CHECK_STR_EQ(action(AMLDIST__RZ_A_STOP, 0)->text,
                 "node 1 (10.0.0.1): host n1: SIGINT received: the job stops");
    done(0, 0, 130);
    done(1, 0, 130);
    /* FINAL: the job ends although restarts are left. */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_FINISH), 2);
    CHECK_INT_EQ(action(AMLDIST__RZ_A_FINISH, 0)->value, 130);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_ASSIGN), 0);
    amldist__rz_sm_free(sm);
}

static void test_final_while_stopping_ends(void)
{
    job(2, 2, 3);
    form(2);
    fail(0, 0, 0, 0, 1, "");
    /* Node 1, stopping, is itself told to stop by a signal. */
    fail(1, 0, AMLDIST_RDZV_FINAL, -1, 143, "amlrun: SIGTERM");
    done(0, 0, 1);
    done(1, 0, 143);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_FINISH), 2);
    CHECK_INT_EQ(action(AMLDIST__RZ_A_FINISH, 1)->value, 1);
    amldist__rz_sm_free(sm);
}

static void test_restart_then_finish(void)
{
    job(2, 2, 1);
    form(2);
    done(1, 0, 7); /* a failure told by DONE alone */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_STOP), 1);
    CHECK_STR_EQ(action(AMLDIST__RZ_A_STOP, 0)->text,
                 "node 1 (10.0.0.1): exit status 7");
    done(0, 0, 143);
    /* Every node done: the next round, one restart counted, same order. */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_ASSIGN), 2);
    CHECK_INT_EQ(node_of(0), 0);
    CHECK_INT_EQ(node_of(1), 1);
    const amldist__rz_round_t *rd = amldist__rz_sm_round(sm);
    CHECK_INT_EQ(rd->round, 1);
    CHECK_INT_EQ(rd->restarts, 1);
    /* Node 0's new port offer (its DONE's) is the new master port. */
    CHECK_INT_EQ(rd->master_port, 31000);
    fail(0, 1, 0, 2, 3, "again");
    done(0, 1, 3);
    done(1, 1, 143);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_FINISH), 2);
    CHECK_INT_EQ(action(AMLDIST__RZ_A_FINISH, 0)->value, 3);
    CHECK_STR_HAS(action(AMLDIST__RZ_A_FINISH, 0)->text, "rank 2: exit "
                  "status 3\nagain");
    amldist__rz_sm_free(sm);
}

static void test_lost_in_fixed_job(void)
{
    job(3, 3, 5);
    form(3);
    lost(1, "connection closed");
    CHECK_INT_EQ(count(AMLDIST__RZ_A_STOP), 2);
    CHECK_STR_EQ(action(AMLDIST__RZ_A_STOP, 2)->text,
                 "node 1 (10.0.0.1) was lost: connection closed");
    done(0, 0, 143);
    done(2, 0, 143);
    /* No restart can bring the node back: the job ends with 125. */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_FINISH), 2);
    CHECK_INT_EQ(action(AMLDIST__RZ_A_FINISH, 0)->value,
                 AMLDIST_RDZV_STATUS_LOST);
    CHECK_STR_EQ(action(AMLDIST__RZ_A_FINISH, 0)->text,
                 "node 1 (10.0.0.1) was lost: connection closed");
    amldist__rz_sm_free(sm);
}

static void test_lost_in_elastic_job(void)
{
    job(2, 3, 0);
    form(3);
    lost(1, "no heartbeat for 5.0 s");
    CHECK_INT_EQ(count(AMLDIST__RZ_A_STOP), 2);
    done(2, 0, 143);
    done(0, 0, 143);
    /* The job re-forms with the two left; no restart is counted. */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_ASSIGN), 2);
    CHECK_INT_EQ(node_of(0), 0);
    CHECK_INT_EQ(node_of(2), 1);
    const amldist__rz_round_t *rd = amldist__rz_sm_round(sm);
    CHECK_INT_EQ(rd->round, 1);
    CHECK_INT_EQ(rd->restarts, 0);
    CHECK_INT_EQ(rd->nnodes, 2);
    CHECK_INT_EQ(rd->nproc[1], 3);
    /* Below min: no round can form, the job is lost. */
    lost(2, "connection closed");
    CHECK_INT_EQ(count(AMLDIST__RZ_A_STOP), 1);
    done(0, 1, 143);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_FINISH), 1);
    CHECK_INT_EQ(action(AMLDIST__RZ_A_FINISH, 0)->value,
                 AMLDIST_RDZV_STATUS_LOST);
    amldist__rz_sm_free(sm);
}

static void test_lost_while_done(void)
{
    job(2, 2, 0);
    form(2);
    done(1, 0, 0);
    lost(1, "connection closed"); /* gone after its workers ended */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_STOP), 1);
    done(0, 0, 143);
    CHECK_INT_EQ(action(AMLDIST__RZ_A_FINISH, 0)->value,
                 AMLDIST_RDZV_STATUS_LOST);
    amldist__rz_sm_free(sm);
}

static void test_newcomer_joins_running_elastic_job(void)
{
    job(2, 4, 0);
    form(2);
    join(5, -1, 4);
    CHECK(action(AMLDIST__RZ_A_ADMIT, 5) != NULL);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_STOP), 2);
    CHECK_STR_EQ(action(AMLDIST__RZ_A_STOP, 1)->text,
                 "a node (10.0.0.5) joined: the job re-forms with 3 nodes");
    done(0, 0, 143);
    done(1, 0, 143);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_ASSIGN), 3);
    CHECK_INT_EQ(node_of(5), 2);
    const amldist__rz_round_t *rd = amldist__rz_sm_round(sm);
    CHECK_INT_EQ(rd->round, 1);
    CHECK_INT_EQ(rd->restarts, 0);
    CHECK_INT_EQ(rd->nproc[2], 4);
    amldist__rz_sm_free(sm);
}

static void test_unknown_members_ignored(void)
{
    job(1, 1, 0);
    form(1);
    done(9, 0, 1);
    CHECK_INT_EQ(nact, 0);
    fail(9, 0, 0, 0, 1, "x");
    CHECK_INT_EQ(nact, 0);
    lost(9, "closed");
    CHECK_INT_EQ(nact, 0);
    CHECK_INT_EQ(amldist__rz_sm_phase(sm), AMLDIST__RZ_P_RUNNING);
    amldist__rz_sm_free(sm);
}

/* ---- issue 20: views and the hang rule, gathers, marks ---- */

#define MS(t) ((int64_t)(t) * 1000000LL)

/* Member i's view: ranks first.. first+n-1, each with `flags`, last
 * progress at prog[k] ms and last line at line[k] ms (-1: never; the
 * rule itself is lib/progress/hang.c's, tested in test_hang). */
static void send_view(int i)
{
    step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_VIEW, .who = &mb[i],
                               .round = (uint32_t)sent[i].round,
                               .timeout_ms = sent[i].timeout_ms,
                               .views = sent[i].v,
                               .nviews = (size_t)sent[i].n});
}

static void view(int i, int round, uint32_t timeout_ms, int first, int n,
                 unsigned flags, const long long *prog, const long long *line)
{
    for (int k = 0; k < n; k++)
        sent[i].v[k] = (amldist__rz_view_t){
            .rank = (uint32_t)(first + k), .flags = flags,
            .progress_ns = prog[k] < 0 ? 0 : MS(prog[k]),
            .line_ns = line[k] < 0 ? 0 : MS(line[k])};
    sent[i].n = n;
    sent[i].round = round;
    sent[i].timeout_ms = timeout_ms;
    sent[i].sending = 1;
    send_view(i);
}

/* The clock runs ms on, every node that sends views sending its last one
 * again each 100 ms (as often as amlrun does at the least), strictly
 * before the end, where the host ticks: what the last step did is what
 * happened at the end. */
static void pass(long long ms)
{
    long long end = now + ms;
    for (long long t = now + 100; t < end; t += 100) {
        now = t;
        for (int i = 0; i < NM; i++) {
            if (!sent[i].sending)
                continue;
            for (int k = 0; k < sent[i].n && sent[i].moving; k++)
                sent[i].v[k].progress_ns = sent[i].v[k].line_ns = MS(now);
            send_view(i);
        }
    }
    now = end;
    tick();
}

static void answer(int i, uint32_t id, uint32_t flags, const char *chunk)
{
    step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_ANSWER, .who = &mb[i],
                               .id = id, .flags = flags,
                               .text = (const unsigned char *)chunk,
                               .text_len = strlen(chunk)});
}

static void ask(int i, uint32_t tag, uint32_t topic, uint32_t timeout_ms,
                const char *arg)
{
    step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_ASK, .who = &mb[i],
                               .tag = tag, .topic = topic,
                               .timeout_ms = timeout_ms,
                               .text = (const unsigned char *)arg,
                               .text_len = strlen(arg)});
}

/* The k-th action of the last step that is `type` (any member). */
static const amldist__rz_action_t *nth(int type, int k)
{
    for (int j = 0; j < nact; j++)
        if (act[j].type == type && k-- == 0)
            return &act[j];
    return NULL;
}

/* The host decides as of this long ago (views on their way). */
#define SLACK_MS(timeout_ms) (2 * AMLDIST__RZ_VIEW_EVERY_MS(timeout_ms) + 50)

static const long long API = AMLDIST_RDZV_VIEW_ALIVE | AMLDIST_RDZV_VIEW_API;
static const long long ALIVE = AMLDIST_RDZV_VIEW_ALIVE;

/* With the progress API: the rank of node 1 whose progress stopped is
 * named, though its node's other rank and node 0's progress; the host asks
 * every node for its stacks, for the host's own agent. */
static void test_hang_per_rank_names_the_stalled(void)
{
    job(2, 2, 0);
    form(2); /* node 0: 1 worker (rank 0), node 1: 2 (ranks 1, 2) */
    long long p0[] = {now}, l0[] = {now};
    view(0, 0, 3000, 0, 1, API, p0, l0);
    long long p1[] = {now, now}, l1[] = {now, now};
    view(1, 0, 3000, 1, 2, API, p1, l1);
    CHECK_INT_EQ(nact, 0);
    /* The rule decides again at the first rank's deadline (and the views'
     * slack). */
    CHECK(amldist__rz_sm_next_deadline(sm) == now + 3000 + SLACK_MS(3000));
    long long t0 = now;
    pass(2500);
    long long p0b[] = {now}, p1b[] = {now, t0}, l1b[] = {now, now};
    view(0, 0, 3000, 0, 1, API, p0b, l0);
    view(1, 0, 3000, 1, 2, API, p1b, l1b); /* rank 2 still prints */
    CHECK_INT_EQ(nact, 0);
    pass(500 + SLACK_MS(3000) - 1); /* not yet: rank 2's progress, a view on its way aside, is 1 ms
               short of 3 s old */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    pass(1);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 2);
    const amldist__rz_action_t *q = action(AMLDIST__RZ_A_QUERY, 1);
    CHECK(q != NULL);
    if (q) {
        CHECK_INT_EQ(q->topic, AMLDIST_RDZV_TOPIC_HANG);
        CHECK_INT_EQ(q->node, AMLDIST__RZ_NONE); /* the host asks */
        CHECK_INT_EQ(q->len, 12);
        CHECK_INT_EQ(amldist__net_get_u32(q->data), 3000);
        CHECK_INT_EQ(amldist__net_get_u32(q->data + 4), 1);
        CHECK_INT_EQ(amldist__net_get_u32(q->data + 8), 2);
    }
    /* Once a round. */
    pass(100);
    view(1, 0, 3000, 1, 2, API, p1b, l1b);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    uint32_t id = q ? q->value : 0;
    answer(1, id, 0, "node1-");
    const amldist__rz_action_t *r = action(AMLDIST__RZ_A_RESULT, 0);
    CHECK(r != NULL);
    if (r) {
        CHECK_INT_EQ(r->tag, 0);
        CHECK_INT_EQ(r->node, 1);
        CHECK_INT_EQ(r->flags, 0);
        CHECK_INT_EQ(r->len, 6);
    }
    answer(1, id, AMLDIST__RZ_G_LAST, "stacks");
    CHECK_INT_EQ(action(AMLDIST__RZ_A_RESULT, 0)->flags, AMLDIST__RZ_G_LAST);
    answer(0, id, AMLDIST__RZ_G_LAST, "node0");
    CHECK_INT_EQ(count(AMLDIST__RZ_A_RESULT), 2);
    r = nth(AMLDIST__RZ_A_RESULT, 1);
    CHECK(r && (r->flags & AMLDIST__RZ_G_END) && r->len == 12);
    /* The host's node fails the round: an ordinary failure, a restart if
     * any is left. */
    fail(0, 0, 0, -1, AMLDIST_RDZV_STATUS_HANG, "amlrun: the job hung");
    CHECK_INT_EQ(count(AMLDIST__RZ_A_STOP), 2);
    amldist__rz_sm_free(sm);
}

/* Without the API: hung only when no rank of any node showed progress
 * for the timeout; node 0's ranks alone waiting is no hang while node 1
 * prints. */
static void test_hang_whole_job_across_nodes(void)
{
    job(2, 2, 0);
    form(2);
    long long none[] = {-1, -1}, old[] = {now, now};
    view(0, 0, 2000, 0, 1, ALIVE, none, old);
    pass(1900);
    long long fresh[] = {now, now};
    view(1, 0, 2000, 1, 2, ALIVE, none, fresh);
    pass(1500); /* node 0 silent for 3.4 s, node 1 for 1.5 s */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    CHECK(amldist__rz_sm_next_deadline(sm) == now + 500 + SLACK_MS(2000));
    pass(501 + SLACK_MS(2000));
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 2);
    const amldist__rz_action_t *q = action(AMLDIST__RZ_A_QUERY, 0);
    CHECK(q && amldist__net_get_u32(q->data + 4) == 0); /* none stalled */
    amldist__rz_sm_free(sm);
}

/* Dead ranks, views of another round and no view at all decide nothing;
 * with several timeouts, the least. */
static void test_hang_ignores_dead_and_stale(void)
{
    job(2, 2, 0);
    form(2);
    long long none[] = {-1, -1}, old[] = {now - 10000, now - 10000};
    view(1, 0, 60000, 1, 2, 0, none, old); /* both dead */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    view(1, 5, 60000, 1, 2, ALIVE, none, old); /* another round's */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    view(1, 0, 60000, 1, 2, 0, none, old); /* its own again */
    long long fresh[] = {now};
    view(0, 0, 60000, 0, 1, ALIVE, none, fresh);
    pass(1500);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    long long mid[] = {now - 1200 - SLACK_MS(1000),
                       now - 1200 - SLACK_MS(1000)};
    view(1, 0, 1000, 1, 2, ALIVE, none, mid); /* 1 s: the least */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 2);
    amldist__rz_sm_free(sm);
}

/* Issue 37: a node whose views stop (its amlrun stopped 4 s, its workers
 * still calling the API) is late: its ranks are unseen, not stalled, and
 * the other node's ranks, which waited for them, are no hang either; when
 * its views come again the clock restarts; a real stall after that is
 * still found, a timeout later. */
static void test_hang_late_node_is_unseen(void)
{
    job(2, 2, 0);
    form(2);
    long long p[] = {now, now};
    view(0, 0, 3000, 0, 1, API, p, p);
    view(1, 0, 3000, 1, 1, API, p, p);
    sent[0].moving = sent[1].moving = 1;
    pass(1000);
    /* node 1's amlrun stops; node 0's rank waits for node 1's in a
     * collective: its progress stops too */
    sent[1].sending = 0;
    sent[0].moving = 0;
    pass(4000); /* past the timeout and the views' slack */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    /* its views come again (its workers went on meanwhile); node 0's rank
     * has not moved for 4 s, time the host could not see of node 1 */
    long long p1[] = {now};
    view(1, 0, 3000, 1, 1, API, p1, p1);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    pass(2900);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    /* node 0's rank truly stopped: named a timeout after the restart */
    pass(100 + SLACK_MS(3000));
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 2);
    const amldist__rz_action_t *q = action(AMLDIST__RZ_A_QUERY, 0);
    CHECK(q && amldist__net_get_u32(q->data + 4) == 1 &&
          amldist__net_get_u32(q->data + 8) == 0);
    amldist__rz_sm_free(sm);
}

/* A node late for good (its amlrun stopped, its heartbeats the judge of
 * its loss) holds every verdict off, though its last view and the other
 * node's both show ranks without progress for longer than the timeout;
 * a node whose views keep coming with old progress is judged. */
static void test_hang_late_node_holds_the_verdict(void)
{
    job(2, 2, 0);
    form(2);
    long long p[] = {now};
    view(0, 0, 2000, 0, 1, API, p, p);
    view(1, 0, 2000, 1, 1, API, p, p);
    sent[1].sending = 0;
    pass(6000);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    CHECK(amldist__rz_sm_next_deadline(sm) >= 0);
    /* node 1 sends again, its rank's progress as old: the clock restarts
     * at its return, and the hang is found a timeout later */
    sent[1].sending = 1;
    send_view(1);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    pass(2000 + SLACK_MS(2000) - 1);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    pass(1);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 2);
    amldist__rz_sm_free(sm);
}

/* The rule's sums are kept per node and updated as views come and nodes
 * change (host_sm_watch.c's tree, issue 40), not recomputed over every
 * node: a node whose workers are done, though its last view shows a rank
 * without progress for longer than the timeout, leaves the rule at once;
 * one whose view shows its ranks moving again no longer holds the oldest
 * progress; and one left behind is still found among many. */
static void test_hang_sums_follow_each_node(void)
{
    job(6, 6, 0);
    form(6);
    long long p[] = {now};
    for (int i = 0; i < 6; i++) {
        view(i, 0, 2000, i, 1, API, p, p);
        sent[i].moving = 1;
    }
    sent[2].moving = 0;
    queries = 0;
    pass(1500);
    done(2, 0, 0); /* its workers succeeded: its view leaves the rule */
    sent[2].sending = 0;
    pass(3000); /* its rank would have been named 2,550 ms after t0 */
    CHECK_INT_EQ(queries, 0);
    sent[5].moving = 0; /* still for less than the timeout */
    pass(1500);
    sent[5].moving = 1;
    pass(3000);
    CHECK_INT_EQ(queries, 0);
    long long t4 = now; /* node 4's last progress: 100 ms before */
    sent[4].moving = 0;
    pass(4000);
    /* named when its progress is the timeout and the slack old, on the
     * views' 100 ms; every node of the job asked, node 2's too */
    CHECK_INT_EQ(queries, 6);
    CHECK_INT_EQ(query_at - t4, 2500);
    CHECK_INT_EQ(query_rank, 4);
    amldist__rz_sm_free(sm);
}

/* A node that does not answer the hang's gather is named missing (with
 * its address) at the gather's end; if the host's node then does not end
 * the round, the host does, with status 124. */
static void test_hang_gather_missing_node(void)
{
    job(3, 3, 1);
    form(3);
    long long none[] = {-1}, old[] = {now};
    for (int i = 0; i < 3; i++)
        view(i, 0, 1000, i, 1, ALIVE, none, old);
    pass(1000 + SLACK_MS(1000) - 1);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    pass(1);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 3);
    uint32_t id = action(AMLDIST__RZ_A_QUERY, 2)->value;
    answer(0, id, AMLDIST__RZ_G_LAST, "n0");
    answer(2, id, AMLDIST__RZ_G_LAST, "n2");
    CHECK_INT_EQ(count(AMLDIST__RZ_A_RESULT), 1);
    now += 14000;
    tick();
    CHECK_INT_EQ(count(AMLDIST__RZ_A_RESULT), 0);
    now += 1000; /* the gather's 15 s */
    tick();
    CHECK_INT_EQ(count(AMLDIST__RZ_A_RESULT), 2);
    const amldist__rz_action_t *r = nth(AMLDIST__RZ_A_RESULT, 0);
    CHECK(r != NULL);
    if (r) {
        CHECK_INT_EQ(r->node, 1);
        CHECK_INT_EQ(r->flags, AMLDIST__RZ_G_MISSING | AMLDIST__RZ_G_LAST);
        CHECK(r->len == strlen("10.0.0.1") && !memcmp(r->data, "10.0.0.1", 8));
        CHECK(r->who == &mb[0]);
    }
    CHECK(nth(AMLDIST__RZ_A_RESULT, 1)->flags & AMLDIST__RZ_G_END);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_STOP), 0);
    now += 10000;
    tick();
    CHECK_INT_EQ(count(AMLDIST__RZ_A_STOP), 3);
    CHECK_STR_HAS(action(AMLDIST__RZ_A_STOP, 1)->text, "hung");
    for (int i = 0; i < 3; i++)
        done(i, 0, 143);
    /* A hang counts as a restart: one was left. */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_ASSIGN), 3);
    amldist__rz_sm_free(sm);
}

/* Any node asks; every node answers in chunks; the answers reach the
 * asker alone, then END with the arg; an answer past the bound is named
 * too big; answers to requests never made, or made of others, go
 * nowhere. */
static void test_gather_relays_to_the_asker(void)
{
    job(2, 2, 0);
    form(2);
    ask(1, 7, AMLDIST_RDZV_TOPIC_STATUS, 2000, "verbose");
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 2);
    const amldist__rz_action_t *q = action(AMLDIST__RZ_A_QUERY, 0);
    CHECK(q && q->node == 1 && q->topic == AMLDIST_RDZV_TOPIC_STATUS &&
          q->len == 7);
    uint32_t id = q ? q->value : 0;
    answer(0, id + 100, AMLDIST__RZ_G_LAST, "never asked");
    CHECK_INT_EQ(nact, 0);
    answer(0, id, AMLDIST__RZ_G_LAST, "node0 status");
    const amldist__rz_action_t *r = action(AMLDIST__RZ_A_RESULT, 1);
    CHECK(r && r->tag == 7 && r->node == 0 && r->index == 0);
    answer(0, id, AMLDIST__RZ_G_LAST, "twice");
    CHECK_INT_EQ(nact, 0);
    /* Past the bound: named, and the rest of its chunks dropped. */
    static char big[AMLDIST__RZ_CHUNK_MAX + 1];
    memset(big, 'x', AMLDIST__RZ_CHUNK_MAX);
    for (unsigned k = 0; k < AMLDIST__RZ_BLOB_MAX / AMLDIST__RZ_CHUNK_MAX; k++)
        answer(1, id, 0, big);
    CHECK_INT_EQ(action(AMLDIST__RZ_A_RESULT, 1)->flags, 0);
    answer(1, id, AMLDIST__RZ_G_LAST, "y");
    CHECK_INT_EQ(count(AMLDIST__RZ_A_RESULT), 2);
    r = nth(AMLDIST__RZ_A_RESULT, 0);
    CHECK(r && r->flags == (AMLDIST__RZ_G_TOOBIG | AMLDIST__RZ_G_LAST));
    r = nth(AMLDIST__RZ_A_RESULT, 1);
    CHECK(r && r->flags == AMLDIST__RZ_G_END && r->len == 7 &&
          !memcmp(r->data, "verbose", 7));
    amldist__rz_sm_free(sm);
}

/* Refused: the topic HANG from an agent, a node in no round, a ninth
 * gather at once.  A lost node is named missing at once; a lost asker's
 * gather goes on without it. */
static void test_gather_refusals_and_losses(void)
{
    job(2, 3, 0);
    form(2);
    ask(1, 1, AMLDIST_RDZV_TOPIC_HANG, 0, "");
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    CHECK(action(AMLDIST__RZ_A_RESULT, 1)->flags ==
          (AMLDIST__RZ_G_END | AMLDIST__RZ_G_REFUSED));
    join(2, -1, 1); /* waits for the next round */
    ask(2, 1, AMLDIST_RDZV_TOPIC_STATUS, 0, "");
    CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 0);
    CHECK(action(AMLDIST__RZ_A_RESULT, 2)->flags & AMLDIST__RZ_G_REFUSED);
    for (int k = 0; k < AMLDIST__RZ_GATHERS_MAX; k++) {
        ask(0, (uint32_t)k + 1, AMLDIST_RDZV_TOPIC_STACKS, 0, "");
        CHECK_INT_EQ(count(AMLDIST__RZ_A_QUERY), 3); /* the joiner too */
    }
    ask(0, 99, AMLDIST_RDZV_TOPIC_STACKS, 0, "");
    CHECK(action(AMLDIST__RZ_A_RESULT, 0)->flags & AMLDIST__RZ_G_REFUSED);
    lost(2, "connection closed");
    /* Each open gather names it missing, at once. */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_RESULT), AMLDIST__RZ_GATHERS_MAX);
    lost(0, "connection closed"); /* the asker: nobody to tell */
    CHECK_INT_EQ(count(AMLDIST__RZ_A_RESULT), 0);
    now += 6000;
    tick();
    CHECK_INT_EQ(count(AMLDIST__RZ_A_RESULT), 0);
    amldist__rz_sm_free(sm);
}

/* Marks go to the host's own agent, with the sender's node. */
/* A hung round stopped by the host itself, as a backend that logs its
 * events replays it (EV_HUNG: the views it came from are not logged):
 * every node stopped with its text, the job's status the hang's; one of
 * another round is no news. */
static void test_hung_replayed(void)
{
    job(2, 2, 0);
    form(2);
    const char *why = "the job hung (no progress within --hang-timeout), "
                      "and the host's node did not end it";
    step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_HUNG, .round = 7,
                               .text = (const unsigned char *)why,
                               .text_len = strlen(why)});
    CHECK_INT_EQ(nact, 0);
    step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_HUNG, .round = 0,
                               .text = (const unsigned char *)why,
                               .text_len = strlen(why)});
    CHECK_INT_EQ(count(AMLDIST__RZ_A_STOP), 2);
    CHECK_STR_EQ(action(AMLDIST__RZ_A_STOP, 1)->text, why);
    CHECK_INT_EQ(amldist__rz_sm_phase(sm), AMLDIST__RZ_P_STOPPING);
    done(0, 0, 143);
    done(1, 0, 143);
    CHECK_INT_EQ(count(AMLDIST__RZ_A_FINISH), 2);
    CHECK_INT_EQ(action(AMLDIST__RZ_A_FINISH, 0)->value,
                 AMLDIST_RDZV_STATUS_HANG);
    amldist__rz_sm_free(sm);
}

static void test_marks_to_the_host_node(void)
{
    job(2, 2, 0);
    form(2);
    unsigned char m[2 * AMLDIST__RZ_MARK_LEN] = {0};
    step((amldist__rz_event_t){.type = AMLDIST__RZ_EV_MARKS, .who = &mb[1],
                               .rank = 2, .text = m, .text_len = sizeof m});
    const amldist__rz_action_t *a = action(AMLDIST__RZ_A_MARKS, 0);
    CHECK(a && a->node == 1 && a->value == 2 && a->len == sizeof m);
    amldist__rz_sm_free(sm);
}

int main(void)
{
    RUN(test_forms_when_max_joined);
    RUN(test_forms_after_last_call);
    RUN(test_forming_says_and_ends_on_early_failure);
    RUN(test_last_call_restarts_below_min);
    RUN(test_join_timeout);
    RUN(test_order_by_arrival);
    RUN(test_order_by_given_rank);
    RUN(test_numbering_and_given_master);
    RUN(test_no_port_offered);
    RUN(test_gpu_shares_by_machine);
    RUN(test_assign_runs);
    RUN(test_local_addr_is_master);
    RUN(test_master_never_loopback_for_remote_nodes);
    RUN(test_master_check_on_assign);
    RUN(test_waiting_line);
    RUN(test_refuse_keepalive_mismatch);
    RUN(test_refusals);
    RUN(test_refuse_rank_taken_and_mixed);
    RUN(test_refuse_full_and_fixed_running);
    RUN(test_refuse_lost_agent);
    RUN(test_refuse_too_many_workers);
    RUN(test_success_finishes);
    RUN(test_drained_after_dead_time);
    RUN(test_first_failure_stops_all);
    RUN(test_stop_names_the_node_words);
    RUN(test_final_while_stopping_ends);
    RUN(test_restart_then_finish);
    RUN(test_lost_in_fixed_job);
    RUN(test_lost_in_elastic_job);
    RUN(test_lost_while_done);
    RUN(test_newcomer_joins_running_elastic_job);
    RUN(test_unknown_members_ignored);
    RUN(test_hang_per_rank_names_the_stalled);
    RUN(test_hang_whole_job_across_nodes);
    RUN(test_hang_ignores_dead_and_stale);
    RUN(test_hang_gather_missing_node);
    RUN(test_hang_late_node_is_unseen);
    RUN(test_hang_late_node_holds_the_verdict);
    RUN(test_hang_sums_follow_each_node);
    RUN(test_gather_relays_to_the_asker);
    RUN(test_gather_refusals_and_losses);
    RUN(test_marks_to_the_host_node);
    RUN(test_hung_replayed);
    return test_summary();
}
