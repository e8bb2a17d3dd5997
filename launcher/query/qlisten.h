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

#endif /* AMLRUN_QLISTEN_H */
