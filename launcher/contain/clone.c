/* clone3 into a cgroup, forked or vforked (see clone.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "contain/clone.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CLONE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CLONE_ASAN 1
#endif
#ifdef CLONE_ASAN
/* The child's frames poisoned the shadow of the stack below ours; ASan's
 * own vfork() interceptor clears it the same way. */
void __asan_handle_vfork(void *sp);
#endif

/* struct clone_args of <linux/sched.h>, spelled out: that header's CLONE_*
 * macros clash with <sched.h>'s. */
struct args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack,
        stack_size, tls, set_tid, set_tid_size, cgroup;
};

#define F_VM 0x100ULL
#define F_VFORK 0x4000ULL
#define F_INTO_CGROUP 0x200000000ULL

static void args_for(struct args *a, int dir, uint64_t flags)
{
    memset(a, 0, sizeof *a);
    a->flags = flags | F_INTO_CGROUP;
    a->exit_signal = SIGCHLD;
    a->cgroup = (uint64_t)dir;
}

/* A child that never ran: reaped, and the call fails. */
static pid_t killed_at_birth(pid_t pid)
{
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    errno = ECANCELED;
    return -1;
}

pid_t clone_fork(int dir, int check)
{
#ifdef SYS_clone3
    int p[2] = {-1, -1};
    if (check && pipe2(p, O_CLOEXEC) < 0)
        return -1;
    struct args a;
    args_for(&a, dir, 0);
    pid_t pid = (pid_t)syscall(SYS_clone3, &a, sizeof a);
    if (!check)
        return pid;
    int e = errno;
    if (pid == 0) {
        /* Alive: a byte (a child killed at birth closes the pipe unread). */
        ssize_t w = write(p[1], "a", 1);
        (void)w;
        close(p[0]);
        close(p[1]);
        return 0;
    }
    close(p[1]);
    char c;
    ssize_t n = 0;
    if (pid > 0)
        while ((n = read(p[0], &c, 1)) < 0 && errno == EINTR) {
        }
    close(p[0]);
    if (pid > 0 && n != 1)
        return killed_at_birth(pid);
    errno = e;
    return pid;
#else
    (void)dir;
    (void)check;
    errno = ENOSYS;
    return -1;
#endif
}

/* The system call itself, inline: with the stack shared, the child must
 * not return from a function the parent is still in (as from syscall(3),
 * whose return address the child's next call would overwrite). */
#if defined(SYS_clone3) && defined(__x86_64__)
static inline __attribute__((always_inline)) long raw_clone3(struct args *a)
{
    long ret;
    register long rdi __asm__("rdi") = (long)a;
    register long rsi __asm__("rsi") = (long)sizeof *a;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"((long)SYS_clone3), "r"(rdi), "r"(rsi)
                     : "rcx", "r11", "memory");
    return ret;
}

pid_t clone_vfork(int dir, void (*fn)(void *), void *arg)
{
    struct args a;
    args_for(&a, dir, F_VM | F_VFORK);
    /* Set by the child first thing, in our memory: a child killed at
     * birth never runs, and then leaves it 0. */
    volatile int started = 0;
    long ret = raw_clone3(&a);
    if (ret == 0) {
        started = 1;
        fn(arg);
        _exit(127); /* fn does not return */
    }
#ifdef CLONE_ASAN
    __asan_handle_vfork(&a);
#endif
    if (ret < 0) {
        errno = (int)-ret;
        return -1;
    }
    if (!started)
        return killed_at_birth((pid_t)ret);
    return (pid_t)ret;
}
#else
pid_t clone_vfork(int dir, void (*fn)(void *), void *arg)
{
    (void)dir;
    (void)fn;
    (void)arg;
    errno = ENOTSUP;
    return -1;
}
#endif
