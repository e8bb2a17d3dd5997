/*
 * Two small tools of the topology cache's files (cache_internal.h): the
 * growable string that the fingerprint and an entry are built in, and the
 * listing of a directory's names, for the fingerprint (by path) and the
 * prune (by the cache directory's descriptor).
 */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo/cache_internal.h"

void amldist__buf_add(struct amldist__buf *b, const char *p, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->s, cap);
        if (grown == NULL) {
            b->oom = 1;
            return;
        }
        b->s = grown;
        b->cap = cap;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void amldist__buf_str(struct amldist__buf *b, const char *s)
{
    amldist__buf_add(b, s, strlen(s));
}

void amldist__buf_printf(struct amldist__buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        amldist__buf_add(b, tmp,
                         (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

int amldist__cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of d's entries from where it stands ("." and ".." left out),
 * each malloc'd, in *names (NULL when none); the count.  Closes d. */
static int read_names(DIR *d, char ***names)
{
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' &&
            (e->d_name[1] == '\0' ||
             (e->d_name[1] == '.' && e->d_name[2] == '\0')))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            char **grown = realloc(*names, (size_t)cap * sizeof *grown);
            if (grown == NULL)
                break;
            *names = grown;
        }
        if (((*names)[n] = strdup(e->d_name)) == NULL)
            break;
        n++;
    }
    closedir(d);
    return n;
}

int amldist__list_dir(const char *path, char ***names)
{
    *names = NULL;
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    int n = read_names(d, names);
    if (n > 1)
        qsort(*names, (size_t)n, sizeof **names, amldist__cmp_names);
    return n;
}

int amldist__list_dirfd(int dirfd, char ***names)
{
    *names = NULL;
    /* A stream of its own, from the start: fdopendir() takes the
     * descriptor it is given and its offset. */
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    rewinddir(d);
    return read_names(d, names);
}

void amldist__free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}
