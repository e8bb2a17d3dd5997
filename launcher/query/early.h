/*
 * --status from amlrun's start: its query socket (qlisten.h) is made
 * before the rendezvous and answered by a thread of its own while
 * amldist_rdzv_join() waits and the supervisor's loop does not run yet.
 * It answers "info" and "status" from what is known then (the job record
 * with phase=rendezvous and what the rendezvous waits for: qtext.h),
 * refuses "stacks" (no worker runs), and holds each connection at most
 * QE_REQUEST_MS for its request.  The thread is stopped before amlrun
 * forks anything; the supervisor's plugin takes the socket over, so that
 * the job keeps one socket, one path, from its start to its end.
 */
#ifndef AMLRUN_QEARLY_H
#define AMLRUN_QEARLY_H

#include <stddef.h>

/* How long a connection may take to send its request, here and in the
 * supervisor (proto.h's deadline bounds the rest of the exchange). */
#define QE_REQUEST_MS 2000

struct qearly_job {
    const char *run_id;
    char *const *cmd; /* the command as given to amlrun */
    int ncmd;
    int nodes;        /* the job's nodes as far as known (>= 1) */
};

/* Make the socket and, with `answer`, start answering; a directory
 * refused on the way is said once (unless quiet), the socket's path with
 * verbose, and a socket that cannot be made (with verbose) leaves the job
 * without one.  0, or -1 when there is no socket.  Only the first call
 * does anything (the supervisor calls it too, for a socket made now when
 * none was made at the start). */
int qearly_start(const struct qearly_job *job, int verbose, int quiet,
                 int answer);

/* What the rendezvous waits for, in words ("the rendezvous at HOST:PORT
 * (static, 2 nodes)"); shown by a status until the next call. */
void qearly_waiting(const char *what);

/* Stop the thread (the socket stays, its connections wait in its
 * backlog, and those it took but that sent no request yet wait for the
 * supervisor: qearly_take_waiting): before any fork. */
void qearly_pause(void);

/* The connections the thread took whose request had not come, into
 * fds[0..max) (those past max closed): the supervisor's from now on, each
 * due to send its request within QE_REQUEST_MS of now. */
#define QE_CLIENTS 16
int qearly_take_waiting(int *fds, int max);

/* The socket, for the supervisor (its path into path): the listening
 * descriptor, or -1 when there is none; the thread is stopped first.
 * Once taken, the socket is the taker's to close and unlink. */
int qearly_take(char *path, size_t size);

/* Close and unlink the socket unless it was taken (amlrun ends before its
 * supervisor runs). */
void qearly_close(void);

#endif /* AMLRUN_QEARLY_H */
