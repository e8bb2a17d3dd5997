/*
 * --event-log FILE: the job's events, one JSON object a line, appended by
 * the supervisor's one loop and never blocking it.  The file is opened
 * non-blocking: a FIFO or pipe whose reader is slow gets what it can take
 * and the rest waits in memory (at most EVENTLOG_QUEUE_MAX bytes, whole
 * lines; beyond that new events are dropped and counted), written when the
 * loop sees it writable (eventlog_fd, eventlog_pending).  A regular file
 * never waits; a write that fails there (a full disk) drops that event,
 * and a line half-written is cut off again, so that every line stays one
 * whole JSON object.  A drop is said once, and counted at the end.
 */
#ifndef AMLRUN_EVENTLOG_H
#define AMLRUN_EVENTLOG_H

#include <stddef.h>

#define EVENTLOG_QUEUE_MAX (256u << 10)
/* The longest event line; below PIPE_BUF, so that a pipe takes a line
 * whole or not at all. */
#define EVENT_MAX 2048

struct eventlog;

/* One event being built: ev_begin, then fields, then eventlog_write. */
struct event {
    char buf[EVENT_MAX];
    size_t len;
    int fields; /* in the object open now */
    int full;   /* a field did not fit: the event is dropped */
};

/* Open FILE for appending (created 0666 less the umask); NULL after a
 * message naming it (a FIFO without a reader cannot be opened). */
struct eventlog *eventlog_open(const char *path);
/* Flush what can be flushed now, say what was dropped, close. */
void eventlog_close(struct eventlog *e);

/* {"event": NAME — the fields follow. */
void ev_begin(struct event *v, const char *name);
/* An empty object: { — for another format (torchrun's). */
void ev_open(struct event *v);
/* "key": { — an object in the object, until ev_close. */
void ev_object(struct event *v, const char *key);
void ev_close(struct event *v);
/* Close the object and the line: its length, 0 if it did not fit. */
size_t ev_finish(struct event *v);
/* "key": "val" (JSON-escaped; NULL: null). */
void ev_str(struct event *v, const char *key, const char *val);
void ev_int(struct event *v, const char *key, long long val);
/* "key": val, or null when val < 0 (a rank not known). */
void ev_id(struct event *v, const char *key, int val);
/* "key": val with `decimals` digits after the point. */
void ev_num(struct event *v, const char *key, double val, int decimals);
/* "key": RAW, RAW being JSON already. */
void ev_raw(struct event *v, const char *key, const char *raw);
/* Close the object and write or queue the line. */
void eventlog_write(struct eventlog *e, struct event *v);

/* The descriptor to watch for POLLOUT while eventlog_pending(). */
int eventlog_fd(const struct eventlog *e);
int eventlog_pending(const struct eventlog *e);
/* Write what is queued, as far as it goes now. */
void eventlog_flush(struct eventlog *e);

#endif /* AMLRUN_EVENTLOG_H */
