/*
 * amlrun's own messages and exit statuses.  Every message is one line,
 * "amlrun: subject: what happened: why", written with a single write(2) so
 * that it never interleaves with a worker's line on a shared terminal.
 */
#ifndef AMLRUN_MSG_H
#define AMLRUN_MSG_H

#include <stddef.h>
#include <sys/uio.h>

/* Exit statuses of amlrun itself (a worker's status passes through). */
enum {
    AMLRUN_EXIT_USAGE = 2,     /* bad command line */
    AMLRUN_EXIT_HANG = 124,    /* a hang (--hang-timeout) or --timeout, as
                                  timeout(1) */
    AMLRUN_EXIT_SYSTEM = 125,  /* amlrun could not do its job (fork, pipe...) */
    AMLRUN_EXIT_NOEXEC = 126,  /* command found but cannot be executed */
    AMLRUN_EXIT_NOTFOUND = 127 /* command not found */
};

#if defined(__GNUC__)
#define AMLRUN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define AMLRUN_PRINTF(f, a)
#endif

/* "amlrun: <fmt>\n" on stderr. */
void msg(const char *fmt, ...) AMLRUN_PRINTF(1, 2);
/* "amlrun: <fmt>: strerror(err)\n" on stderr. */
void msg_errno(int err, const char *fmt, ...) AMLRUN_PRINTF(2, 3);

/* The last message msg() or msg_errno() wrote, without its "amlrun: "
 * (what a node that cannot start tells the job's others: worker/control.h);
 * "" before any. */
const char *msg_last(void);

/* The terminal's open line: a worker's unfinished line shown on a
 * terminal (output.c's live streams), its owner the stream and fd the
 * console it is on.  Whoever else writes to the terminal ends it first
 * (msg_line_end: a newline, on the console only), so that no two lines
 * ever share one; amlrun's messages do.  msg_line_set(NULL, -1): no line
 * is open. */
void msg_line_set(const void *owner, int fd);
const void *msg_line_owner(void);
void msg_line_end(void);
/* How msg_line_end ends the owner's line (output.c's: it erases it, to
 * show it again whole later); NULL: a newline. */
void msg_line_ender(void (*end)(const void *owner));

/* amlrun's own text of several lines on stderr (a root cause, stacks, an
 * event), in one write, after the terminal's open line is ended. */
int msg_write(const char *text, size_t len);

/* Write everything, retrying partial writes and EINTR, and waiting for room
 * on EAGAIN (a non-blocking descriptor); 0 or -1 (errno). */
int write_all(int fd, const void *buf, size_t len);
/* The same for an iovec array (which it modifies). */
int writev_all(int fd, struct iovec *iov, int iovcnt);
/* A small file (a /proc file, which gives what it has in one read) into
 * buf, NUL-terminated: its length, or -1 when it cannot be read or is
 * empty. */
long read_small(const char *path, char *buf, size_t size);

/* Make stdout's stdio writes go through write_all: a parent (a shell's
 * pipeline, a Python harness) may have made the descriptor non-blocking,
 * and stdio would then drop, with no word, what did not fit (--dry-run of
 * many ranks, --topo, --help).  0, or -1 (stdout left as it was). */
int msg_stdout_waits(void);

/* Monotonic seconds. */
double now_s(void);

#endif /* AMLRUN_MSG_H */
