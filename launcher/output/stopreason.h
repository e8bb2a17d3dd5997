/*
 * Why an attempt or the job stops: one table, one row per reason, read by
 * whoever says or records it (the supervisor's messages and the other
 * nodes' news, the event log, the stacks' head line and JSON), so that a
 * reason is an enum everywhere and its words live here once.
 */
#ifndef AMLRUN_STOPREASON_H
#define AMLRUN_STOPREASON_H

enum stop_reason {
    STOP_FAILURE,  /* the attempt's first failed worker */
    STOP_HANG,     /* --hang-timeout: no progress */
    STOP_TIMEOUT,  /* --timeout: the job's wall time */
    STOP_SIGNAL,   /* a stop signal to amlrun */
    STOP_DEADLINE, /* --term-timeout after SIGTERM: SIGKILL */
    STOP_PEER,     /* the control plane's host stopped this node */
    STOP_REQUEST,  /* nothing stops: amlrun --stacks asked */
    STOP_NREASONS
};

struct stop_row {
    const char *name;   /* the word in events and in --hang-report's JSON */
    int exit_status;    /* amlrun's, -1: the worker's or the signal's */
    int restartable;    /* a failure of the attempt: restarts may follow */
    /* The stacks' head line, before the limit in seconds ("hang: no
     * progress for" 30 s); NULL: none (the stacks say only what they
     * hold). */
    const char *stacks_head;
    /* The "hang" event's field for the time the reason measured (idle
     * or run), NULL where the reason makes no such event. */
    const char *time_field;
};

/* The row of `r` (a reason out of range: STOP_REQUEST's). */
const struct stop_row *stop_row(enum stop_reason r);

#endif /* AMLRUN_STOPREASON_H */
