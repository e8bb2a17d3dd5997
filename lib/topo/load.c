/* Discovery: load the hwloc topology once and list its GPUs and NICs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/ncclxml.h"

static int is_nvidia_gpu(hwloc_obj_t pci)
{
    unsigned cls = pci->attr->pcidev.class_id;
    /* VGA or 3D controller; NVSwitches (0x0680) and HDMI audio are not. */
    return pci->attr->pcidev.vendor_id == 0x10de &&
           (cls == 0x0300 || cls == 0x0302);
}

static void format_busid(hwloc_obj_t pci, char *buf, size_t size)
{
    snprintf(buf, size, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain,
             pci->attr->pcidev.bus, pci->attr->pcidev.dev,
             pci->attr->pcidev.func);
}

static long pci_key(hwloc_obj_t pci)
{
    const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;
    return ((long)a->domain << 24) | ((long)a->bus << 16) |
           ((long)a->dev << 8) | a->func;
}

static int cmp_gpu(const void *x, const void *y)
{
    long a = pci_key(((const struct amldist__gpu *)x)->pci);
    long b = pci_key(((const struct amldist__gpu *)y)->pci);
    return (a > b) - (a < b);
}

static int cmp_nic(const void *x, const void *y)
{
    const struct amldist__nic *a = x, *b = y;
    long ka = pci_key(a->pci), kb = pci_key(b->pci);
    if (ka != kb)
        return (ka > kb) - (ka < kb);
    return strcmp(a->name, b->name);
}

static void describe_gpu(amldist_topo_t *t, struct amldist__gpu *g)
{
    format_busid(g->pci, g->busid, sizeof g->busid);
    const char *model = hwloc_obj_get_info_by_name(g->pci, "PCIDevice");
    for (hwloc_obj_t os = g->pci->io_first_child; os; os = os->next_sibling) {
        const char *uuid = hwloc_obj_get_info_by_name(os, "NVIDIAUUID");
        const char *m = hwloc_obj_get_info_by_name(os, "GPUModel");
        if (uuid != NULL && g->uuid[0] == '\0')
            amldist__strlcpy(g->uuid, uuid, sizeof g->uuid);
        if (m != NULL)
            model = m;
    }
    if (model != NULL)
        amldist__strlcpy(g->model, model, sizeof g->model);
    g->numa = amldist__io_numa(t->h, g->pci);
}

static int find_gpus(amldist_topo_t *t)
{
    int n = 0;
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_pcidev(t->h, o));)
        n += is_nvidia_gpu(o);
    t->all = calloc(n > 0 ? (size_t)n : 1, sizeof *t->all);
    t->gpus = calloc(n > 0 ? (size_t)n : 1, sizeof *t->gpus);
    if (t->all == NULL || t->gpus == NULL)
        return amldist__fail(AMLDIST_ENOMEM, "topology: out of memory");
    t->gpus_cap = n > 0 ? n : 1;
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_pcidev(t->h, o));)
        if (is_nvidia_gpu(o))
            t->all[t->nall++].pci = o;
    qsort(t->all, (size_t)t->nall, sizeof *t->all, cmp_gpu);
    for (int i = 0; i < t->nall; i++)
        describe_gpu(t, &t->all[i]);
    return amldist__usable_gpus(t);
}

/* A topology from hwloc whose GPUs or NICs have no NUMA node (a VM): take
 * their locality from NCCL_TOPO_FILE when it names them; then say which
 * GPUs still have none. */
static void nccl_locality(amldist_topo_t *t)
{
    int missing = 0;
    for (int i = 0; i < t->nall; i++)
        missing += t->all[i].numa == NULL;
    for (int i = 0; i < t->nnics; i++)
        missing += amldist__io_numa(t->h, t->nics[i].pci) == NULL;
    const char *path = getenv("NCCL_TOPO_FILE");
    if (missing > 0 && path != NULL && path[0] != '\0') {
        struct amldist__nx *nx = NULL;
        if (amldist__nx_read(path, &nx) == 0)
            amldist__nx_apply(t, nx);
        else
            amldist__warn(t->warnings, sizeof t->warnings,
                          "%s; locality from hwloc alone",
                          amldist_last_error());
        amldist__nx_free(nx);
        amldist__clear_error();
    }
    for (int i = 0; i < t->nall; i++) {
        const struct amldist__gpu *g = &t->all[i];
        if (g->numa == NULL)
            amldist__warn(t->warnings, sizeof t->warnings,
                          "GPU %s has no known NUMA node (the machine "
                          "reports none for it%s): ranks on it are spread "
                          "over the NUMA nodes",
                          g->busid,
                          path != NULL && path[0] != '\0'
                              ? ""
                              : ", and no NCCL_TOPO_FILE gives one");
    }
}

static hwloc_obj_t pci_parent(hwloc_obj_t o)
{
    while (o != NULL && o->type != HWLOC_OBJ_PCI_DEVICE)
        o = o->parent;
    return o;
}

/* Port state from hwloc's Port<N>State infos (4 is IB_PORT_ACTIVE). */
static void port_state(hwloc_obj_t os, struct amldist__nic *n)
{
    n->port = 1;
    n->state = AMLDIST__PORT_UNKNOWN;
    for (int port = 1; port <= 16; port++) {
        char name[32];
        snprintf(name, sizeof name, "Port%dState", port);
        const char *v = hwloc_obj_get_info_by_name(os, name);
        if (v == NULL)
            continue;
        if (strcmp(v, "4") == 0) {
            n->port = port;
            n->state = AMLDIST__PORT_ACTIVE;
            return;
        }
        n->state = AMLDIST__PORT_DOWN;
    }
}

