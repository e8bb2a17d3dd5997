/*
 * clone3(2) for a worker, born in the job's cgroup (CLONE_INTO_CGROUP).
 *
 * clone_fork is fork() into a cgroup.  clone_vfork is vfork() into it: the
 * child shares amlrun's memory and runs on amlrun's stack, below the
 * caller's frame, while amlrun waits; it returns once the child has
 * exec'd or exited.  Nothing is copied (no page tables, no copy-on-write
 * faults in amlrun after it, no copied memory to tear down at the exec),
 * which is most of what a worker's start costs amlrun (issue 23).  fn must
 * not return; until its exec it may write nothing amlrun reads (errno,
 * which is amlrun's, aside) and call only async-signal-safe functions.
 *
 * Linux 6.x (seen on 6.18) kills a child cloned into a cgroup whose
 * cgroup.kill count differs from that of the parent's cgroup, before the
 * child runs: after a kill of the job's cgroup, or in a cgroup of amlrun's
 * that was once killed (systemd does that).  Both calls can tell: with
 * `check` (clone_fork; clone_vfork always), a child killed before it ran
 * is reaped and the call fails with ECANCELED.
 */
#ifndef AMLRUN_CLONE_H
#define AMLRUN_CLONE_H

#include <sys/types.h>

/* The child's pid, 0 in the child (clone_fork), or -1 with errno: ENOSYS
 * when clone3 or CLONE_INTO_CGROUP is not there (Linux < 5.7, valgrind),
 * ECANCELED when the child was killed at birth, and for clone_vfork
 * ENOTSUP on an architecture it has no code for (x86-64 only so far). */
pid_t clone_fork(int cgroup_dir, int check);
pid_t clone_vfork(int cgroup_dir, void (*fn)(void *), void *arg);

#endif /* AMLRUN_CLONE_H */
