/*
 * The orphan guard: a small process forked before any worker that outlives
 * amlrun by a moment.  amlrun tells it each worker's process group; if
 * amlrun dies without saying goodbye (SIGKILL, OOM killer), the guard sees
 * its pipe close and kills those groups, so that the workers' own children
 * die too (the workers themselves die by PR_SET_PDEATHSIG).
 */
#ifndef AMLRUN_GUARD_H
#define AMLRUN_GUARD_H

#include <sys/types.h>

/* Fork the guard; 0, or -1 with errno. */
int guard_start(void);
/* A worker's group appeared / is gone. */
void guard_add(pid_t pgid);
void guard_del(pid_t pgid);
/* Normal end: the guard exits without killing anything. */
void guard_stop(void);
/* The guard's pid (0 when none), which amlrun reaps but never kills. */
pid_t guard_pid(void);

#endif /* AMLRUN_GUARD_H */
