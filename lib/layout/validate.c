/*
 * The last check on a layout: every index below its size, and sizes that
 * fit together; the message names both values and where they came from.
 */
#include "layout/layout.h"

static const char *const field_names[AMLDIST_FIELD_COUNT] = {
    "rank",      "world size", "local rank",    "local world size",
    "node rank", "node count", "master address", "master port",
};

/* a < b must hold for the two fields when both are known. */
static int below(const struct amldist *h, amldist_field_t a, amldist_field_t b,
                 int or_equal)
{
    int va = h->val[a], vb = h->val[b];
    if (va < 0 || vb < 0 || va < vb || (or_equal && va == vb))
        return 0;
    return amldist__fail(AMLDIST_ERANGE, "%s %d (%s) must be %s %s %d (%s)",
                         field_names[a], va, h->why[a],
                         or_equal ? "at most" : "below the", field_names[b],
                         vb, h->why[b]);
}

int amldist__validate(const struct amldist *h)
{
    int rc;
    if (!amldist__known(h, AMLDIST_FIELD_WORLD_SIZE))
        return amldist__fail(AMLDIST_EMISSING,
                             "%s is set but the world size is unknown (%s)",
                             h->why[AMLDIST_FIELD_RANK],
                             h->why[AMLDIST_FIELD_WORLD_SIZE]);
    if ((rc = below(h, AMLDIST_FIELD_RANK, AMLDIST_FIELD_WORLD_SIZE, 0)) ||
        (rc = below(h, AMLDIST_FIELD_LOCAL_RANK,
                    AMLDIST_FIELD_LOCAL_WORLD_SIZE, 0)) ||
        (rc = below(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE,
                    AMLDIST_FIELD_WORLD_SIZE, 1)) ||
        (rc = below(h, AMLDIST_FIELD_NODE_RANK, AMLDIST_FIELD_NUM_NODES, 0)) ||
        (rc = below(h, AMLDIST_FIELD_NUM_NODES, AMLDIST_FIELD_WORLD_SIZE, 1)))
        return rc;
    int lw = h->val[AMLDIST_FIELD_LOCAL_WORLD_SIZE];
    int nodes = h->val[AMLDIST_FIELD_NUM_NODES];
    /* Every other node runs a rank at least. */
    if (nodes > 1 && lw > 0 &&
        (long long)lw + nodes - 1 > h->val[AMLDIST_FIELD_WORLD_SIZE])
        return amldist__fail(AMLDIST_ERANGE,
                             "local world size %d (%s) and %d nodes (%s) "
                             "need more than world size %d (%s)",
                             lw, h->why[AMLDIST_FIELD_LOCAL_WORLD_SIZE], nodes,
                             h->why[AMLDIST_FIELD_NUM_NODES],
                             h->val[AMLDIST_FIELD_WORLD_SIZE],
                             h->why[AMLDIST_FIELD_WORLD_SIZE]);
    if (h->val[AMLDIST_FIELD_NUM_NODES] == 1 && lw > 0 &&
        lw != h->val[AMLDIST_FIELD_WORLD_SIZE])
        return amldist__fail(AMLDIST_ERANGE,
                             "node count 1 (%s) but local world size %d (%s) "
                             "differs from world size %d (%s)",
                             h->why[AMLDIST_FIELD_NUM_NODES], lw,
                             h->why[AMLDIST_FIELD_LOCAL_WORLD_SIZE],
                             h->val[AMLDIST_FIELD_WORLD_SIZE],
                             h->why[AMLDIST_FIELD_WORLD_SIZE]);
    return 0;
}
