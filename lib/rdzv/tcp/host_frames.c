/*
 * The host's frames (see host.c): a member's frame decoded into an event
 * for the decider (host_sm.h, where every decision about the job is
 * made), and the decider's actions carried out as frames to the members
 * (issue 20's decoded and encoded by plane_frames.c, every backend's).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rdzv/plane_frames.h"
#include "rdzv/tcp/host_io.h"

/* A peer whose queue is full is stuck: it is dropped like a lost one, on the
 * next sweep (send() only marks it). */
void amldist__rz_member_send(struct member *m, unsigned type, const void *p,
                             size_t len)
{
    if (m->c.fd >= 0 && amldist__conn_send(&m->c, type, p, len) < 0) {
        m->c.last_rx = 0; /* silent since forever: lost at the next tick */
        amldist__rz_host_soon(m->h);
    }
    m->sent_at = amldist__now_ms();
    amldist__rz_member_dirty(m);
}

/* A frame of a u32 and a text (REFUSE, STOP, FINISH), cut to its type's
 * bound. */
static void send_text(struct member *m, unsigned type, uint32_t head,
                      const char *text)
{
    unsigned char buf[AMLDIST__RZ_FINISH_MAX];
    size_t n = strlen(text), max = amldist__rz_max_payload(type) - 4;
    if (n > max)
        n = max;
    amldist__net_put_u32(buf, head);
    memcpy(buf + 4, text, n);
    amldist__rz_member_send(m, type, buf, 4 + n);
}

void amldist__rz_member_refuse(struct member *m, uint32_t reason,
                               const char *text)
{
    send_text(m, AMLDIST__RZ_REFUSE, reason, text);
    /* Half-close: the REFUSE is delivered before the end of the stream
     * (a close() with unread input would reset the connection first). */
    shutdown(m->c.fd, SHUT_WR);
    m->state = M_CLOSING;
    m->since = amldist__now_ms();
    if (m->h->scan_at > m->since + CLOSING_MS)
        m->h->scan_at = m->since + CLOSING_MS;
}

/* QUERY, RESULT and MARKS: a head of u32s and the action's data
 * (plane_frames.c); a RESULT waits its turn behind what the asker has not
 * read yet. */
static void send_watch(struct member *m, const amldist__rz_action_t *a)
{
    unsigned char head[AMLDIST__RZ_RESULT_HEAD];
    unsigned type;
    size_t hl = amldist__rz_plane_head(a, &type, head);
    if (m->c.fd < 0)
        return;
    if (type == AMLDIST__RZ_RESULT) {
        if (amldist__rz_outbox_push(&m->out, type, head, hl, a->data,
                                    a->len) < 0 ||
            amldist__rz_outbox_pump(&m->out, &m->c) < 0) {
            m->c.last_rx = 0; /* stuck: lost at the next tick */
            amldist__rz_host_soon(m->h);
        }
        amldist__rz_member_dirty(m);
        return;
    }
    unsigned char buf[8 + AMLDIST__RZ_MARK_LEN * AMLDIST__RZ_MARKS_MAX];
    size_t len = a->len < sizeof buf - hl ? a->len : sizeof buf - hl;
    memcpy(buf, head, hl);
    if (len)
        memcpy(buf + hl, a->data, len);
    amldist__rz_member_send(m, type, buf, hl + len);
}

/* The round's ASSIGN to m: its first 12 bytes its own (its node rank at
 * 8), the rest the frame every node shares (12 bytes a node: one copy, not
 * one per connection). */
static void send_assign(struct member *m, amldist__conn_shared_t *s,
                        uint32_t node)
{
    unsigned char head[12];
    memcpy(head, s->data, sizeof head);
    amldist__net_put_u32(head + 8, node);
    if (m->c.fd >= 0 && amldist__conn_send_shared(&m->c, AMLDIST__RZ_ASSIGN,
                                                  head, sizeof head, s,
                                                  sizeof head) < 0) {
        m->c.last_rx = 0; /* silent since forever: lost at the next tick */
        amldist__rz_host_soon(m->h);
    }
    amldist__rz_member_dirty(m);
}

/* Carry out the state machine's answer to one event. */
static void apply(amldist__rz_host_t *h, const amldist__rz_action_t *a, int n)
{
    amldist__conn_shared_t *assign = NULL;
    for (int i = 0; i < n; i++) {
        struct member *m = a[i].who;
        switch (a[i].type) {
        case AMLDIST__RZ_A_ADMIT:
            m->state = M_JOINED;
            break;
        case AMLDIST__RZ_A_REFUSE:
            amldist__rz_member_refuse(m, a[i].value, a[i].text);
            break;
        case AMLDIST__RZ_A_ASSIGN:
            /* One round per step: encoded once, each node its rank. */
            if (!assign) {
                if (!(assign = amldist__conn_shared_new(AMLDIST__RZ_ASSIGN_MAX)))
                    break; /* no ASSIGN: the node is lost for want of it */
                assign->len = amldist__rz_put_assign(
                    amldist__rz_sm_round(h->sm), assign->data);
            }
            send_assign(m, assign, a[i].value);
            break;
        case AMLDIST__RZ_A_WAIT:
            amldist__rz_member_send(m, AMLDIST__RZ_WAIT, a[i].text,
                                    strlen(a[i].text));
            break;
        case AMLDIST__RZ_A_QUERY:
        case AMLDIST__RZ_A_RESULT:
        case AMLDIST__RZ_A_MARKS:
            send_watch(m, &a[i]);
            break;
        case AMLDIST__RZ_A_STOP:
        case AMLDIST__RZ_A_FINISH:
            send_text(m, a[i].type == AMLDIST__RZ_A_STOP ? AMLDIST__RZ_STOP
                                                         : AMLDIST__RZ_FINISH,
                      a[i].value, a[i].text);
            break;
        }
    }
    amldist__conn_shared_put(assign); /* the connections hold their own */
}

