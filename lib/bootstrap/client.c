/*
 * A non-zero rank's side of the bootstrap: connect to rank 0, send HELLO,
 * read the blob.  Rank 0 may not listen yet (it starts later, or is still
 * serving the previous call), so every failure that a later attempt can cure
 * is retried with jittered exponential backoff until the overall deadline;
 * answers that no retry can change (another job's token, a different world
 * size or length) fail at once.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap_internal.h"
#include "net/conn.h"

/* One connection attempt may take this long before the next one. */
#define ATTEMPT_MS 10000
#define BACKOFF_FIRST_MS 10
#define BACKOFF_MAX_MS 1000
/* In barrier mode rank 0 is up and only waits for the last ranks: come back
 * soon, so the whole job goes on within this long of the last arrival. */
#define BACKOFF_WAIT_MAX_MS 50

enum { DONE = 0, RETRY = 1 };

typedef struct {
    const amldist__bs_params_t *p;
    char addr[300];
    char last[256]; /* why the last attempt failed, for the timeout message */
    int waiting;    /* the last answer was "come back" (barrier mode) */
} client_t;

static int refused(client_t *c, uint32_t reason, uint32_t value, size_t len)
{
    const amldist__bs_params_t *p = c->p;
    switch (reason) {
    case AMLDIST__BS_R_TOKEN:
        return amldist__fail(
            AMLDIST_EDENIED,
            "rank %d: %s refused this rank's job token (from %s): it serves "
            "another job, or the ranks disagree on the token; export the same "
            "AMLDIST_JOB_TOKEN to every rank",
            p->rank, c->addr, p->token_source);
    case AMLDIST__BS_R_WORLD:
        return amldist__fail(AMLDIST_EPROTO,
                             "rank %d: rank 0 at %s has a world size of %u, "
                             "this rank %d",
                             p->rank, c->addr, value, p->world);
    case AMLDIST__BS_R_RANK:
        return amldist__fail(AMLDIST_EPROTO,
                             "rank %d: rank 0 at %s refused rank %d in a world "
                             "of %u",
                             p->rank, c->addr, p->rank, value);
    case AMLDIST__BS_R_LENGTH:
        return amldist__fail(AMLDIST_EPROTO,
                             "rank %d: rank 0 at %s broadcasts %u bytes, this "
                             "rank expects %zu",
                             p->rank, c->addr, value, len);
    case AMLDIST__BS_R_AHEAD:
        snprintf(c->last, sizeof c->last,
                 "rank 0 still serves bootstrap call #%u, this rank is at #%u",
                 value, p->round);
        return RETRY;
    case AMLDIST__BS_R_WAIT:
        snprintf(c->last, sizeof c->last,
                 "rank 0 waits for every rank to come (%u of %d have)", value,
                 p->world - 1);
        c->waiting = 1;
        return RETRY;
    case AMLDIST__BS_R_BEHIND:
        return amldist__fail(AMLDIST_EPROTO,
                             "rank %d: rank 0 at %s is at bootstrap call #%u, "
                             "this rank at #%u: the ranks made different "
                             "numbers of calls",
                             p->rank, c->addr, value, p->round);
    default:
        return amldist__fail(AMLDIST_EPROTO,
                             "rank %d: rank 0 at %s refused with unknown "
                             "reason %u",
                             p->rank, c->addr, reason);
    }
}

static int io_failed(client_t *c, const char *what, const char *why)
{
    snprintf(c->last, sizeof c->last, "%s: %s", what, why);
    return RETRY;
}

/* Rank 0 did not prove the job's secret, or one side has a secret and the
 * other none: no retry cures it. */
static int not_proven(client_t *c, const char *why)
{
    const amldist__bs_params_t *p = c->p;
    if (!p->secure)
        return amldist__fail(AMLDIST_EDENIED,
                             "rank %d: %s speaks with a job secret and this "
                             "rank has none: export the same AMLDIST_JOB_TOKEN "
                             "to every rank",
                             p->rank, c->addr);
    return amldist__fail(AMLDIST_EDENIED,
                         "rank %d: the endpoint %s did not prove the job's "
                         "secret (the job token from %.200s): it serves "
                         "another job, an "
                         "impostor holds the port, or the ranks disagree on "
                         "the secret (%s)",
                         p->rank, c->addr, p->secret_source, why);
}

