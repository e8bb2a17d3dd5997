/* torchrun's log line prefix template (see lineprefix.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/lineprefix.h"

static int id_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int id_char(char c)
{
    return id_start(c) || (c >= '0' && c <= '9');
}

/* The value of `name` (n bytes), or NULL when it is not one of torchrun's. */
static const char *value(const char *name, size_t n, const char *role,
                         const char *rank, const char *local)
{
    if (n == 9 && memcmp(name, "role_name", 9) == 0)
        return role;
    if (n == 4 && memcmp(name, "rank", 4) == 0)
        return rank;
    if (n == 10 && memcmp(name, "local_rank", 10) == 0)
        return local;
    return NULL;
}

char *torch_line_prefix(const char *tmpl, const char *role, int rank,
                        int local_rank)
{
    char r[16], l[16];
    snprintf(r, sizeof r, "%d", rank);
    snprintf(l, sizeof l, "%d", local_rank);
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    if (!f)
        return NULL;
    for (const char *p = tmpl; *p;) {
        if (*p != '$') {
            fputc(*p++, f);
            continue;
        }
        /* Python's pattern tries, in order: $$, $name, ${name}, else the
         * '$' alone is kept (safe_substitute). */
        const char *name = NULL, *end = NULL;
        size_t n = 0;
        if (p[1] == '$') {
            fputc('$', f);
            p += 2;
            continue;
        } else if (id_start(p[1])) {
            name = p + 1;
            for (n = 1; id_char(name[n]); n++) {
            }
            end = name + n;
        } else if (p[1] == '{' && id_start(p[2])) {
            name = p + 2;
            for (n = 1; id_char(name[n]); n++) {
            }
            end = name[n] == '}' ? name + n + 1 : NULL;
        }
        const char *v = end ? value(name, n, role, r, l) : NULL;
        if (v) {
            fputs(v, f);
            p = end;
        } else if (end) {
            fwrite(p, 1, (size_t)(end - p), f); /* unknown: as written */
            p = end;
        } else {
            fputc(*p++, f);
        }
    }
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}
