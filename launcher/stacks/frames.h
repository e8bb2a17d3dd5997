/*
 * What a frame is, for merge.c and report.c: the frames that decide a
 * rank's place, user code or not, a collective or not, and the order of
 * two stacks; and the two small things they share.
 */
#ifndef AMLRUN_STK_FRAMES_H
#define AMLRUN_STK_FRAMES_H

#include <stddef.h>

#include "stacks/stacks.h"

/* A Python worker: some thread of it has Python frames. */
int stk_rank_python(const struct stk_rank *r);
/* t is a thread of r's own process, not of one of its descendants. */
int stk_thread_own(const struct stk_rank *r, const struct stk_thread *t);

/* The frames of thread t that say where it is: its Python frames in a
 * Python worker, else its native frames. */
const struct stk_frame *stk_thread_frames(const struct stk_thread *t, int python, size_t *n);

/* The user's code, not the system's: a Python frame outside the standard
 * library, site-packages, dist-packages and "<frozen ...>"; a native frame
 * of a module outside the system's libraries (/lib, /usr/lib, the loader,
 * libc, libpthread, the vdso, the Python interpreter, CUDA). */
int stk_frame_user(const struct stk_frame *f, int python);

/* A frame of a collective or a barrier (torch.distributed, NCCL, MPI,
 * gloo): where ranks wait for the others. */
int stk_frame_collective(const struct stk_frame *f);

/* The order of two frame lists, innermost first: by function and file
 * (the module when both are unknown), and by line for every frame but the
 * innermost (a caller's line is its call site, the same in every rank at
 * the same place; the innermost line moves in a loop).  <0, 0, >0. */
int stk_frames_cmp(const struct stk_frame *a, size_t na, const struct stk_frame *b,
                   size_t nb);

/* The last part of a path ("a.py" of "/x/a.py"). */
const char *stk_base(const char *path);

/* qsort's and bsearch's order of two ints (ranks). */
int stk_int_cmp(const void *a, const void *b);

#endif /* AMLRUN_STK_FRAMES_H */
