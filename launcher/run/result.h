/*
 * --result-json FILE: the job's result as one JSON document, written when
 * the job ends: amlrun's exit status, the first failure, and per rank of
 * this node its status, exit code, signal and start and end times (of the
 * last attempt, after restarts).
 */
#ifndef AMLRUN_RESULT_H
#define AMLRUN_RESULT_H

struct job;

/* Write it if --result-json was given; a file that cannot be written is
 * said, and changes nothing else. */
void result_write(const struct job *j, int status);

#endif /* AMLRUN_RESULT_H */
