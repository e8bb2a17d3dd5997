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

/* pid holds the other end of the pipe fd (one of its descriptors is that
 * pipe): a worker that still has amlrun's Python channel.  1, 0, or -1
 * when its descriptors cannot be read (not dumpable: not known). */
int cap_holds_fd(pid_t pid, int fd);

/* What a thread that did not stop is doing, from /proc/PID/task/TID:
 * "state D (uninterruptible sleep) in WCHAN" (its wait channel where the
 * kernel shows it). */
void cap_thread_wait(pid_t pid, pid_t tid, char *buf, size_t size);

#endif /* AMLRUN_STACKS_CAPTURE_CORE_H */
