/* The control plane's frames and its buffered, non-blocking connections
 * (see rdzv_internal.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdzv/rdzv_internal.h"

static void put_u64(unsigned char *p, uint64_t v)
{
    amldist__bs_put_u32(p, (uint32_t)(v >> 32));
    amldist__bs_put_u32(p + 4, (uint32_t)v);
}

static uint64_t get_u64(const unsigned char *p)
{
    return (uint64_t)amldist__bs_get_u32(p) << 32 | amldist__bs_get_u32(p + 4);
}

void amldist__rz_put_join(unsigned char *p, const amldist__rz_join_t *j)
{
    put_u64(p, j->token);
    put_u64(p + 8, j->agent);
    put_u64(p + 16, j->run);
    const uint32_t v[] = {j->round, j->nproc, j->order, j->min,
                          j->max,   j->max_restarts, j->port};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        amldist__bs_put_u32(p + 24 + 4 * i, v[i]);
}

void amldist__rz_get_join(const unsigned char *p, amldist__rz_join_t *j)
{
    j->token = get_u64(p);
    j->agent = get_u64(p + 8);
    j->run = get_u64(p + 16);
    uint32_t *v[] = {&j->round, &j->nproc, &j->order, &j->min,
                     &j->max,   &j->max_restarts, &j->port};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        *v[i] = amldist__bs_get_u32(p + 24 + 4 * i);
}

uint32_t amldist__rz_max_payload(unsigned type)
{
    switch (type) {
    case AMLDIST__RZ_JOIN:
        return AMLDIST__RZ_JOIN_LEN;
    case AMLDIST__RZ_REFUSE:
        return 4 + AMLDIST__RZ_TEXT_MAX;
    case AMLDIST__RZ_ASSIGN:
        return AMLDIST__RZ_ASSIGN_MAX;
    case AMLDIST__RZ_FAIL:
        return 16 + AMLDIST__RZ_SUMMARY_MAX;
    case AMLDIST__RZ_STOP:
        return 4 + AMLDIST__RZ_TEXT_MAX;
    case AMLDIST__RZ_DONE:
        return 12;
    case AMLDIST__RZ_FINISH:
        return AMLDIST__RZ_FINISH_MAX;
    default:
        return 0; /* BEAT, and types that are not ours */
    }
}

/* The least payload a frame of `type` needs; frames are checked against
 * both bounds before anything reads them. */
static uint32_t min_payload(unsigned type)
{
    switch (type) {
    case AMLDIST__RZ_JOIN:
        return AMLDIST__RZ_JOIN_LEN;
    case AMLDIST__RZ_REFUSE:
    case AMLDIST__RZ_STOP:
    case AMLDIST__RZ_FINISH:
        return 4;
    case AMLDIST__RZ_ASSIGN:
        return 28; /* one node */
    case AMLDIST__RZ_FAIL:
        return 16;
    case AMLDIST__RZ_DONE:
        return 12;
    default:
        return 0;
    }
}

static int known_type(unsigned type)
{
    return type >= AMLDIST__RZ_JOIN && type <= AMLDIST__RZ_BEAT;
}

void amldist__rz_conn_init(amldist__rz_conn_t *c, int fd)
{
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->last_rx = amldist__bs_now_ms();
}

void amldist__rz_conn_close(amldist__rz_conn_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    free(c->out);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

int amldist__rz_send(amldist__rz_conn_t *c, unsigned type, const void *p,
                     size_t len)
{
    size_t need = c->out_len - c->out_off + AMLDIST__BS_HEADER_LEN + len;
    if (need > AMLDIST__RZ_OUT_MAX)
        return -1;
    if (c->out_off > 0) { /* move the unsent rest to the front */
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    if (need > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 256;
        while (cap < need)
            cap *= 2;
        unsigned char *n = realloc(c->out, cap);
        if (!n)
            return -1;
        c->out = n;
        c->out_cap = cap;
    }
    amldist__bs_put_header(c->out + c->out_len, type, (uint32_t)len);
    if (len)
        memcpy(c->out + c->out_len + AMLDIST__BS_HEADER_LEN, p, len);
    c->out_len += AMLDIST__BS_HEADER_LEN + len;
    return amldist__rz_flush(c);
}

int amldist__rz_flush(amldist__rz_conn_t *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0)
            c->out_off += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        else
            return -1;
    }
    c->out_off = c->out_len = 0;
    return 0;
}

/* Grow the input buffer to hold `need` bytes. */
static int reserve_in(amldist__rz_conn_t *c, size_t need)
{
    if (need <= c->in_cap)
        return 0;
    size_t cap = c->in_cap ? c->in_cap : 256;
    while (cap < need)
        cap *= 2;
    unsigned char *n = realloc(c->in, cap);
    if (!n)
        return -1;
    c->in = n;
    c->in_cap = cap;
    return 0;
}

/*
 * A frame is read in two steps, header then payload, so that no byte of
 * the next frame is taken before this one is handed out, and no more is
 * ever buffered than the frame's type allows.
 */
