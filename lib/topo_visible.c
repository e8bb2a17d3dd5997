/* CUDA_VISIBLE_DEVICES: which GPUs a process sees, and in which order. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "topo_internal.h"

/* The GPU a UUID prefix names: its index, -1 when none or several match. */
static int by_uuid(const amldist_topo_t *t, const char *tok, size_t len)
{
    int found = -1;
    for (int i = 0; i < t->nall; i++) {
        if (t->all[i].uuid[0] == '\0' ||
            strncmp(t->all[i].uuid, tok, len) != 0)
            continue;
        if (found >= 0)
            return -1; /* ambiguous, as CUDA treats it */
        found = i;
    }
    return found;
}

static int any_uuid(const amldist_topo_t *t)
{
    for (int i = 0; i < t->nall; i++)
        if (t->all[i].uuid[0] != '\0')
            return 1;
    return 0;
}

static int by_index(const amldist_topo_t *t, const char *tok, size_t len)
{
    long v = 0;
    if (len == 0 || len > 6)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)tok[i]))
            return -1;
        v = v * 10 + (tok[i] - '0');
    }
    return v < t->nall ? (int)v : -1;
}

int amldist_topo_set_visible(amldist_topo_t *t, const char *value)
{
    amldist__clear_error();
    if (t == NULL)
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_topo_set_visible: topology is NULL");
    t->ngpus = 0;
    t->vis_warning[0] = '\0';
    if (value == NULL) {
        for (int i = 0; i < t->nall; i++) {
            t->gpus[t->ngpus] = t->all[i];
            snprintf(t->gpus[t->ngpus].token, sizeof t->gpus[0].token, "%d",
                     i);
            t->ngpus++;
        }
        return 0;
    }
    char used[4096] = {0};
    for (const char *p = value; *p != '\0';) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == '\0')
            break;
        size_t len = strcspn(p, ",");
        while (len > 0 && p[len - 1] == ' ')
            len--;
        int idx;
        if (len >= 4 && strncmp(p, "GPU-", 4) == 0 && !any_uuid(t)) {
            /* Guessing would bind ranks next to the wrong GPU. */
            snprintf(t->vis_warning, sizeof t->vis_warning,
                     "CUDA_VISIBLE_DEVICES=%.120s names GPUs by UUID and %.200s "
                     "gives no GPU UUIDs: binding ignores GPUs (use GPU "
                     "indices to get GPU-aware binding)",
                     value, t->source);
            t->ngpus = 0;
            return 0;
        }
        if (len >= 4 && strncmp(p, "GPU-", 4) == 0)
            idx = by_uuid(t, p, len);
        else
            idx = by_index(t, p, len);
        /* CUDA stops at the first entry it cannot use. */
        if (idx < 0 || idx >= (int)sizeof used || used[idx]) {
            snprintf(t->vis_warning, sizeof t->vis_warning,
                     "CUDA_VISIBLE_DEVICES=%.120s: entry \"%.*s\" names no GPU "
                     "of %.200s; CUDA ignores it and everything after it",
                     value, (int)(len > 64 ? 64 : len), p, t->source);
            break;
        }
        used[idx] = 1;
        struct amldist__gpu *g = &t->gpus[t->ngpus++];
        *g = t->all[idx];
        snprintf(g->token, sizeof g->token, "%.*s", (int)len, p);
        p += strcspn(p, ",");
    }
    return 0;
}
