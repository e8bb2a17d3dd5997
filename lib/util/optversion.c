/*
 * Versioned option structures (amldist_options_t, amldist_plan_options_t,
 * amldist_bootstrap_options_t): each starts with `unsigned version`, and a
 * new version only adds fields at the end.  A program built against an
 * older header passes the older, shorter structure, so the library reads
 * the bytes that version has and no more; the fields it lacks keep the
 * current _INIT macro's defaults.  Version 0 (a structure never
 * initialised) and versions newer than the library are refused.
 */
#include <string.h>

#include "util/internal.h"

int amldist__opts_version(const amldist__opts_kind_t *k, const char *fn,
                          unsigned version)
{
    if (version >= 1 && version <= k->current)
        return 0;
    return amldist__fail(AMLDIST_EINVAL,
                         "%s: %s version %u: this library reads versions 1 "
                         "to %u (initialise it with %s)",
                         fn, k->type, version, k->current, k->init);
}

int amldist__opts_copy(const amldist__opts_kind_t *k, const char *fn,
                       void *dst, const void *src)
{
    /* The structure's first member: reading it is valid whatever the
     * version (C11 6.7.2.1p15). */
    unsigned version = *(const unsigned *)src;
    int rc = amldist__opts_version(k, fn, version);
    if (rc < 0)
        return rc;
    memcpy(dst, src, k->sizes[version]);
    *(unsigned *)dst = k->current;
    return 0;
}
