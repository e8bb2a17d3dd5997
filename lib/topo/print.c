/* amlrun --topo: a matrix in the shape of `nvidia-smi topo -m`. */
#include <stdio.h>
#include <string.h>

#include "topo/topo_internal.h"

static const char *const legend[] = {
    "  X    = Self",
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect "
    "between NUMA nodes",
    "  NODE = Connection traversing PCIe as well as the interconnect between "
    "PCIe Host Bridges within a NUMA node",
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge "
    "(typically the CPU)",
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing "
    "the PCIe Host Bridge)",
    "  PIX  = Connection traversing at most a single PCIe bridge",
};

static const char *const port_states[] = {"down", "state unknown", "active"};

/* Row/column i: GPUs first, then NICs. */
static hwloc_obj_t dev(const amldist_topo_t *t, int i)
{
    return i < t->ngpus ? t->gpus[i].pci : t->nics[i - t->ngpus].pci;
}

static void dev_label(const amldist_topo_t *t, int i, char *buf, size_t n)
{
    if (i < t->ngpus)
        snprintf(buf, n, "GPU%d", i);
    else
        snprintf(buf, n, "NIC%d", i - t->ngpus);
}

static void gpu_affinity(const amldist_topo_t *t, int i, char *cpus,
                         size_t ncpus, char *numa, size_t nnuma)
{
    hwloc_obj_t node = t->gpus[i].numa;
    if (node == NULL) {
        snprintf(cpus, ncpus, "N/A");
        snprintf(numa, nnuma, "N/A");
        return;
    }
    hwloc_bitmap_t set = hwloc_bitmap_dup(node->cpuset);
    if (set == NULL || hwloc_bitmap_list_snprintf(cpus, ncpus, set) < 0)
        snprintf(cpus, ncpus, "?");
    hwloc_bitmap_free(set);
    snprintf(numa, nnuma, "%u", node->os_index);
}

struct line {
    char buf[8192];
    size_t len;
};

static void cell(struct line *l, int width, const char *text)
{
    if (l->len < sizeof l->buf) {
        int n = snprintf(l->buf + l->len, sizeof l->buf - l->len, "%-*s",
                         width, text);
        if (n > 0)
            l->len += (size_t)n;
        if (l->len >= sizeof l->buf)
            l->len = sizeof l->buf - 1;
    }
}

/* Without trailing blanks, so that golden files compare exactly. */
static void put_line(struct line *l, FILE *f)
{
    while (l->len > 0 && l->buf[l->len - 1] == ' ')
        l->len--;
    l->buf[l->len] = '\0';
    fprintf(f, "%s\n", l->buf);
    l->len = 0;
}

static void print_matrix(const amldist_topo_t *t, FILE *f)
{
    int n = t->ngpus + t->nnics, width = 7, cpuw = 14;
    char label[16], cpus[512], numa[16];
    struct line l = {.len = 0};
    for (int i = 0; i < t->ngpus; i++) {
        gpu_affinity(t, i, cpus, sizeof cpus, numa, sizeof numa);
        if ((int)strlen(cpus) + 2 > cpuw)
            cpuw = (int)strlen(cpus) + 2;
    }
    cell(&l, width, "");
    for (int j = 0; j < n; j++) {
        dev_label(t, j, label, sizeof label);
        cell(&l, width, label);
    }
    if (t->ngpus > 0) {
        cell(&l, cpuw, "CPU Affinity");
        cell(&l, 0, "NUMA Affinity");
    }
    put_line(&l, f);
    for (int i = 0; i < n; i++) {
        dev_label(t, i, label, sizeof label);
        cell(&l, width, label);
        for (int j = 0; j < n; j++)
            cell(&l, width,
                 amldist_dist_name(
                     amldist__pci_dist(t->h, dev(t, i), dev(t, j))));
        if (i < t->ngpus) {
            gpu_affinity(t, i, cpus, sizeof cpus, numa, sizeof numa);
            cell(&l, cpuw, cpus);
            cell(&l, 0, numa);
        }
        put_line(&l, f);
    }
}

int amldist_topo_print_matrix(const amldist_topo_t *t, FILE *f)
{
    amldist__clear_error();
    if (t == NULL || f == NULL)
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_topo_print_matrix: NULL argument");
    fprintf(f, "Topology of %s: %d GPU%s, %d NIC%s, %d NUMA node%s, %d "
               "cores\n",
            t->source, t->ngpus, t->ngpus == 1 ? "" : "s", t->nnics,
            t->nnics == 1 ? "" : "s", t->nnuma, t->nnuma == 1 ? "" : "s",
            t->ncores);
    fprintf(f, "NUMA locality of GPUs and NICs %s\n\n", t->locality);
    if (t->ngpus + t->nnics > 0) {
        print_matrix(t, f);
        fputc('\n', f);
    }
    if (t->ngpus == 0)
        fprintf(f, "No NVIDIA GPU visible.\n");
    for (int i = 0; i < t->ngpus; i++) {
        const struct amldist__gpu *g = &t->gpus[i];
        fprintf(f, "GPU%d: %s", i, g->busid);
        if (g->model[0] != '\0')
            fprintf(f, "  %s", g->model);
        if (g->uuid[0] != '\0')
            fprintf(f, "  %s", g->uuid);
        fputc('\n', f);
    }
    for (int i = 0; i < t->nnics; i++) {
        const struct amldist__nic *c = &t->nics[i];
        char busid[AMLDIST__BUSID_MAX];
        snprintf(busid, sizeof busid, "%04x:%02x:%02x.%01x",
                 c->pci->attr->pcidev.domain, c->pci->attr->pcidev.bus,
                 c->pci->attr->pcidev.dev, c->pci->attr->pcidev.func);
        if (c->port > 0)
            fprintf(f, "NIC%d: %s  %s  port %d %s\n", i, c->name, busid,
                    c->port, port_states[c->state]);
        else
            fprintf(f, "NIC%d: %s  %s  network interface\n", i, c->name,
                    busid);
    }
    if (t->ngpus + t->nnics > 0) {
        fprintf(f, "\nLegend:\n\n");
        for (size_t i = 0; i < sizeof legend / sizeof *legend; i++)
            fprintf(f, "%s\n", legend[i]);
    }
    const char *w = amldist_topo_warnings(t);
    if (w[0] != '\0')
        fprintf(f, "\nNote: %s\n", w);
    if (fflush(f) != 0 || ferror(f))
        return amldist__fail(AMLDIST_ESYS, "--topo: writing the matrix failed");
    return 0;
}
