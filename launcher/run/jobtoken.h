/*
 * A random job token for the bootstrap, when one amlrun starts every rank of
 * the job (one node, or head-node mode): the token derived from public
 * values (job ids, MASTER_ADDR) lets a HELLO replayed from an earlier run
 * through; a per-launch secret does not.
 */
#ifndef AMLRUN_JOBTOKEN_H
#define AMLRUN_JOBTOKEN_H

/* Export AMLDIST_JOB_TOKEN as 128 random bits in hex, unless it is set.
 * Returns 0, or -1 when the kernel gives no randomness (the derived token
 * is then used, as without amlrun). */
int job_token_export(void);

#endif /* AMLRUN_JOBTOKEN_H */
