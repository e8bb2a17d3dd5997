/*
 * Kubeflow's PyTorchJob: the training operator gives each pod MASTER_ADDR,
 * MASTER_PORT, RANK = the pod's index and WORLD_SIZE, and for torchrun
 * (which reads PET_<OPTION> as its options' defaults) PET_NNODES = the pods,
 * PET_NPROC_PER_NODE and, in later versions, PET_NODE_RANK = RANK.  Its
 * WORLD_SIZE counts pods, or pods times an integer PET_NPROC_PER_NODE: in
 * both, RANK and WORLD_SIZE do not describe workers but the one process the
 * pod starts, node RANK of PET_NNODES, alone in its pod.  That process is
 * a per-node launcher (torchrun, amlrun) or the only worker of the pod.
 * Only canonical variables without a launcher marker and without the local
 * pair are read so: torchrun's and amlrun's workers inherit PET_* too.
 */
#include <stdio.h>
#include <string.h>

#include "sources/sources.h"

/* PET_<name> as a positive integer; "N:N" (torchrun's --nnodes range with
 * equal ends) counts as N, other ranges and words ("auto") as nothing. */
static long pet_count(const amldist__env_t *env, const char *name)
{
    const char *s = amldist__env_get(env, name);
    char buf[24];
    long a, b;
    if (s == NULL)
        return -1;
    const char *colon = strchr(s, ':');
    if (colon == NULL)
        return amldist__parse_long(s, 1, 0x7ffffffeL, &a) == 0 ? a : -1;
    if ((size_t)(colon - s) >= sizeof buf)
        return -1;
    memcpy(buf, s, (size_t)(colon - s));
    buf[colon - s] = '\0';
    if (amldist__parse_long(buf, 1, 0x7ffffffeL, &a) != 0 ||
        amldist__parse_long(colon + 1, 1, 0x7ffffffeL, &b) != 0 || a != b)
        return -1;
    return a;
}

int amldist__kubeflow_pod(const amldist__env_t *env, struct amldist *r)
{
    long nodes = pet_count(env, "PET_NNODES");
    long nproc = pet_count(env, "PET_NPROC_PER_NODE");
    long node = -1;
    int rank = r->val[AMLDIST_FIELD_RANK];
    int world = r->val[AMLDIST_FIELD_WORLD_SIZE];
    const char *pet_node = amldist__env_get(env, "PET_NODE_RANK");
    if (nodes < 1 || rank < 0 || world < 1 ||
        amldist__known(r, AMLDIST_FIELD_LOCAL_RANK) ||
        amldist__known(r, AMLDIST_FIELD_LOCAL_WORLD_SIZE) ||
        (amldist__known(r, AMLDIST_FIELD_NUM_NODES) &&
         r->val[AMLDIST_FIELD_NUM_NODES] != nodes))
        return 0;
    if (pet_node != NULL &&
        (amldist__parse_long(pet_node, 0, 0x7ffffffeL, &node) != 0 ||
         node != rank))
        return 0;
    char how[128];
    if (world == nodes)
        snprintf(how, sizeof how, "WORLD_SIZE=%d == PET_NNODES=%ld", world,
                 nodes);
    else if (nproc > 0 && rank < nodes && (long long)nodes * nproc == world)
        snprintf(how, sizeof how,
                 "WORLD_SIZE=%d is PET_NNODES=%ld * PET_NPROC_PER_NODE=%ld",
                 world, nodes, nproc);
    else
        return 0;
    if (amldist__known(r, AMLDIST_FIELD_NODE_RANK) &&
        r->val[AMLDIST_FIELD_NODE_RANK] != rank)
        return 0;
    if (world != nodes)
        amldist__set(r, AMLDIST_FIELD_WORLD_SIZE, nodes,
                     "derived: PET_NNODES=%ld, one process per pod (%s)",
                     nodes, how);
    amldist__set(r, AMLDIST_FIELD_LOCAL_RANK, 0,
                 "derived: one process per pod (Kubeflow: %s)", how);
    amldist__set(r, AMLDIST_FIELD_LOCAL_WORLD_SIZE, 1,
                 "derived: one process per pod (Kubeflow: %s)", how);
    if (!amldist__known(r, AMLDIST_FIELD_NODE_RANK))
        amldist__set(r, AMLDIST_FIELD_NODE_RANK, rank,
                     "derived: RANK=%d, the pod's index (Kubeflow: %s)", rank,
                     how);
    amldist__set(r, AMLDIST_FIELD_NUM_NODES, nodes,
                 "PET_NNODES=%ld (Kubeflow: %s)", nodes, how);
    return 1;
}
