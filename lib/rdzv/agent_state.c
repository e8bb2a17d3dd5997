/*
 * What an agent's caller and its backend hand each other (see
 * agent_state.h), below both: the sink's life, the backend's signals to
 * the caller, the requests and gathers it hands over (and their public
 * frees), and the caller's word to the backend (amldist__rz_wake()).
 * Nothing here blocks or does I/O but on the caller's descriptors.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "rdzv/handle.h"
#include "util/escape.h"

void amldist__rz_sink_init(amldist__rz_sink_t *s)
{
    s->efd = s->gfd = s->note_fd = -1;
    s->state = C_CONNECTING;
    s->next.round = -1;
    pthread_mutex_init(&s->mu, NULL);
    /* The caller's waits are durations: on the monotonic clock, as
     * libuv's uv_cond_timedwait() waits. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
}

int amldist__rz_sink_open(amldist__rz_sink_t *s)
{
    if ((s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
        (s->gfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        return -1;
    return 0;
}

static void plane_shared_free(struct amldist__rz_plane_shared *pl)
{
    amldist__rz_asks_free(pl->asks);
    amldist__rz_answers_free(pl->answers);
    while (pl->reqs) {
        struct amldist__rz_req *q = pl->reqs;
        pl->reqs = q->next;
        amldist_rdzv_request_free(&q->pub);
    }
    while (pl->got) {
        struct amldist__rz_got *g = pl->got;
        pl->got = g->next;
        amldist_rdzv_gather_free(&g->pub);
    }
    free(pl->views);
    free(pl->marks_out);
    free(pl->marks_in);
}

void amldist__rz_sink_free(amldist__rz_sink_t *s)
{
    if (s->efd >= 0)
        close(s->efd);
    if (s->gfd >= 0)
        close(s->gfd);
    plane_shared_free(&s->pl);
    free(s->next.nproc);
    free(s->failure);
    free(s->fail);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
}

void amldist__rz_signal_caller(amldist__rz_sink_t *s)
{
    uint64_t one = 1;
    while (write(s->efd, &one, sizeof one) < 0 && errno == EINTR) {
    }
    pthread_cond_broadcast(&s->cv);
}

void amldist__rz_set_over(amldist__rz_sink_t *s, int status,
                          const char *failure)
{
    int was = s->state;
    s->state = C_OVER;
    s->status = status;
    free(s->failure);
    s->failure = strdup(failure ? failure : "");
    if (was == C_RUNNING)
        amldist__strlcpy(s->stop_why, s->failure, sizeof s->stop_why);
    amldist__rz_signal_caller(s);
}

void amldist__rz_plane_signal(amldist__rz_sink_t *s)
{
    uint64_t v = 1;
    if (s->pl.reqs || s->pl.got) {
        if (write(s->gfd, &v, sizeof v) < 0) {
            /* the counter is full: readable all the same */
        }
    } else {
        while (read(s->gfd, &v, sizeof v) > 0) {
        }
    }
}

/* The host's line on the forming round, for whoever reads the note
 * descriptor (amlrun's stderr): one write, so that lines do not mix, and
 * its control characters escaped, whatever the host sent. */
void amldist__rz_note_wait(const amldist__rz_sink_t *s,
                           const unsigned char *p, uint32_t len)
{
    char line[AMLDIST__RZ_TEXT_MAX + 100];
    if (s->note_fd < 0)
        return;
    size_t n = (size_t)snprintf(line, sizeof line, "%s", s->note_prefix);
    if (n > sizeof line - 2)
        n = sizeof line - 2;
    n += amldist__escape(line + n, sizeof line - 1 - n, p, len,
                         AMLDIST__ESC_ONE_LINE);
    line[n++] = '\n';
    while (write(s->note_fd, line, n) < 0 && errno == EINTR) {
    }
}

/* The ranks a hang's request names (its arg: timeout ms | count |
 * ranks). */
