/*
 * The job's cgroup v2, the strongest containment (guard.h): a cgroup of its
 * own beside amlrun's (under root, or a delegated subtree), which workers
 * are cloned into (CLONE_INTO_CGROUP) or moved into after fork(); ending
 * the job is a write to its cgroup.kill.  Job cgroups that an amlrun killed
 * with its guard left behind are swept when the next one is made.
 */
#ifndef AMLRUN_CGROUP_H
#define AMLRUN_CGROUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Make the job's cgroup; 0, or -1 with why[] saying why there is none. */
int cgroup_setup(char *why, size_t whysz);
/* 1 once a child was cloned into the cgroup (born in it, never outside)
 * and none is born outside since; 0 when not, or not known yet (before the
 * first worker, and after a kill: those are forked and moved). */
int cgroup_clones_into(void);
/* 0 once clone3 into the cgroup is known not to work, or not to give a
 * child that lives; 1 while it works or is not tried yet. */
int cgroup_may_clone_into(void);
/* Its path (after cgroup_setup succeeded). */
const char *cgroup_path(void);
/* fork() into the job's cgroup: the child is in it before this returns. */
pid_t cgroup_fork(void);
/* Like cgroup_fork, but the child runs FN(ARG) on STACK sharing amlrun's
 * memory until it execs (clonevm.h: FLAGS is 0 or CLONEVM_WAIT).  The
 * first child (before cgroup_clones_into() says 1) must wait for a
 * go-ahead before it may exit, as cgroup_fork's does: it is looked at for
 * a kill at birth.  -1 with ENOSYS where it cannot (no clone3 into the
 * cgroup here, a child killed at birth, not this machine's kind; held
 * before that is known): fork then. */
pid_t cgroup_clonevm(uint64_t flags, void (*fn)(void *), void *arg,
                     void *stack, size_t size);
/* Kill everything in it (the cgroup stays). */
void cgroup_kill(void);
/* In the guard: kill everything in it, wait until it is empty and remove
 * it. */
void cgroup_end(void);
/* Close amlrun's descriptor of it / and remove the (empty) cgroup too. */
void cgroup_close(void);
void cgroup_remove(void);

#endif /* AMLRUN_CGROUP_H */
