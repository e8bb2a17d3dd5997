/*
 * Distance classes between PCI devices, as nvidia-smi topo -m and NCCL
 * define them.  The common ancestor is found by walking parents here:
 * hwloc_get_common_ancestor_obj() compares depths, and I/O objects at
 * different bridge depths all share one virtual depth in hwloc 2.9.
 */
#include "topo/topo_internal.h"

#define MAX_CHAIN 64

hwloc_obj_t amldist__io_numa(hwloc_topology_t h, hwloc_obj_t io)
{
    /* The node an NCCL topology file gave a device hwloc placed nowhere
     * (topo/ncclxml_use.c). */
    if (io->userdata != NULL)
        return io->userdata;
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(h, io);
    int nnuma = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
    if (nnuma == 1)
        return hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, 0);
    if (anc == NULL || anc->nodeset == NULL ||
        hwloc_bitmap_weight(anc->nodeset) != 1)
        return NULL; /* attached to the machine: sysfs said numa_node -1 */
    return hwloc_get_numanode_obj_by_os_index(
        h, (unsigned)hwloc_bitmap_first(anc->nodeset));
}

static int is_io(hwloc_obj_t o)
{
    return o->type == HWLOC_OBJ_BRIDGE || o->type == HWLOC_OBJ_PCI_DEVICE ||
           o->type == HWLOC_OBJ_OS_DEVICE;
}

/* Bridges strictly between `o` and its ancestor `top`. */
static int bridges_between(hwloc_obj_t o, hwloc_obj_t top)
{
    int n = 0;
    for (hwloc_obj_t x = o->parent; x != NULL && x != top; x = x->parent)
        n += x->type == HWLOC_OBJ_BRIDGE;
    return n;
}

int amldist__pci_dist(hwloc_topology_t h, hwloc_obj_t a, hwloc_obj_t b)
{
    if (a == b)
        return AMLDIST_DIST_X;
    hwloc_obj_t chain[MAX_CHAIN];
    int n = 0;
    for (hwloc_obj_t x = a->parent; x != NULL && n < MAX_CHAIN; x = x->parent)
        chain[n++] = x;
    hwloc_obj_t common = NULL;
    for (hwloc_obj_t y = b->parent; y != NULL && common == NULL;
         y = y->parent)
        for (int i = 0; i < n; i++)
            if (chain[i] == y) {
                common = y;
                break;
            }
    if (common != NULL && is_io(common)) {
        if (common->type == HWLOC_OBJ_BRIDGE &&
            common->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST)
            return AMLDIST_DIST_PHB;
        /* Under one PCIe switch, each device sits at most one downstream
         * port below the switch's upstream bridge. */
        if (bridges_between(a, common) <= 1 && bridges_between(b, common) <= 1)
            return AMLDIST_DIST_PIX;
        return AMLDIST_DIST_PXB;
    }
    /* Different host bridges: NODE only when both are known to hang off
     * the same NUMA node. */
    hwloc_obj_t na = amldist__io_numa(h, a), nb = amldist__io_numa(h, b);
    return na != NULL && na == nb ? AMLDIST_DIST_NODE : AMLDIST_DIST_SYS;
}