static void hang_arg(uint32_t topic, const unsigned char *arg, size_t len,
                     int *timeout_ms, int *stalled, int *n)
{
    *timeout_ms = 0;
    *n = 0;
    if (topic != AMLDIST_RDZV_TOPIC_HANG || len < 8)
        return;
    uint32_t k = amldist__net_get_u32(arg + 4);
    *timeout_ms = (int)(amldist__net_get_u32(arg) & 0x7fffffff);
    if ((uint64_t)k * 4 + 8 != len)
        return;
    for (uint32_t i = 0; i < k; i++)
        stalled[(*n)++] = (int)(amldist__net_get_u32(arg + 8 + 4 * i) &
                                0x7fffffff);
}

struct amldist__rz_req *amldist__rz_req_new(uint32_t id, uint32_t topic,
                                            uint32_t asker,
                                            const unsigned char *arg,
                                            size_t arg_len)
{
    struct amldist__rz_req *q = calloc(1, sizeof *q);
    if (!q || arg_len > sizeof q->arg) {
        free(q);
        return NULL;
    }
    memcpy(q->arg, arg, arg_len);
    q->pub.id = id;
    q->pub.topic = topic;
    q->pub.asker = asker > INT32_MAX ? -1 : (int)asker;
    q->pub.arg = q->arg;
    q->pub.arg_len = arg_len;
    hang_arg(topic, arg, arg_len, &q->pub.hang_timeout_ms, q->stalled,
             &q->pub.nstalled);
    q->pub.stalled = q->stalled;
    return q;
}

struct amldist__rz_got *amldist__rz_got_new(uint32_t tag, uint32_t topic,
                                            const unsigned char *arg,
                                            size_t arg_len)
{
    struct amldist__rz_got *g = calloc(1, sizeof *g);
    if (!g || arg_len > sizeof g->arg) {
        free(g);
        return NULL;
    }
    memcpy(g->arg, arg, arg_len);
    g->pub.tag = tag;
    g->pub.topic = topic;
    g->pub.arg = g->arg;
    g->pub.arg_len = arg_len;
    hang_arg(topic, arg, arg_len, &g->pub.hang_timeout_ms, g->stalled,
             &g->pub.nstalled);
    g->pub.stalled = g->stalled;
    return g;
}

void amldist__rz_asks_free(struct amldist__rz_ask *a)
{
    while (a) {
        struct amldist__rz_ask *n = a->next;
        free(a);
        a = n;
    }
}

void amldist__rz_answers_free(struct amldist__rz_answer *a)
{
    while (a) {
        struct amldist__rz_answer *n = a->next;
        free(a);
        a = n;
    }
}

void amldist_rdzv_request_free(amldist_rdzv_request_t *q)
{
    free(q); /* the first member of its amldist__rz_req */
}

void amldist_rdzv_gather_free(amldist_rdzv_gather_t *g)
{
    if (!g)
        return;
    for (int i = 0; g->answers && i < g->n; i++)
        free((void *)g->answers[i].blob);
    free(g->answers);
    free(g); /* the first member of its amldist__rz_got */
}

void amldist__rz_wake(amldist_rdzv_t *r)
{
    r->ops->send(r->be);
}

void amldist__rz_set_lost(amldist__rz_sink_t *s, const char *endpoint,
                          const char *what, const char *why)
{
    if (s->state < C_RUNNING && !s->err) {
        s->err = AMLDIST_ESYS;
        snprintf(s->errmsg, sizeof s->errmsg, "rendezvous at %s: %s",
                 endpoint, why);
        amldist__rz_set_over(s, AMLDIST_RDZV_STATUS_LOST, s->errmsg);
    } else if (s->state != C_OVER) {
        char text[700];
        snprintf(text, sizeof text, "the rendezvous %s at %s was lost: %s",
                 what, endpoint, why);
        amldist__rz_set_over(s, AMLDIST_RDZV_STATUS_LOST, text);
    }
}
