/*
 * A child that shares amlrun's memory until it execs, as glibc's
 * posix_spawn makes one (clone with CLONE_VM | CLONE_VFORK), but by clone3,
 * so that it can also be born in the job's cgroup (CLONE_INTO_CGROUP), and
 * if need be without holding the caller until its exec.
 *
 * Why: fork() copies amlrun's page tables for every worker, and every page
 * amlrun or the child then writes is copied again (a copy-on-write fault),
 * only for the child to throw it all away at exec.  For 8 workers that was
 * most of amlrun's own CPU beyond the fork floor (issue 23).
 *
 * The child runs FN(ARG) on STACK (SIZE bytes, 16-byte aligned).  FN must
 * not return.  Two ways:
 *   CLONEVM_WAIT  as vfork: the caller's thread is held until the child has
 *                 exec'd or exited.  STACK may be in the caller's frame; the
 *                 child may make any async-signal-safe call.
 *   without       the caller goes on at once, beside the child, as after a
 *                 fork: on 2 CPUs a held parent waited for a CPU each time
 *                 its child's exec took both, 0.3 to 1.5 ms a worker.  The
 *                 child then shares the caller's thread-local storage too,
 *                 errno among it, which the caller may be writing or saving
 *                 and restoring meanwhile (free() does): it may only make
 *                 clonevm_sys() calls, which touch nothing of it, and read
 *                 memory the caller leaves as it is; STACK and all of it
 *                 must stay until the child has exec'd or exited (a
 *                 close-on-exec pipe's end of file says so).
 * Only x86-64 has the few instructions this needs (a clone3 onto a new stack
 * cannot go through a C function); elsewhere it fails with ENOSYS, and so
 * does a kernel without clone3 (Linux < 5.3, valgrind): callers fork() then.
 */
#ifndef AMLRUN_CLONEVM_H
#define AMLRUN_CLONEVM_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

/* 1 where clonevm can clone at all (the kernel may still say ENOSYS). */
#if defined(__x86_64__)
#define CLONEVM_ARCH 1
#else
#define CLONEVM_ARCH 0
#endif

/* clone3's CLONE_VFORK: hold the caller until the child has exec'd. */
#define CLONEVM_WAIT 0x00004000ULL

/* The pid (with CLONEVM_WAIT, after the child exec'd or exited); or -1
 * with errno, and then there is no child.  FLAGS are added to CLONE_VM;
 * CGROUP is the cgroup's directory for CLONE_INTO_CGROUP (else ignored). */
pid_t clonevm(uint64_t flags, int cgroup, void (*fn)(void *), void *arg,
              void *stack, size_t size);

/* A system call that leaves errno and the rest of the thread's storage
 * alone: its result, or -errno.  On x86-64 the instruction itself; where
 * clonevm cannot clone, only forked children need it, and libc's syscall()
 * does (its errno is then the child's own). */
static inline long clonevm_sys(long nr, long a1, long a2, long a3, long a4)
{
#if CLONEVM_ARCH
    register long r10 __asm__("r10") = a4;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
#else
    long ret = syscall(nr, a1, a2, a3, a4);
    return ret < 0 ? -(long)errno : ret;
#endif
}

#endif /* AMLRUN_CLONEVM_H */
