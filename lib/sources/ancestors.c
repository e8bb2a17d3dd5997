/*
 * This process's nearest ancestors as /proc shows them: a launcher's
 * process that started us (Hydra's proxy, mpirun), looked for through the
 * wrappers (env, a shell) that may stand between.  What is read is the
 * launcher's command line, the user's own words, never its files.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sources/sources.h"

long amldist__proc_read(long pid, const char *what, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/%s", pid, what);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

/* The parent of `pid` from /proc/<pid>/stat, or -1. */
static long parent_of(long pid)
{
    char buf[512];
    if (amldist__proc_read(pid, "stat", buf, sizeof buf) < 0)
        return -1;
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses. */
    const char *p = strrchr(buf, ')');
    long ppid;
    if (p == NULL || sscanf(p + 1, " %*c %ld", &ppid) != 1)
        return -1;
    return ppid;
}

long amldist__ancestor(amldist__argv_match_t match, void *arg, char *buf,
                       size_t size, size_t *len)
{
    long pid = (long)getpid();
    for (int i = 0; i < AMLDIST__ANCESTORS; i++) {
        if ((pid = parent_of(pid)) <= 1)
            return -1;
        long n = amldist__proc_read(pid, "cmdline", buf, size);
        if (n < 0)
            return -1;
        if (match(buf, (size_t)n, arg)) {
            *len = (size_t)n;
            return pid;
        }
    }
    return -1;
}
