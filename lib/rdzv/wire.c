/* The control plane's frames: their limits and payload encodings (see
 * rdzv_internal.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/rdzv_internal.h"
#include "util/secret.h"

void amldist__rz_put_u64(unsigned char *p, uint64_t v)
{
    amldist__net_put_u32(p, (uint32_t)(v >> 32));
    amldist__net_put_u32(p + 4, (uint32_t)v);
}

uint64_t amldist__rz_get_u64(const unsigned char *p)
{
    return (uint64_t)amldist__net_get_u32(p) << 32 | amldist__net_get_u32(p + 4);
}

size_t amldist__rz_put_join(unsigned char *p, const amldist__rz_join_t *j)
{
    amldist__rz_put_u64(p, j->token);
    amldist__rz_put_u64(p + 8, j->agent);
    amldist__rz_put_u64(p + 16, j->run);
    const uint32_t v[] = {j->round, j->nproc, j->order, j->min,
                          j->max,   j->max_restarts, j->port,
                          j->keepalive_ms, j->keepalive_misses,
                          j->last_call_ms, j->join_timeout_ms};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        amldist__net_put_u32(p + 24 + 4 * i, v[i]);
    amldist__rz_put_u64(p + 68, j->machine);
    size_t alen = strnlen(j->local_addr, AMLDIST__RZ_ADDR_MAX);
    amldist__net_put_u32(p + 76, (uint32_t)alen);
    amldist__net_put_u32(p + 80, AMLDIST__RZ_PROTOCOL);
    memcpy(p + AMLDIST__RZ_JOIN_LEN, j->local_addr, alen);
    return AMLDIST__RZ_JOIN_LEN + alen;
}

int amldist__rz_get_join(const unsigned char *p, uint32_t len,
                         amldist__rz_join_t *j)
{
    j->token = amldist__rz_get_u64(p);
    j->agent = amldist__rz_get_u64(p + 8);
    j->run = amldist__rz_get_u64(p + 16);
    uint32_t *v[] = {&j->round, &j->nproc, &j->order, &j->min,
                     &j->max,   &j->max_restarts, &j->port,
                     &j->keepalive_ms, &j->keepalive_misses,
                     &j->last_call_ms, &j->join_timeout_ms};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        *v[i] = amldist__net_get_u32(p + 24 + 4 * i);
    j->machine = amldist__rz_get_u64(p + 68);
    uint32_t alen = amldist__net_get_u32(p + 76);
    j->local_addr[0] = '\0';
    /* Protocol 1's JOIN ends its fixed part at 80 bytes: one of its
     * length is that agent's, whatever else its bytes hold. */
    if (alen <= AMLDIST__RZ_ADDR_MAX &&
        (uint64_t)len == AMLDIST__RZ_JOIN_V1_LEN + (uint64_t)alen) {
        j->protocol = 1;
        return -2;
    }
    j->protocol = len >= AMLDIST__RZ_JOIN_LEN ? amldist__net_get_u32(p + 80) : 0;
    if (j->protocol != AMLDIST__RZ_PROTOCOL && len >= AMLDIST__RZ_JOIN_LEN &&
        alen <= AMLDIST__RZ_ADDR_MAX &&
        (uint64_t)len == AMLDIST__RZ_JOIN_LEN + (uint64_t)alen)
        return -2;
    if (alen > AMLDIST__RZ_ADDR_MAX ||
        (uint64_t)len != AMLDIST__RZ_JOIN_LEN + (uint64_t)alen ||
        memchr(p + AMLDIST__RZ_JOIN_LEN, '\0', alen))
        return -1;
    memcpy(j->local_addr, p + AMLDIST__RZ_JOIN_LEN, alen);
    j->local_addr[alen] = '\0';
    return 0;
}

/* The least and most payload of each frame; the connection checks both
 * before anything reads a frame. */
