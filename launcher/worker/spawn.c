/* fork/exec of one worker (see spawn.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "contain/clonevm.h"
#include "contain/guard.h"
#include "worker/spawn.h"

/* <linux/close_range.h>'s, spelled out (not in every libc's headers). */
#define CLOSE_RANGE_CLOEXEC_FLAG (1U << 2)

/* The child's code is not instrumented by ASan: a child beside amlrun runs
 * on a stack ASan does not know (it would warn at each call that does not
 * return, and poison the stack's shadow, which outlives the mapping). */
#define CHILD_CODE __attribute__((no_sanitize_address))

/* What the child is given, in one: the request, the pipe that reports a
 * failure, whether it applies a binding, and the go-ahead pipe's ends
 * (-1: none). */
struct child_args {
    const struct spawn_req *r;
    int report_fd;
    int binds;
    int go_rd, go_wr;
};

/* In the child: tell the parent what failed and leave.  The statuses match
 * a shell's: 127 not found, 126 could not run. */
CHILD_CODE static _Noreturn void child_fail(int fd, enum spawn_stage stage,
                                            long err)
{
    int report[2] = {(int)stage, (int)err};
    while (clonevm_sys(SYS_write, fd, (long)report, sizeof report, 0) ==
           -EINTR) {
    }
    for (;;)
        clonevm_sys(SYS_exit_group, err == ENOENT ? 127 : 126, 0, 0, 0);
}

/* dup2 by dup3, which every architecture has; dup2 of a descriptor onto
 * itself does nothing, and dup3 refuses it. */
CHILD_CODE static long child_dup2(int from, int to)
{
    return from == to ? to : clonevm_sys(SYS_dup3, from, to, 0, 0);
}

/* A signal's action back to SIG_DFL or SIG_IGN.  On x86-64, where a child
 * may share amlrun's memory, by rt_sigaction with the kernel's struct (no
 * handler, so no restorer); elsewhere every child is forked and libc's
 * sigaction will do. */
CHILD_CODE static long child_signal(int sig, int ignore)
{
#if CLONEVM_ARCH
    struct {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        uint64_t mask;
    } ka = {ignore ? SIG_IGN : SIG_DFL, 0, NULL, 0};
    return clonevm_sys(SYS_rt_sigaction, sig, (long)&ka, 0, sizeof ka.mask);
#else
    struct sigaction sa = {0};
    sa.sa_handler = ignore ? SIG_IGN : SIG_DFL;
    return sigaction(sig, &sa, NULL) < 0 ? -(long)errno : 0;
#endif
}

/* glibc's own two signals (the kernel's 32 and 33: thread cancellation,
 * set*id across threads) as amlrun was started with them, bit k for
 * signal 32 + k: one ignored then is ignored again in the worker.  glibc
 * puts its handler on 33 at amlrun's first thread (the --status thread,
 * the rendezvous's), and an exec turns a handler into the default, so a
 * worker would not inherit what amlrun's parent ignored, as it does under
 * any other launcher (spawn_note_inherited). */
#define LIBC_SIG_FIRST 32
#define LIBC_SIGS 2
static unsigned libc_ignored;

/* The soft limit of open files amlrun was started with: the rendezvous
 * host raises amlrun's own to the hard one for a job of many nodes
 * (lib/rdzv/tcp/hosting.c), and the workers get the one they would have
 * had without amlrun (a select() loop breaks past 1024). */
static struct rlimit start_nofile;
static int have_nofile;

void spawn_note_inherited(void)
{
    have_nofile = getrlimit(RLIMIT_NOFILE, &start_nofile) == 0;
    struct {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        uint64_t mask;
    } old;
    for (int k = 0; k < LIBC_SIGS; k++)
        if (syscall(SYS_rt_sigaction, LIBC_SIG_FIRST + k, NULL, &old,
                    sizeof old.mask) == 0 && old.handler == SIG_IGN)
            libc_ignored |= 1u << k;
}

/* A failed call in the child ends it with a report on FD: the system
 * calls say -errno themselves (clonevm_sys), so that errno, which a child
 * sharing amlrun's memory shares with amlrun, is never read or written
 * here. */
