/* The job's event log (see eventlog.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "output/eventlog.h"
#include "output/json.h"
#include "output/msg.h"

struct eventlog {
    int fd;
    int regular;        /* a regular file: never queue */
    char *path;
    char *queue;        /* whole lines not yet written (pipes, FIFOs) */
    size_t qlen, qcap;
    long long dropped;
    int said;           /* the first drop was reported */
};

static void write_line(struct eventlog *e, const char *line, size_t len);

struct eventlog *eventlog_open(const char *path)
{
    struct eventlog *e = calloc(1, sizeof *e);
    if (!e || !(e->path = strdup(path))) {
        free(e);
        msg("--event-log %s: out of memory", path);
        return NULL;
    }
    /* O_NONBLOCK: a FIFO without a reader fails now (ENXIO) instead of
     * blocking amlrun's start; a slow reader never blocks a write. */
    e->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC |
                 O_NOCTTY, 0666);
    struct stat st;
    if (e->fd < 0 || fstat(e->fd, &st) < 0) {
        msg_errno(errno, "--event-log %s: cannot open it%s", path,
                  errno == ENXIO ? " (a FIFO with no reader)" : "");
        eventlog_close(e);
        return NULL;
    }
    e->regular = S_ISREG(st.st_mode);
    return e;
}

static void drop(struct eventlog *e, int err)
{
    if (!e->said)
        msg("--event-log %s: event dropped (%s); later drops are counted at "
            "the end", e->path, err ? strerror(err) : "the reader is behind");
    e->said = 1;
    e->dropped++;
}

void eventlog_flush(struct eventlog *e)
{
    while (e->qlen > 0) {
        /* A line at a time: a pipe takes a write of at most PIPE_BUF bytes
         * whole or not at all, so a reader never sees half a line. */
        const char *nl = memchr(e->queue, '\n', e->qlen);
        size_t len = nl ? (size_t)(nl - e->queue) + 1 : e->qlen;
        ssize_t n = write(e->fd, e->queue, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            /* The reader is gone (EPIPE: SIGPIPE is ignored) or worse:
             * what is queued cannot be written.  Count its lines. */
            int err = n < 0 ? errno : EIO;
            for (size_t k = 0; k < e->qlen; k++)
                if (e->queue[k] == '\n')
                    drop(e, err);
            e->qlen = 0;
            return;
        }
        memmove(e->queue, e->queue + n, e->qlen - (size_t)n);
        e->qlen -= (size_t)n;
    }
}

/* A regular file: the line now, whole, or not at all.  A write past
 * `ulimit -f` raises SIGXFSZ, which kills by default: it is blocked here
 * (the first event comes before main.c blocks it for good) and, raised,
 * taken back, so that the write fails with EFBIG instead. */
static void write_file(struct eventlog *e, const char *line, size_t len)
{
    sigset_t xfsz, old;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    sigprocmask(SIG_BLOCK, &xfsz, &old);
    write_line(e, line, len);
    if (!sigismember(&old, SIGXFSZ)) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&xfsz, NULL, &zero) == SIGXFSZ) {
        }
        sigprocmask(SIG_SETMASK, &old, NULL);
    }
}

static void write_line(struct eventlog *e, const char *line, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(e->fd, line + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int err = n < 0 ? errno : ENOSPC;
            /* Cut a torn line off again: the next event starts a line. */
            off_t end = lseek(e->fd, 0, SEEK_END);
            if (done > 0 && end >= (off_t)done)
                (void)!ftruncate(e->fd, end - (off_t)done);
            drop(e, err);
            return;
        }
        done += (size_t)n;
    }
}

