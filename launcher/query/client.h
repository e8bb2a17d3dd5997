/*
 * `amlrun --status [JOB]` and `amlrun --stacks [JOB]`: find the running
 * job (a run id or an amlrun pid; without one, the only job of this user
 * on this machine) through the query sockets of sockdir.h, ask it, print
 * its answer.  Root may name another user's job by its pid.
 */
#ifndef AMLRUN_QCLIENT_H
#define AMLRUN_QCLIENT_H

enum query_kind { QUERY_STATUS, QUERY_STACKS };

/* The exit status of `amlrun --status` (json: --status=json) or
 * `--stacks`: 0 when the job answered, 1 when there is no such job (or
 * several, or it did not answer), each said on stderr. */
int query_main(enum query_kind kind, int json, const char *job);

/* ---- printing a status (statusprint.c) ---- */

/* Print the answer's records (the "job" record, then each node's part) as
 * a table, or as JSON; 0, or -1 when the answer is malformed.  text is
 * changed in place. */
int status_print(char *text, size_t len, int json);

#endif /* AMLRUN_QCLIENT_H */