#define CHILD_TRY(fd, call, stage)                                             \
    do {                                                                       \
        long rc_ = (call);                                                     \
        if (rc_ < 0)                                                           \
            child_fail((fd), (stage), -rc_);                                   \
    } while (0)

CHILD_CODE static _Noreturn void child(const struct child_args *a)
{
    const struct spawn_req *r = a->r;
    int fd = a->report_fd;
    /* Own group first, so that a signal for the group never misses a
     * process that is about to exec. */
    CHILD_TRY(fd, clonevm_sys(SYS_setpgid, 0, 0, 0, 0), SPAWN_SETUP);
    /* Die with amlrun. */
    CHILD_TRY(fd, clonevm_sys(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0),
              SPAWN_SETUP);
    guard_child_setup();
    /* Unless born inside a containment the guard ends as a whole (go is
     * -1), run nothing before amlrun has told the orphan guard about our
     * group or moved us into the cgroup (its go-ahead byte): killed in
     * between, amlrun would leave the command's children unknown to the
     * guard.  End of file means amlrun died, maybe before the prctl took
     * effect. */
    if (a->go_rd >= 0) {
        char c;
        long n;
        /* (or the pipe would never read end of file) */
        clonevm_sys(SYS_close, a->go_wr, 0, 0, 0);
        while ((n = clonevm_sys(SYS_read, a->go_rd, (long)&c, 1, 0)) ==
               -EINTR) {
        }
        if (n != 1)
            for (;;)
                clonevm_sys(SYS_exit_group, 128 + SIGKILL, 0, 0, 0);
        clonevm_sys(SYS_close, a->go_rd, 0, 0, 0);
    }
    CHILD_TRY(fd, child_dup2(r->stdin_fd, 0), SPAWN_SETUP);
    CHILD_TRY(fd, child_dup2(r->stdout_fd, 1), SPAWN_SETUP);
    CHILD_TRY(fd, child_dup2(r->stderr_fd, 2), SPAWN_SETUP);
    /* amlrun installs no handlers (it reads signals from a signalfd), but it
     * ignores SIGPIPE for itself: give the worker the usual default back. */
    child_signal(SIGPIPE, r->pipe_was_ignored);
    if (r->ignore_sighup)
        child_signal(SIGHUP, 1);
    for (int k = 0; k < LIBC_SIGS; k++)
        if (libc_ignored & (1u << k))
            child_signal(LIBC_SIG_FIRST + k, 1);
    if (have_nofile)
        (void)clonevm_sys(SYS_prlimit64, 0, RLIMIT_NOFILE, (long)&start_nofile,
                          0);
    /* Only a child of its own, or one amlrun waits for (spawn.h). */
    if (a->binds) {
        int err = bind_apply_child(r->binding, r->local_rank);
        if (err)
            child_fail(fd, SPAWN_BIND, err);
    }
    /* Past the standard three, the worker gets its stack channel and the
     * progress page, nothing else: what amlrun's own parent left open (a
     * CI runner's pipe, make's jobserver, another launcher's socket) is
     * closed at exec, as torchrun's workers (close_fds) and mpirun's have
     * it.  Marked, not closed, so that the report pipe still tells of a
     * failed exec.  A kernel without CLOSE_RANGE_CLOEXEC (before 5.11)
     * passes them on, as before. */
#ifdef SYS_close_range
    (void)clonevm_sys(SYS_close_range, 3, (long)~0U, CLOSE_RANGE_CLOEXEC_FLAG,
                      0);
#endif
    /* Those two keep their numbers, named in the environment the parent
     * composed: no dup2 onto a fixed number that another descriptor could
     * hold. */
    const int keep[] = {r->keep_fd, r->page_fd};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (keep[i] >= 0)
            CHILD_TRY(fd, clonevm_sys(SYS_fcntl, keep[i], F_SETFD, 0, 0),
                      SPAWN_SETUP);
    clonevm_sys(SYS_rt_sigprocmask, SIG_SETMASK, (long)r->mask, 0, _NSIG / 8);
    long rc = clonevm_sys(SYS_execve, (long)r->path, (long)r->argv,
                          (long)r->envp, 0);
    if (rc == -ENOEXEC && r->sh_argv)
        rc = clonevm_sys(SYS_execve, (long)"/bin/sh", (long)r->sh_argv,
                         (long)r->envp, 0);
    child_fail(fd, SPAWN_EXEC, -rc);
}

