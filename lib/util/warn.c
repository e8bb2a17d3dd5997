/* Warnings gathered in a buffer, one sentence a line, for a caller to read
 * (the topology's and the plan's notes). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/internal.h"

void amldist__warn(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 2 >= size)
        return;
    if (len > 0)
        buf[len++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}
