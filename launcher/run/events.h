/*
 * The job's events: --event-log FILE (output/eventlog.h: one JSON line
 * each, written by the supervisor's loop without blocking it) and
 * torchrun's --event-log-handler console (its agent's one event at the
 * end, on stderr, in torchrun's own format).  Every event carries "time"
 * (UTC, ISO 8601, milliseconds), "ts" (Unix seconds), "host", "node" (the
 * node rank, null while unknown) and "run_id"; a worker's event its
 * "rank" and "local_rank".  No event carries the command's arguments.
 */
#ifndef AMLRUN_EVENTS_H
#define AMLRUN_EVENTS_H

#include "output/eventlog.h"
#include "run/job.h"

/* "start", before any rendezvous: `node` as known (-1: from the
 * rendezvous), the workers this node starts, the entry point. */
void events_job_start(struct eventlog *e, const struct amlrun_opts *o,
                      const char *host, int node, int nproc,
                      const char *entry);
/* Watch the log's descriptor on the job's loop (written when writable). */
int events_watch(struct job *j);
/* "rendezvous": a round of the control plane (its number, the nodes, this
 * node's rank), the first at the start. */
void events_rendezvous(const struct job *j);
/* "worker_start", "worker_exit" (exit_code or signal, seconds run). */
void events_worker_start(const struct job *j, const struct worker *w);
void events_worker_exit(const struct job *j, const struct worker *w);
/* "failure": the attempt's first failed worker, or one that could not
 * start (`why`, else NULL). */
void events_failure(const struct job *j, const struct worker *w, const char *why);
/* "restart": restart `restarts` of --max-restarts begins. */
void events_restart(const struct job *j, int restarts);
/* "stop": why ("signal", "failure", "peer", "deadline") and the signal
 * sent or received. */
void events_stop(const struct job *j, const char *reason, int sig);
/* "hang": a hang ("hang", `idle` s without progress, the stalled ranks
 * where progress is per rank) or --timeout ("timeout", the job's time). */
void events_hang(const struct job *j, const char *reason, double idle,
                 const int *stalled, size_t nstalled);
/* Every worker of the attempt has started: torchrun's console events of
 * the rendezvous and the workers' START. */
void events_attempt_started(const struct job *j);
/* "end" with amlrun's exit status, torchrun's console events, and
 * --result-json (result.h). */
void events_end(const struct job *j, int status);

#endif /* AMLRUN_EVENTS_H */
