/*
 * The master's address and port, once the ranks are settled: an option,
 * then MASTER_ADDR / MASTER_PORT, then Azure ML's variables, then what the
 * launcher says (Slurm's first node, PMIx's host of rank 0), then the
 * defaults of one process or one node.
 */
#include <string.h>

#include "layout/layout.h"

static int read_master_env(const amldist__env_t *env, struct amldist *h)
{
    /* A variable of mpirun's node alone, set aside (layout.c). */
    if (!amldist__known(h, AMLDIST_FIELD_MASTER_PORT) &&
        !(h->node_only & AMLDIST__MASTER_PORT_BIT)) {
        long port;
        int rc = amldist__env_long(env, "MASTER_PORT", 1, 65535, &port);
        if (rc < 0)
            return rc;
        if (rc == 1)
            amldist__set(h, AMLDIST_FIELD_MASTER_PORT, port, "MASTER_PORT=%ld",
                         port);
    }
    const char *addr = amldist__env_get(env, "MASTER_ADDR");
    if (amldist__known(h, AMLDIST_FIELD_MASTER_ADDR) || addr == NULL ||
        (h->node_only & AMLDIST__MASTER_ADDR_BIT))
        return 0;
    int port = -1;
    if (amldist__parse_hostport(addr, h->addr, sizeof h->addr, &port) != 0 ||
        port != -1) {
        h->addr[0] = '\0';
        return amldist__fail(AMLDIST_EPARSE,
                             "MASTER_ADDR=\"%s\": not a host name or IP "
                             "address",
                             addr);
    }
    amldist__why(h, AMLDIST_FIELD_MASTER_ADDR, "MASTER_ADDR=%s", addr);
    return 0;
}

int amldist__resolve_master(const amldist__env_t *env, struct amldist *h,
                            const struct amldist *launcher)
{
    int rc = read_master_env(env, h);
    if (rc < 0)
        return rc;
    if (!amldist__known(h, AMLDIST_FIELD_MASTER_ADDR)) {
        struct amldist named; /* a master reader's */
        rc = amldist__read_first(AMLDIST__READ_MASTER, env, h, &named);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            memcpy(h->addr, named.addr, sizeof h->addr);
            memcpy(h->why[AMLDIST_FIELD_MASTER_ADDR],
                   named.why[AMLDIST_FIELD_MASTER_ADDR], AMLDIST__WHY_MAX);
            if (!amldist__known(h, AMLDIST_FIELD_MASTER_PORT))
                amldist__set(h, AMLDIST_FIELD_MASTER_PORT,
                             named.val[AMLDIST_FIELD_MASTER_PORT], "%s",
                             named.why[AMLDIST_FIELD_MASTER_PORT]);
        }
    }
    if (!amldist__known(h, AMLDIST_FIELD_MASTER_ADDR) &&
        amldist__known(launcher, AMLDIST_FIELD_MASTER_ADDR)) {
        memcpy(h->addr, launcher->addr, sizeof h->addr);
        memcpy(h->why[AMLDIST_FIELD_MASTER_ADDR],
               launcher->why[AMLDIST_FIELD_MASTER_ADDR], AMLDIST__WHY_MAX);
    }
    if (!amldist__known(h, AMLDIST_FIELD_MASTER_ADDR)) {
        if (strcmp(h->source, "default") == 0) {
            strcpy(h->addr, "127.0.0.1");
            amldist__why(h, AMLDIST_FIELD_MASTER_ADDR,
                         "default (single process)");
        } else if (h->val[AMLDIST_FIELD_NUM_NODES] == 1) {
            strcpy(h->addr, "127.0.0.1");
            amldist__why(h, AMLDIST_FIELD_MASTER_ADDR,
                         "default (single node: %s, no MASTER_ADDR)",
                         h->why[AMLDIST_FIELD_NUM_NODES]);
        } else if (launcher->why[AMLDIST_FIELD_MASTER_ADDR][0] != '\0') {
            /* The launcher's reason: why it cannot name the master. */
            memcpy(h->why[AMLDIST_FIELD_MASTER_ADDR],
                   launcher->why[AMLDIST_FIELD_MASTER_ADDR], AMLDIST__WHY_MAX);
        } else if (h->why[AMLDIST_FIELD_MASTER_ADDR][0] == '\0') {
            amldist__why(h, AMLDIST_FIELD_MASTER_ADDR,
                         "unknown: no MASTER_ADDR, AZ_BATCH_MASTER_NODE or "
                         "Slurm node list, and more than one node may be "
                         "involved");
        }
    }
    if (!amldist__known(h, AMLDIST_FIELD_MASTER_PORT))
        amldist__set(h, AMLDIST_FIELD_MASTER_PORT, AMLDIST__DEFAULT_PORT,
                     "default %d (torchrun's; MASTER_PORT not set)",
                     AMLDIST__DEFAULT_PORT);
    return 0;
}
