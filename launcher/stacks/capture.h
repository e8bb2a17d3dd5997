/*
 * The parts of stk_capture() (capture.c), not for the rest of amlrun:
 * native frames (capture_native.c: ptrace; capture_unwind.c: libdwfl) and
 * Python frames (capture_python.c: the faulthandler channel), over the
 * helpers they share (capture_core.h).
 */
#ifndef AMLRUN_STACKS_CAPTURE_H
#define AMLRUN_STACKS_CAPTURE_H

#include <stddef.h>
#include <sys/types.h>

#include "stacks/capture_core.h"
#include "stacks/stacks.h"

/* What the native pass learnt of one target beside its threads. */
struct cap_native {
    int exited;               /* it was gone, or went, during the pass */
    int stopped;              /* it was in a group-stop (SIGSTOP, ...) */
    unsigned long *tp;        /* per thread of the rank: its thread
                                 pointer (x86-64: pthread_self()), 0 none */
    int act_known;            /* the kernel's handler of the stack signal */
    unsigned long act_handler; /* was read (capture_sigact.c): this one */
};

/* Read every thread's native frames of the n targets t into r[i]
 * (threads, error) and c[i], by the deadline (cap_now_ms()), a few targets
 * at a time, each let go as soon as it is read: a thread that has not
 * stopped in a moment and does not run (an uninterruptible sleep: a dead
 * NFS server) gets no frames, its state said.  The targets run on
 * afterwards, or stay stopped if they were.  0, or -1 when out of
 * memory. */
int cap_native_all(const struct stk_target *t, size_t n, struct stk_rank *r,
                   struct cap_native *c, double deadline);

/* Python frames of the targets that have a channel: signal each, read and
 * parse the dumps by the deadline, and put the frames on r[i]'s threads
 * (c[i].tp maps faulthandler's thread ids to them).  0, or -1 when out of
 * memory. */
int cap_python(const struct stk_target *t, size_t n, struct stk_rank *r,
               struct cap_native *c, double deadline);

/* The descendants of pid, children first, then theirs (at most
 * CAP_MAX_KIDS), malloc'd in *out (capture_kids.c).  0, or -1 when out of
 * memory. */
#define CAP_MAX_KIDS 64
int cap_descendants(pid_t pid, pid_t **out, size_t *n);

/* Put a descendant's threads (their pid set to its) after r's, and its
 * error into r's ("child PID (name): ..."); kid keeps the rest.  0, or -1
 * when out of memory. */
int cap_adopt(struct stk_rank *r, struct stk_rank *kid);

/* pid answers the Python stack signal and holds the channel fd (a
 * Python forked from a worker holds its rank's). */
int cap_python_hooked(pid_t pid, int fd);

/* Parse one faulthandler dump ("Thread 0x... (most recent call first):"
 * blocks) into threads of Python frames only, tid 0, and their ids (the
 * pthread_t faulthandler prints) in *ids (malloc'd).  Exposed for tests.
 * 0, or -1 when out of memory. */
int cap_parse_dump(const char *text, size_t len, struct stk_thread **th,
                   size_t *n, unsigned long **ids, int *current);

#endif /* AMLRUN_STACKS_CAPTURE_H */
