/*
 * Internal helpers shared by the library's source files.  Nothing here is
 * exported: the library is built with -fvisibility=hidden and only functions
 * marked AMLDIST_API in <amldist.h> are visible.  Internal names use the
 * amldist__ prefix (two underscores), as libuv's uv__ does.
 */
#ifndef AMLDIST_INTERNAL_H
#define AMLDIST_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include "amldist.h"

#if defined(__GNUC__)
#define AMLDIST__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define AMLDIST__PRINTF(f, a)
#endif

/* Record a detailed message for amldist_last_error() and return `code`. */
int amldist__fail(int code, const char *fmt, ...) AMLDIST__PRINTF(2, 3);
/* Forget the last message (called at the start of every public entry point
 * that can fail, so a stale message never describes a later success). */
void amldist__clear_error(void);

/* Bounded string copy that always terminates; returns -1 if truncated. */
int amldist__strlcpy(char *dst, const char *src, size_t size);

/* The value in `entry` when it is NAME=value, else NULL (util/envp.c). */
const char *amldist__env_value(const char *entry, const char *name);

/* A versioned options structure (optversion.c). */
typedef struct {
    const char *type;    /* "amldist_options_t" */
    const char *init;    /* "AMLDIST_OPTIONS_INIT" */
    unsigned current;    /* its _VERSION macro */
    const size_t *sizes; /* sizes[v]: bytes version v has, 1 <= v <= current */
} amldist__opts_kind_t;

/* 0 when `version` is one this library reads (1 .. current), else
 * AMLDIST_EINVAL with a message for function `fn`. */
int amldist__opts_version(const amldist__opts_kind_t *k, const char *fn,
                          unsigned version);
/* Check src's version and copy the fields that version has over `dst`,
 * which holds the defaults; dst's version becomes the current one. */
int amldist__opts_copy(const amldist__opts_kind_t *k, const char *fn,
                       void *dst, const void *src);

/* Append one sentence to a warnings buffer (newline-separated); a full
 * buffer keeps what it has. */
void amldist__warn(char *buf, size_t size, const char *fmt, ...)
    AMLDIST__PRINTF(3, 4);

#endif /* AMLDIST_INTERNAL_H */
