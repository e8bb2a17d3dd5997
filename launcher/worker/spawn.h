/*
 * Starting one worker: fork (or, where the child is born inside the job's
 * containment, a clone that borrows amlrun's memory until it execs:
 * contain/clonevm.h), then in the child only system calls (setpgid, prctl,
 * dup2, sigaction, sigprocmask, the binding's, execve) on data the parent
 * prepared.  A failure in the child (exec, binding) comes back to the
 * parent through a close-on-exec pipe, libuv style, so that it is reported
 * once, by the parent.
 *
 * A child that borrows the memory runs beside amlrun, which goes on to the
 * next worker as after a fork, unless the child applies a binding: the
 * library's amldist_plan_apply() sets errno when it fails, which such a
 * child shares with amlrun, so amlrun waits for that one's exec as vfork
 * does (everything else in the child is clonevm_sys(), which leaves errno
 * alone).
 */
#ifndef AMLRUN_SPAWN_H
#define AMLRUN_SPAWN_H

#include <signal.h>
#include <sys/types.h>

#include "worker/bind.h"

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
    int page_fd;             /* the same for the progress page; -1 none.
                                Every other descriptor past 2 is closed at
                                exec. */
};

/* A worker between spawn_begin and spawn_end. */
struct spawn {
    pid_t pid;         /* 0: none */
    int report_fd;     /* says how the exec went; -1 none */
    void *mem;         /* the stack of a child that runs beside amlrun, and
                          its copy of the request; NULL none */
    size_t mem_size;
};
#define SPAWN_NONE {0, -1, NULL, 0}

/* Start a worker in two steps, so that the workers' execs overlap:
 * spawn_begin forks it into its own process group, tells the orphan guard
 * about the group and lets the child go on towards exec; spawn_end waits
 * for that exec.  Every spawn_begin that succeeded needs its spawn_end,
 * which reaps a child that failed.  The child may still read what R points
 * to (path, argv, envp, sh_argv, mask, binding) until spawn_end: keep it
 * as it is till then (R itself is copied).
 *
 * spawn_begin: 0, with *sp the child; or -1 with *stage and *err saying
 * what failed (then there is no child). */
int spawn_begin(const struct spawn_req *r, struct spawn *sp,
                enum spawn_stage *stage, int *err);

/* Before amlrun's first thread: which of glibc's own signals (32, 33) its
 * parent left ignored, and its soft limit of open files, for the workers
 * to inherit them so. */
void spawn_note_inherited(void);
/* 0: the worker runs; -1: it failed before running the command, with
 * *stage and *err saying where and why (it is reaped and out of the
 * guard's list).  *sp is SPAWN_NONE after. */
int spawn_end(struct spawn *sp, enum spawn_stage *stage, int *err);

#endif /* AMLRUN_SPAWN_H */
