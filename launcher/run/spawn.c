/* fork/exec of one worker (see spawn.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "contain/guard.h"
#include "run/spawn.h"

/* <linux/close_range.h>'s, spelled out (not in every libc's headers). */
#define CLOSE_RANGE_CLOEXEC_FLAG (1U << 2)

/* In the child: tell the parent what failed and leave.  The statuses match
 * a shell's: 127 not found, 126 could not run. */
static _Noreturn void child_fail(int fd, enum spawn_stage stage, int err)
{
    int report[2] = {(int)stage, err};
    ssize_t w;
    do
        w = write(fd, report, sizeof report);
    while (w < 0 && errno == EINTR);
    _exit(err == ENOENT ? 127 : 126);
}

static _Noreturn void child(const struct spawn_req *r, int go, int fd)
{
    /* Own group first, so that a signal for the group never misses a
     * process that is about to exec. */
    if (setpgid(0, 0) < 0)
        child_fail(fd, SPAWN_SETUP, errno);
    /* Die with amlrun. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        child_fail(fd, SPAWN_SETUP, errno);
    guard_child_setup();
    /* Unless born inside a containment the guard ends as a whole (go is
     * -1), run nothing before amlrun has told the orphan guard about our
     * group or moved us into the cgroup (its go-ahead byte): killed in
     * between, amlrun would leave the command's children unknown to the
     * guard.  End of file means amlrun died, maybe before the prctl took
     * effect. */
    if (go >= 0) {
        char c;
        ssize_t n;
        do
            n = read(go, &c, 1);
        while (n < 0 && errno == EINTR);
        if (n != 1)
            _exit(128 + SIGKILL);
        close(go);
    }
    if (dup2(r->stdin_fd, 0) < 0 || dup2(r->stdout_fd, 1) < 0 ||
        dup2(r->stderr_fd, 2) < 0)
        child_fail(fd, SPAWN_SETUP, errno);
    /* amlrun installs no handlers (it reads signals from a signalfd), but it
     * ignores SIGPIPE for itself: give the worker the usual default back. */
    struct sigaction sa = {0};
    sa.sa_handler = r->pipe_was_ignored ? SIG_IGN : SIG_DFL;
    sigaction(SIGPIPE, &sa, NULL);
    if (r->ignore_sighup) {
        sa.sa_handler = SIG_IGN;
        sigaction(SIGHUP, &sa, NULL);
    }
    int err = bind_apply_child(r->binding, r->local_rank);
    if (err)
        child_fail(fd, SPAWN_BIND, err);
    /* Past the standard three, the worker gets its stack channel and the
     * progress page, nothing else: what amlrun's own parent left open (a
     * CI runner's pipe, make's jobserver, another launcher's socket) is
     * closed at exec, as torchrun's workers (close_fds) and mpirun's have
     * it.  Marked, not closed, so that the report pipe still tells of a
     * failed exec.  A kernel without CLOSE_RANGE_CLOEXEC (before 5.11)
     * passes them on, as before. */
#ifdef SYS_close_range
    (void)syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC_FLAG);
#endif
    /* Those two keep their numbers, named in the environment the parent
     * composed: no dup2 onto a fixed number that another descriptor could
     * hold. */
    const int keep[] = {r->keep_fd, r->page_fd};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (keep[i] >= 0 && fcntl(keep[i], F_SETFD, 0) < 0)
            child_fail(fd, SPAWN_SETUP, errno);
    sigprocmask(SIG_SETMASK, r->mask, NULL);
    execve(r->path, r->argv, r->envp);
    err = errno;
    if (err == ENOEXEC && r->sh_argv) {
        execve("/bin/sh", r->sh_argv, r->envp);
        err = errno;
    }
    child_fail(fd, SPAWN_EXEC, err);
}

/* The child of guard_vfork: its arguments in one. */
struct child_args {
    const struct spawn_req *r;
    int report_fd;
};

static void child_entry(void *arg)
{
    const struct child_args *a = arg;
    child(a->r, -1, a->report_fd);
}

/* The borrowed stack of a child of guard_vfork: what child() needs, with
 * room to spare for a sanitizer's interceptors. */
enum { CHILD_STACK = 64 * 1024 };

pid_t spawn_begin(const struct spawn_req *r, int *report_fd,
                  enum spawn_stage *stage, int *err)
{
    int p[2], go[2] = {-1, -1};
    *report_fd = -1;
    if (pipe2(p, O_CLOEXEC) < 0) {
        *stage = SPAWN_SETUP;
        *err = errno;
        return -1;
    }
    if (!guard_born_contained() && pipe2(go, O_CLOEXEC) < 0) {
        *stage = SPAWN_SETUP;
        *err = errno;
        close(p[0]);
        close(p[1]);
        return -1;
    }
    /* Test hook: freeze amlrun right after the fork, so that a test can
     * SIGKILL it in the window before the worker is registered. */
    int stop_after_fork = getenv("AMLDIST_TEST_STOP_AFTER_FORK") != NULL;
    pid_t pid = -1;
    errno = ENOSYS;
    if (go[0] < 0) {
        /* Born contained, so nothing to wait for before exec: the child
         * may borrow amlrun's memory rather than get a copy of it. */
        _Alignas(16) char stack[CHILD_STACK];
        struct child_args a = {r, p[1]};
        pid = guard_vfork(child_entry, &a, stack, sizeof stack);
    }
    if (pid < 0 && errno == ENOSYS)
        pid = guard_fork();
    if (pid < 0) {
        *stage = SPAWN_SETUP;
        *err = errno;
        close(p[0]);
        close(p[1]);
        if (go[0] >= 0) {
            close(go[0]);
            close(go[1]);
        }
        return -1;
    }
    if (pid == 0) {
        if (go[1] >= 0)
            close(go[1]); /* or the go-ahead pipe never reads end of file */
        child(r, go[0], p[1]);
    }
    if (stop_after_fork)
        raise(SIGSTOP);
    /* Closed before the next worker is forked: a later child must not
     * hold this write end, or its end of file would wait for that one's
     * exec too. */
    close(p[1]);
    /* Both sides set the group so that it exists whichever runs first;
     * then the guard learns it, then the child may go on. */
    (void)setpgid(pid, pid);
    if (go[0] >= 0) {
        close(go[0]);
        guard_add(pid);
        ssize_t n;
        do
            n = write(go[1], "g", 1);
        while (n < 0 && errno == EINTR);
        close(go[1]);
    }
    *report_fd = p[0];
    return pid;
}

int spawn_end(pid_t pid, int report_fd, enum spawn_stage *stage, int *err)
{
    int report[2];
    ssize_t n;
    do
        n = read(report_fd, report, sizeof report);
    while (n < 0 && errno == EINTR);
    close(report_fd);
    if (n == 0)
        return 0; /* exec closed the pipe: the worker runs */
    *stage = n == (ssize_t)sizeof report ? (enum spawn_stage)report[0]
                                         : SPAWN_SETUP;
    *err = n == (ssize_t)sizeof report ? report[1] : EPROTO;
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    guard_del(pid);
    return -1;
}
