/*
 * The job's secret in amlrun.  A random job token for the bootstrap, when
 * one amlrun starts every rank of the job (one node, or head-node mode):
 * the token derived from public values (job ids, MASTER_ADDR) lets a HELLO
 * replayed from an earlier run through; a per-launch secret does not.  And
 * the user's secret (lib/util/secret.h, which amlrun links): a refused file
 * stops the job before anything starts, AMLDIST_REQUIRE_SECRET=1 refuses a
 * job of several nodes without one, and such a job without one is told
 * once that its plane is open; amlrun --make-secret makes the file.
 */
#ifndef AMLRUN_JOBTOKEN_H
#define AMLRUN_JOBTOKEN_H

/* Export AMLDIST_JOB_TOKEN as 128 random bits in hex, unless it is set;
 * `one_node`: every rank runs on this machine, and a token made here is
 * marked so (AMLDIST_JOB_TOKEN_ORIGIN, util/secret.h), so that the
 * bootstrap needs no libcrypto for it; else any such mark is dropped.
 * Returns 0, or -1 when the kernel gives no randomness (the derived token
 * is then used, as without amlrun). */
int job_token_export(int one_node);

/* Before anything starts: read the job's secret once.  `several`: the job
 * has several nodes; `notice`: this amlrun says what is open (one per
 * node, not under --quiet or --dry-run); `plane`: the job has a control
 * plane (per-node mode) beside the workers' bootstrap, which is all that
 * per-process mode has.  -1 to go on, else the exit status (2) after one
 * line saying why. */
int job_secret_check(int several, int notice, int plane);

/* amlrun --make-secret: the path on stdout; 0 made, 1 one exists already
 * (never overwritten), or amlrun's status for an error. */
int job_secret_make(void);

#endif /* AMLRUN_JOBTOKEN_H */
