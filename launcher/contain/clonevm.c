/* clone3 with CLONE_VM onto a stack of its own (clonevm.h). */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "contain/clonevm.h"

/* <linux/sched.h>'s, spelled out: its macros clash with <sched.h>'s. */
#define CLONE_VM_FLAG 0x00000100ULL

pid_t clonevm(uint64_t flags, int cgroup, void (*fn)(void *), void *arg,
              void *stack, size_t size)
{
#if CLONEVM_ARCH && defined(SYS_clone3)
    struct {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack,
            stack_size, tls, set_tid, set_tid_size, cgroup;
    } a;
    memset(&a, 0, sizeof a);
    a.flags = flags | CLONE_VM_FLAG;
    a.exit_signal = SIGCHLD;
    a.stack = (uint64_t)(uintptr_t)stack;
    a.stack_size = size;
    a.cgroup = (uint64_t)(cgroup >= 0 ? cgroup : 0);
    /* The child starts on the new stack at the instruction after the
     * syscall, with the parent's registers: FN and ARG come over in
     * registers the syscall keeps.  No C frame may be returned through
     * there, hence the assembly (glibc's clone3.S does the same).  The
     * kernel points rsp at the stack's top, 16-byte aligned as the call
     * needs. */
    register void (*r12)(void *) __asm__("r12") = fn;
    register void *r13 __asm__("r13") = arg;
    long ret;
    __asm__ volatile("syscall\n\t"
                     "testq %%rax, %%rax\n\t"
                     "jnz 1f\n\t"
                     "xorl %%ebp, %%ebp\n\t" /* the outermost frame */
                     "movq %%r13, %%rdi\n\t"
                     "callq *%%r12\n\t"
                     /* FN does not return; should it, _exit(127) */
                     "movl %[exit], %%eax\n\t"
                     "movl $127, %%edi\n\t"
                     "syscall\n\t"
                     "hlt\n"
                     "1:"
                     : "=a"(ret)
                     : "0"((long)SYS_clone3), "D"(&a), "S"(sizeof a),
                       "r"(r12), "r"(r13), [exit] "i"(SYS_exit)
                     : "rcx", "r11", "memory", "cc");
    if (ret < 0) {
        errno = (int)-ret;
        return -1;
    }
    return (pid_t)ret;
#else
    (void)flags;
    (void)cgroup;
    (void)fn;
    (void)arg;
    (void)stack;
    (void)size;
    errno = ENOSYS;
    return -1;
#endif
}
