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

/* The value in `entry` when it is NAME=value, else NULL (envp.c). */
const char *amldist__env_value(const char *entry, const char *name);

#endif /* AMLDIST_INTERNAL_H */
