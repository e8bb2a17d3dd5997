/* The l3 policy (torchrun's core-complex): one last-level cache per rank. */
#ifndef AMLDIST_PLAN_CPUS_L3_H
#define AMLDIST_PLAN_CPUS_L3_H

#include "topo/topo_internal.h"

/*
 * Give the k ranks `ranks` of one NUMA node (OS index `node`), whose usable
 * cores are `cores` (their allowed PUs, in logical order), one cache domain
 * each: the cores sharing a last-level cache.  Returns 0, AMLDIST_ENOMEM,
 * or 1 when the topology shows no cache shared by cores, and the caller
 * splits the node as exclusive does (a warning says so).
 */
int amldist__l3_split(amldist_plan_t *plan, hwloc_topology_t h,
                      hwloc_bitmap_t *cores, int ncores, unsigned node,
                      const int *ranks, int k);

#endif
