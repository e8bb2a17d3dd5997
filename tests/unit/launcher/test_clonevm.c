/* contain/clonevm.c, the clone3 amlrun starts its workers with: the child
 * runs on the stack it is given, in the caller's memory; with CLONEVM_WAIT
 * the caller goes on only once the child has exec'd or exited, without it
 * at once, beside the child, whose exec a close-on-exec pipe then tells;
 * the child's statuses, an exec's among them, come through as a fork's
 * would; clonevm_sys leaves errno alone.  Where clonevm cannot clone
 * (ENOSYS: not x86-64, or valgrind, which has no clone3) each case says so
 * and passes, as amlrun then forks. */
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#include "contain/clonevm.h"

struct shared {
    volatile int before_exit; /* the child's last write before _exit */
    volatile uintptr_t local_at; /* where a local of the child's lies */
    int code;
};

/* The child's stack, in the caller's frame as amlrun's is (ASan knows it
 * there as the thread's stack). */
#define STACK_SIZE (64 * 1024)

static int unsupported(pid_t pid)
{
    if (pid >= 0 || errno != ENOSYS)
        return 0;
    printf("# clonevm: no clone3 onto a new stack here (amlrun forks "
           "instead)\n");
    return 1;
}

/* clonevm with CLONEVM_WAIT onto STACK (STACK_SIZE bytes): the pid, once
 * the child has exec'd or exited; -1 where clonevm cannot clone. */
static pid_t start_held(void (*fn)(void *), void *arg, char *stack)
{
    pid_t pid = clonevm(CLONEVM_WAIT, -1, fn, arg, stack, STACK_SIZE);
    if (unsupported(pid))
        return -1;
    CHECK(pid > 0);
    return pid;
}

/* The child's exit status once reaped, or -1 when it was not reaped or
 * did not exit. */
