/*
 * The orphan guard and the job's containment.
 *
 * The guard is a small process forked before any worker that outlives
 * amlrun by a moment.  If amlrun dies without saying goodbye (SIGKILL, OOM
 * killer), the guard sees its pipe close and ends the job's containment
 * (the workers themselves die by PR_SET_PDEATHSIG).  A worker that is not
 * born inside a containment the guard ends as a whole (process groups
 * alone, or a cgroup it is moved into after fork()) waits before exec
 * until amlrun has told the guard its group or moved it.
 *
 * A descendant that leaves its group (setsid, a double fork) is out of the
 * groups' reach, so the job is also contained where the system allows it,
 * the strongest first:
 *   cgroup   a cgroup v2 of its own under amlrun's (root, or a delegated
 *            subtree), which the workers are cloned into
 *            (CLONE_INTO_CGROUP); ending the job is a write to cgroup.kill,
 *            and the guard removes the directory, whichever way amlrun ends
 *            (cgroup.h);
 *   pidns    a PID namespace whose init is the guard: when it exits, the
 *            kernel kills everything in the namespace;
 *   pgroups  the process groups alone (the documented limit).
 */
#ifndef AMLRUN_GUARD_H
#define AMLRUN_GUARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Set up the containment and fork the guard; 0, or -1 with errno (then
 * there is no guard, and no containment beyond the process groups). */
int guard_start(void);
/* For -v: which containment is in force, and why not a stronger one. */
const char *guard_describe(void);
/* fork() for a worker: the child starts inside the containment.  Unless
 * guard_born_contained() said 1 before, the child must not exec before
 * guard_fork has returned in the parent and guard_add has been called. */
pid_t guard_fork(void);
/* guard_fork for a child that runs FN(ARG) on STACK in amlrun's memory
 * until it execs; with FLAGS CLONEVM_WAIT this returns once it has exec'd
 * or exited, as vfork does (contain/clonevm.h).  Unless
 * guard_born_contained() said 1, the child must wait for a go-ahead, as
 * guard_fork's, and FLAGS must be 0.  -1 with ENOSYS where it cannot be
 * made so (this containment, this machine): guard_fork then. */
pid_t guard_clonevm(uint64_t flags, void (*fn)(void *), void *arg,
                    void *stack, size_t size);
/* 1 when guard_clonevm can be tried: the job's cgroup, where clone3 is not
 * known not to work, on a CPU clonevm knows. */
int guard_clones_vm(void);
/* 1 when guard_fork's children are born inside a containment the guard
 * ends as a whole (cloned into the job's cgroup, or in its PID namespace):
 * they may go on to exec at once. */
int guard_born_contained(void);
/* In the child of guard_fork, before exec (async-signal-safe): in a PID
 * namespace, a mount namespace of its own with a /proc of the PID
 * namespace, so that its pids name it there (best effort). */
void guard_child_setup(void);
/* A worker's group appeared (call before letting it exec) / is gone
 * (kept for process groups alone; the other containments need no list). */
void guard_add(pid_t pgid);
void guard_del(pid_t pgid);
/* Every worker has ended: kill whatever descendant is left, in or out of
 * the workers' groups, before it returns (cgroup, pidns; nothing to do for
 * process groups alone). */
void guard_kill_strays(void);
/* Normal end: the guard kills what is left in the containment, removes the
 * cgroup and exits; reap it with waitpid(guard_pid()).  Once is enough; a
 * second call does nothing. */
void guard_stop(void);
/* The guard's pid (0 when none), which amlrun reaps but never kills. */
pid_t guard_pid(void);

#endif /* AMLRUN_GUARD_H */