static int collect_nics(amldist_topo_t *t, hwloc_obj_osdev_type_t type)
{
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_osdev(t->h, o));) {
        hwloc_obj_t pci = pci_parent(o->parent);
        if (o->attr->osdev.type != type || pci == NULL || o->name == NULL)
            continue;
        struct amldist__nic *grown =
            realloc(t->nics, (size_t)(t->nnics + 1) * sizeof *t->nics);
        if (grown == NULL)
            return amldist__fail(AMLDIST_ENOMEM, "topology: out of memory");
        t->nics = grown;
        struct amldist__nic *n = &t->nics[t->nnics++];
        memset(n, 0, sizeof *n);
        n->pci = pci;
        amldist__strlcpy(n->name, o->name, sizeof n->name);
        if (type == HWLOC_OBJ_OSDEV_OPENFABRICS)
            port_state(o, n);
        else
            n->state = AMLDIST__PORT_UNKNOWN;
    }
    return 0;
}

static int find_nics(amldist_topo_t *t)
{
    int rc = collect_nics(t, HWLOC_OBJ_OSDEV_OPENFABRICS);
    /* Plain network interfaces only where there is no RDMA device at all:
     * next to one they are its IPoIB or management ports. */
    if (rc == 0 && t->nnics == 0)
        rc = collect_nics(t, HWLOC_OBJ_OSDEV_NETWORK);
    if (rc == 0 && t->nnics > 1)
        qsort(t->nics, (size_t)t->nnics, sizeof *t->nics, cmp_nic);
    return rc;
}

/* An NCCL topology file stands for a machine of its own: its CPUs, NUMA
 * nodes, GPUs and NICs, as hwloc XML (topo/ncclxml_use.c). */
static int load_nccl(amldist_topo_t *t, const char *path)
{
    struct amldist__nx *nx = NULL;
    int rc = amldist__nx_read(path, &nx);
    char *xml = rc == 0 ? amldist__nx_hwloc_xml(nx) : NULL;
    if (rc == 0 && xml == NULL)
        rc = AMLDIST_ETOPO;
    if (rc == 0)
        rc = amldist__hwloc_new(&t->h);
    if (rc == 0 &&
        (hwloc_topology_set_xmlbuffer(t->h, xml, (int)strlen(xml) + 1) < 0 ||
         hwloc_topology_load(t->h) < 0))
        rc = amldist__fail(AMLDIST_ETOPO,
                           "NCCL topology file %s: hwloc refuses the machine "
                           "made of it",
                           path);
    if (rc == 0) {
        snprintf(t->source, sizeof t->source, "NCCL topology file %.480s",
                 path);
        snprintf(t->locality, sizeof t->locality,
                 "from the NCCL topology file %.500s", path);
        if (nx->notes[0] != '\0')
            amldist__warn(t->warnings, sizeof t->warnings, "%s", nx->notes);
    }
    free(xml);
    amldist__nx_free(nx);
    return rc;
}

static int load_hwloc(amldist_topo_t *t, const char *xml)
{
    /* This machine: from the per-node cache when it holds a valid copy,
     * else discovered (and the copy stored) (cache.c). */
    if (xml == NULL)
        return amldist__topo_live(&t->h);
    if (amldist__nx_sniff(xml))
        return load_nccl(t, xml);
    int rc = amldist__hwloc_new(&t->h);
    if (rc < 0)
        return rc;
    if (hwloc_topology_set_xml(t->h, xml) < 0)
        return amldist__fail(AMLDIST_ETOPO,
                             "topology file %s: hwloc cannot read it", xml);
    if (hwloc_topology_load(t->h) < 0)
        return amldist__fail(AMLDIST_ETOPO,
                             "topology %s: hwloc_topology_load failed", xml);
    return 0;
}

int amldist_topo_load(amldist_topo_t **out, const char *xml_path,
                      unsigned flags)
{
    amldist__clear_error();
    if (out == NULL)
        return amldist__fail(AMLDIST_EINVAL, "amldist_topo_load: out is NULL");
    *out = NULL;
    const char *xml = xml_path;
    if (xml == NULL || xml[0] == '\0') {
        xml = getenv("HWLOC_XMLFILE");
        if (xml != NULL && xml[0] == '\0')
            xml = NULL;
    }
    amldist_topo_t *t = calloc(1, sizeof *t);
    if (t == NULL)
        return amldist__fail(AMLDIST_ENOMEM, "topology: out of memory");
    t->from_xml = xml != NULL;
    amldist__strlcpy(t->source, xml != NULL ? xml : "this machine",
                     sizeof t->source);
    amldist__strlcpy(t->locality, "from hwloc", sizeof t->locality);
    int rc = load_hwloc(t, xml);
    if (rc == 0)
        rc = find_gpus(t);
    if (rc == 0)
        rc = find_nics(t);
    if (rc == 0)
        nccl_locality(t);
    if (rc == 0) {
        t->nnuma = hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_NUMANODE);
        t->ncores = hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_CORE);
        if (t->ncores <= 0)
            t->ncores = hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_PU);
        const char *cvd = (flags & AMLDIST_TOPO_ALL_GPUS)
                              ? NULL
                              : getenv("CUDA_VISIBLE_DEVICES");
        rc = amldist_topo_set_visible(t, cvd);
    }
    if (rc < 0) {
        char msg[1024];
        amldist__strlcpy(msg, amldist_last_error(), sizeof msg);
        amldist_topo_free(t);
        return amldist__fail(rc, "%s", msg);
    }
    *out = t;
    return 0;
}

void amldist_topo_free(amldist_topo_t *t)
{
    if (t == NULL)
        return;
    if (t->h != NULL)
        hwloc_topology_destroy(t->h);
    free(t->all);
    free(t->gpus);
    free(t->nics);
    free(t);
}
