/*
 * The caller's side of issue 20's calls (see amldist_rdzv(3) and
 * agent_state.h): the clock offset, the view of this node's ranks, gathers
 * (asking, answering, taking the answers) and the per-step marks.  Each
 * call only queues or takes in the sink, under its mu; the backend does
 * the rest.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdzv/handle.h"

int amldist_rdzv_clock_offset_ns(const amldist_rdzv_t *r, long long *offset_ns,
                                 long long *error_ns)
{
    if (!r || !offset_ns || !error_ns)
        return AMLDIST_EINVAL;
    if (r->ops->hosts(r->be)) { /* the host's own clock */
        *offset_ns = *error_ns = 0;
        return 0;
    }
    amldist_rdzv_t *w = (amldist_rdzv_t *)r;
    pthread_mutex_lock(&w->sk.mu);
    int have = r->sk.pl.clk_have;
    *offset_ns = r->sk.pl.clk_offset;
    *error_ns = r->sk.pl.clk_error;
    pthread_mutex_unlock(&w->sk.mu);
    return have ? 0 : AMLDIST_EUNKNOWN;
}

long long amldist_rdzv_host_time_ns(const amldist_rdzv_t *r,
                                    long long monotonic_ns)
{
    long long off = 0, err;
    if (r && amldist_rdzv_clock_offset_ns(r, &off, &err) < 0)
        off = 0;
    return monotonic_ns + amldist__rz_clock_shift_ns() + off;
}

int amldist_rdzv_watch(amldist_rdzv_t *r, int timeout_ms)
{
    if (!r || timeout_ms < 0)
        return AMLDIST_EINVAL;
    pthread_mutex_lock(&r->sk.mu);
    r->sk.pl.watch_ms = timeout_ms;
    pthread_mutex_unlock(&r->sk.mu);
    amldist__rz_wake(r);
    return 0;
}

int amldist_rdzv_set_view(amldist_rdzv_t *r, const amldist_rdzv_view_t *v,
                          int n)
{
    if (!r || n < 0 || n > AMLDIST__RZ_VIEW_RANKS || (n && !v))
        return AMLDIST_EINVAL;
    amldist_rdzv_view_t *c = NULL;
    if (n && !(c = malloc((size_t)n * sizeof *c)))
        return AMLDIST_ENOMEM;
    if (n)
        memcpy(c, v, (size_t)n * sizeof *c);
    pthread_mutex_lock(&r->sk.mu);
    free(r->sk.pl.views);
    r->sk.pl.views = c;
    r->sk.pl.nviews = n;
    r->sk.pl.view_fresh = 1;
    pthread_mutex_unlock(&r->sk.mu);
    return 0;
}

int amldist_rdzv_events_fd(const amldist_rdzv_t *r)
{
    return r ? r->sk.gfd : AMLDIST_EINVAL;
}

int amldist_rdzv_gather(amldist_rdzv_t *r, unsigned topic, const void *arg,
                        size_t arg_len, int timeout_ms, unsigned *tag)
{
    amldist__clear_error();
    if (!r || !tag || topic == AMLDIST_RDZV_TOPIC_HANG || topic == 0 ||
        arg_len > AMLDIST__RZ_ARG_MAX || (arg_len && !arg))
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_gather: %s",
                             arg_len > AMLDIST__RZ_ARG_MAX
                                 ? "arg longer than 4 KiB"
                                 : "no handle, no tag, or topic 0 or HANG");
    struct amldist__rz_ask *a = malloc(sizeof *a + arg_len);
    if (!a)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    a->next = NULL;
    a->topic = topic;
    a->timeout_ms = timeout_ms <= 0 ? 0
                    : timeout_ms > AMLDIST__RZ_GATHER_MS_MAX
                        ? AMLDIST__RZ_GATHER_MS_MAX
                        : (uint32_t)timeout_ms;
    a->arg_len = arg_len;
    if (arg_len)
        memcpy(a->arg, arg, arg_len);
    pthread_mutex_lock(&r->sk.mu);
    if (++r->sk.pl.next_tag == 0) /* 0 is the host's */
        r->sk.pl.next_tag = 1;
    a->tag = *tag = r->sk.pl.next_tag;
    struct amldist__rz_ask **end = &r->sk.pl.asks;
    while (*end)
        end = &(*end)->next;
    *end = a;
    pthread_mutex_unlock(&r->sk.mu);
    amldist__rz_wake(r);
    return 0;
}

