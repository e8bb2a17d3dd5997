/* Reading one variable from an environment array, and filling readings. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/reading.h"
#include "util/parse.h"

const char *amldist__env_get(const amldist__env_t *env, const char *name)
{
    return amldist_envp_get(env->envp, name);
}

int amldist__env_own(const amldist__env_t *env, const char *name)
{
    const char *a = amldist__env_get(env, name), *b = getenv(name);
    return a != NULL && b != NULL && strcmp(a, b) == 0;
}

int amldist__env_long(const amldist__env_t *env, const char *name, long min,
                      long max, long *out)
{
    const char *s = amldist__env_get(env, name);
    if (s == NULL)
        return 0;
    int rc = amldist__parse_long(s, min, max, out);
    if (rc == AMLDIST_ERANGE)
        return amldist__fail(AMLDIST_ERANGE,
                             "%s=%s: out of range (%ld..%ld)", name, s, min,
                             max);
    if (rc < 0)
        return amldist__fail(AMLDIST_EPARSE,
                             "%s=\"%s\": not a decimal integer", name, s);
    return 1;
}

void amldist__reading_init(struct amldist *r, const char *source)
{
    memset(r, 0, sizeof *r);
    amldist__strlcpy(r->source, source, sizeof r->source);
    for (int f = 0; f < AMLDIST_FIELD_COUNT; f++)
        r->val[f] = AMLDIST_EUNKNOWN;
}

static void vwhy(struct amldist *r, amldist_field_t f, const char *fmt,
                 va_list ap) AMLDIST__PRINTF(3, 0);
static void vwhy(struct amldist *r, amldist_field_t f, const char *fmt,
                 va_list ap)
{
    vsnprintf(r->why[f], sizeof r->why[f], fmt, ap);
}

void amldist__set(struct amldist *r, amldist_field_t f, long v,
                  const char *fmt, ...)
{
    va_list ap;
    r->val[f] = (int)v;
    va_start(ap, fmt);
    vwhy(r, f, fmt, ap);
    va_end(ap);
}

void amldist__why(struct amldist *r, amldist_field_t f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwhy(r, f, fmt, ap);
    va_end(ap);
}

int amldist__known(const struct amldist *r, amldist_field_t f)
{
    if (f == AMLDIST_FIELD_MASTER_ADDR)
        return r->addr[0] != '\0';
    return r->val[f] >= 0;
}

int amldist__env_field(const amldist__env_t *env, struct amldist *r,
                       amldist_field_t f, const char *name)
{
    /* Ranks and indices from 0, sizes and counts from 1. */
    int index = f == AMLDIST_FIELD_RANK || f == AMLDIST_FIELD_LOCAL_RANK ||
                f == AMLDIST_FIELD_NODE_RANK;
    long v;
    int rc = amldist__env_long(env, name, index ? 0 : 1,
                               index ? INT_MAX - 1 : INT_MAX, &v);
    if (rc == 1)
        amldist__set(r, f, v, "%s=%ld", name, v);
    return rc;
}

/* Both halves of a pair, or neither. */
static int pair(const amldist__env_t *env, struct amldist *r,
                amldist_field_t fa, const char *a, amldist_field_t fb,
                const char *b)
{
    int ha = amldist__env_field(env, r, fa, a), hb;
    if (ha < 0)
        return ha;
    if ((hb = amldist__env_field(env, r, fb, b)) < 0)
        return hb;
    if (ha && !hb)
        return amldist__fail(AMLDIST_EMISSING, "%s is set but %s is not",
                             r->why[fa], b);
    if (hb && !ha)
        return amldist__fail(AMLDIST_EMISSING, "%s is set but %s is not",
                             r->why[fb], a);
    return ha;
}

int amldist__env_quad(const amldist__env_t *env, struct amldist *r,
                      const char *rank, const char *size,
                      const char *local_rank, const char *local_size)
{
    int rc = pair(env, r, AMLDIST_FIELD_RANK, rank, AMLDIST_FIELD_WORLD_SIZE,
                  size);
    if (rc <= 0)
        return rc;
    if (local_rank == NULL)
        return 1;
    rc = pair(env, r, AMLDIST_FIELD_LOCAL_RANK, local_rank,
              AMLDIST_FIELD_LOCAL_WORLD_SIZE, local_size);
    return rc < 0 ? rc : 1;
}
