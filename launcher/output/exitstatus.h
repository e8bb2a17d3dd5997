/* Turning a worker's wait status into words and into amlrun's status. */
#ifndef AMLRUN_EXITSTATUS_H
#define AMLRUN_EXITSTATUS_H

#include <stddef.h>

/* The shell's convention: the exit status, or 128+N for signal N. */
int status_exit_code(int wstatus);
/* True for anything but a normal exit with status 0. */
int status_failed(int wstatus);
/* "exited with status 3", "killed by signal 9 (SIGKILL)", ", core dumped". */
void status_describe(int wstatus, char *buf, size_t size);
/* "SIGKILL" (or "SIG42" for a number without a name). */
void signal_name(int sig, char *buf, size_t size);

#endif /* AMLRUN_EXITSTATUS_H */
