/*
 * Starting one worker: fork, then in the child only async-signal-safe calls
 * (setpgid, prctl, dup2, sigaction, sigprocmask, the binding's syscalls,
 * execve) on data the parent prepared.  A failure in the child (exec,
 * binding) comes back to the parent through a close-on-exec pipe, libuv
 * style, so that it is reported once, by the parent.
 */
#ifndef AMLRUN_SPAWN_H
#define AMLRUN_SPAWN_H

#include <signal.h>
#include <sys/types.h>

#include "run/bind.h"

/* Where in the child a failure happened. */
enum spawn_stage { SPAWN_OK, SPAWN_SETUP, SPAWN_BIND, SPAWN_EXEC };

struct spawn_req {
    const char *path;        /* executable */
    char *const *argv;
    char *const *envp;
    char *const *sh_argv;    /* retry under /bin/sh on ENOEXEC; may be NULL */
    int stdin_fd;            /* becomes fd 0 */
    int stdout_fd, stderr_fd;/* become fds 1 and 2 */
    const struct amlrun_binding *binding;
    int local_rank;
    const sigset_t *mask;    /* signal mask the worker starts with */
    int ignore_sighup;       /* SIGHUP stays ignored in the worker */
    int pipe_was_ignored;    /* SIGPIPE was ignored when amlrun started */
    int keep_fd;             /* inherited as it is (close-on-exec cleared,
                                same number): the Python stack channel's
                                write end; -1 none */
};

/* Start a worker in its own process group.  Returns its pid; or -1 with
 * *stage and *err saying what failed (the child, if any, is reaped). */
pid_t spawn_worker(const struct spawn_req *r, enum spawn_stage *stage,
                   int *err);

#endif /* AMLRUN_SPAWN_H */
