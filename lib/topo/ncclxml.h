/*
 * NCCL topology files (NCCL_TOPO_FILE): the reader (topo/ncclxml.c) and
 * their use (topo/ncclxml_use.c).  Only the attributes NCCL's own reader
 * (src/graph/xml.cc) takes from them are read: <cpu numaid affinity>, <pci
 * busid class vendor device> nested under a <cpu> or another <pci>, and
 * <nic><net name port> under a <pci>.  A <pci> of class 0x03.... is a GPU
 * (NCCL counts every display controller as one), 0x02.... a NIC, 0x0604..
 * a PCIe switch; one without a class names a device of the live machine
 * that NCCL is to place (a switch above its GPUs and NICs, AWS g5).
 */
#ifndef AMLDIST_TOPO_NCCLXML_H
#define AMLDIST_TOPO_NCCLXML_H

#include "topo/topo_internal.h"

#define AMLDIST__NX_MAX_CPUS 64
#define AMLDIST__NX_MAX_DEVS 1024

enum {
    AMLDIST__NX_OTHER = 0, /* no class, or one we do not use */
    AMLDIST__NX_GPU,
    AMLDIST__NX_NIC,
    AMLDIST__NX_BRIDGE
};

struct amldist__nx_cpu {
    int numaid;
    hwloc_bitmap_t cpus; /* empty when the file gives no affinity */
};

struct amldist__nx_dev {
    char busid[AMLDIST__BUSID_MAX]; /* lower case, "dddd:bb:dd.f" */
    unsigned domain, bus, dev, func;
    unsigned cls;                   /* 24-bit class, 0 when absent */
    unsigned vendor, device;        /* 0 when absent */
    int kind;                       /* AMLDIST__NX_* */
    int cpu;    /* index in cpus[] */
    int parent; /* index in devs[] of the enclosing <pci>, or -1 */
    int depth;  /* <pci> elements above it */
    char net[AMLDIST__DEVNAME_MAX]; /* the <net name>, "" when none */
    int port;                       /* its port, 0 when none */
};

struct amldist__nx {
    char path[512];
    struct amldist__nx_cpu cpus[AMLDIST__NX_MAX_CPUS];
    int ncpus;
    struct amldist__nx_dev *devs;
    int ndevs;
    int ngpus, nnics;
    char notes[1024]; /* what was skipped, one sentence a line */
};

/* Read the NCCL topology file `path`.  Errors (ETOPO, with the file and
 * line): not well-formed XML, an NCCL graph file (<graphs>, NCCL_GRAPH_FILE),
 * a root other than <system>, a <cpu> without a numaid or with a bad
 * affinity, a bad or repeated busid, overlapping affinities; ENOMEM. */
int amldist__nx_read(const char *path, struct amldist__nx **out);
void amldist__nx_free(struct amldist__nx *nx);
/* The device with this bus id (any case), or NULL. */
const struct amldist__nx_dev *amldist__nx_find(const struct amldist__nx *nx,
                                               const char *busid);
/* Parse "00000000,0000ffff,ff000000" (Linux's cpumask: 32-bit hex words,
 * most significant first) into `set`; -1 when malformed. */
int amldist__nx_mask(const char *text, hwloc_bitmap_t set);
/* 1 when the file at `path` is an NCCL topology or graph file (its first
 * 4 KiB have <system or <graphs and no <topology). */
int amldist__nx_sniff(const char *path);

/* An hwloc XML machine built from the file (topo/ncclxml_use.c): one
 * package per <cpu>, holding its NUMA node and one core per CPU of its
 * affinity, a host bridge with the <pci> tree under it; GPUs, NICs (an
 * OpenFabrics device named by <net name>, else "nic@BUSID") and switches
 * kept.  A malloc'd NUL-terminated buffer, or NULL with the error set. */
char *amldist__nx_hwloc_xml(const struct amldist__nx *nx);
/* Give the GPUs and NICs of t (a hwloc topology) without a NUMA node the
 * one the file gives them or a PCI device above them; records in
 * t->locality what came from where, and the file's devices not in t in
 * t->warnings. */
int amldist__nx_apply(amldist_topo_t *t, const struct amldist__nx *nx);

#endif