/* One request and its reply on a connected socket (the connection's). */
static int talk(client_t *c, amldist__conn_t *cn, void *blob, size_t len,
                long long deadline)
{
    const amldist__bs_params_t *p = c->p;
    unsigned char req[AMLDIST__BS_FAIL_LEN];
    size_t req_len = p->failed ? AMLDIST__BS_FAIL_LEN : AMLDIST__BS_HELLO_LEN;
    amldist__bs_hello_t h = {(uint32_t)p->rank, (uint32_t)p->world, p->round,
                             (uint32_t)len, p->token};
    unsigned type;
    uint32_t plen;
    const unsigned char *reply;
    const char *why;

    amldist__bs_put_hello(req, &h);
    memset(req + AMLDIST__BS_HELLO_LEN, 0, AMLDIST__BS_WHY_LEN);
    memcpy(req + AMLDIST__BS_HELLO_LEN, p->why,
           strnlen(p->why, AMLDIST__BS_WHY_LEN - 1));
    if ((p->secure && amldist__conn_secure(cn, &p->keys, 0) < 0) ||
        amldist__conn_send(cn, p->failed ? AMLDIST__BS_FAIL : AMLDIST__BS_HELLO,
                           req, req_len) < 0)
        return io_failed(c, "sending the request", strerror(errno));
    int rc = amldist__conn_wait(cn, deadline, &type, &reply, &plen, &why);
    if (rc == AMLDIST__CONN_EAUTH)
        return not_proven(c, why);
    /* Something answered, but not our server: retrying will not help. */
    if (rc == AMLDIST__CONN_EMALFORMED || (rc == 1 && type == AMLDIST__BS_HELLO))
        return amldist__fail(AMLDIST_EPROTO,
                             "rank %d: %s answered with %s: is another "
                             "service listening on the bootstrap port?",
                             p->rank, c->addr,
                             rc == 1 ? "a request" : why);
    if (rc == AMLDIST__CONN_EINTEGRITY)
        return amldist__fail(AMLDIST_EPROTO, "rank %d: %s: %s", p->rank,
                             c->addr, why);
    if (rc < 0)
        return io_failed(c, "reading the reply", why);
    if (type == AMLDIST__BS_REFUSE)
        return refused(c, amldist__net_get_u32(reply),
                       amldist__net_get_u32(reply + 4), len);
    if (type == AMLDIST__BS_PEER) {
        char text[AMLDIST__BS_WHY_LEN];
        uint32_t who = amldist__net_get_u32(reply);
        memcpy(text, reply + 4, sizeof text);
        text[sizeof text - 1] = '\0';
        /* Rank 0 counts this rank told only on the ACK. */
        if (amldist__conn_send(cn, AMLDIST__BS_ACK, NULL, 0) < 0 ||
            amldist__conn_drain(cn, deadline) < 0)
            return io_failed(c, "acknowledging the failure", strerror(errno));
        if (p->failed)
            return DONE; /* our own failure, or an earlier one: told */
        return amldist__fail(AMLDIST_EPEER, "rank %d: rank %u failed: %s",
                             p->rank, who, text);
    }
    if (plen != len)
        return amldist__fail(AMLDIST_EPROTO,
                             "rank %d: rank 0 at %s sent %u bytes, this rank "
                             "expects %zu",
                             p->rank, c->addr, plen, len);
    memcpy(blob, reply, len);
    /* Rank 0 counts this rank served only on the ACK: if it cannot be
     * sent, fetch again rather than leave rank 0 waiting. */
    if (amldist__conn_send(cn, AMLDIST__BS_ACK, NULL, 0) < 0 ||
        amldist__conn_drain(cn, deadline) < 0)
        return io_failed(c, "acknowledging the blob", strerror(errno));
    return DONE;
}

static void pause_ms(long long ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

int amldist__bs_fetch(const amldist__bs_params_t *p, void *blob, size_t len)
{
    long long deadline = amldist__now_ms() + p->timeout_ms;
    long long backoff = BACKOFF_FIRST_MS;
    /* Jitter from the rank, so that hundreds of ranks started together do
     * not knock on rank 0's door in lockstep. */
    unsigned seed = (unsigned)p->rank * 2654435761u ^ (unsigned)getpid();
    client_t c;
    c.p = p;
    c.waiting = 0;
    snprintf(c.last, sizeof c.last, "no attempt finished");
    amldist__net_format_addr(p->host, p->port, c.addr, sizeof c.addr);
    if (len == 0 || len > AMLDIST_BOOTSTRAP_MAX_LEN)
        return amldist__fail(AMLDIST_EINVAL, "bootstrap blob of %zu bytes: "
                             "must be 1 .. %d", len, AMLDIST_BOOTSTRAP_MAX_LEN);
    for (;;) {
        struct addrinfo *res;
        long long now = amldist__now_ms();
        if (now >= deadline)
            return amldist__fail(AMLDIST_ETIMEDOUT,
                                 "rank %d: no answer from %s within %g s "
                                 "(last error: %s)",
                                 p->rank, c.addr, p->timeout_ms / 1000.0,
                                 c.last);
        if (amldist__net_resolve(p->host, p->port, &res, c.last,
                                sizeof c.last) == 0) {
            for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                long long end = now + ATTEMPT_MS < deadline ? now + ATTEMPT_MS
                                                            : deadline;
                int fd = amldist__net_connect(ai, end), rc;
                if (fd < 0) {
                    io_failed(&c, "connecting", strerror(errno));
                    continue;
                }
                amldist__conn_t cn;
                amldist__conn_init(&cn, fd, amldist__bs_frames);
                rc = talk(&c, &cn, blob, len, end);
                amldist__conn_close(&cn);
                if (rc != RETRY) {
                    freeaddrinfo(res);
                    return rc;
                }
            }
            freeaddrinfo(res);
        }
        long long wait = backoff / 2 + rand_r(&seed) % (backoff / 2 + 1);
        long long left = deadline - amldist__now_ms();
        pause_ms(wait < left ? wait : left > 0 ? left : 0);
        backoff = backoff * 2 < BACKOFF_MAX_MS ? backoff * 2 : BACKOFF_MAX_MS;
        if (c.waiting && backoff > BACKOFF_WAIT_MAX_MS)
            backoff = BACKOFF_WAIT_MAX_MS;
    }
}
