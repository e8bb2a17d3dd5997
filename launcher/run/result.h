/*
 * --result-json FILE: the job's result as one JSON document, written when
 * the job ends: amlrun's exit status, the first failure, and per rank of
 * this node its status, exit code, signal and start and end times (of the
 * last attempt, after restarts).
 */
#ifndef AMLRUN_RESULT_H
#define AMLRUN_RESULT_H

struct job;

/* At start, before any worker: 0 when `path` can be written (the file,
 * or a new one in its directory); else -1 after a message, so that a job
 * does not run for hours to lose its result at the end (or its report at
 * a hang): the message names option `opt` (--result-json, --hang-report). */
int result_check(const char *opt, const char *path);

/* Write it if --result-json was given; a file that cannot be written then
 * (it went away since result_check) is said, and changes nothing else. */
void result_write(const struct job *j, int status);

#endif /* AMLRUN_RESULT_H */
