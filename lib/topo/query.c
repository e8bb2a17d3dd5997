/* Read-only accessors of a loaded topology. */
#include "topo/topo_internal.h"

static const char *const dist_names[] = {"X", "PIX", "PXB", "PHB", "NODE",
                                         "SYS"};

const char *amldist_dist_name(int dist)
{
    if (dist < 0 || dist > AMLDIST_DIST_SYS)
        return "?";
    return dist_names[dist];
}

const char *amldist_topo_source(const amldist_topo_t *t)
{
    return t != NULL ? t->source : NULL;
}

const char *amldist_topo_locality(const amldist_topo_t *t)
{
    return t != NULL ? t->locality : NULL;
}

const char *amldist_topo_warnings(const amldist_topo_t *t)
{
    static _Thread_local char buf[AMLDIST__WARN_MAX + 512];
    if (t == NULL)
        return "";
    buf[0] = '\0';
    amldist__warn(buf, sizeof buf, "%s", t->warnings);
    if (t->vis_warning[0] != '\0')
        amldist__warn(buf, sizeof buf, "%s", t->vis_warning);
    return buf;
}

int amldist_topo_num_gpus(const amldist_topo_t *t)
{
    return t != NULL ? t->ngpus : AMLDIST_EINVAL;
}

static const struct amldist__gpu *gpu_at(const amldist_topo_t *t, int i)
{
    return t != NULL && i >= 0 && i < t->ngpus ? &t->gpus[i] : NULL;
}

const char *amldist_topo_gpu_busid(const amldist_topo_t *t, int gpu)
{
    const struct amldist__gpu *g = gpu_at(t, gpu);
    return g != NULL ? g->busid : NULL;
}

const char *amldist_topo_gpu_uuid(const amldist_topo_t *t, int gpu)
{
    const struct amldist__gpu *g = gpu_at(t, gpu);
    return g != NULL ? g->uuid : NULL;
}

int amldist_topo_gpu_numa(const amldist_topo_t *t, int gpu)
{
    const struct amldist__gpu *g = gpu_at(t, gpu);
    if (g == NULL)
        return AMLDIST_EINVAL;
    return g->numa != NULL ? (int)g->numa->os_index : AMLDIST_EUNKNOWN;
}

int amldist_topo_num_nics(const amldist_topo_t *t)
{
    return t != NULL ? t->nnics : AMLDIST_EINVAL;
}

const char *amldist_topo_nic_name(const amldist_topo_t *t, int nic)
{
    if (t == NULL || nic < 0 || nic >= t->nnics)
        return NULL;
    return t->nics[nic].name;
}

int amldist_topo_num_numa(const amldist_topo_t *t)
{
    return t != NULL ? t->nnuma : AMLDIST_EINVAL;
}

int amldist_topo_num_cores(const amldist_topo_t *t)
{
    return t != NULL ? t->ncores : AMLDIST_EINVAL;
}

int amldist_topo_gpu_gpu_dist(const amldist_topo_t *t, int a, int b)
{
    const struct amldist__gpu *ga = gpu_at(t, a), *gb = gpu_at(t, b);
    if (ga == NULL || gb == NULL)
        return AMLDIST_EINVAL;
    return amldist__pci_dist(t->h, ga->pci, gb->pci);
}

int amldist_topo_gpu_nic_dist(const amldist_topo_t *t, int gpu, int nic)
{
    const struct amldist__gpu *g = gpu_at(t, gpu);
    if (g == NULL || nic < 0 || nic >= t->nnics)
        return AMLDIST_EINVAL;
    return amldist__pci_dist(t->h, g->pci, t->nics[nic].pci);
}
