/*
 * The canonical variables: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * NODE_RANK / GROUP_RANK, GROUP_WORLD_SIZE, as torchrun, amlrun, Azure ML's
 * PyTorch distribution or a Kubernetes operator set them.  torchrun's
 * TORCHELASTIC_RUN_ID or GROUP_RANK and amlrun's AMLDIST_LAUNCHER=amlrun
 * mark the set as written by the innermost launcher (see layout/layout.c).
 */
#include <limits.h>
#include <string.h>

#include "sources/sources.h"

#define RANK_MAX (INT_MAX - 1)

/* Reads NAME into field f of r; 1 if set, 0 if not, < 0 if malformed. */
static int take(const amldist__env_t *env, struct amldist *r,
                amldist_field_t f, const char *name, long min, long max)
{
    long v;
    int rc = amldist__env_long(env, name, min, max, &v);
    if (rc == 1)
        amldist__set(r, f, v, "%s=%ld", name, v);
    return rc;
}

static int node_rank(const amldist__env_t *env, struct amldist *r)
{
    long node, group;
    int has_node = amldist__env_long(env, "NODE_RANK", 0, RANK_MAX, &node);
    if (has_node < 0)
        return has_node;
    int has_group = amldist__env_long(env, "GROUP_RANK", 0, RANK_MAX, &group);
    if (has_group < 0)
        return has_group;
    if (has_node && has_group && node != group)
        return amldist__fail(AMLDIST_ECONFLICT,
                             "NODE_RANK=%ld conflicts with GROUP_RANK=%ld "
                             "(both name this node's index)",
                             node, group);
    if (has_node)
        amldist__set(r, AMLDIST_FIELD_NODE_RANK, node, "NODE_RANK=%ld", node);
    else if (has_group)
        amldist__set(r, AMLDIST_FIELD_NODE_RANK, group, "GROUP_RANK=%ld",
                     group);
    return 0;
}

static int marker(const amldist__env_t *env, const char **source)
{
    const char *launcher = amldist__env_get(env, "AMLDIST_LAUNCHER");
    if (launcher != NULL) {
        if (strcmp(launcher, "amlrun") != 0)
            return amldist__fail(AMLDIST_EPARSE,
                                 "AMLDIST_LAUNCHER=\"%s\": unknown launcher "
                                 "(only \"amlrun\" is defined)",
                                 launcher);
        *source = "amlrun";
        return 1;
    }
    if (amldist__env_get(env, "TORCHELASTIC_RUN_ID") != NULL ||
        amldist__env_get(env, "GROUP_RANK") != NULL) {
        *source = "torchrun";
        return 1;
    }
    *source = "env";
    return 0;
}

int amldist__src_canonical(const amldist__env_t *env, struct amldist *r)
{
    const char *source = "env";
    int marked = marker(env, &source);
    if (marked < 0)
        return marked;
    amldist__reading_init(r, source);
    r->marker = marked;

    int has_rank = take(env, r, AMLDIST_FIELD_RANK, "RANK", 0, RANK_MAX);
    if (has_rank < 0)
        return has_rank;
    int has_world = take(env, r, AMLDIST_FIELD_WORLD_SIZE, "WORLD_SIZE", 1,
                         INT_MAX);
    if (has_world < 0)
        return has_world;
    if (!has_rank && !has_world) {
        if (strcmp(source, "amlrun") == 0)
            return amldist__fail(AMLDIST_EMISSING,
                                 "AMLDIST_LAUNCHER=amlrun is set but RANK and "
                                 "WORLD_SIZE are not (a leftover of an "
                                 "amlrun's worker? unset it)");
        return 0;
    }
    if (!has_rank)
        return amldist__fail(AMLDIST_EMISSING,
                             "WORLD_SIZE=%d is set but RANK is not (set "
                             "both, or unset it)",
                             r->val[AMLDIST_FIELD_WORLD_SIZE]);
    if (!has_world)
        return amldist__fail(AMLDIST_EMISSING,
                             "RANK=%d is set but WORLD_SIZE is not (set "
                             "both, or unset it)",
                             r->val[AMLDIST_FIELD_RANK]);

    int rc;
    if ((rc = take(env, r, AMLDIST_FIELD_LOCAL_RANK, "LOCAL_RANK", 0,
                   RANK_MAX)) < 0 ||
        (rc = take(env, r, AMLDIST_FIELD_LOCAL_WORLD_SIZE, "LOCAL_WORLD_SIZE",
                   1, INT_MAX)) < 0 ||
        (rc = take(env, r, AMLDIST_FIELD_NUM_NODES, "GROUP_WORLD_SIZE", 1,
                   INT_MAX)) < 0 ||
        (rc = node_rank(env, r)) < 0)
        return rc;

    if (!marked && amldist__kubeflow_pod(env, r))
        return 1;
    /* torchrun starts the same number of workers on every node, so older
     * versions that lack GROUP_WORLD_SIZE still tell the node count. */
    int world = r->val[AMLDIST_FIELD_WORLD_SIZE];
    int local_world = r->val[AMLDIST_FIELD_LOCAL_WORLD_SIZE];
    if (strcmp(source, "torchrun") == 0 &&
        !amldist__known(r, AMLDIST_FIELD_NUM_NODES) && local_world > 0 &&
        world % local_world == 0)
        amldist__set(r, AMLDIST_FIELD_NUM_NODES, world / local_world,
                     "derived: WORLD_SIZE=%d / LOCAL_WORLD_SIZE=%d (torchrun "
                     "runs as many workers on every node)",
                     world, local_world);
    return 1;
}
