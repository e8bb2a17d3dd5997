/*
 * The plan as an annotated hwloc XML, for lstopo to draw: each rank's PUs,
 * cores, GPU and NIC get an "lstopoStyle" colour, a Misc object "rank N"
 * labels them, and "lstopoLegend" lines on the root list ranks and devices
 * (lstopo(1), COLORS).  The drawing itself is lstopo's job.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_internal.h"

/* Colours far apart, dark enough for white text; 16, a DGX-2's GPUs,
 * before they repeat. */
static const char *const palette[] = {
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
    "#e377c2", "#17becf", "#7f7f7f", "#bcbd22", "#393b79", "#637939",
    "#843c39", "#7b4173", "#3182bd", "#31a354",
};
#define NCOLOURS (sizeof palette / sizeof palette[0])

static const char *colour(int lrank)
{
    return palette[(size_t)lrank % NCOLOURS];
}

/* The first rank to claim an object colours it: shared cores keep one. */
static void paint(hwloc_obj_t o, const char *style)
{
    if (o != NULL && hwloc_obj_get_info_by_name(o, "lstopoStyle") == NULL)
        hwloc_obj_add_info(o, "lstopoStyle", style);
}

static int label(hwloc_topology_t h, hwloc_obj_t parent, const char *name,
                 const char *style)
{
    if (parent == NULL)
        return 0;
    hwloc_obj_t m = hwloc_topology_insert_misc_object(h, parent, name);
    if (m == NULL)
        return -1;
    return hwloc_obj_add_info(m, "lstopoStyle", style);
}

static hwloc_obj_t find_nic(hwloc_topology_t h, const char *name)
{
    hwloc_obj_t o = NULL;
    while (name[0] != '\0' && (o = hwloc_get_next_osdev(h, o)) != NULL)
        if (o->name != NULL && strcmp(o->name, name) == 0)
            return o;
    return NULL;
}

static int annotate_rank(hwloc_topology_t h, const amldist_plan_t *p, int i)
{
    const struct amldist__rank *r = &p->ranks[i];
    char style[64], name[32], legend[512];
    snprintf(style, sizeof style, "Background=%s;Text=#ffffff",
             colour(i));
    snprintf(name, sizeof name, "rank %d", i);
    int bound = r->bind_cpus && r->cpus != NULL && !hwloc_bitmap_iszero(r->cpus);
    if (bound) {
        hwloc_obj_t o = NULL;
        while ((o = hwloc_get_next_obj_by_type(h, HWLOC_OBJ_PU, o)) != NULL)
            if (hwloc_bitmap_isset(r->cpus, o->os_index))
                paint(o, style);
        while ((o = hwloc_get_next_obj_by_type(h, HWLOC_OBJ_CORE, o)) != NULL)
            if (o->cpuset && hwloc_bitmap_isincluded(o->cpuset, r->cpus))
                paint(o, style);
        /* One label per rank, not one per core: on the smallest object
         * holding all of its cores. */
        hwloc_obj_t cover = hwloc_get_obj_covering_cpuset(h, r->cpus);
        if (cover == NULL)
            cover = hwloc_get_root_obj(h);
        if (label(h, cover, name, style) < 0)
            return -1;
    }
    hwloc_obj_t gpu = r->gpu >= 0 && r->busid[0] != '\0'
                          ? hwloc_get_pcidev_by_busidstring(h, r->busid)
                          : NULL;
    paint(gpu, style);
    if (label(h, gpu, name, style) < 0)
        return -1;
    hwloc_obj_t nic = r->nic >= 0 ? find_nic(h, r->nicname) : NULL;
    paint(nic, style);
    if (label(h, nic, name, style) < 0)
        return -1;
    snprintf(legend, sizeof legend, "rank %d (%s): cores %s; GPU %s; NIC %s",
             i, colour(i), bound ? r->cpulist : "not bound",
             gpu ? r->busid : "none", nic ? r->nicname : "none");
    return hwloc_obj_add_info(hwloc_get_root_obj(h), "lstopoLegend", legend);
}

/* A copy, so that the plan's topology stays as every caller sees it, read
 * back from XML: a loaded topology's filters cannot change, and the
 * default one refuses Misc objects, the labels. */
static int copy_with_misc(const amldist_topo_t *t, hwloc_topology_t *out)
{
    char *xml = NULL;
    int len = 0;
    if (hwloc_topology_export_xmlbuffer(t->h, &xml, &len, 0) < 0)
        return -1;
    hwloc_topology_t h = NULL;
    int rc = hwloc_topology_init(&h);
    if (rc == 0) {
        hwloc_topology_set_all_types_filter(h, HWLOC_TYPE_FILTER_KEEP_ALL);
        rc = hwloc_topology_set_xmlbuffer(h, xml, len);
        if (rc == 0)
            rc = hwloc_topology_load(h);
        if (rc < 0)
            hwloc_topology_destroy(h);
    }
    hwloc_free_xmlbuffer(t->h, xml);
    if (rc == 0)
        *out = h;
    return rc;
}

int amldist_plan_export_xml(const amldist_plan_t *p, const amldist_topo_t *t,
                            const char *path)
{
    if (p == NULL || t == NULL || path == NULL)
        return amldist__fail(AMLDIST_EINVAL, "plan export: no plan, "
                                             "topology or path");
    hwloc_topology_t h = NULL;
    if (copy_with_misc(t, &h) < 0)
        return amldist__fail(AMLDIST_ETOPO, "plan export: the topology "
                                            "could not be copied");
    int rc = 0;
    for (int i = 0; i < p->n && rc == 0; i++)
        if (annotate_rank(h, p, i) < 0)
            rc = amldist__fail(AMLDIST_ENOMEM, "plan export: out of memory");
    if (rc == 0 && hwloc_topology_export_xml(h, path, 0) < 0)
        rc = amldist__fail(AMLDIST_ESYS, "plan export: cannot write %s",
                           path);
    hwloc_topology_destroy(h);
    return rc;
}
