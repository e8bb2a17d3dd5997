/*
 * The exchange on a running amlrun's query socket (sockdir.h), one request
 * per connection:
 *
 *   client:  "info\n" | "status\n" | "stacks\n"   (at most QP_REQ_MAX bytes)
 *   amlrun:  "amlrun-answer 1 KIND\n"  or  "amlrun-error MESSAGE\n"
 *            then, for info and status, a "job" record (qtext.h);
 *            then, for status and stacks, one part per node:
 *            "part NODE LEN\n" and LEN bytes (status: the node's records,
 *            stacks: its stk_encode() text);
 *            then amlrun closes the connection.
 *
 * A peer of another user (SO_PEERCRED; root may ask) is closed without a
 * byte.  Each exchange has a deadline, so a client that stalls costs the
 * supervisor nothing but a descriptor for a while.
 */
#ifndef AMLRUN_QPROTO_H
#define AMLRUN_QPROTO_H

#define QP_REQ_MAX 64
#define QP_ANSWER "amlrun-answer 1 "
#define QP_ERROR "amlrun-error "
/* The supervisor's bound on one exchange, from accept to the last byte. */
#define QP_DEADLINE_MS 30000
/* The interval over which a status measures each rank's CPU use. */
#define QP_CPU_INTERVAL_MS 250

#endif /* AMLRUN_QPROTO_H */
