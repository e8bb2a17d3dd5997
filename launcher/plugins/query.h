/*
 * The supervisor's query socket (query/sockdir.h, query/proto.h): `amlrun
 * --status` and `amlrun --stacks` answered from the supervisor's one loop,
 * never blocking it on a client.  Costs one listening descriptor while
 * nobody asks.  Each answer covers every node (job/gather.h).  A socket
 * that cannot be made (its directory refused, no room) is said with -v
 * and the job runs without one.
 */
#ifndef AMLRUN_PLUGIN_QUERY_H
#define AMLRUN_PLUGIN_QUERY_H

#include "job/hooks.h"

extern const struct job_plugin query_plugin;

#endif /* AMLRUN_PLUGIN_QUERY_H */
