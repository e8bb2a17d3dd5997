/* Rank lists (see rankset.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "cli/rankset.h"

int rankset_parse(const char *s, struct rankset *out)
{
    out->n = 0;
    free(out->r);
    out->r = NULL;
    const char *p = s;
    while (*p) {
        int lo, hi;
        char *end;
        if (*p < '0' || *p > '9')
            return -1;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || v > INT_MAX)
            return -1;
        lo = hi = (int)v;
        if (*end == '-') {
            p = end + 1;
            if (*p < '0' || *p > '9')
                return -1;
            v = strtol(p, &end, 10);
            if (errno || v > INT_MAX || v < lo)
                return -1;
            hi = (int)v;
        }
        if (*end != ',' && *end != '\0')
            return -1;
        void *grown = realloc(out->r, (size_t)(out->n + 1) * sizeof *out->r);
        if (!grown)
            return -1;
        out->r = grown;
        out->r[out->n].lo = lo;
        out->r[out->n].hi = hi;
        out->n++;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p)
            return -1;
    }
    return out->n > 0 ? 0 : -1;
}

int rankset_has(const struct rankset *s, int r)
{
    if (s->n == 0)
        return 1;
    for (int i = 0; i < s->n; i++)
        if (r >= s->r[i].lo && r <= s->r[i].hi)
            return 1;
    return 0;
}
