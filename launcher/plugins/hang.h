/*
 * The hang watch: what the supervisor watches besides exits, on the job's
 * timers, each armed only when it is asked for (no timer, no cost
 * otherwise):
 *   - --hang-timeout: a look when a hang could first be due, deciding with
 *     lib/progress/hang.h over this node's ranks (their output lines, and
 *     their calls of the progress API); on a hang, every rank's stack is
 *     read and merged, printed (and written, --hang-report), and the
 *     attempt stops as a failure: exit status 124, or a restart;
 *   - --timeout: the job's wall time; the stacks first, then the job ends
 *     (124) whatever restarts are left; across nodes the rendezvous host's
 *     node gathers every node's stacks for one report (job_gather), and
 *     another node's timer is only a fallback, 30 s later;
 *   - ranks still running after others ended: a notice soon after, then
 *     at doubling intervals.
 */
#ifndef AMLRUN_PLUGIN_HANG_H
#define AMLRUN_PLUGIN_HANG_H

#include "job/hooks.h"

/* Its verdicts go to the supervisor (job_stop: STOP_HANG, STOP_TIMEOUT)
 * and to the topic TOPIC_HANG (the event log). */
extern const struct job_plugin hang_plugin;

#endif /* AMLRUN_PLUGIN_HANG_H */