void eventlog_write(struct eventlog *e, struct event *v)
{
    if (!ev_finish(v)) {
        drop(e, EMSGSIZE);
        return;
    }
    if (e->regular) {
        write_file(e, v->buf, v->len);
        return;
    }
    eventlog_flush(e);
    size_t done = 0;
    if (e->qlen == 0) {
        ssize_t n;
        do
            n = write(e->fd, v->buf, v->len);
        while (n < 0 && errno == EINTR);
        if (n < 0 && errno != EAGAIN) {
            drop(e, errno);
            return;
        }
        done = n > 0 ? (size_t)n : 0;
        if (done == v->len)
            return;
    }
    size_t rest = v->len - done;
    if (e->qlen + rest > EVENTLOG_QUEUE_MAX) {
        /* A partly written line must still end: only whole lines drop. */
        if (done == 0) {
            drop(e, 0);
            return;
        }
    }
    if (e->qlen + rest > e->qcap) {
        size_t cap = e->qcap ? e->qcap * 2 : 8192;
        while (cap < e->qlen + rest)
            cap *= 2;
        char *q = realloc(e->queue, cap);
        if (!q) {
            drop(e, ENOMEM);
            return;
        }
        e->queue = q;
        e->qcap = cap;
    }
    memcpy(e->queue + e->qlen, v->buf + done, rest);
    e->qlen += rest;
}

int eventlog_fd(const struct eventlog *e)
{
    return e->fd;
}

int eventlog_pending(const struct eventlog *e)
{
    return e->qlen > 0;
}

void eventlog_close(struct eventlog *e)
{
    if (!e)
        return;
    if (e->fd >= 0) {
        eventlog_flush(e);
        /* Never wait for a reader at the end either: what it did not take
         * is lost, and said. */
        for (size_t k = 0; k < e->qlen; k++)
            if (e->queue[k] == '\n')
                e->dropped++;
        if (e->dropped)
            msg("--event-log %s: %lld event%s dropped", e->path, e->dropped,
                e->dropped == 1 ? "" : "s");
        close(e->fd);
    }
    free(e->queue);
    free(e->path);
    free(e);
}

/* ---- building one event -------------------------------------------------- */

static void put(struct event *v, const char *fmt, ...) AMLRUN_PRINTF(2, 3);
static void put(struct event *v, const char *fmt, ...)
{
    if (v->full)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(v->buf + v->len, sizeof v->buf - v->len, fmt, ap);
    va_end(ap);
    /* Room for the closing "}\n" is kept. */
    if (n < 0 || (size_t)n + 2 >= sizeof v->buf - v->len)
        v->full = 1;
    else
        v->len += (size_t)n;
}

static void put_string(struct event *v, const char *s)
{
    char e[8];
    put(v, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p && !v->full; p++)
        put(v, "%s", json_char(*p, e));
    put(v, "\"");
}

static void key(struct event *v, const char *k)
{
    if (v->fields++)
        put(v, ", ");
    put_string(v, k);
    put(v, ": ");
}

void ev_open(struct event *v)
{
    v->len = 0;
    v->full = 0;
    v->fields = 0;
    put(v, "{");
}

void ev_begin(struct event *v, const char *name)
{
    ev_open(v);
    ev_str(v, "event", name);
}

void ev_object(struct event *v, const char *k)
{
    key(v, k);
    put(v, "{");
    v->fields = 0;
}

void ev_close(struct event *v)
{
    put(v, "}");
    v->fields = 1;
}

size_t ev_finish(struct event *v)
{
    /* put() always leaves room for these two. */
    if (v->full || v->len + 2 > sizeof v->buf)
        return 0;
    v->buf[v->len++] = '}';
    v->buf[v->len++] = '\n';
    return v->len;
}

void ev_str(struct event *v, const char *k, const char *val)
{
    key(v, k);
    if (val)
        put_string(v, val);
    else
        put(v, "null");
}

void ev_int(struct event *v, const char *k, long long val)
{
    key(v, k);
    put(v, "%lld", val);
}

void ev_id(struct event *v, const char *k, int val)
{
    key(v, k);
    if (val < 0)
        put(v, "null");
    else
        put(v, "%d", val);
}

void ev_num(struct event *v, const char *k, double val, int decimals)
{
    key(v, k);
    put(v, "%.*f", decimals, val);
}

void ev_raw(struct event *v, const char *k, const char *raw)
{
    key(v, k);
    put(v, "%s", raw);
}
