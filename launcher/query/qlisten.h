/*
 * This amlrun's query socket (sockdir.h): made once, in the directory
 * qdir_choose() picks, by whoever comes first (the rendezvous' server,
 * early.h, or the supervisor's plugin), and answered by both in turn.
 */
#ifndef AMLRUN_QLISTEN_H
#define AMLRUN_QLISTEN_H

#include <stddef.h>

/* The most connections the socket holds unanswered (its backlog). */
#define QLISTEN_BACKLOG 64

/* The listening descriptor (non-blocking, close-on-exec, mode 0600) of
 * run id `run_id`, its path in path; or -1 with a reason in why.  note
 * gets the directories refused on the way, as qdir_choose()'s. */
int qsock_listen(const char *run_id, char *path, size_t size, char *note,
                 size_t notesize, char *why, size_t whysize);

/* The socket's file gone (the job is over), and its directory with it
 * when that is a fallback of sockdir.h's 3 and no other job's socket is
 * left there (rmdir of a directory that is not empty fails). */
void qsock_remove(const char *path);

/* Whether the peer of a connection to the socket may ask: the same user,
 * or root (SO_PEERCRED). */
int qsock_peer_allowed(int fd);

/* What a client sent of its request line, read into req (*len bytes so
 * far, room for QP_REQ_MAX and a NUL): 1 when the line is whole (its
 * newline now the NUL that ends it), 0 to wait for more, -1 to drop the
 * client (closed, an error, or longer than any request). */
int qsock_read_request(int fd, char *req, size_t *len);

#endif /* AMLRUN_QLISTEN_H */
