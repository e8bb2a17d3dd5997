/*
 * NCCL topology files put to use (topo/ncclxml.h): a machine of their own
 * as hwloc XML, or the NUMA locality of a hwloc topology's devices.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/ncclxml.h"

struct out {
    FILE *f;
    unsigned gp;
};

/* "cpuset=... complete_cpuset=... nodeset=... complete_nodeset=..." */
static int sets(struct out *o, hwloc_const_bitmap_t cpus,
                hwloc_const_bitmap_t nodes)
{
    char *c = NULL, *n = NULL;
    if (hwloc_bitmap_asprintf(&c, cpus) < 0 ||
        hwloc_bitmap_asprintf(&n, nodes) < 0) {
        free(c);
        return -1;
    }
    fprintf(o->f,
            " cpuset=\"%s\" complete_cpuset=\"%s\" nodeset=\"%s\""
            " complete_nodeset=\"%s\" gp_index=\"%u\"",
            c, c, n, n, ++o->gp);
    free(c);
    free(n);
    return 0;
}

/* Names from the file end up in XML and in NCCL_IB_HCA: keep them plain. */
static void plain_name(const struct amldist__nx_dev *d, char *buf, size_t size)
{
    if (d->net[0] == '\0') {
        snprintf(buf, size, "nic@%s", d->busid);
        return;
    }
    amldist__strlcpy(buf, d->net, size);
    for (char *p = buf; *p; p++)
        if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') &&
            !(*p >= '0' && *p <= '9') && *p != '_' && *p != '-' && *p != '.')
            *p = '_';
}

static int has_children(const struct amldist__nx *nx, int i)
{
    for (int j = i + 1; j < nx->ndevs; j++)
        if (nx->devs[j].parent == i)
            return 1;
    return 0;
}

static void emit_dev(struct out *o, const struct amldist__nx *nx, int i);

static void emit_children(struct out *o, const struct amldist__nx *nx,
                          int parent, int cpu)
{
    for (int j = 0; j < nx->ndevs; j++)
        if (nx->devs[j].parent == parent && nx->devs[j].cpu == cpu)
            emit_dev(o, nx, j);
}

static void emit_dev(struct out *o, const struct amldist__nx *nx, int i)
{
    const struct amldist__nx_dev *d = &nx->devs[i];
    unsigned vendor = d->vendor;
    if (d->kind == AMLDIST__NX_GPU && vendor == 0)
        vendor = 0x10de; /* NCCL takes every display controller for one */
    int bridge = d->kind == AMLDIST__NX_BRIDGE ||
                 (d->kind == AMLDIST__NX_OTHER && has_children(nx, i));
    unsigned cls = bridge ? 0x0604 : d->cls >> 8;
    fprintf(o->f,
            "<object type=\"%s\" gp_index=\"%u\" pci_busid=\"%s\" "
            "pci_type=\"%04x [%04x:%04x] [0000:0000] 00\"",
            bridge ? "Bridge" : "PCIDev", ++o->gp, d->busid, cls, vendor,
            d->device);
    if (bridge) {
        fprintf(o->f,
                " bridge_type=\"1-1\" depth=\"%d\" bridge_pci=\"%04x:[%02x-%02x]\">\n",
                d->depth + 1, d->domain, d->bus, d->bus);
        emit_children(o, nx, i, d->cpu);
        fputs("</object>\n", o->f);
        return;
    }
    fputs(">\n", o->f);
    if (d->kind == AMLDIST__NX_NIC) {
        char name[AMLDIST__DEVNAME_MAX];
        plain_name(d, name, sizeof name);
        fprintf(o->f,
                "<object type=\"OSDev\" gp_index=\"%u\" name=\"%s\" "
                "osdev_type=\"3\"/>\n",
                ++o->gp, name);
    }
    fputs("</object>\n", o->f);
    emit_children(o, nx, i, d->cpu); /* devices nested in a GPU or NIC */
}

