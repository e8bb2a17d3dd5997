/*
 * torchelastic error files: what torch.distributed.elastic's @record
 * (ErrorHandler.record_exception) writes to $TORCHELASTIC_ERROR_FILE when a
 * worker dies of an exception.  torch 1.13 writes
 *
 *   {"message": {"message": "ValueError: text",
 *                "extraInfo": {"py_callstack": "Traceback ...",
 *                              "timestamp": "1700000000"}}}
 *
 * and an agent that copies a child's file up adds "errorCode" to the inner
 * object; the older form is {"message": "text", "timestamp": N}.  The
 * parser is strict JSON (RFC 8259) with a depth limit, takes only those
 * fields and ignores the rest; it needs nothing but libc, so that a fuzz
 * target can include it.
 */
#ifndef AMLRUN_ERRORFILE_H
#define AMLRUN_ERRORFILE_H

#include <stddef.h>

/* Error files are small (a traceback); a larger one is not read. */
#define ERRORFILE_MAX (1u << 20)

struct errorfile {
    char *message;    /* "ValueError: text", or NULL */
    char *traceback;  /* py_callstack, or NULL */
    long long timestamp; /* seconds since the epoch, or -1 */
    /* Where the inner message object closes, for adding "errorCode" to a
     * copy (0: the message is not an object); and whether it is empty. */
    size_t inner_close;
    int inner_empty;
};

/* Parse buf[0..len) into *ef (zeroed first).  0, or -1 with why[] saying
 * what is wrong and where ("malformed JSON at byte 12: want ':'"); *ef
 * holds nothing then. */
int errorfile_parse(const char *buf, size_t len, struct errorfile *ef,
                    char *why, size_t whysz);
void errorfile_free(struct errorfile *ef);

#endif /* AMLRUN_ERRORFILE_H */