int amldist_rdzv_next_request(amldist_rdzv_t *r, amldist_rdzv_request_t **out)
{
    if (!r || !out)
        return AMLDIST_EINVAL;
    pthread_mutex_lock(&r->sk.mu);
    struct amldist__rz_req *q = r->sk.pl.reqs;
    if (q) {
        r->sk.pl.reqs = q->next;
        r->sk.pl.nreqs--;
    }
    amldist__rz_plane_signal(&r->sk);
    pthread_mutex_unlock(&r->sk.mu);
    *out = q ? &q->pub : NULL;
    return q != NULL;
}

int amldist_rdzv_answer(amldist_rdzv_t *r, unsigned id, const void *blob,
                        size_t len)
{
    amldist__clear_error();
    if (!r || (len && !blob))
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_answer: no handle "
                             "or no blob");
    if (len > AMLDIST__RZ_BLOB_MAX)
        return amldist__fail(AMLDIST_ERANGE, "amldist_rdzv_answer: %zu bytes "
                             "(at most %u)", len, AMLDIST__RZ_BLOB_MAX);
    struct amldist__rz_answer *a = malloc(sizeof *a + len);
    if (!a)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    a->next = NULL;
    a->id = id;
    a->len = len;
    if (len)
        memcpy(a->blob, blob, len);
    pthread_mutex_lock(&r->sk.mu);
    struct amldist__rz_answer **end = &r->sk.pl.answers;
    while (*end)
        end = &(*end)->next;
    *end = a;
    pthread_mutex_unlock(&r->sk.mu);
    amldist__rz_wake(r);
    return 0;
}

int amldist_rdzv_next_gather(amldist_rdzv_t *r, amldist_rdzv_gather_t **out)
{
    if (!r || !out)
        return AMLDIST_EINVAL;
    pthread_mutex_lock(&r->sk.mu);
    struct amldist__rz_got *g = r->sk.pl.got;
    if (g)
        r->sk.pl.got = g->next;
    amldist__rz_plane_signal(&r->sk);
    pthread_mutex_unlock(&r->sk.mu);
    *out = g ? &g->pub : NULL;
    return g != NULL;
}

/* Under mu: keep the marks of steps that are multiples of the stride,
 * doubled (once a mark) while the queue is full; a mark without room
 * goes. */
static void keep_mark(struct amldist__rz_plane_shared *pl,
                      const amldist_rdzv_mark_t *m)
{
    if (m->step % pl->stride)
        return;
    if (pl->nmarks_out == AMLDIST__RZ_MARKS_MAX) {
        if (pl->stride < (1ull << 40)) {
            pl->stride *= 2;
            int k = 0;
            for (int i = 0; i < pl->nmarks_out; i++)
                if (pl->marks_out[i].step % pl->stride == 0)
                    pl->marks_out[k++] = pl->marks_out[i];
            pl->nmarks_out = k;
        }
        if (m->step % pl->stride || pl->nmarks_out == AMLDIST__RZ_MARKS_MAX)
            return;
    }
    pl->marks_out[pl->nmarks_out++] = *m;
}

int amldist_rdzv_put_marks(amldist_rdzv_t *r, const amldist_rdzv_mark_t *m,
                           int n)
{
    if (!r || n < 0 || (n && !m))
        return AMLDIST_EINVAL;
    int64_t shift = amldist__rz_clock_shift_ns();
    long long off = 0, err;
    if (amldist_rdzv_clock_offset_ns(r, &off, &err) < 0)
        off = 0;
    pthread_mutex_lock(&r->sk.mu);
    struct amldist__rz_plane_shared *pl = &r->sk.pl;
    if (!pl->marks_out &&
        !(pl->marks_out = malloc(AMLDIST__RZ_MARKS_MAX * sizeof *pl->marks_out))) {
        pthread_mutex_unlock(&r->sk.mu);
        return AMLDIST_ENOMEM;
    }
    if (pl->stride == 0)
        pl->stride = 1;
    for (int i = 0; i < n; i++) {
        amldist_rdzv_mark_t k = m[i];
        k.t_ns += shift + off;
        keep_mark(pl, &k);
    }
    pthread_mutex_unlock(&r->sk.mu);
    amldist__rz_wake(r);
    return 0;
}

int amldist_rdzv_take_marks(amldist_rdzv_t *r, amldist_rdzv_mark_t *out,
                            int max)
{
    if (!r || max < 0 || (max && !out))
        return AMLDIST_EINVAL;
    pthread_mutex_lock(&r->sk.mu);
    struct amldist__rz_plane_shared *pl = &r->sk.pl;
    int n = 0;
    while (n < max && pl->in_n) {
        out[n++] = pl->marks_in[pl->in_first];
        pl->in_first = (pl->in_first + 1) % AMLDIST__RZ_MARKS_IN;
        pl->in_n--;
    }
    pthread_mutex_unlock(&r->sk.mu);
    return n;
}
