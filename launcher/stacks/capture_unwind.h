/*
 * The unwinding of a target's stopped threads with libdwfl
 * (capture_unwind.c), for the ptrace pass that stops them
 * (capture_native.c).
 */
#ifndef AMLRUN_STACKS_CAPTURE_UNWIND_H
#define AMLRUN_STACKS_CAPTURE_UNWIND_H

#include <stddef.h>
#include <sys/types.h>

#include "stacks/capture.h"

/* One thread of a target, as the ptrace pass found and left it. */
struct cap_task {
    pid_t tid;
    int seized, stopped, gone;
    int inject;      /* the signal its stop reported, handed back */
    int group_stop;  /* the stop signal of its group-stop, else 0 */
};

/* Each file's line table, read once for all the targets of a capture;
 * {0} before the first, cap_srccache_free() after the last. */
struct cap_srccache {
    struct cap_srcmod *m;
    size_t n;
};

/* Load libdw (dw.h) for the unwinding, before the first target is seized:
 * 0; -1 with *why (the library and dlerror's reason) when it cannot be. */
int cap_unwind_load(const char **why);

/* Unwind every stopped thread of pid (k: its n threads, the leader first)
 * into r->threads, one per seized thread that has not ended, in k's
 * order, with their thread pointers in c->tp; r->error says what could
 * not be read.  0, or -1 when out of memory. */
int cap_unwind(pid_t pid, const struct cap_task *k, size_t n,
               struct stk_rank *r, struct cap_native *c,
               struct cap_srccache *cache);

void cap_srccache_free(struct cap_srccache *c);

#endif /* AMLRUN_STACKS_CAPTURE_UNWIND_H */