int amldist__rz_recv(amldist__rz_conn_t *c, unsigned *type,
                     const unsigned char **payload, uint32_t *len,
                     const char **why)
{
    *why = NULL;
    /* The last call's frame was handed out: start the next one. */
    if (c->in_len >= AMLDIST__BS_HEADER_LEN &&
        c->in_len == AMLDIST__BS_HEADER_LEN +
                         (size_t)amldist__bs_get_u32(c->in + 8))
        c->in_len = 0;
    for (;;) {
        size_t want = AMLDIST__BS_HEADER_LEN;
        if (c->in_len >= AMLDIST__BS_HEADER_LEN) {
            unsigned proto = (unsigned)c->in[4] << 8 | c->in[5];
            *type = (unsigned)c->in[6] << 8 | c->in[7];
            *len = amldist__bs_get_u32(c->in + 8);
            if (amldist__bs_get_u32(c->in) != AMLDIST__BS_MAGIC)
                *why = "not a control-plane frame (bad magic)";
            else if (proto != AMLDIST__BS_PROTOCOL)
                *why = "unsupported protocol version";
            else if (!known_type(*type))
                *why = "unknown frame type";
            else if (*len > amldist__rz_max_payload(*type) ||
                     *len < min_payload(*type))
                *why = "frame length outside its type's limits";
            if (*why)
                return -1;
            want += *len;
            if (c->in_len == want) {
                *payload = c->in + AMLDIST__BS_HEADER_LEN;
                c->last_rx = amldist__bs_now_ms();
                return 1;
            }
        }
        if (reserve_in(c, want) < 0) {
            *why = "out of memory";
            return -1;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, want - c->in_len,
                         MSG_DONTWAIT);
        if (n > 0) {
            c->in_len += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        *why = n == 0 ? "connection closed" : strerror(errno);
        return -2;
    }
}

#define HASH_START 0xcbf29ce484222325ull

uint64_t amldist__rz_token(const char *explicit_token, const char *endpoint,
                           char *source, size_t size)
{
    const char *v = getenv("AMLDIST_JOB_TOKEN");
    if (explicit_token) {
        amldist__strlcpy(source, "the options", size);
        return amldist__bs_hash(explicit_token, HASH_START);
    }
    if (v && *v) {
        amldist__strlcpy(source, "AMLDIST_JOB_TOKEN", size);
        return amldist__bs_hash(v, HASH_START);
    }
    /* Same endpoint, same job: what every node's command line says alike.
     * The run id is not in it, so that another one is refused as such. */
    amldist__strlcpy(source, "the endpoint", size);
    return amldist__bs_hash(endpoint,
                            amldist__bs_hash("amldist-rdzv|", HASH_START));
}

size_t amldist__rz_put_assign(const amldist__rz_round_t *rd, unsigned char *p)
{
    size_t alen = strlen(rd->master_addr);
    const uint32_t v[] = {(uint32_t)rd->round, (uint32_t)rd->restarts,
                          (uint32_t)rd->node, (uint32_t)rd->nnodes,
                          (uint32_t)rd->master_port, (uint32_t)alen};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        amldist__bs_put_u32(p + 4 * i, v[i]);
    memcpy(p + 24, rd->master_addr, alen);
    for (int i = 0; i < rd->nnodes; i++)
        amldist__bs_put_u32(p + 24 + alen + 4 * (size_t)i,
                            (uint32_t)rd->nproc[i]);
    return 24 + alen + 4 * (size_t)rd->nnodes;
}

int amldist__rz_get_assign(const unsigned char *p, uint32_t len,
                           amldist__rz_round_t *out, const char **why)
{
    uint32_t v[6];
    for (int i = 0; i < 6; i++)
        v[i] = amldist__bs_get_u32(p + 4 * i);
    uint32_t nodes = v[3], alen = v[5];
    if (alen == 0 || alen > AMLDIST__RZ_ADDR_MAX || nodes == 0 ||
        nodes > AMLDIST_RDZV_MAX_NODES || v[2] >= nodes ||
        v[0] > INT32_MAX || v[1] > INT32_MAX || v[4] == 0 || v[4] > 65535 ||
        (uint64_t)len != 24 + (uint64_t)alen + 4 * (uint64_t)nodes) {
        *why = "malformed ASSIGN";
        return -1;
    }
    int *nproc = malloc(nodes * sizeof *nproc);
    if (!nproc) {
        *why = "out of memory";
        return -1;
    }
    long long world = 0;
    for (uint32_t i = 0; i < nodes; i++) {
        uint32_t k = amldist__bs_get_u32(p + 24 + alen + 4 * i);
        nproc[i] = (int)k;
        world += k;
        if (k == 0 || k > AMLDIST__RZ_NPROC_MAX || world > AMLDIST__RZ_WORLD_MAX) {
            free(nproc);
            *why = "ASSIGN with an impossible worker count";
            return -1;
        }
    }
    for (uint32_t i = 0; i < alen; i++)
        if (p[24 + i] == '\0') {
            free(nproc);
            *why = "ASSIGN with a NUL in the address";
            return -1;
        }
    free(out->nproc);
    out->round = (int)v[0];
    out->restarts = (int)v[1];
    out->node = (int)v[2];
    out->nnodes = (int)nodes;
    out->master_port = (int)v[4];
    memcpy(out->master_addr, p + 24, alen);
    out->master_addr[alen] = '\0';
    out->nproc = nproc;
    return 0;
}
