/* CUDA_VISIBLE_DEVICES: which GPUs a process sees, and in which order. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_internal.h"

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

/* amldist_topo_gpu_note(): how many GPUs, how many usable, how many
 * visible. */
static void note(amldist_topo_t *t, const char *value)
{
    snprintf(t->gpu_note, sizeof t->gpu_note, "%s", t->usable_note);
    if (value == NULL)
        return;
    size_t len = strlen(t->gpu_note);
    if (t->vis_warning[0] != '\0')
        snprintf(t->gpu_note + len, sizeof t->gpu_note - len, "; %s",
                 t->vis_warning);
    else if (t->ngpus > 0)
        snprintf(t->gpu_note + len, sizeof t->gpu_note - len,
                 "; CUDA_VISIBLE_DEVICES=%.200s selects %d of them", value,
                 t->ngpus);
    else
        snprintf(t->gpu_note + len, sizeof t->gpu_note - len,
                 "; CUDA_VISIBLE_DEVICES=%.200s selects none of them", value);
}

/* Room for one visible GPU per entry: MIG instances share a GPU. */
static int make_room(amldist_topo_t *t, const char *value)
{
    size_t need = 1;
    for (const char *p = value; *p != '\0'; p++)
        need += *p == ',';
    if (need <= (size_t)t->gpus_cap || need > 4096)
        return 0;
    struct amldist__gpu *grown = realloc(t->gpus, need * sizeof *grown);
    if (grown == NULL)
        return amldist__fail(AMLDIST_ENOMEM, "topology: out of memory");
    t->gpus = grown;
    t->gpus_cap = (int)need;
    return 0;
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
        note(t, NULL);
        return 0;
    }
    if (make_room(t, value) < 0)
        return AMLDIST_ENOMEM;
    char used[4096] = {0};
    for (const char *p = value; *p != '\0' && t->ngpus < t->gpus_cap;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == '\0')
            break;
        size_t len = strcspn(p, ",");
        while (len > 0 && p[len - 1] == ' ')
            len--;
        int idx, mig = len >= 4 && strncmp(p, "MIG-", 4) == 0;
        if (len >= 4 && strncmp(p, "GPU-", 4) == 0 && !any_uuid(t)) {
            /* Guessing would bind ranks next to the wrong GPU. */
            snprintf(t->vis_warning, sizeof t->vis_warning,
                     "CUDA_VISIBLE_DEVICES=%.120s names GPUs by UUID and %.200s "
                     "gives no GPU UUIDs: binding ignores GPUs (use GPU "
                     "indices to get GPU-aware binding)",
                     value, t->source);
            t->ngpus = 0;
            break;
        }
        if (mig && t->nall != 1) {
            /* Which GPU a MIG instance is on only NVML can say; with one
             * usable GPU (a container given one MIG slice) it is that one. */
            snprintf(t->vis_warning, sizeof t->vis_warning,
                     "CUDA_VISIBLE_DEVICES=%.120s names MIG instances and "
                     "%d GPUs are usable: which GPU each is on cannot be "
                     "told without NVML, so binding ignores GPUs",
                     value, t->nall);
            t->ngpus = 0;
            break;
        }
        if (mig)
            idx = 0;
        else if (len >= 4 && strncmp(p, "GPU-", 4) == 0)
            idx = by_uuid(t, p, len);
        else
            idx = by_index(t, p, len);
        /* CUDA stops at the first entry it cannot use. */
        if (idx < 0 || idx >= (int)sizeof used || (used[idx] && !mig)) {
            char of[256];
            if (t->npci != t->nall)
                snprintf(of, sizeof of,
                         "the %d this process can use (of %d on the PCI "
                         "bus)",
                         t->nall, t->npci);
            else
                snprintf(of, sizeof of, "%.200s", t->source);
            snprintf(t->vis_warning, sizeof t->vis_warning,
                     "CUDA_VISIBLE_DEVICES=%.120s: entry \"%.*s\" names no GPU "
                     "of %s; CUDA ignores it and everything after it",
                     value, (int)(len > 64 ? 64 : len), p, of);
            break;
        }
        used[idx] = 1;
        struct amldist__gpu *g = &t->gpus[t->ngpus++];
        *g = t->all[idx];
        snprintf(g->token, sizeof g->token, "%.*s", (int)len, p);
        p += strcspn(p, ",");
    }
    note(t, value);
    return 0;
}
