/*
 * TEMPORARY, crypto branch only: a minimal amldist__secret_load() (the
 * contract of util/secret.h) that reads AMLDIST_JOB_TOKEN's bytes, so that
 * the channel (lib/net/chan.c) can be built and tested before the secret
 * branch lands.  The integrator DELETES this file for the secret branch's
 * lib/util/secret.c (AMLDIST_JOB_TOKEN_FILE, the XDG file, their rules).
 */
#include <stdlib.h>
#include <string.h>

#include "util/internal.h"
#include "util/secret.h"

int amldist__secret_load(amldist__secret_t *out, char *why, size_t why_size)
{
    const char *v = getenv("AMLDIST_JOB_TOKEN");
    memset(out, 0, sizeof *out);
    if (why_size)
        why[0] = '\0';
    if (!v || !*v)
        return 0;
    out->len = strnlen(v, sizeof out->bytes);
    memcpy(out->bytes, v, out->len);
    amldist__strlcpy(out->source, "AMLDIST_JOB_TOKEN", sizeof out->source);
    return 1;
}

void amldist__secret_clear(amldist__secret_t *s)
{
    explicit_bzero(s, sizeof *s);
}