const amldist__frame_limit_t amldist__rz_frames[] = {
    /* protocol 1's shorter JOIN too: it is refused in words */
    {AMLDIST__RZ_JOIN, AMLDIST__RZ_JOIN_V1_LEN, AMLDIST__RZ_JOIN_MAX},
    {AMLDIST__RZ_REFUSE, 4, 4 + AMLDIST__RZ_TEXT_MAX},
    /* one node, an address of one byte */
    {AMLDIST__RZ_ASSIGN, AMLDIST__RZ_ASSIGN_HEAD + 1 + AMLDIST__RZ_ASSIGN_NODE,
     AMLDIST__RZ_ASSIGN_MAX},
    {AMLDIST__RZ_FAIL, 16, 16 + AMLDIST__RZ_SUMMARY_MAX},
    {AMLDIST__RZ_STOP, 4, 4 + AMLDIST__RZ_TEXT_MAX},
    {AMLDIST__RZ_DONE, 12, 12},
    {AMLDIST__RZ_FINISH, 4, AMLDIST__RZ_FINISH_MAX},
    {AMLDIST__RZ_BEAT, 0, 0},
    {AMLDIST__RZ_WAIT, 1, AMLDIST__RZ_TEXT_MAX},
    {AMLDIST__RZ_TIMEQ, 8, 8},
    {AMLDIST__RZ_TIMEA, 24, 24},
    {AMLDIST__RZ_VIEW, AMLDIST__RZ_VIEW_HEAD,
     AMLDIST__RZ_VIEW_HEAD + AMLDIST__RZ_VIEW_RANK * AMLDIST__RZ_VIEW_RANKS},
    {AMLDIST__RZ_ASK, 12, 12 + AMLDIST__RZ_ARG_MAX},
    {AMLDIST__RZ_QUERY, 12, 12 + AMLDIST__RZ_ARG_MAX},
    {AMLDIST__RZ_ANSWER, 8, 8 + AMLDIST__RZ_CHUNK_MAX},
    /* a chunk, or the gather's arg at its END */
    {AMLDIST__RZ_RESULT, AMLDIST__RZ_RESULT_HEAD,
     AMLDIST__RZ_RESULT_HEAD + AMLDIST__RZ_CHUNK_MAX},
    {AMLDIST__RZ_MARKS, 8, 8 + AMLDIST__RZ_MARK_LEN * AMLDIST__RZ_MARKS_MAX},
    {0, 0, 0},
};

uint32_t amldist__rz_max_payload(unsigned type)
{
    return amldist__frame_max_payload(amldist__rz_frames, type);
}

void amldist__rz_conn_init(amldist__conn_t *c, int fd)
{
    amldist__conn_init(c, fd, amldist__rz_frames);
}

int amldist__rz_conn_open(amldist__conn_t *c, int fd,
                          const amldist__rz_cfg_t *cfg, int server)
{
    amldist__rz_conn_init(c, fd);
    if (cfg->secure && amldist__conn_secure(c, &cfg->keys, server) < 0) {
        amldist__conn_close(c);
        return -1;
    }
    return 0;
}

int amldist__rz_token(const char *explicit_token, const char *endpoint,
                      int secure, uint64_t *token, char *source, size_t size)
{
    if (explicit_token) {
        amldist__strlcpy(source, "the options", size);
        *token = amldist__bs_hash(explicit_token, AMLDIST__BS_HASH_START);
        return 0;
    }
    /* The job's secret (util/secret.h, loaded by the caller): the channel
     * proves it, so neither it nor a digest of it goes on the wire, and it
     * names the job (nodes may reach the endpoint by other names: a proxy,
     * a load balancer). */
    if (secure) {
        amldist__strlcpy(source, "the job's secret", size);
        *token = 0;
        return 0;
    }
    /* Same endpoint, same job: what every node's command line says alike.
     * The run id is not in it, so that another one is refused as such. */
    amldist__strlcpy(source, "the endpoint", size);
    *token = amldist__bs_hash(endpoint, amldist__bs_hash("amldist-rdzv|",
                                                         AMLDIST__BS_HASH_START));
    return 0;
}

int amldist__rz_round_alloc(amldist__rz_round_t *rd, int n)
{
    int *block = calloc(3 * (size_t)(n > 0 ? n : 1), sizeof *block);
    if (!block)
        return -1;
    free(rd->nproc);
    rd->nproc = block;
    rd->gpu_first = block + n;
    rd->machine_ranks = block + 2 * n;
    return 0;
}

/* Node i is as node i - 1 (a run goes on). */
static int same_node(const amldist__rz_round_t *rd, int i)
{
    return rd->nproc[i] == rd->nproc[i - 1] &&
           rd->gpu_first[i] == rd->gpu_first[i - 1] &&
           rd->machine_ranks[i] == rd->machine_ranks[i - 1];
}

size_t amldist__rz_put_assign(const amldist__rz_round_t *rd, unsigned char *p)
{
    size_t alen = strlen(rd->master_addr);
    /* Runs of nodes alike when shorter than the list: a uniform job's
     * ASSIGN is one run, of constant size, where the list of 4,096 nodes
     * was 48 KiB for every agent to receive and read (issue 40). */
    uint32_t runs = rd->nnodes > 0;
    for (int i = 1; i < rd->nnodes; i++)
        runs += !same_node(rd, i);
    if ((uint64_t)runs * AMLDIST__RZ_ASSIGN_RUN >=
        (uint64_t)rd->nnodes * AMLDIST__RZ_ASSIGN_NODE)
        runs = 0;
    const uint32_t v[] = {(uint32_t)rd->round, (uint32_t)rd->restarts,
                          (uint32_t)rd->node, (uint32_t)rd->nnodes,
                          (uint32_t)rd->master_port, (uint32_t)alen,
                          rd->flags, (uint32_t)rd->last_call_ms,
                          (uint32_t)rd->join_timeout_ms, runs};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        amldist__net_put_u32(p + 4 * i, v[i]);
    unsigned char *q = p + AMLDIST__RZ_ASSIGN_HEAD;
    memcpy(q, rd->master_addr, alen);
    q += alen;
    for (int i = 0; i < rd->nnodes; i++) {
        if (runs) {
            int k = i;
            while (k + 1 < rd->nnodes && same_node(rd, k + 1))
                k++;
            amldist__net_put_u32(q, (uint32_t)(k - i + 1));
            q += 4;
            i = k;
        }
        amldist__net_put_u32(q, (uint32_t)rd->nproc[i]);
        amldist__net_put_u32(q + 4, (uint32_t)rd->gpu_first[i]);
        amldist__net_put_u32(q + 8, (uint32_t)rd->machine_ranks[i]);
        q += AMLDIST__RZ_ASSIGN_NODE;
    }
    return (size_t)(q - p);
}