static int emit_cpu(struct out *o, const struct amldist__nx *nx, int i)
{
    const struct amldist__nx_cpu *c = &nx->cpus[i];
    hwloc_bitmap_t node = hwloc_bitmap_alloc(), one = hwloc_bitmap_alloc();
    int rc = node != NULL && one != NULL ? 0 : -1;
    if (rc == 0) {
        hwloc_bitmap_only(node, (unsigned)c->numaid);
        fprintf(o->f, "<object type=\"Package\" os_index=\"%d\"", i);
        rc = sets(o, c->cpus, node);
    }
    if (rc == 0) {
        fprintf(o->f, ">\n<object type=\"NUMANode\" os_index=\"%d\"",
                c->numaid);
        rc = sets(o, c->cpus, node);
        fputs(" local_memory=\"0\"/>\n", o->f);
    }
    for (int b = hwloc_bitmap_first(c->cpus); rc == 0 && b >= 0;
         b = hwloc_bitmap_next(c->cpus, b)) {
        hwloc_bitmap_only(one, (unsigned)b);
        fprintf(o->f, "<object type=\"Core\" os_index=\"%d\"", b);
        rc = sets(o, one, node);
        fprintf(o->f, ">\n<object type=\"PU\" os_index=\"%d\"", b);
        if (rc == 0)
            rc = sets(o, one, node);
        fputs("/>\n</object>\n", o->f);
    }
    if (rc == 0) {
        fprintf(o->f,
                "<object type=\"Bridge\" gp_index=\"%u\" bridge_type=\"0-1\" "
                "depth=\"0\" bridge_pci=\"0000:[00-ff]\">\n",
                ++o->gp);
        emit_children(o, nx, -1, i);
        fputs("</object>\n</object>\n", o->f);
    }
    hwloc_bitmap_free(node);
    hwloc_bitmap_free(one);
    return rc;
}

static int check_cpus(const struct amldist__nx *nx, hwloc_bitmap_t all,
                      hwloc_bitmap_t nodes)
{
    for (int i = 0; i < nx->ncpus; i++) {
        if (hwloc_bitmap_iszero(nx->cpus[i].cpus))
            return amldist__fail(
                AMLDIST_ETOPO,
                "NCCL topology file %s gives no CPUs (affinity) for NUMA "
                "node %d, so it cannot stand for a machine: it can only "
                "place a live machine's devices, named in NCCL_TOPO_FILE "
                "there",
                nx->path, nx->cpus[i].numaid);
        hwloc_bitmap_or(all, all, nx->cpus[i].cpus);
        hwloc_bitmap_set(nodes, (unsigned)nx->cpus[i].numaid);
    }
    return 0;
}

