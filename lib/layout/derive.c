/*
 * The layout of a worker that a per-node launcher (amlrun) starts: worker
 * `index` of `nproc`, numbered after its parent the way torchrun numbers
 * them, so that the ranks of one node are contiguous.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"

/* parent value * nproc + offset, or unknown when the parent's is. */
static int scaled(struct amldist *c, const amldist_t *p, amldist_field_t f,
                  int nproc, int offset, const char *what)
{
    long v = p->val[f];
    if (v < 0) {
        amldist__why(c, f, "unknown: the launcher's %s is unknown (%s)", what,
                     p->why[f]);
        return 0;
    }
    long long r = (long long)v * nproc + offset;
    if (r > INT_MAX)
        return amldist__fail(AMLDIST_ERANGE,
                             "launcher %s %ld (%s) * nproc %d overflows", what,
                             v, p->why[f], nproc);
    amldist__set(c, f, (long)r, "derived: %ld * %d + %d (launcher %s: %s)", v,
                 nproc, offset, what, p->why[f]);
    return 0;
}

int amldist_derive_child(const amldist_t *parent, int nproc, int index,
                         amldist_t **out)
{
    amldist__clear_error();
    if (out == NULL || parent == NULL)
        return amldist__fail(AMLDIST_EINVAL, "amldist_derive_child: %s is NULL",
                             out == NULL ? "out" : "parent");
    *out = NULL;
    if (nproc < 1 || index < 0 || index >= nproc)
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_derive_child: worker index %d of nproc "
                             "%d (need 0 <= index < nproc)",
                             index, nproc);
    if (parent->val[AMLDIST_FIELD_RANK] < 0 ||
        parent->val[AMLDIST_FIELD_WORLD_SIZE] < 0)
        return amldist__fail(AMLDIST_EUNKNOWN,
                             "amldist_derive_child: the launcher's rank or "
                             "world size is unknown (%s; %s)",
                             parent->why[AMLDIST_FIELD_RANK],
                             parent->why[AMLDIST_FIELD_WORLD_SIZE]);
    struct amldist *c = malloc(sizeof *c);
    if (c == NULL)
        return amldist__fail(AMLDIST_ENOMEM, "out of memory");
    amldist__reading_init(c, "amlrun");
    int rc;
    if ((rc = scaled(c, parent, AMLDIST_FIELD_RANK, nproc, index, "rank")) <
            0 ||
        (rc = scaled(c, parent, AMLDIST_FIELD_WORLD_SIZE, nproc, 0,
                     "world size")) < 0 ||
        (rc = scaled(c, parent, AMLDIST_FIELD_LOCAL_RANK, nproc, index,
                     "local rank")) < 0 ||
        (rc = scaled(c, parent, AMLDIST_FIELD_LOCAL_WORLD_SIZE, nproc, 0,
                     "local world size")) < 0) {
        free(c);
        return rc;
    }
    static const amldist_field_t same[] = {
        AMLDIST_FIELD_NODE_RANK, AMLDIST_FIELD_NUM_NODES,
        AMLDIST_FIELD_MASTER_ADDR, AMLDIST_FIELD_MASTER_PORT};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        amldist_field_t f = same[i];
        c->val[f] = parent->val[f];
        amldist__why(c, f, "%s", parent->why[f]);
    }
    memcpy(c->addr, parent->addr, sizeof c->addr);
    *out = c;
    return 0;
}
