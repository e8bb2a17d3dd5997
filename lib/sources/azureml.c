/*
 * Azure ML names the master only; ranks come from Open MPI (or the canonical
 * variables).  As the Azure ML guide's aml_mpienv.py does: on several nodes
 * the host of AZ_BATCH_MASTER_NODE ("host:port", here also "[v6]:port") with
 * port 6105 unless MASTER_PORT is set (the port inside the variable is Azure
 * Batch's own, not ours); on one node AZ_BATCHAI_MPI_MASTER_NODE with port
 * 54965.  Unlike aml_mpienv.py, MASTER_PORT is kept on one node too and
 * MASTER_ADDR when set (layout/master.c reads those first); each variable
 * stands in for the other when only one is set.
 */
#include "sources/sources.h"

/* The ports the Azure ML guide's aml_mpienv.py uses (multi- / single node). */
#define AMLDIST__AZURE_PORT 6105
#define AMLDIST__AZURE_SINGLE_PORT 54965

static int host_of(const char *name, const char *value, char *host,
                   size_t hostsz)
{
    int port;
    if (amldist__parse_hostport(value, host, hostsz, &port) != 0)
        return amldist__fail(AMLDIST_EPARSE,
                             "%s=\"%s\": not host, host:port or [IPv6]:port",
                             name, value);
    return 0;
}

int amldist__src_azureml(const amldist__env_t *env,
                         const struct amldist *layout, struct amldist *r)
{
    static const char multi[] = "AZ_BATCH_MASTER_NODE";
    static const char single[] = "AZ_BATCHAI_MPI_MASTER_NODE";
    amldist__reading_init(r, "azureml");
    int world = layout->val[AMLDIST_FIELD_WORLD_SIZE];
    int one_node = layout->val[AMLDIST_FIELD_NUM_NODES] == 1 ||
                   (world > 0 &&
                    layout->val[AMLDIST_FIELD_LOCAL_WORLD_SIZE] == world);
    const char *name = one_node ? single : multi;
    const char *value = amldist__env_get(env, name);
    if (value == NULL) {
        name = one_node ? multi : single;
        value = amldist__env_get(env, name);
    }
    if (value == NULL)
        return 0;
    int rc = host_of(name, value, r->addr, sizeof r->addr);
    if (rc < 0)
        return rc;
    amldist__why(r, AMLDIST_FIELD_MASTER_ADDR, "%s=%s%s", name, value,
                 one_node ? " (one node)" : "");
    if (one_node)
        amldist__set(r, AMLDIST_FIELD_MASTER_PORT, AMLDIST__AZURE_SINGLE_PORT,
                     "Azure ML single-node port %d (MASTER_PORT not set)",
                     AMLDIST__AZURE_SINGLE_PORT);
    else
        amldist__set(r, AMLDIST_FIELD_MASTER_PORT, AMLDIST__AZURE_PORT,
                     "Azure ML default port %d (MASTER_PORT not set)",
                     AMLDIST__AZURE_PORT);
    return 1;
}
