/* Error codes, names and the per-thread detailed message. */
#include <stdio.h>
#include <string.h>

#include "util/internal.h"

/* Per-thread, so that concurrent callers never read each other's message. */
static _Thread_local char last_error[1024];

const char *amldist_strerror(int err)
{
    /* A switch: two codes given one value fail to compile here. */
    switch (err) {
    case AMLDIST_OK:
        return "success";
#define XX(name, value, msg)                                                   \
    case AMLDIST_##name:                                                       \
        return msg;
        AMLDIST_ERRNO_MAP(XX)
#undef XX
    default:
        return "unknown error";
    }
}

const char *amldist_err_name(int err)
{
    switch (err) {
    case AMLDIST_OK:
        return "AMLDIST_OK";
#define XX(name, value, msg)                                                   \
    case AMLDIST_##name:                                                       \
        return "AMLDIST_" #name;
        AMLDIST_ERRNO_MAP(XX)
#undef XX
    default:
        return "AMLDIST_UNKNOWN_ERROR";
    }
}

const char *amldist_last_error(void)
{
    return last_error;
}

void amldist__clear_error(void)
{
    last_error[0] = '\0';
}

int amldist__fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

int amldist__strlcpy(char *dst, const char *src, size_t size)
{
    size_t n = strlen(src);
    if (size == 0)
        return -1;
    if (n >= size) {
        memcpy(dst, src, size - 1);
        dst[size - 1] = '\0';
        return -1;
    }
    memcpy(dst, src, n + 1);
    return 0;
}
