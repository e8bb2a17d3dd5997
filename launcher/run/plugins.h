/*
 * The one list of the supervisor's plugins (job/hooks.h), in the order of
 * their callbacks: the one file of amlrun that names them.
 */
#ifndef AMLRUN_PLUGINS_H
#define AMLRUN_PLUGINS_H

#include "cli/options.h"
#include "job/hooks.h"
#include "output/eventlog.h"

/* NULL-terminated. */
extern const struct job_plugin *const job_plugin_list[];

/* Before the job exists (main.c, before any rendezvous): the event log's
 * "start" (plugins/events.h). */
void plugins_job_start(struct eventlog *e, const struct amlrun_opts *o,
                       const char *host, int node, int nproc,
                       const char *entry);

#endif /* AMLRUN_PLUGINS_H */
