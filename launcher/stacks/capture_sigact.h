/*
 * The kernel's disposition of amlrun's stack signal in a worker
 * (capture_sigact.c): read while the native pass holds the worker's
 * threads (capture_native.c), and judged by the Python pass before it
 * signals (capture_python.c).
 */
#ifndef AMLRUN_STACKS_CAPTURE_SIGACT_H
#define AMLRUN_STACKS_CAPTURE_SIGACT_H

#include <stddef.h>
#include <sys/types.h>

#include "stacks/capture.h"
#include "stacks/capture_unwind.h"

/* Where the worker catches the stack signal (SigCgt), read its handler
 * into c (act_known, act_handler) by making one of its stopped threads k
 * (n of them, seized by this thread) run rt_sigaction(sig, NULL, &old)
 * and putting the thread back as it was; k's stops are kept up to date (a
 * signal that came meanwhile is handed back at the detach).  Nothing is
 * read (act_known 0) where it cannot be done safely: not x86-64, a
 * seccomp filter the worker added itself (it might kill it for the call;
 * those inherited from amlrun, a container's, let amlrun's own query
 * through), a worker in a group-stop, no thread stopped. */
void cap_sigact_read(pid_t pid, struct cap_task *k, size_t n,
                     struct cap_native *c);

/* handler, the kernel's for the stack signal in pid, is amlrun's guard's
 * (faulthandler's, installed through python/guard.c's trampoline): 1; 0
 * when it is not (the program's own); -1 when it cannot be told (the
 * guard not there, not mapped in pid). */
int cap_sigact_ours(pid_t pid, unsigned long handler);

#endif /* AMLRUN_STACKS_CAPTURE_SIGACT_H */
