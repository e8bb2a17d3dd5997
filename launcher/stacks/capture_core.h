/*
 * What the parts of stk_capture() share (capture_core.c), below all of
 * them: the dispatcher (capture.c), the native frames (capture_native.c,
 * capture_unwind.c) and the Python frames (capture_python.c).
 */
#ifndef AMLRUN_STACKS_CAPTURE_CORE_H
#define AMLRUN_STACKS_CAPTURE_CORE_H

#include <stddef.h>
#include <sys/types.h>

#include "stacks/stacks.h"

/* Milliseconds on the monotonic clock. */
double cap_now_ms(void);

/* The text after "NAME:" of a line of /proc/PID/status (tid 0), of
 * /proc/PID/task/TID/status, or of /proc/self/status (pid 0), in buf;
 * NULL when the file or the line is not there. */
const char *cap_status_field(pid_t pid, pid_t tid, const char *name,
                             char *buf, size_t size);

/* A thread's state letter from /proc/PID/task/TID/stat, 0: it is gone;
 * cap_gone_state(): that letter says it has ended (0, Z, X). */
char cap_task_state(pid_t pid, pid_t tid);
int cap_gone_state(char s);

/* Append "; more" (or set) r->error: one line. */
int cap_error(struct stk_rank *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void cap_frames_free(struct stk_frame *f, size_t n);

#endif /* AMLRUN_STACKS_CAPTURE_CORE_H */
