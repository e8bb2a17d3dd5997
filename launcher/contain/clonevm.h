/*
 * A child that shares amlrun's memory until it execs, as glibc's
 * posix_spawn makes one (clone with CLONE_VM | CLONE_VFORK), but by clone3,
 * so that it can also be born in the job's cgroup (CLONE_INTO_CGROUP).
 *
 * Why: fork() copies amlrun's page tables for every worker, and every page
 * amlrun or the child then writes is copied again (a copy-on-write fault),
 * only for the child to throw it all away at exec.  For 8 workers that was
 * most of amlrun's own CPU beyond the fork floor (issue 23).  Here the
 * child borrows the memory instead and the parent thread waits, as vfork's
 * does, until the child has exec'd or exited: the exec itself (loading the
 * program, the dynamic linker) still runs beside the next spawn.
 *
 * The child runs FN(ARG) on STACK (SIZE bytes, 16-byte aligned, not in use
 * by anyone else until this returns: the caller's own frame will do, as
 * the caller is suspended meanwhile).  FN must not return and may only make
 * async-signal-safe calls on memory it does not free; errno it sets lands
 * in the calling thread's.  Only x86-64 has the few instructions this needs
 * (a clone3 onto a new stack cannot go through a C function); elsewhere it
 * fails with ENOSYS, and so does a kernel without clone3 (Linux < 5.3,
 * valgrind): callers fork() then.
 */
#ifndef AMLRUN_CLONEVM_H
#define AMLRUN_CLONEVM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The pid, after the child exec'd or exited; or -1 with errno, and then
 * there is no child.  FLAGS are added to CLONE_VM | CLONE_VFORK; CGROUP is
 * the cgroup's directory for CLONE_INTO_CGROUP (else ignored). */
pid_t clonevm(uint64_t flags, int cgroup, void (*fn)(void *), void *arg,
              void *stack, size_t size);

#endif /* AMLRUN_CLONEVM_H */
