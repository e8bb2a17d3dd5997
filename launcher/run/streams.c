/* The workers' output pipes on the supervisor's loop (see streams.h). */
#include <errno.h>
#include <poll.h>

#include "output/msg.h"
#include "output/pty.h"
#include "run/streams.h"
#include "util/clock.h"

static void on_stream(void *arg, int fd, short revents);
static void on_show(void *arg);

/* The live streams' partial lines (output.h): one timer, at the earliest
 * that is due; armed when none is. */
static void arm_show(struct job *j)
{
    if (j->show_timer)
        return;
    int64_t due = 0;
    for (int i = 0; i < j->n; i++) {
        int64_t d[2] = {out_stream_due(&j->w[i].out),
                        out_stream_due(&j->w[i].err)};
        for (int k = 0; k < 2; k++)
            if (d[k] && (!due || d[k] < due))
                due = d[k];
    }
    if (!due)
        return;
    j->show_timer = amldist__loop_timer(j->loop, (due + 999999) / 1000000,
                                        on_show, j);
    if (j->show_timer < 0)
        j->show_timer = 0;
}

static void on_show(void *arg)
{
    struct job *j = arg;
    j->show_timer = 0;
    /* The timer has milliseconds: what is due within one is due now. */
    int64_t now = amldist__now_ns() + 1000000;
    for (int i = 0; i < j->n; i++) {
        struct out_stream *ss[2] = {&j->w[i].out, &j->w[i].err};
        for (int k = 0; k < 2; k++) {
            int64_t d = out_stream_due(ss[k]);
            if (d && d <= now)
                out_stream_show(ss[k]);
        }
    }
    arm_show(j);
}

void streams_resize(struct job *j)
{
    for (int i = 0; i < j->n; i++) {
        if (j->w[i].out.live && j->w[i].out.fd >= 0)
            out_pty_resize(1, j->w[i].out.fd);
        if (j->w[i].err.live && j->w[i].err.fd >= 0)
            out_pty_resize(2, j->w[i].err.fd);
    }
}

void stream_watch(struct job *j, struct worker *w, struct out_stream *s)
{
    if (s->fd >= 0 &&
        amldist__loop_watch(j->loop, s->fd, POLLIN, on_stream, w) < 0) {
        msg_errno(errno, "output pipes for local worker %d", (int)(w - j->w));
        out_stream_close(s);
    }
}

static void stream_read(struct job *j, struct out_stream *s)
{
    int fd = s->fd;
    out_stream_read(s, j->buf, READ_BUF);
    if (s->fd < 0)
        amldist__loop_unwatch(j->loop, fd);
    /* Its line, or another's it erased or let go of, may be due. */
    arm_show(j);
}

void stream_close(struct job *j, struct out_stream *s)
{
    if (s->fd >= 0)
        amldist__loop_unwatch(j->loop, s->fd);
    out_stream_close(s);
}

static void on_stream(void *arg, int fd, short revents)
{
    struct worker *w = arg;
    (void)revents;
    if (w->out.fd == fd)
        stream_read(w->job, &w->out);
    else if (w->err.fd == fd)
        stream_read(w->job, &w->err);
}

int open_streams(const struct job *j)
{
    int n = 0;
    for (int i = 0; i < j->n; i++)
        n += (j->w[i].out.fd >= 0) + (j->w[i].err.fd >= 0);
    return n;
}

/* Read what a dead worker left in its pipes (or a live one's pending
 * output: job_drain), without waiting for writers that may still hold
 * them.  What the loop polled of them before is stale now (a read would
 * block on a pipe a stray holds open): watched anew. */
void drain(struct job *j, struct worker *w)
{
    struct out_stream *ss[2] = {&w->out, &w->err};
    for (int k = 0; k < 2; k++) {
        for (int rounds = 0; rounds < 64 && ss[k]->fd >= 0; rounds++) {
            struct pollfd p = {ss[k]->fd, POLLIN, 0};
            if (poll(&p, 1, 0) <= 0)
                break;
            stream_read(j, ss[k]);
        }
        stream_watch(j, w, ss[k]);
    }
}
