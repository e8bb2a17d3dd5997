/*
 * Asking running amlruns (proto.h): a socket is reached by its name in a
 * directory open as a descriptor (sockdir.h's checks done on it), never
 * by a path looked up again, and asked only when the server's uid
 * (SO_PEERCRED) is the directory's owner.  Several are asked at once, so
 * that one amlrun that does not answer (stopped, swapped out) costs the
 * deadline once, whatever the others do.
 */
#ifndef AMLRUN_QASK_H
#define AMLRUN_QASK_H

#include <stddef.h>
#include <sys/types.h>

/* One question in flight. */
struct asking {
    int fd;       /* -1: done */
    int dfd;
    const char *name;
    uid_t owner;
    const char *req;
    int connected;
    char *buf;
    size_t n, cap;
    int err;      /* 0 while asking or answered */
};

/* Ask every one of a[0..n) (fd -1, dfd, name, owner, req set; the rest
 * 0) at once, until each answered or `timeout_ms` passed: then err is 0
 * and buf the answer (NUL-ended, n bytes; the caller frees it), or err
 * says why not (ETIMEDOUT, EPERM: another uid's server, ECONNRESET:
 * closed without a byte). */
void ask_all(struct asking *a, size_t n, int timeout_ms);

/* Ask one socket one question; its whole answer (NUL-ended), or NULL with
 * errno as ask_all()'s err. */
char *ask(int dfd, const char *name, uid_t owner, const char *req,
          int timeout_ms, size_t *len);

#endif /* AMLRUN_QASK_H */
