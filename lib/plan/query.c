/* Read-only accessors of a plan. */
#include "topo/topo_internal.h"

static const struct amldist__rank *rank_at(const amldist_plan_t *p, int r)
{
    return p != NULL && r >= 0 && r < p->n ? &p->ranks[r] : NULL;
}

const char *amldist_plan_warnings(const amldist_plan_t *p)
{
    return p != NULL ? p->warnings : "";
}

int amldist_plan_size(const amldist_plan_t *p)
{
    return p != NULL ? p->n : AMLDIST_EINVAL;
}

int amldist_plan_rank_gpu(const amldist_plan_t *p, int lrank)
{
    const struct amldist__rank *r = rank_at(p, lrank);
    if (r == NULL)
        return AMLDIST_EINVAL;
    return r->gpu >= 0 ? r->gpu : AMLDIST_EUNKNOWN;
}

const char *amldist_plan_rank_gpu_busid(const amldist_plan_t *p, int lrank)
{
    const struct amldist__rank *r = rank_at(p, lrank);
    return r != NULL && r->gpu >= 0 ? r->busid : NULL;
}

const char *amldist_plan_rank_cpus(const amldist_plan_t *p, int lrank)
{
    const struct amldist__rank *r = rank_at(p, lrank);
    if (r == NULL)
        return NULL;
    return r->bind_cpus ? r->cpulist : "";
}

int amldist_plan_rank_ncores(const amldist_plan_t *p, int lrank)
{
    const struct amldist__rank *r = rank_at(p, lrank);
    return r != NULL ? r->ncores : AMLDIST_EINVAL;
}

int amldist_plan_rank_numa(const amldist_plan_t *p, int lrank)
{
    const struct amldist__rank *r = rank_at(p, lrank);
    if (r == NULL)
        return AMLDIST_EINVAL;
    return r->numa >= 0 ? r->numa : AMLDIST_EUNKNOWN;
}

int amldist_plan_rank_numa_guessed(const amldist_plan_t *p, int lrank)
{
    const struct amldist__rank *r = rank_at(p, lrank);
    return r != NULL ? r->numa_guessed : AMLDIST_EINVAL;
}

const char *amldist_plan_rank_nic(const amldist_plan_t *p, int lrank)
{
    const struct amldist__rank *r = rank_at(p, lrank);
    return r != NULL && r->nic >= 0 ? r->nicname : NULL;
}

int amldist_plan_rank_nic_port(const amldist_plan_t *p, int lrank)
{
    const struct amldist__rank *r = rank_at(p, lrank);
    if (r == NULL)
        return AMLDIST_EINVAL;
    return r->nic >= 0 ? r->nicport : AMLDIST_EUNKNOWN;
}

int amldist_plan_rank_nic_dist(const amldist_plan_t *p, int lrank)
{
    const struct amldist__rank *r = rank_at(p, lrank);
    if (r == NULL)
        return AMLDIST_EINVAL;
    return r->nic >= 0 ? r->nic_dist : AMLDIST_EUNKNOWN;
}
