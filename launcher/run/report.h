/*
 * The supervisor's messages (one line each, through msg.h), what this node
 * tells the others through the control plane, and the end-of-job summary:
 * the root cause of the first failure (rootcause.h), or with a control
 * plane the job's first failure, printed by node 0.
 */
#ifndef AMLRUN_REPORT_H
#define AMLRUN_REPORT_H

#include "job/job.h"
#include "job/policy.h"
#include "output/stopreason.h"
#include "worker/spawn.h"

/* A worker has ended: its failure, the attempt's first (first_failure),
 * or with -v any end. */
void report_worker_end(const struct job *j, struct worker *w,
                       int first_failure);
/* After the first failure: the other workers are being stopped. */
void report_stopping_others(struct job *j);
/* A plugin's verdict (a hang, --timeout: `r`) stops the workers (when `a`
 * is ACT_STOP). */
void report_stopping(struct job *j, enum stop_reason r, enum action a);
/* The job succeeded: one line (not with -q; with a control plane, node 0
 * for the job). */
void report_success(const struct job *j, int status);
/* To the other nodes: this node's attempt failed (a hang: a failure of the
 * job's round, which restarts it while restarts are left), with `status`
 * and the text of its summary. */
void report_tell_round_failure(const struct job *j, int status,
                               const char *text);
/* A worker stopped by `sig`, or continued (sig 0). */
void report_worker_stopped(const struct job *j, struct worker *w, int sig);
/* A worker that could not start; returns amlrun's exit status for it. */
int report_start_failure(struct job *j, const struct worker *w,
                         enum spawn_stage stage, int err);
/* With -v: every worker of the attempt started. */
void report_started(const struct job *j);
/* Stop signal `sig`, and what the policy made of it. */
void report_stop_signal(struct job *j, int sig, enum action a);
/* The --term-timeout deadline passed with workers running. */
void report_deadline(struct job *j);
/* The control plane's host stops this node's workers. */
void report_peer_stop(struct job *j);
/* A restart of this node's workers (no control plane). */
void report_restart(struct job *j);
/* A new round of the job (control plane), `restarts` its count. */
void report_round(struct job *j, int restarts);
/* Where the error files (and torchrun's logs) of the run are. */
void report_rundir(const struct job *j, int keep, int base);

/* To the other nodes, through the control plane: this node's first
 * failure (its summary; kept as j->local_block), or an end of the job
 * whatever restarts are left (a stop signal, a worker that could not
 * start), with `status`. */
void report_tell_failure(struct job *j, const struct worker *w);
void report_tell_final(const struct job *j, int status, const char *why);

/* The end of the job: without a control plane, the root cause of the
 * first failure; with one, the job's summary (node 0, or every node when
 * the host was lost) and this node's own failure. */
void report_root_cause(struct job *j);
void report_job(const struct job *j, int status);
/* The end of a job that a hang or --timeout ended (no control plane):
 * one line, and for an agent above amlrun its error file. */
void report_hang_end(const struct job *j, int status);
/* The host said the job succeeded, but this node's workers did not all
 * succeed (stopped for the host, failed, or stopped here): amlrun's exit
 * status is `status`, never 0, and this line says why. */
void report_not_done(const struct job *j, int status);
/* With -v: why a node stopped by SIGTERM in a Slurm step exits 1. */
void report_slurm_stop(const struct job *j, int status);

#endif /* AMLRUN_REPORT_H */
