/*
 * The per-node supervisor: starts the workers, then runs the one event
 * loop (net/loop.h) over a signalfd (signals and child exits), the control
 * plane's descriptor, the workers' output pipes and a timer (the SIGKILL
 * deadline), until every worker has ended and every pipe is drained.  No
 * polling interval anywhere.
 */
#ifndef AMLRUN_SUPERVISE_H
#define AMLRUN_SUPERVISE_H

#include "job/jobspec.h"

/* Run the job; returns amlrun's exit status. */
int supervise(const struct job_spec *s);

/* The signals amlrun handles: stop the job (--signals-to-handle's) / pass
 * on / job control (SIGTSTP stops the workers, then amlrun; SIGCONT
 * continues them). */
int sig_stops_job(const struct amlrun_opts *o, int sig);
int sig_forwarded(const struct amlrun_opts *o, int sig);
int sig_job_control(int sig);

#endif /* AMLRUN_SUPERVISE_H */