CHILD_CODE static void child_entry(void *arg)
{
    child(arg);
}

/* A child's stack: what child() needs, with room to spare for a
 * sanitizer's interceptors. */
enum { CHILD_STACK = 64 * 1024 };

/* A child that applies a binding, held until its exec (spawn.h): its stack
 * in this frame, which amlrun does not leave meanwhile. */
static pid_t clone_held(const struct child_args *a)
{
    _Alignas(16) char stack[CHILD_STACK];
    return guard_clonevm(CLONEVM_WAIT, child_entry, (void *)a, stack,
                         sizeof stack);
}

/* A child that runs beside amlrun: its stack, below a guard page, and its
 * copy of the request and the arguments above it, in a mapping of its own
 * that spawn_end unmaps once the child is done with it. */
struct beside {
    struct spawn_req r;
    struct child_args a;
};

static pid_t clone_beside(const struct child_args *a, struct spawn *sp)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t top = (sizeof(struct beside) + page - 1) / page * page;
    size_t size = page + CHILD_STACK + top;
    char *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (mem == MAP_FAILED)
        return -1;
    struct beside *b = (struct beside *)(mem + page + CHILD_STACK);
    b->r = *a->r;
    b->a = *a;
    b->a.r = &b->r;
    pid_t pid = -1;
    if (mprotect(mem, page, PROT_NONE) == 0)
        pid = guard_clonevm(0, child_entry, &b->a, mem + page, CHILD_STACK);
    if (pid < 0) {
        int e = errno;
        munmap(mem, size);
        errno = e;
        return -1;
    }
    sp->mem = mem;
    sp->mem_size = size;
    return pid;
}

int spawn_begin(const struct spawn_req *r, struct spawn *sp,
                enum spawn_stage *stage, int *err)
{
    int p[2], go[2] = {-1, -1};
    *sp = (struct spawn)SPAWN_NONE;
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
    struct child_args a = {r, p[1],
                           bind_child_applies(r->binding, r->local_rank),
                           go[0], go[1]};
    pid_t pid = -1;
    errno = ENOSYS;
    /* In the job's cgroup the child may borrow amlrun's memory rather than
     * get a copy of it: beside amlrun, or, when it binds, held until its
     * exec, unless it waits for its go-ahead, which amlrun gives after
     * this (then it is forked). */
    if (guard_clones_vm()) {
        if (!a.binds)
            pid = clone_beside(&a, sp);
        else if (go[0] < 0)
            pid = clone_held(&a);
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
    if (pid == 0)
        child(&a);
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
    sp->pid = pid;
    sp->report_fd = p[0];
    return 0;
}

int spawn_end(struct spawn *sp, enum spawn_stage *stage, int *err)
{
    int report[2];
    ssize_t n;
    do
        n = read(sp->report_fd, report, sizeof report);
    while (n < 0 && errno == EINTR);
    close(sp->report_fd);
    int rc = 0;
    if (n != 0) {
        *stage = n == (ssize_t)sizeof report ? (enum spawn_stage)report[0]
                                             : SPAWN_SETUP;
        *err = n == (ssize_t)sizeof report ? report[1] : EPROTO;
        while (waitpid(sp->pid, NULL, 0) < 0 && errno == EINTR) {
        }
        guard_del(sp->pid);
        rc = -1;
    }
    /* Exec'd (which lets go of amlrun's memory before it closes the
     * close-on-exec pipe) or reaped: the child is done with its stack. */
    if (sp->mem != NULL)
        munmap(sp->mem, sp->mem_size);
    *sp = (struct spawn)SPAWN_NONE;
    return rc;
}
