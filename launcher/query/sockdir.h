/*
 * Where a running amlrun answers --status and --stacks: a Unix socket per
 * supervising amlrun, in a directory that only its user can open.
 *
 *   1. $XDG_RUNTIME_DIR/amlrun/  when XDG_RUNTIME_DIR is set, absolute,
 *                                and a directory (not a link) of the
 *                                user's with mode 0700
 *   2. /tmp/amlrun-<uid>/
 *   3. /tmp/amlrun-<uid>.XXXXXX/ (mkdtemp) when 1 and 2 are refused: the
 *                                first such directory that passes the
 *                                checks, else a new one; removed by the
 *                                job that ends last in it (qsock_remove)
 *
 * The supervisor takes the first that passes the checks (made 0700 when
 * missing): a directory, not a symbolic link, owned by the user, with no
 * bit for group or others.  A refused one is never read, written or
 * removed (another user who made /tmp/amlrun-<uid> first cannot switch
 * --status off: the job goes to 3 and says so once).  The asking side
 * reads every candidate that passes the same checks, by a descriptor of
 * the directory it checked (never its path again), and a socket in it
 * only when lstat says it is a socket of that user.  A socket is
 * <run id>.<pid>.sock, its run id escaped
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

/* The same checks, on a descriptor: the directory opened (O_DIRECTORY,
 * O_NOFOLLOW, close-on-exec) once it passed them, or -1 as qdir_check. */
int qdir_open(const char *dir, int create, uid_t owner, char *why,
              size_t whysize);

/* The candidate directories of user `uid` (its XDG_RUNTIME_DIR `xdg`, NULL:
 * unset), in the order above, at most QDIRS_MAX: 1 when xdg is usable, 2,
 * and each /tmp/amlrun-<uid>.* that is a directory of the user's (lstat)
 * by name.  Checked again by whoever opens them (qdir_open). */
#define QDIRS_MAX 8
struct qdirs {
    int n;
    int nfixed; /* the first ones, 1 and 2 (3s follow) */
    char dir[QDIRS_MAX][QDIR_PATH_MAX + 1];
};
void qdir_candidates(uid_t uid, const char *xdg, struct qdirs *out);

/* The supervisor's directory: the first candidate that passes (made when
 * missing), else a new mkdtemp() one; 0 with its path in dir, or -1 with
 * a reason in why.  Each candidate refused on the way is said in note
 * (its path and why, "" when none), for the user to be told once. */
int qdir_choose(uid_t uid, const char *xdg, char *dir, size_t size,
                char *note, size_t notesize, char *why, size_t whysize);

/* Whether dir is one of 3 (/tmp/amlrun-<uid>.XXXXXX), which a job that
 * ends removes when no socket of another job is left in it. */
int qdir_is_fallback(uid_t uid, const char *dir);

/* The socket's path for run id `run_id` and pid `pid` in dir; 0, or -1
 * when even the pid does not fit. */
int qsock_path(const char *dir, const char *run_id, pid_t pid, char *buf,
               size_t size);
/* The pid of a socket's file name (its last component), 0 when the name
 * is not one of ours. */
pid_t qsock_pid(const char *name);

#endif /* AMLRUN_SOCKDIR_H */
