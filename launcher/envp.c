/* Heap environment arrays for workers (see envp.h). */
#include <stdlib.h>
#include <string.h>

#include "envp.h"

static size_t envp_len(char *const *e)
{
    size_t n = 0;
    while (e && e[n])
        n++;
    return n;
}

/* Index of NAME in e, or -1. */
static long envp_find(char *const *e, const char *name, size_t nlen)
{
    for (size_t i = 0; e && e[i]; i++)
        if (strncmp(e[i], name, nlen) == 0 && e[i][nlen] == '=')
            return (long)i;
    return -1;
}

char **envp_dup(char *const *src)
{
    size_t n = envp_len(src);
    char **e = calloc(n + 1, sizeof *e);
    if (!e)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!(e[i] = strdup(src[i]))) {
            envp_free(e);
            return NULL;
        }
    }
    return e;
}

int envp_set(char ***envp, const char *name, const char *value)
{
    size_t nlen = strlen(name), vlen = strlen(value);
    char *s = malloc(nlen + vlen + 2);
    if (!s)
        return -1;
    memcpy(s, name, nlen);
    s[nlen] = '=';
    memcpy(s + nlen + 1, value, vlen + 1);
    long at = envp_find(*envp, name, nlen);
    if (at >= 0) {
        free((*envp)[at]);
        (*envp)[at] = s;
        return 0;
    }
    size_t n = envp_len(*envp);
    char **grown = realloc(*envp, (n + 2) * sizeof *grown);
    if (!grown) {
        free(s);
        return -1;
    }
    grown[n] = s;
    grown[n + 1] = NULL;
    *envp = grown;
    return 0;
}

const char *envp_get(char *const *envp, const char *name)
{
    size_t nlen = strlen(name);
    long at = envp_find(envp, name, nlen);
    return at < 0 ? NULL : envp[at] + nlen + 1;
}

void envp_unset(char **envp, const char *name)
{
    long at = envp_find(envp, name, strlen(name));
    if (at < 0)
        return;
    free(envp[at]);
    /* Keep the order: dry runs and tests read the array as it is. */
    for (size_t i = (size_t)at; envp[i]; i++)
        envp[i] = envp[i + 1];
}

void envp_free(char **envp)
{
    for (size_t i = 0; envp && envp[i]; i++)
        free(envp[i]);
    free(envp);
}