static int exit_code(pid_t pid)
{
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static void child_exits(void *p)
{
    struct shared *s = p;
    volatile int local = 0;
    s->local_at = (uintptr_t)&local;
    s->before_exit = 1;
    _exit(s->code);
}

/* The parent sees what the child wrote last: the memory is the same one,
 * and the parent was held until the child's end (after a fork it would
 * see nothing; without the hold, maybe nothing yet). */
static void test_shared_memory_held_until_exit(void)
{
    _Alignas(16) char stack[STACK_SIZE];
    struct shared s = {0, 0, 7};
    pid_t pid = start_held(child_exits, &s, stack);
    if (pid < 0)
        return;
    CHECK_INT_EQ(s.before_exit, 1);
    CHECK_INT_EQ(exit_code(pid), 7);
}

/* The child ran on the stack it was given, not on the caller's. */
static void test_runs_on_the_given_stack(void)
{
    _Alignas(16) char stack[STACK_SIZE];
    struct shared s = {0, 0, 0};
    pid_t pid = start_held(child_exits, &s, stack);
    if (pid < 0)
        return;
    CHECK(s.local_at >= (uintptr_t)stack &&
          s.local_at < (uintptr_t)stack + sizeof stack);
    waitpid(pid, NULL, 0);
}

struct exec_args {
    volatile int about_to_exec;
    char *const *argv;
};

static void child_execs(void *p)
{
    struct exec_args *a = p;
    a->about_to_exec = 1;
    execv(a->argv[0], a->argv);
    _exit(127);
}

/* An exec in the child: the parent goes on (the child has its own memory
 * from then on) and the program's status is the child's. */
static void test_exec_status(void)
{
    _Alignas(16) char stack[STACK_SIZE];
    char *const argv[] = {"/bin/sh", "-c", "exit 5", NULL};
    struct exec_args a = {0, argv};
    pid_t pid = start_held(child_execs, &a, stack);
    if (pid < 0)
        return;
    CHECK_INT_EQ(a.about_to_exec, 1);
    CHECK_INT_EQ(exit_code(pid), 5);
}

/* Many in a row, as for a node's workers, each reaped: no child is lost,
 * none is left. */
static void test_many_in_a_row(void)
{
    _Alignas(16) char stack[STACK_SIZE];
    for (int i = 0; i < 64; i++) {
        struct shared s = {0, 0, i % 100};
        pid_t pid = start_held(child_exits, &s, stack);
        if (pid < 0)
            return;
        CHECK_INT_EQ(exit_code(pid), i % 100);
    }
    CHECK_INT_EQ(waitpid(-1, NULL, WNOHANG), -1);
    CHECK_INT_EQ(errno, ECHILD);
}

/* ---- without CLONEVM_WAIT: the child runs beside the caller ---------- */

struct beside {
    int go;                    /* read end: the caller's go-ahead */
    volatile int after_go;     /* written once the go-ahead came */
    volatile uintptr_t local_at;
    char *const *argv;         /* exec this after the go-ahead, if set */
};

/* Only clonevm_sys: errno and the rest of the caller's thread storage are
 * the caller's, who runs meanwhile (clonevm.h). */
static void child_beside(void *p)
{
    struct beside *b = p;
    volatile int local = 0;
    char c;
    b->local_at = (uintptr_t)&local;
    while (clonevm_sys(SYS_read, b->go, (long)&c, 1, 0) == -EINTR) {
    }
    b->after_go = 1;
    if (b->argv)
        clonevm_sys(SYS_execve, (long)b->argv[0], (long)b->argv, 0, 0);
    for (;;)
        clonevm_sys(SYS_exit_group, 9, 0, 0, 0);
}

/* Not in a frame: amlrun gives such a child a mapping of its own. */
static _Alignas(16) char beside_stack[STACK_SIZE];

/* A child beside the caller that waits on a new go-ahead pipe (GO[1] the
 * caller's end) and then execs ARGV, or exits 9 when ARGV is NULL: its
 * pid, or -1 where clonevm cannot clone (the pipe closed then). */
static pid_t start_beside(struct beside *b, char *const *argv, int go[2])
{
    CHECK_INT_EQ(pipe2(go, O_CLOEXEC), 0);
    *b = (struct beside){go[0], 0, 0, argv};
    pid_t pid = clonevm(0, -1, child_beside, b, beside_stack,
                        sizeof beside_stack);
    if (unsupported(pid)) {
        close(go[0]);
        close(go[1]);
        return -1;
    }
    CHECK(pid > 0);
    return pid;
}

/* The caller is back while the child still waits for its go-ahead, which
 * only the caller can give: held, it would never come back. */
static void test_beside_returns_at_once(void)
{
    struct beside b;
    int go[2];
    pid_t pid = start_beside(&b, NULL, go);
    if (pid < 0)
        return;
    CHECK_INT_EQ(b.after_go, 0);
    CHECK_INT_EQ((int)write(go[1], "g", 1), 1);
    CHECK_INT_EQ(exit_code(pid), 9);
    CHECK_INT_EQ(b.after_go, 1); /* the same memory */
    CHECK(b.local_at >= (uintptr_t)beside_stack &&
          b.local_at < (uintptr_t)beside_stack + sizeof beside_stack);
    close(go[0]);
    close(go[1]);
}

/* The child's exec closes its copy of a close-on-exec pipe: end of file
 * there says the stack is free again, as amlrun's spawn_end reads it; the
 * program's status is the child's. */
static void test_beside_exec_told_by_pipe(void)
{
    char *const argv[] = {"/bin/sh", "-c", "exit 5", NULL};
    struct beside b;
    int go[2], told[2];
    CHECK_INT_EQ(pipe2(told, O_CLOEXEC), 0);
    pid_t pid = start_beside(&b, argv, go);
    close(told[1]); /* the child's copy, if any, is the last */
    if (pid >= 0) {
        CHECK_INT_EQ((int)write(go[1], "g", 1), 1);
        char c;
        CHECK_INT_EQ((int)read(told[0], &c, 1), 0);
        CHECK_INT_EQ(b.after_go, 1);
        CHECK_INT_EQ(exit_code(pid), 5);
        close(go[0]);
        close(go[1]);
    }
    close(told[0]);
}

/* clonevm_sys says a failure by its result and leaves errno as it was. */
static void test_sys_leaves_errno(void)
{
    errno = EDOM;
    CHECK_INT_EQ((int)clonevm_sys(SYS_close, -1, 0, 0, 0), -EBADF);
    CHECK_INT_EQ(errno, EDOM);
    CHECK_INT_EQ((int)clonevm_sys(SYS_getpid, 0, 0, 0, 0), (int)getpid());
}

int main(void)
{
    RUN(test_shared_memory_held_until_exit);
    RUN(test_runs_on_the_given_stack);
    RUN(test_exec_status);
    RUN(test_many_in_a_row);
    RUN(test_beside_returns_at_once);
    RUN(test_beside_exec_told_by_pipe);
    RUN(test_sys_leaves_errno);
    return test_summary();
}
