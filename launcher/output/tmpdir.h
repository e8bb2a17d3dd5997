/*
 * amlrun's temporary files and directories, made where Python's tempfile
 * would make them (tempfile._candidate_tempdir_list): the first usable of
 * $TMPDIR, $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp and the current
 * directory.  A batch job that carries a login node's per-job TMPDIR
 * (gone by then) runs as under torchrun, whose workers' tempfile falls
 * back the same way.
 */
#ifndef AMLRUN_TMPDIR_H
#define AMLRUN_TMPDIR_H

#include <stddef.h>

/* Whether one of TMPDIR, TEMP or TMP names a directory (non-empty). */
int tmpdir_asked(void);
/* Make <dir>/<leaf> in the first usable directory, leaf a mkdtemp(3)
 * template ("name_XXXXXX"): a directory when dir_wanted, else a file
 * opened O_RDWR | O_CLOEXEC (its descriptor in *fd).  The path, absolute,
 * in out.  A directory skipped before it is said in one line under
 * verbose, naming its variable; when none is usable, one line says what
 * was tried, for `what` (the message's subject).  0, or -1 after that
 * line. */
int tmpdir_make(char *out, size_t size, const char *leaf, int dir_wanted,
                int *fd, int verbose, const char *what);

#endif