char *amldist__nx_hwloc_xml(const struct amldist__nx *nx)
{
    struct out o = {NULL, 0};
    char *buf = NULL;
    size_t len = 0;
    hwloc_bitmap_t all = hwloc_bitmap_alloc(), nodes = hwloc_bitmap_alloc();
    if (all == NULL || nodes == NULL ||
        (o.f = open_memstream(&buf, &len)) == NULL) {
        hwloc_bitmap_free(all);
        hwloc_bitmap_free(nodes);
        amldist__fail(AMLDIST_ENOMEM, "NCCL topology: out of memory");
        return NULL;
    }
    int rc = check_cpus(nx, all, nodes);
    if (rc == 0) {
        fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
              "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
              "<topology version=\"2.0\">\n"
              "<object type=\"Machine\" os_index=\"0\"",
              o.f);
        rc = sets(&o, all, nodes);
        fputs(">\n", o.f);
    }
    /* hwloc wants siblings in the order of their first CPU. */
    int order[AMLDIST__NX_MAX_CPUS];
    for (int i = 0; i < nx->ncpus; i++) {
        int j = i;
        for (; j > 0 && hwloc_bitmap_first(nx->cpus[order[j - 1]].cpus) >
                            hwloc_bitmap_first(nx->cpus[i].cpus);
             j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    for (int i = 0; rc == 0 && i < nx->ncpus; i++)
        rc = emit_cpu(&o, nx, order[i]);
    fputs("</object>\n</topology>\n", o.f);
    hwloc_bitmap_free(all);
    hwloc_bitmap_free(nodes);
    if (fclose(o.f) != 0 && rc == 0)
        rc = amldist__fail(AMLDIST_ENOMEM, "NCCL topology: out of memory");
    else if (rc == -1)
        rc = amldist__fail(AMLDIST_ENOMEM, "NCCL topology: out of memory");
    if (rc < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The file's NUMA node for `o` or the nearest PCI object above it. */
static hwloc_obj_t file_numa(amldist_topo_t *t, const struct amldist__nx *nx,
                             hwloc_obj_t o, int *unknown_node)
{
    for (; o != NULL && (o->type == HWLOC_OBJ_PCI_DEVICE ||
                         o->type == HWLOC_OBJ_BRIDGE);
         o = o->parent) {
        if (o->type == HWLOC_OBJ_BRIDGE &&
            o->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI)
            break;
        char busid[AMLDIST__BUSID_MAX];
        snprintf(busid, sizeof busid, "%04x:%02x:%02x.%x",
                 o->attr->pcidev.domain, o->attr->pcidev.bus,
                 o->attr->pcidev.dev, o->attr->pcidev.func);
        const struct amldist__nx_dev *d = amldist__nx_find(nx, busid);
        if (d == NULL)
            continue;
        int id = nx->cpus[d->cpu].numaid;
        hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(t->h,
                                                              (unsigned)id);
        if (node == NULL)
            *unknown_node = id;
        return node;
    }
    return NULL;
}

static int place(amldist_topo_t *t, const struct amldist__nx *nx,
                 hwloc_obj_t pci, const char *what)
{
    int unknown_node = -1;
    hwloc_obj_t node = file_numa(t, nx, pci, &unknown_node);
    if (node != NULL) {
        pci->userdata = node; /* read by amldist__io_numa() */
        return 1;
    }
    if (unknown_node >= 0)
        amldist__warn(t->warnings, sizeof t->warnings,
                      "%s: NCCL_TOPO_FILE=%s puts it on NUMA node %d, which "
                      "this machine does not have",
                      what, nx->path, unknown_node);
    else
        amldist__warn(t->warnings, sizeof t->warnings,
                      "%s has no NUMA node from hwloc and is not in "
                      "NCCL_TOPO_FILE=%s",
                      what, nx->path);
    return 0;
}

static int on_machine(const amldist_topo_t *t, const char *busid)
{
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_pcidev(t->h, o));) {
        char b[AMLDIST__BUSID_MAX];
        snprintf(b, sizeof b, "%04x:%02x:%02x.%x", o->attr->pcidev.domain,
                 o->attr->pcidev.bus, o->attr->pcidev.dev,
                 o->attr->pcidev.func);
        if (strcmp(b, busid) == 0)
            return 1;
    }
    return 0;
}

/* The file's GPUs and NICs this machine lacks: a file for another kind. */
static void note_strangers(amldist_topo_t *t, const struct amldist__nx *nx)
{
    int n = 0;
    const char *first = NULL;
    for (int i = 0; i < nx->ndevs; i++) {
        const struct amldist__nx_dev *d = &nx->devs[i];
        if ((d->kind == AMLDIST__NX_GPU || d->kind == AMLDIST__NX_NIC) &&
            !on_machine(t, d->busid)) {
            n++;
            if (first == NULL)
                first = d->busid;
        }
    }
    if (n > 0)
        amldist__warn(t->warnings, sizeof t->warnings,
                      "NCCL_TOPO_FILE=%s lists %d GPU%s or NIC%s this "
                      "machine does not have (%s%s): is it this kind of "
                      "machine's file?",
                      nx->path, n, n == 1 ? "" : "s", n == 1 ? "" : "s",
                      first, n > 1 ? ", ..." : "");
}

int amldist__nx_apply(amldist_topo_t *t, const struct amldist__nx *nx)
{
    int gpus = 0, nics = 0;
    for (int i = 0; i < t->nall; i++) {
        struct amldist__gpu *g = &t->all[i];
        char what[64];
        snprintf(what, sizeof what, "GPU %s", g->busid);
        if (g->numa == NULL && place(t, nx, g->pci, what)) {
            g->numa = g->pci->userdata;
            gpus++;
        }
    }
    for (int i = 0; i < t->nnics; i++) {
        struct amldist__nic *c = &t->nics[i];
        char what[96];
        snprintf(what, sizeof what, "NIC %s", c->name);
        if (amldist__io_numa(t->h, c->pci) == NULL &&
            place(t, nx, c->pci, what))
            nics++;
    }
    note_strangers(t, nx);
    if (gpus + nics > 0)
        snprintf(t->locality, sizeof t->locality,
                 "from NCCL_TOPO_FILE=%.400s for %d GPU%s and %d NIC%s "
                 "(hwloc gives them none), else from hwloc",
                 nx->path, gpus, gpus == 1 ? "" : "s", nics,
                 nics == 1 ? "" : "s");
    return 0;
}
