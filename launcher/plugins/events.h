/*
 * The job's events: --event-log FILE (output/eventlog.h: one JSON line
 * each, written by the supervisor's loop without blocking it) and
 * torchrun's --event-log-handler console (its agent's one event at the
 * end, on stderr, in torchrun's own format).  Every event carries "time"
 * (UTC, ISO 8601, milliseconds), "ts" (Unix seconds), "host", "node" (the
 * node rank, null while unknown) and "run_id"; a worker's event its
 * "rank" and "local_rank".  No event carries the command's arguments.
 */
#ifndef AMLRUN_PLUGIN_EVENTS_H
#define AMLRUN_PLUGIN_EVENTS_H

#include "cli/options.h"
#include "job/hooks.h"
#include "output/eventlog.h"

/* "start", before any rendezvous (no job yet): `node` as known (-1: from
 * the rendezvous), the workers this node starts, the entry point. */
void events_job_start(struct eventlog *e, const struct amlrun_opts *o,
                      const char *host, int node, int nproc,
                      const char *entry);

/* The job's events, from its hooks: "rendezvous" (a round of the control
 * plane), "worker_start", "worker_exit", "failure", "restart", "stop"
 * (its reason and signal), "hang" (TOPIC_HANG), "end"; torchrun's console
 * events when every worker of an attempt has started, and at the end. */
extern const struct job_plugin events_plugin;

#endif /* AMLRUN_PLUGIN_EVENTS_H */
