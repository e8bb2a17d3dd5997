/*
 * The supervisor's query socket (query/sockdir.h, query/proto.h): `amlrun
 * --status` and `amlrun --stacks` answered from the supervisor's one loop,
 * never blocking it on a client.  Costs one listening descriptor while
 * nobody asks.  Each answer covers every node (run/gather.h).
 */
#ifndef AMLRUN_JOBQUERY_H
#define AMLRUN_JOBQUERY_H

struct job;

/* Make the socket and watch it.  A socket that cannot be made (its
 * directory refused, no room) is said with -v and the job runs without
 * one; -1 only when out of memory. */
int jobquery_open(struct job *j);
/* Close the socket and every client, and remove the socket's file. */
void jobquery_close(struct job *j);

#endif /* AMLRUN_JOBQUERY_H */
