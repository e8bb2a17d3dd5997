/*
 * The job summary after a failure: torchrun's "Root Cause (first observed
 * failure)" block for the first failing worker (time, host, rank, local
 * rank, exit code or signal, pid, error file, and from its torchelastic
 * error file the exception and traceback), written to stderr at once.
 * Like torchrun's own @record'ed main, the root cause's error file is
 * copied, with "errorCode" added, to the TORCHELASTIC_ERROR_FILE that
 * amlrun itself was given, so that an agent above amlrun learns it too.
 */
#ifndef AMLRUN_ROOTCAUSE_H
#define AMLRUN_ROOTCAUSE_H

#include <sys/types.h>
#include <time.h>

struct failure {
    int rank, local;        /* negative: unknown */
    pid_t pid;
    int status;             /* its wait status */
    const char *host;
    time_t when;            /* when it was reaped */
    const char *error_file; /* its TORCHELASTIC_ERROR_FILE, or NULL */
    int python;             /* a Python worker: the one that @record can
                               make write its error file */
};

/* The block as text (malloc'd; NULL after a message); then the error
 * file is copied to FORWARD_TO (if not NULL and the error file was written
 * and is well-formed).  The caller writes the block in one write, so that
 * it stays whole beside other writers. */
char *rootcause_text(const struct failure *f, const char *forward_to);

#endif /* AMLRUN_ROOTCAUSE_H */
