/*
 * The straggler readings of the workers' progress page (job.h's page,
 * lib/progress/straggler.h): while some worker calls amldist_progress(),
 * the slots' rings are read from a timer into a history per worker; every
 * worker's lag now goes into its --status record, the new marks to the
 * topic TOPIC_MARKS (the plane takes them to the host's node), and at the
 * end of a job on one node the line "amlrun: slowest rank R: ..." is
 * printed when one rank was consistently last.
 *
 * The timer: without a call yet it looks every 1, 2, 4 ... up to 16 s (a
 * few loads, no system call but the loop's wake-up); once a worker calls,
 * often enough that no slot's ring (64 steps) fills between two looks
 * (10 ms to 1 s).  A job that never calls the API costs nothing else.
 */
#ifndef AMLRUN_PLUGIN_STRAGGLER_H
#define AMLRUN_PLUGIN_STRAGGLER_H

#include "job/hooks.h"

extern const struct job_plugin straggler_plugin;

#endif /* AMLRUN_PLUGIN_STRAGGLER_H */
