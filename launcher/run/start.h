/*
 * The supervisor's job and an attempt's workers: the job's state set up
 * and freed, the run directory, and each worker started with its files
 * (error file, logs), its output pipes and its process.
 */
#ifndef AMLRUN_START_H
#define AMLRUN_START_H

#include "job/job.h"

/* 0, or -1 with errno (then job_free it all the same). */
int job_init(struct job *j, const struct job_spec *s);
void job_free(struct job *j);
/* Every worker's error file lives in a run directory: --log-dir's in
 * torchrun's layout, else a private one.  0, or -1 after a message. */
int job_open_rundir(struct job *j);
/* Close the log files of the attempt (torchrun's layout makes new ones). */
void job_close_attempt_logs(struct job *j);

/* Start worker `index` of the attempt, its output pipes in w->out and
 * w->err: forked and let go towards its exec, which start_worker_end
 * waits for (the workers of an attempt are all forked first, so that
 * their execs overlap).  0, or -1 after a message with amlrun's exit
 * status in *status (the pipes are closed then, and there is no
 * start_worker_end to call). */
int start_worker(struct job *j, int index, int *status);
/* The worker started by start_worker has exec'd: it runs (0), or it could
 * not (-1, reaped, its pipes closed, *status amlrun's exit status, and the
 * failure reported when REPORT says so). */
int start_worker_end(struct job *j, int index, int report, int *status);
/* Close w's Python stack channel (at its end; a new attempt opens one). */
void worker_close_stack(struct worker *w);

#endif /* AMLRUN_START_H */
