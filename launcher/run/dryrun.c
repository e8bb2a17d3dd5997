/* --dry-run output (see dryrun.h). */
#include <string.h>

#include "run/dryrun.h"

static void put_quoted(FILE *f, const char *s)
{
    if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789_-+=.,/:@%") == strlen(s)) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

static int in_base(char *const *base, const char *entry)
{
    for (size_t i = 0; base && base[i]; i++)
        if (strcmp(base[i], entry) == 0)
            return 1;
    return 0;
}

int dryrun_hidden(const char *entry)
{
    static const char name[] = "AMLDIST_JOB_TOKEN=";
    return strncmp(entry, name, sizeof name - 1) == 0;
}

void dryrun_line(FILE *f, const struct worker_id *id, char *const *env,
                 char *const *base, const char *path, char *const *argv,
                 int all)
{
    char r[12], l[12], n[12];
    fprintf(f, "rank %s (local %s, node %s):", worker_id_str(id->rank, r),
            worker_id_str(id->local, l), worker_id_str(id->node, n));
    for (size_t i = 0; env[i]; i++) {
        if (!all && in_base(base, env[i]))
            continue;
        fputc(' ', f);
        if (dryrun_hidden(env[i]))
            fputs("AMLDIST_JOB_TOKEN=" DRYRUN_HIDDEN, f);
        else
            put_quoted(f, env[i]);
    }
    fputs(" -- ", f);
    put_quoted(f, path);
    for (size_t i = 1; argv[i]; i++) {
        fputc(' ', f);
        put_quoted(f, argv[i]);
    }
    fputc('\n', f);
}
