/*
 * amlrun's stdin and the workers (--stdin, as mpirun's --stdin and srun's
 * --input): in a terminal rank 0 reads it by default, so that a prompt
 * and breakpoint() work there.  A terminal is read only while amlrun is
 * in its foreground process group, and its lines are written to the
 * chosen workers' stdin pipes: the workers stay in process groups of
 * their own (signals, job control: supervise.c), where reading the
 * terminal would stop them (SIGTTIN).  A stdin that is not a terminal
 * goes to its one reader as it is (inherited, as before --stdin); to all
 * of them through amlrun.  What a worker does not take holds the rest
 * back: nothing is dropped, and amlrun reads on once every reader took the
 * chunk (or closed its stdin, or ended).  Without --stdin and outside a
 * terminal, the first local worker inherits stdin unless it is a
 * terminal (then /dev/null), as amlrun always did.
 */
#ifndef AMLRUN_STDIN_H
#define AMLRUN_STDIN_H

#include "job/job.h"

/* Decide from the options and what stdin and stdout are (job_init). */
void stdin_plan(struct job *j);
/* The descriptor worker w (local index `index`, its rank known) gets as
 * its stdin; *owned is set to it when it is a pipe's read end that the
 * caller closes once the worker is spawned (else -1).  -1 with errno. */
int stdin_for(struct job *j, struct worker *w, int index, int *owned);
/* Before an attempt's first worker starts (`id`: its rank and the job's
 * world): --stdin RANK that is no rank of the job is refused in the first
 * attempt (-1 after a message, *status the exit status 2), said once in a
 * later one (an elastic job shrunk).  0 otherwise. */
int stdin_check(struct job *j, const struct worker_id *id, int *status);
/* Once the attempt's workers have their ranks: --stdin RANK on another
 * node is said, once: that node's amlrun gives it its own stdin. */
void stdin_note(struct job *j);
/* The worker ended (or never started): its pipe closed. */
void stdin_worker_end(struct job *j, struct worker *w);

#endif /* AMLRUN_STDIN_H */
