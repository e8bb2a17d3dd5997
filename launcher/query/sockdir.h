/*
 * Where a running amlrun answers --status and --stacks: a Unix socket per
 * supervising amlrun, in a directory that only its user can open.
 *
 *   $XDG_RUNTIME_DIR/amlrun/   when XDG_RUNTIME_DIR is set and is a
 *                              directory owned by the user
 *   /tmp/amlrun-<uid>/         otherwise
 *
 * The directory is made 0700; one that is a symbolic link, not owned by
 * the user or open to group or others is refused (no socket: the job runs
 * without one).  A socket is <run id>.<pid>.sock, its run id escaped
 * (%XX for anything but letters, digits, '-' and '_') and cut to fit
 * sun_path (the full run id is the socket's own answer to "info").
 */
#ifndef AMLRUN_SOCKDIR_H
#define AMLRUN_SOCKDIR_H

#include <stddef.h>
#include <sys/types.h>

/* sun_path's size, less its terminating NUL. */
#define QDIR_PATH_MAX 107

/* The directory of user `uid` whose XDG_RUNTIME_DIR is `xdg` (NULL:
 * unset) into buf; 0, or -1 when it does not fit. */
int qdir_path(uid_t uid, const char *xdg, char *buf, size_t size);

/* Check the directory of user `owner` (made when `create`): 0, or -1 with
 * a one-line reason in why ("... is a symbolic link", ENOENT's when it
 * does not exist and create is 0: errno is then ENOENT). */
int qdir_check(const char *dir, int create, uid_t owner, char *why,
               size_t whysize);

/* The socket's path for run id `run_id` and pid `pid` in dir; 0, or -1
 * when even the pid does not fit. */
int qsock_path(const char *dir, const char *run_id, pid_t pid, char *buf,
               size_t size);
/* The pid of a socket's file name (its last component), 0 when the name
 * is not one of ours. */
pid_t qsock_pid(const char *name);

#endif /* AMLRUN_SOCKDIR_H */
