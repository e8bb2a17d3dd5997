/*
 * Issue 20's frames on the decider's side, every backend's (host_sm.h):
 * a member's VIEW, ASK, ANSWER or MARKS decoded into the decider's event,
 * the head of its QUERY, RESULT and MARKS actions encoded, and the answer
 * to a TIMEQ.  The TCP host (tcp/host_frames.c) and the etcd decider's
 * plane (etcd/plane_host.c) carry them over their own connections.
 */
#include <stdlib.h>
#include <string.h>

#include "rdzv/host_sm.h"
#include "rdzv/plane_frames.h"

static int decode_view(const unsigned char *p, uint32_t len,
                       amldist__rz_event_t *ev, amldist__rz_view_t **views,
                       const char **why)
{
    uint32_t n = amldist__net_get_u32(p + 8);
    if ((uint64_t)n * AMLDIST__RZ_VIEW_RANK + AMLDIST__RZ_VIEW_HEAD != len) {
        *why = "a malformed VIEW (its count)";
        return -1;
    }
    amldist__rz_view_t *v = n ? malloc(n * sizeof *v) : NULL;
    if (n && !v)
        return 0; /* out of memory: this view is not heard */
    for (uint32_t i = 0; i < n; i++) {
        const unsigned char *q = p + AMLDIST__RZ_VIEW_HEAD +
                                 (size_t)i * AMLDIST__RZ_VIEW_RANK;
        v[i].rank = amldist__net_get_u32(q);
        v[i].flags = amldist__net_get_u32(q + 4);
        v[i].start_ns = (int64_t)amldist__rz_get_u64(q + 8);
        v[i].progress_ns = (int64_t)amldist__rz_get_u64(q + 16);
        v[i].line_ns = (int64_t)amldist__rz_get_u64(q + 24);
        v[i].end_ns = (int64_t)amldist__rz_get_u64(q + 32);
    }
    ev->type = AMLDIST__RZ_EV_VIEW;
    ev->round = amldist__net_get_u32(p);
    ev->timeout_ms = amldist__net_get_u32(p + 4);
    ev->views = v;
    ev->nviews = n;
    *views = v;
    return 1;
}

int amldist__rz_plane_decode(unsigned type, const unsigned char *p,
                             uint32_t len, amldist__rz_event_t *ev,
                             amldist__rz_view_t **views, const char **why)
{
    *views = NULL;
    switch (type) {
    case AMLDIST__RZ_VIEW:
        return decode_view(p, len, ev, views, why);
    case AMLDIST__RZ_ASK:
        ev->type = AMLDIST__RZ_EV_ASK;
        ev->tag = amldist__net_get_u32(p);
        ev->topic = amldist__net_get_u32(p + 4);
        ev->timeout_ms = amldist__net_get_u32(p + 8);
        ev->text = p + 12;
        ev->text_len = len - 12;
        return 1;
    case AMLDIST__RZ_ANSWER:
        ev->type = AMLDIST__RZ_EV_ANSWER;
        ev->id = amldist__net_get_u32(p);
        ev->flags = amldist__net_get_u32(p + 4);
        ev->text = p + 8;
        ev->text_len = len - 8;
        return 1;
    case AMLDIST__RZ_MARKS:
        ev->type = AMLDIST__RZ_EV_MARKS;
        ev->rank = amldist__net_get_u32(p + 4);
        ev->text = p + 8;
        ev->text_len = len - 8;
        if ((uint64_t)ev->rank * AMLDIST__RZ_MARK_LEN != ev->text_len) {
            *why = "a malformed MARKS (its count)";
            return -1;
        }
        return 1;
    }
    return 0;
}

size_t amldist__rz_plane_head(const amldist__rz_action_t *a, unsigned *type,
                              unsigned char *head)
{
    uint32_t v[5];
    size_t nv = 0;
    *type = a->type == AMLDIST__RZ_A_QUERY    ? AMLDIST__RZ_QUERY
            : a->type == AMLDIST__RZ_A_RESULT ? AMLDIST__RZ_RESULT
                                              : AMLDIST__RZ_MARKS;
    if (*type == AMLDIST__RZ_QUERY) {
        v[nv++] = a->value;
        v[nv++] = a->topic;
        v[nv++] = a->node;
    } else if (*type == AMLDIST__RZ_RESULT) {
        v[nv++] = a->tag;
        v[nv++] = a->topic;
        v[nv++] = a->index;
        v[nv++] = a->node;
        v[nv++] = a->flags;
    } else {
        v[nv++] = a->node;
        v[nv++] = a->value;
    }
    for (size_t i = 0; i < nv; i++)
        amldist__net_put_u32(head + 4 * i, v[i]);
    return 4 * nv;
}

void amldist__rz_plane_timea(int64_t t1, int64_t t2, unsigned char *a)
{
    amldist__rz_put_u64(a, (uint64_t)t1);
    amldist__rz_put_u64(a + 8, (uint64_t)t2);
    amldist__rz_put_u64(a + 16, (uint64_t)amldist__rz_clock_ns());
}
