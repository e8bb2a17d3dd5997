/*
 * The workers' output pipes on the supervisor's loop: each a watch whose
 * callback relays what came (output/output.h), and the drain of what a
 * worker left in them.
 */
#ifndef AMLRUN_STREAMS_H
#define AMLRUN_STREAMS_H

#include "job/job.h"

/* Watch a stream's pipe, anew if it was: events the loop polled before are
 * then dropped.  A pipe the loop cannot watch is closed. */
void stream_watch(struct job *j, struct worker *w, struct out_stream *s);
/* amlrun's terminal changed its size (SIGWINCH): the workers' ptys
 * follow. */
void streams_resize(struct job *j);
/* Stop watching and close it. */
void stream_close(struct job *j, struct out_stream *s);
/* The pipes still open, of every worker. */
int open_streams(const struct job *j);
/* Read what a dead worker left in its pipes (or a live one's pending
 * output: job_drain), without waiting for writers that may still hold
 * them; then watched anew. */
void drain(struct job *j, struct worker *w);

#endif /* AMLRUN_STREAMS_H */
