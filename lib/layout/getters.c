/* Reading a layout.  Handles are immutable, so no locking; the message for
 * an unknown value goes to the calling thread's last error. */
#include "layout/layout.h"

static int get(const amldist_t *h, amldist_field_t f)
{
    if (h == NULL)
        return amldist__fail(AMLDIST_EINVAL, "NULL amldist_t handle");
    if (h->val[f] < 0)
        return amldist__fail(AMLDIST_EUNKNOWN, "%s", h->why[f]);
    return h->val[f];
}

int amldist_rank(const amldist_t *h)
{
    return get(h, AMLDIST_FIELD_RANK);
}

int amldist_world_size(const amldist_t *h)
{
    return get(h, AMLDIST_FIELD_WORLD_SIZE);
}

int amldist_local_rank(const amldist_t *h)
{
    return get(h, AMLDIST_FIELD_LOCAL_RANK);
}

int amldist_local_world_size(const amldist_t *h)
{
    return get(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE);
}

int amldist_node_rank(const amldist_t *h)
{
    return get(h, AMLDIST_FIELD_NODE_RANK);
}

int amldist_num_nodes(const amldist_t *h)
{
    return get(h, AMLDIST_FIELD_NUM_NODES);
}

int amldist_master_port(const amldist_t *h)
{
    return get(h, AMLDIST_FIELD_MASTER_PORT);
}

const char *amldist_master_addr(const amldist_t *h)
{
    if (h == NULL) {
        amldist__fail(AMLDIST_EINVAL, "NULL amldist_t handle");
        return NULL;
    }
    if (h->addr[0] == '\0') {
        amldist__fail(AMLDIST_EUNKNOWN, "%s",
                      h->why[AMLDIST_FIELD_MASTER_ADDR]);
        return NULL;
    }
    return h->addr;
}

const char *amldist_source(const amldist_t *h)
{
    if (h == NULL) {
        amldist__fail(AMLDIST_EINVAL, "NULL amldist_t handle");
        return NULL;
    }
    return h->source;
}

const char *amldist_explain(const amldist_t *h, amldist_field_t field)
{
    if (h == NULL || (unsigned)field >= AMLDIST_FIELD_COUNT) {
        amldist__fail(AMLDIST_EINVAL, h == NULL ? "NULL amldist_t handle"
                                                : "field %d out of range",
                      (int)field);
        return NULL;
    }
    return h->why[field];
}
