/* The workers' output pipes on the supervisor's loop (see streams.h). */
#include <errno.h>
#include <poll.h>

#include "output/msg.h"
#include "run/streams.h"

static void on_stream(void *arg, int fd, short revents);

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