void amldist__rz_host_step(amldist__rz_host_t *h, amldist__rz_event_t *ev)
{
    const amldist__rz_action_t *acts;
    ev->now = amldist__now_ms();
    ev->now_ns = amldist__rz_clock_ns();
    if (ev->type != AMLDIST__RZ_EV_TICK)
        h->stepped = 1;
    int n = amldist__rz_sm_step(h->sm, ev, &acts);
    apply(h, acts, n);
}

void amldist__rz_member_lose(amldist__rz_host_t *h, struct member *m,
                             const char *why)
{
    int was = m->state;
    m->state = M_GONE;
    h->gone = 1;
    if (was == M_JOINED)
        amldist__rz_host_step(h, &(amldist__rz_event_t){
                                     .type = AMLDIST__RZ_EV_LOST, .who = m,
                                     .why = why});
}

/* A member's first frame: its JOIN, or it is refused. */
static void on_first(amldist__rz_host_t *h, struct member *m, unsigned type,
                     const unsigned char *p, uint32_t len)
{
    amldist__rz_event_t ev = {.who = m, .type = AMLDIST__RZ_EV_JOIN};
    if (type != AMLDIST__RZ_JOIN) {
        amldist__rz_member_refuse(m, AMLDIST__RZ_R_PROTO,
                                  "the first frame must be a JOIN");
        return;
    }
    int rc = amldist__rz_get_join(p, len, &ev.join);
    if (rc == -2) {
        /* Another amlrun's agent: told in a REFUSE, which every protocol
         * reads alike, not a close it would take for a network fault. */
        char why[200];
        snprintf(why, sizeof why, "this node's amlrun speaks rendezvous "
                 "protocol %u and the host's %u: run the same amlrun "
                 "version on every node", ev.join.protocol,
                 AMLDIST__RZ_PROTOCOL);
        amldist__rz_member_refuse(m, AMLDIST__RZ_R_PROTO, why);
        return;
    }
    if (rc < 0) {
        amldist__rz_member_refuse(m, AMLDIST__RZ_R_PROTO,
                                  "a malformed JOIN (its local address)");
        return;
    }
    ev.addr = m->addr;
    ev.local = m->local;
    amldist__rz_host_step(h, &ev);
}

void amldist__rz_member_timea(struct member *m)
{
    unsigned char a[24];
    amldist__rz_plane_timea(m->timeq_t1, m->timeq_t2, a);
    m->timeq_due = 0;
    amldist__rz_member_send(m, AMLDIST__RZ_TIMEA, a, sizeof a);
}

/* The host's clock, read as near the wire as the loop allows (its time
 * between t2 and t3, the wait for its next beat included, is the agent's
 * to subtract: the estimate's error is half the round trip without it):
 * not a decision.  The answer is the member's next beat (host.c), but for
 * its first few, at once. */
static void on_timeq(struct member *m, const unsigned char *p)
{
    m->timeq_t1 = (int64_t)amldist__rz_get_u64(p);
    m->timeq_t2 = amldist__rz_clock_ns();
    m->timeq_due = 1;
    if (m->timeqs < AMLDIST__RZ_TIMEQ_QUICK) {
        m->timeqs++;
        amldist__rz_member_timea(m);
    }
}

/* A joined member's frame that the decider hears, as its event: 0, or -1
 * when it is none (its payload's limits are amldist__rz_frames'). */
static int decode(unsigned type, const unsigned char *p, uint32_t len,
                  amldist__rz_event_t *ev)
{
    switch (type) {
    case AMLDIST__RZ_FAIL:
        ev->type = AMLDIST__RZ_EV_FAIL;
        ev->round = amldist__net_get_u32(p);
        ev->flags = amldist__net_get_u32(p + 4);
        ev->rank = amldist__net_get_u32(p + 8);
        ev->status = amldist__net_get_u32(p + 12);
        ev->text = p + 16;
        ev->text_len = len - 16;
        return 0;
    case AMLDIST__RZ_DONE:
        ev->type = AMLDIST__RZ_EV_DONE;
        ev->round = amldist__net_get_u32(p);
        ev->status = amldist__net_get_u32(p + 4);
        ev->port = amldist__net_get_u32(p + 8);
        return 0;
    }
    return -1;
}

void amldist__rz_member_frame(amldist__rz_host_t *h, struct member *m,
                              unsigned type, const unsigned char *p,
                              uint32_t len)
{
    amldist__rz_event_t ev = {.who = m};
    if (m->state == M_CLOSING)
        return;
    if (m->state == M_PENDING) {
        on_first(h, m, type, p, len);
        return;
    }
    if (type == AMLDIST__RZ_BEAT)
        return;
    if (type == AMLDIST__RZ_TIMEQ) {
        on_timeq(m, p);
        return;
    }
    /* Issue 20's frames, as every backend's decider reads them. */
    amldist__rz_view_t *views;
    const char *why;
    int rc = amldist__rz_plane_decode(type, p, len, &ev, &views, &why);
    if (rc < 0) {
        amldist__rz_member_lose(h, m, why);
        return;
    }
    if (rc == 0 && type == AMLDIST__RZ_VIEW)
        return; /* out of memory: this view is not heard */
    if (rc == 0 && decode(type, p, len, &ev) < 0) {
        amldist__rz_member_lose(h, m, "it sent a frame out of turn");
        return;
    }
    amldist__rz_host_step(h, &ev);
    free(views);
}
