/*
 * Applying a rank's binding between fork and exec.  Only raw system calls
 * on memory prepared by amldist_plan_compute(): no allocation, no locks, no
 * stdio, so it is safe in a child of a multi-threaded parent.  The memory
 * policy is set per thread and survives execve, as the affinity does.
 */
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "topo/topo_internal.h"

int amldist_plan_apply(const amldist_plan_t *p, int lrank)
{
    if (p == NULL || lrank < 0 || lrank >= p->n) {
        errno = EINVAL;
        return AMLDIST_EINVAL;
    }
    const struct amldist__rank *r = &p->ranks[lrank];
    if (r->bind_cpus &&
        syscall(SYS_sched_setaffinity, 0, r->masksize, r->mask) != 0)
        return AMLDIST_EBIND;
    if (r->mem_mode >= 0 &&
        syscall(SYS_set_mempolicy, r->mem_mode, r->nodemask,
                (unsigned long)(8 * sizeof r->nodemask + 1)) != 0) {
        /* A kernel without NUMA support has only one node anyway. */
        if (!(errno == ENOSYS && p->single_numa))
            return AMLDIST_EBIND;
    }
    return 0;
}
