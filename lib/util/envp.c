/*
 * Heap environment arrays (amldist_envp_*): a malloc'd, NULL-terminated
 * array of malloc'd "NAME=value" strings.  The one implementation behind the
 * library's exports (layout/export.c), the binding plan's variables (plan/env.c),
 * reading (sources/envutil.c) and amlrun's worker environments.
 */
#include <stdlib.h>
#include <string.h>

#include "util/internal.h"

const char *amldist__env_value(const char *entry, const char *name)
{
    size_t n = strlen(name);
    return strncmp(entry, name, n) == 0 && entry[n] == '=' ? entry + n + 1
                                                           : NULL;
}

/* NULL, "" and a name holding '=' name nothing that could be found again. */
static int bad_name(const char *name)
{
    return name == NULL || name[0] == '\0' || strchr(name, '=') != NULL;
}

static int bad_name_fail(const char *fn, const char *name)
{
    return amldist__fail(AMLDIST_EINVAL,
                         "%s: variable name \"%s\" is empty or holds '='", fn,
                         name != NULL ? name : "(null)");
}

static size_t count(char *const *envp)
{
    size_t n = 0;
    while (envp != NULL && envp[n] != NULL)
        n++;
    return n;
}

/* Index of the first NAME=... in envp, or -1.  The first wins, as getenv(3)
 * does in glibc, so that set and get agree on arrays with duplicates. */
static long find(char *const *envp, const char *name)
{
    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
        if (amldist__env_value(envp[i], name) != NULL)
            return (long)i;
    return -1;
}

/* malloc'd copy of s (strdup's job, without its allocation hidden in libc:
 * the unit test counts every allocation the array makes). */
static char *copy(const char *s)
{
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    return c != NULL ? memcpy(c, s, n) : NULL;
}

int amldist_envp_dup(char *const src[], char ***out)
{
    amldist__clear_error();
    if (out == NULL)
        return amldist__fail(AMLDIST_EINVAL, "amldist_envp_dup: out is NULL");
    *out = NULL;
    size_t n = count(src);
    char **e = calloc(n + 1, sizeof *e);
    if (e == NULL)
        return amldist__fail(AMLDIST_ENOMEM, "environment copy: out of memory");
    for (size_t i = 0; i < n; i++)
        if ((e[i] = copy(src[i])) == NULL) {
            amldist_envp_free(e);
            return amldist__fail(AMLDIST_ENOMEM,
                                 "environment copy: out of memory");
        }
    *out = e;
    return 0;
}

int amldist_envp_set(char ***envp, const char *name, const char *value)
{
    amldist__clear_error();
    if (envp == NULL || value == NULL)
        return amldist__fail(AMLDIST_EINVAL, "amldist_envp_set: %s is NULL",
                             envp == NULL ? "envp" : "value");
    if (bad_name(name))
        return bad_name_fail("amldist_envp_set", name);
    size_t nlen = strlen(name), vlen = strlen(value);
    char *s = malloc(nlen + vlen + 2);
    if (s == NULL)
        return amldist__fail(AMLDIST_ENOMEM, "setting %s: out of memory",
                             name);
    memcpy(s, name, nlen);
    s[nlen] = '=';
    memcpy(s + nlen + 1, value, vlen + 1);
    long at = find(*envp, name);
    if (at >= 0) {
        free((*envp)[at]);
        (*envp)[at] = s;
        return 0;
    }
    /* Everything is allocated before the array changes: on failure the
     * caller's array is as it was. */
    size_t n = count(*envp);
    char **grown = realloc(*envp, (n + 2) * sizeof *grown);
    if (grown == NULL) {
        free(s);
        return amldist__fail(AMLDIST_ENOMEM, "setting %s: out of memory",
                             name);
    }
    grown[n] = s;
    grown[n + 1] = NULL;
    *envp = grown;
    return 0;
}

const char *amldist_envp_get(char *const envp[], const char *name)
{
    if (bad_name(name))
        return NULL;
    long at = find(envp, name);
    return at < 0 ? NULL : amldist__env_value(envp[at], name);
}

int amldist_envp_unset(char **envp, const char *name)
{
    amldist__clear_error();
    if (bad_name(name))
        return bad_name_fail("amldist_envp_unset", name);
    /* Every copy goes, so that get finds none after a duplicate; the rest
     * keep their order (dry runs and tests read the array as it is). */
    int removed = 0;
    size_t w = 0;
    for (size_t r = 0; envp != NULL && envp[r] != NULL; r++) {
        if (amldist__env_value(envp[r], name) != NULL) {
            free(envp[r]);
            removed = 1;
        } else {
            envp[w++] = envp[r];
        }
    }
    if (envp != NULL)
        envp[w] = NULL;
    return removed;
}

void amldist_envp_free(char **envp)
{
    if (envp == NULL)
        return;
    for (char **e = envp; *e != NULL; e++)
        free(*e);
    free(envp);
}
