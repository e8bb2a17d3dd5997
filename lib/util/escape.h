/*
 * Text from another process (another node's failure summary, the host's
 * stop reason, a refusal) made safe to print: every byte below 0x20 and
 * DEL becomes \xNN, so that it can move no cursor, set no colour, and
 * (with newlines escaped too) begin no line of its own.  Other bytes, UTF-8
 * included, are kept.
 */
#ifndef AMLDIST_UTIL_ESCAPE_H
#define AMLDIST_UTIL_ESCAPE_H

#include <stddef.h>

enum { AMLDIST__ESC_ONE_LINE = 0, AMLDIST__ESC_KEEP_NEWLINES = 1 };

/* `len` bytes of `src` into `dst` (NUL-terminated, at most size - 1 bytes,
 * never half an escape); `how`: whether '\n' is kept.  Returns the length
 * written. */
size_t amldist__escape(char *dst, size_t size, const void *src, size_t len,
                       int how);

#endif /* AMLDIST_UTIL_ESCAPE_H */