int amldist__rz_get_assign(const unsigned char *p, uint32_t len,
                           amldist__rz_round_t *out, const char **why)
{
    uint32_t v[10];
    for (int i = 0; i < 10; i++)
        v[i] = amldist__net_get_u32(p + 4 * i);
    uint32_t nodes = v[3], alen = v[5], runs = v[9];
    uint64_t body = runs ? AMLDIST__RZ_ASSIGN_RUN * (uint64_t)runs
                         : AMLDIST__RZ_ASSIGN_NODE * (uint64_t)nodes;
    if (alen == 0 || alen > AMLDIST__RZ_ADDR_MAX || nodes == 0 ||
        nodes > AMLDIST_RDZV_MAX_NODES || v[2] >= nodes || runs > nodes ||
        v[0] > INT32_MAX || v[1] > INT32_MAX || v[4] == 0 || v[4] > 65535 ||
        v[6] > AMLDIST__RZ_F_ALL || v[7] > INT32_MAX || v[8] > INT32_MAX ||
        (uint64_t)len != AMLDIST__RZ_ASSIGN_HEAD + (uint64_t)alen + body) {
        *why = "malformed ASSIGN";
        return -1;
    }
    amldist__rz_round_t n = {0};
    if (amldist__rz_round_alloc(&n, (int)nodes) < 0) {
        *why = "out of memory";
        return -1;
    }
    long long world = 0;
    const unsigned char *q = p + AMLDIST__RZ_ASSIGN_HEAD + alen;
    /* Runs: each its count first, the nodes left in it; exactly `runs`
     * of them (the length holds no more), their counts the nodes. */
    uint32_t left = 0, used = 0;
    for (uint32_t i = 0; i < nodes; i++) {
        if (runs && left == 0) {
            left = used++ < runs ? amldist__net_get_u32(q) : 0;
            q += 4;
            if (left == 0 || left > nodes - i ||
                (used == runs && left != nodes - i)) {
                free(n.nproc);
                *why = "ASSIGN with a run of nodes beyond its count";
                return -1;
            }
        }
        uint32_t k = amldist__net_get_u32(q);
        uint32_t first = amldist__net_get_u32(q + 4);
        uint32_t all = amldist__net_get_u32(q + 8);
        if (!runs || --left == 0)
            q += AMLDIST__RZ_ASSIGN_NODE;
        n.nproc[i] = (int)k;
        world += k;
        if (k == 0 || k > AMLDIST__RZ_NPROC_MAX || world > AMLDIST__RZ_WORLD_MAX) {
            free(n.nproc);
            *why = "ASSIGN with an impossible worker count";
            return -1;
        }
        /* A node's share lies within its machine's ranks, all of them
         * ranks of this job. */
        if (all > AMLDIST__RZ_WORLD_MAX || first > all || all - first < k) {
            free(n.nproc);
            *why = "ASSIGN with an impossible GPU share";
            return -1;
        }
        n.gpu_first[i] = (int)first;
        n.machine_ranks[i] = (int)all;
    }
    if (used != runs) {
        free(n.nproc);
        *why = "ASSIGN with runs of nodes beyond its count";
        return -1;
    }
    for (uint32_t i = 0; i < nodes; i++)
        if (n.machine_ranks[i] > world) {
            free(n.nproc);
            *why = "ASSIGN with an impossible GPU share";
            return -1;
        }
    for (uint32_t i = 0; i < alen; i++) {
        unsigned char c = p[AMLDIST__RZ_ASSIGN_HEAD + i];
        if (c <= 0x20 || c >= 0x7f) {
            free(n.nproc);
            *why = "ASSIGN with a NUL, a space or a control character in "
                   "the address";
            return -1;
        }
    }
    free(out->nproc);
    *out = n;
    out->round = (int)v[0];
    out->restarts = (int)v[1];
    out->node = (int)v[2];
    out->nnodes = (int)nodes;
    out->master_port = (int)v[4];
    out->flags = v[6];
    out->last_call_ms = (int)v[7];
    out->join_timeout_ms = (int)v[8];
    memcpy(out->master_addr, p + AMLDIST__RZ_ASSIGN_HEAD, alen);
    out->master_addr[alen] = '\0';
    return 0;
}
