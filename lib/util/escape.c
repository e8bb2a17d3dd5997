/* Control characters of another process's text escaped (see escape.h). */
#include <stdio.h>

#include "util/escape.h"

size_t amldist__escape(char *dst, size_t size, const void *src, size_t len,
                       int how)
{
    const unsigned char *s = src;
    size_t n = 0;
    if (size == 0)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = s[i];
        int plain = (c >= 0x20 && c != 0x7f) ||
                    (c == '\n' && how == AMLDIST__ESC_KEEP_NEWLINES);
        size_t need = plain ? 1 : 4;
        if (n + need > size - 1)
            break;
        if (plain)
            dst[n++] = (char)c;
        else
            n += (size_t)snprintf(dst + n, 5, "\\x%02x", c);
    }
    dst[n] = '\0';
    return n;
}
