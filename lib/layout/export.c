/*
 * Writing a layout back as the canonical variables, torchrun's names
 * included, so that PyTorch's env:// and torchrun-aware code work, with the
 * AMLDIST_LAUNCHER=amlrun marker that makes them authoritative for the
 * process that reads them (layout/layout.c).  Unknown values are not written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"

struct var {
    const char *name;
    amldist_field_t field;
};

static const struct var vars[] = {
    {"RANK", AMLDIST_FIELD_RANK},
    {"WORLD_SIZE", AMLDIST_FIELD_WORLD_SIZE},
    {"LOCAL_RANK", AMLDIST_FIELD_LOCAL_RANK},
    {"LOCAL_WORLD_SIZE", AMLDIST_FIELD_LOCAL_WORLD_SIZE},
    {"NODE_RANK", AMLDIST_FIELD_NODE_RANK},
    {"GROUP_RANK", AMLDIST_FIELD_NODE_RANK},
    {"GROUP_WORLD_SIZE", AMLDIST_FIELD_NUM_NODES},
    {"ROLE_RANK", AMLDIST_FIELD_RANK},
    {"ROLE_WORLD_SIZE", AMLDIST_FIELD_WORLD_SIZE},
    {"MASTER_ADDR", AMLDIST_FIELD_MASTER_ADDR},
    {"MASTER_PORT", AMLDIST_FIELD_MASTER_PORT},
};
#define NVARS (sizeof vars / sizeof *vars)

/* "NAME=value" for variable i, or NULL when the value is unknown. */
static int format(const amldist_t *h, size_t i, char *buf, size_t bufsz)
{
    amldist_field_t f = vars[i].field;
    if (!amldist__known(h, f))
        return 0;
    if (f == AMLDIST_FIELD_MASTER_ADDR)
        snprintf(buf, bufsz, "%s=%s", vars[i].name, h->addr);
    else
        snprintf(buf, bufsz, "%s=%d", vars[i].name, h->val[f]);
    return 1;
}

int amldist_export_env(const amldist_t *h)
{
    amldist__clear_error();
    if (h == NULL)
        return amldist__fail(AMLDIST_EINVAL, "NULL amldist_t handle");
    char buf[AMLDIST__HOST_MAX + 32];
    for (size_t i = 0; i < NVARS; i++) {
        int rc;
        if (format(h, i, buf, sizeof buf))
            rc = setenv(vars[i].name, strchr(buf, '=') + 1, 1);
        else
            /* A stale value from an outer launcher must not survive. */
            rc = unsetenv(vars[i].name);
        if (rc != 0)
            return amldist__fail(AMLDIST_ENOMEM, "setenv %s failed",
                                 vars[i].name);
    }
    if (setenv("AMLDIST_LAUNCHER", "amlrun", 1) != 0)
        return amldist__fail(AMLDIST_ENOMEM,
                             "setenv AMLDIST_LAUNCHER failed");
    return 0;
}

/* Is `entry` one of the variables we write ("NAME=...")? */
static int ours(const char *entry)
{
    for (size_t i = 0; i <= NVARS; i++) {
        const char *name = i < NVARS ? vars[i].name : "AMLDIST_LAUNCHER";
        if (amldist__env_value(entry, name) != NULL)
            return 1;
    }
    return 0;
}

int amldist_export_envp(const amldist_t *h, char *const base[], char ***out)
{
    amldist__clear_error();
    if (h == NULL || out == NULL)
        return amldist__fail(AMLDIST_EINVAL, "amldist_export_envp: %s is NULL",
                             h == NULL ? "handle" : "out");
    *out = NULL;
    size_t nbase = 0;
    if (base != NULL)
        while (base[nbase] != NULL)
            nbase++;
    char **env = calloc(nbase + NVARS + 2, sizeof *env);
    if (env == NULL)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    size_t n = 0;
    char buf[AMLDIST__HOST_MAX + 32];
    /* Ours first, then base without the entries we replace (or drop as
     * unknown), every string owned by the array: the amldist_envp_* layout
     * (util/envp.c), so that amlrun grows the result with amldist_envp_set(). */
    for (size_t i = 0; i < NVARS; i++)
        if (format(h, i, buf, sizeof buf) && (env[n++] = strdup(buf)) == NULL)
            goto nomem;
    if ((env[n++] = strdup("AMLDIST_LAUNCHER=amlrun")) == NULL)
        goto nomem;
    for (size_t i = 0; i < nbase; i++)
        if (!ours(base[i]) && (env[n++] = strdup(base[i])) == NULL)
            goto nomem;
    env[n] = NULL;
    *out = env;
    return 0;
nomem:
    amldist_envp_free(env);
    return amldist__fail(AMLDIST_ENOMEM, "out of memory");
}
