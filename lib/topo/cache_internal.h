/*
 * What the files of the per-node topology cache share among themselves
 * and with nobody else: cache.c (the lock, reading, import, store and
 * prune), fingerprint.c (the fingerprint), cache_entry.c (an entry's name
 * and format) and cache_util.c (a growable string, directory listings).
 * What lib/plan and the tests use (cache_dir.c's directory too) is in
 * topo_internal.h.
 */
#ifndef AMLDIST_TOPO_CACHE_INTERNAL_H
#define AMLDIST_TOPO_CACHE_INTERNAL_H

#include <stddef.h>

#include "util/internal.h"

/* A growable NUL-terminated string; after a failed allocation oom is set
 * and further additions do nothing (cache_util.c).  {0} is empty. */
struct amldist__buf {
    char *s;
    size_t len, cap;
    int oom;
};

void amldist__buf_add(struct amldist__buf *b, const char *p, size_t n);
void amldist__buf_str(struct amldist__buf *b, const char *s);
/* At most 511 bytes a call. */
void amldist__buf_printf(struct amldist__buf *b, const char *fmt, ...)
    AMLDIST__PRINTF(2, 3);

/* strcmp() for qsort() and bsearch() over an array of char *. */
int amldist__cmp_names(const void *a, const void *b);
/* The sorted entry names of a directory ("." and ".." left out), each
 * malloc'd, in *names; the count, or -1 when it cannot be read. */
int amldist__list_dir(const char *path, char ***names);
/* The entry names of an open directory, as amldist__list_dir() but in the
 * directory's order; dirfd stays open. */
int amldist__list_dirfd(int dirfd, char ***names);
void amldist__free_names(char **names, int n);

/* "topo-HOST-BOOT-": the start of every entry name this host gives its
 * copies during the boot in fingerprint fp (cache_entry.c). */
void amldist__cache_prefix(const char *fp, char *out, size_t size);

#endif /* AMLDIST_TOPO_CACHE_INTERNAL_H */
