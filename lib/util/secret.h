/*
 * The job's secret (issue 21), one reader for the control plane and the
 * bootstrap: AMLDIST_JOB_TOKEN, else the file AMLDIST_JOB_TOKEN_FILE names,
 * else ${XDG_CONFIG_HOME:-~/.config}/amldist/secret if it exists.  A file
 * must be a regular file (not a symlink) owned by the user and unreadable
 * by group and others; anything else is refused with a line naming the
 * file and its mode.  The secret's bytes never leave this process: the
 * channel (lib/net) derives its keys from them and the wire never carries
 * them nor anything that would let a reader join.
 */
#ifndef AMLDIST_UTIL_SECRET_H
#define AMLDIST_UTIL_SECRET_H

#include <stddef.h>

#define AMLDIST__SECRET_MAX 4096
/* The fewest bytes a secret may have, MUNGE's minimum for its keys: one
 * sniffed handshake lets anyone try every shorter value offline, where a
 * guess costs nothing and no one sees it. */
#define AMLDIST__SECRET_MIN 32

typedef struct {
    unsigned char bytes[AMLDIST__SECRET_MAX];
    size_t len;
    char source[300];   /* "AMLDIST_JOB_TOKEN", or the file's path */
} amldist__secret_t;

/* 1 with the secret in *out, 0 when the job has none, -1 when a source is
 * given but refused (why says which file and why, one line): a file that
 * breaks the rules above, or a secret under AMLDIST__SECRET_MIN bytes. */
int amldist__secret_load(amldist__secret_t *out, char *why, size_t why_size);
/* Overwrite the secret's bytes (explicit_bzero). */
void amldist__secret_clear(amldist__secret_t *s);

/* The user's secret file: ${XDG_CONFIG_HOME:-~/.config}/amldist/secret (a
 * relative XDG_CONFIG_HOME is ignored, as the XDG rules say).  0, or -1
 * when no home is known or the path does not fit. */
int amldist__secret_path(char *buf, size_t size);
/* Create that file (amlrun --make-secret): missing directories 0700, the
 * file 0600 with O_EXCL, 32 random bytes from getrandom() as 64 lower-case
 * hex digits and a newline.  0 made (its path in `path`), 1 when it exists
 * already (never overwritten), -1 on error; `why` says which, one line. */
int amldist__secret_make(char *path, size_t size, char *why, size_t why_size);

/* Set by amlrun beside the AMLDIST_JOB_TOKEN it made itself for a job of
 * one machine (never the user's, never one that crosses machines): the
 * bootstrap then goes without the channel where libcrypto cannot be
 * loaded, nothing of it crossing a network (lib/bootstrap/config.c). */
#define AMLDIST__SECRET_ORIGIN_VAR "AMLDIST_JOB_TOKEN_ORIGIN"
#define AMLDIST__SECRET_ORIGIN_ONE_NODE "amlrun-one-node"

#endif /* AMLDIST_UTIL_SECRET_H */
