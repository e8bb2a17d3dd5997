/*
 * Internal state of a topology and a plan (include/amldist/topo.h).  The
 * files that share it each do one job: topo_load.c (discovery),
 * topo_cache.c (the per-node cache of discovery, with fingerprint.c,
 * cache_entry.c and cache_dir.c), topo_usable.c (the GPUs
 * this process can use: the driver's proc list, device nodes,
 * NVIDIA_VISIBLE_DEVICES), topo_visible.c
 * (CUDA_VISIBLE_DEVICES), topo_dist.c (distance classes),
 * topo_print.c (the --topo matrix), plan_options.c, plan_cpus.c (cores per
 * rank), plan_compute.c (GPU, NUMA node and NIC per rank), plan_env.c,
 * plan_apply.c (after fork) and plan_format.c (--report-bindings).
 */
#ifndef AMLDIST_TOPO_INTERNAL_H
#define AMLDIST_TOPO_INTERNAL_H

#include <hwloc.h>
#include <sched.h>

#include "util/internal.h"

#define AMLDIST__BUSID_MAX 16   /* "0000:10:1c.0" */
#define AMLDIST__DEVNAME_MAX 64
#define AMLDIST__UUID_MAX 64
#define AMLDIST__WARN_MAX 2048
/* Node mask handed to set_mempolicy: 1024 nodes, as the kernel's default
 * MAX_NUMNODES allows at most. */
#define AMLDIST__NODEMASK_LONGS (1024 / (8 * sizeof(unsigned long)))

struct amldist__gpu {
    hwloc_obj_t pci;
    char busid[AMLDIST__BUSID_MAX];
    char uuid[AMLDIST__UUID_MAX];
    char model[AMLDIST__DEVNAME_MAX];
    /* How CUDA_VISIBLE_DEVICES named it (an index or a UUID), for
     * --gpu-bind single; the PCI-order index when the variable is unset. */
    char token[AMLDIST__UUID_MAX];
    hwloc_obj_t numa; /* its NUMA node, NULL when not one known node */
};

enum { AMLDIST__PORT_DOWN = 0, AMLDIST__PORT_UNKNOWN, AMLDIST__PORT_ACTIVE };

struct amldist__nic {
    hwloc_obj_t pci;
    char name[AMLDIST__DEVNAME_MAX];
    int port;  /* first active port (1 when none is known); 0 for netdevs */
    int state; /* AMLDIST__PORT_* */
};

struct amldist_topo {
    hwloc_topology_t h;
    char source[512];
    int from_xml;
    /* Where the NUMA locality of GPUs and NICs came from: "from hwloc",
     * or an NCCL topology file (topo/ncclxml_use.c). */
    char locality[640];
    struct amldist__gpu *all; /* the GPUs this process can use, PCI order */
    int nall;
    int npci; /* NVIDIA GPUs on the PCI bus, usable or not */
    struct amldist__gpu *gpus; /* the visible ones, CUDA order */
    int ngpus;
    int gpus_cap; /* entries allocated in gpus */
    struct amldist__nic *nics;
    int nnics;
    int nnuma;
    int ncores;
    char warnings[AMLDIST__WARN_MAX];
    char vis_warning[512]; /* from the last set_visible() */
    char usable_note[1024]; /* how many GPUs there are, usable, and why */
    char gpu_note[1536];    /* usable_note and the last set_visible() */
};

struct amldist__rank {
    int gpu;  /* visible index, -1 without GPUs */
    int numa; /* OS index, -1 when unknown or several */
    int numa_guessed;
    int bind_cpus;
    int cpus_shared; /* another rank of the plan is bound to one of them */
    hwloc_bitmap_t cpus;
    char *cpulist;
    int ncores;
    cpu_set_t *mask; /* CPU_ALLOC'd, filled before any fork */
    size_t masksize;
    int mem_mode; /* MPOL_*, or -1 for none */
    unsigned long nodemask[AMLDIST__NODEMASK_LONGS];
    int nic;      /* index in topo->nics, -1 for none */
    int nic_dist;
    /* Copies, so that the plan outlives its topology. */
    char busid[AMLDIST__BUSID_MAX];
    char gputoken[AMLDIST__UUID_MAX];
    char nicname[AMLDIST__DEVNAME_MAX];
    int nicport;
};

struct amldist_plan {
    amldist_plan_options_t opts;
    int n;
    struct amldist__rank *ranks;
    int single_numa; /* the machine has one NUMA node */
    int widened;     /* the mpirun trap was fixed by AMLDIST_PLAN_WIDEN */
    int ngpus;       /* the topology's visible GPUs */
    char warnings[AMLDIST__WARN_MAX];
};

/* The ranks of the machine whose GPUs the plan's ranks share: its own, or
 * with those of the machine's other launchers (opts.machine_ranks). */
static inline int amldist__plan_machine_ranks(const struct amldist_plan *p)
{
    int own = p->opts.gpu_first + p->n;
    return p->opts.machine_ranks > own ? p->opts.machine_ranks : own;
}

/*
 * Drop from t->all the GPUs this process cannot use (topo/usable.c): on a
 * live topology where /proc/driver/nvidia/gpus exists, those without a
 * directory there, those the driver excludes, those whose /dev/nvidia<minor>
 * is missing (checked only where /dev/nvidiactl exists), and all of them
 * under NVIDIA_VISIBLE_DEVICES=none or void.  Sets npci and usable_note.
 * For tests only, AMLDIST_TEST_NVIDIA_GPUS_DIR and AMLDIST_TEST_DEV_DIR
 * stand for /proc/driver/nvidia/gpus and /dev, and the first applies the
 * filter to an XML topology too.
 */
int amldist__usable_gpus(amldist_topo_t *t);

/* A new hwloc topology set up as every load wants it: PCI devices kept,
 * GPU-driver components and unused plugins off; not loaded yet
 * (topo/load.c). */
int amldist__hwloc_new(hwloc_topology_t *h);
/* amldist__hwloc_new() and hwloc's live discovery of this machine. */
int amldist__hwloc_discover(hwloc_topology_t *h);
/* One line for amldist_build_info(): hwloc's version in use, its file, and
 * the version the build saw (topo/hwloc.c). */
void amldist__hwloc_describe(char *line, size_t size);

/*
 * This machine's topology through the per-node cache (topo/cache.c): a
 * valid copy when there is one, else discovery, whose export is then stored
 * for the next process.  *h is a loaded topology, or NULL after an error.
 * The cache is hwloc's XML export in a directory private to the user
 * (AMLDIST_TOPOLOGY_CACHE: 0 off, or the directory; else
 * $XDG_RUNTIME_DIR/amldist, /run/user/UID/amldist, /tmp/amldist-UID),
 * named by the host, the boot id, the hwloc API version and a hash of its
 * fingerprint, and used only when its fingerprint is this process's (see
 * amldist__cache_fingerprint()).  For tests only,
 * AMLDIST_TEST_TOPOLOGY_CACHE_LOG names a file that gets one line per
 * decision ("hit NAME", "miss NAME: WHY", "store NAME", "off: WHY" ...).
 */
int amldist__topo_live(hwloc_topology_t *h);

/* The fingerprint of this process's view of the machine, one "key value"
 * line each, in a malloc'd string (NULL when out of memory)
 * (topo/fingerprint.c). */
char *amldist__cache_fingerprint(void);
/* The cache directory this process would use, created if need be and
 * opened, its path in path[]; or -1 with *why set (the cache is off)
 * (topo/cache_dir.c). */
int amldist__cache_dir(char *path, size_t size, const char **why);
/* The entry's file name for a fingerprint (topo/cache_entry.c). */
void amldist__cache_name(const char *fp, char *name, size_t size);
/* Whether data[0..n) is a valid entry for fingerprint fp: NULL, with its
 * XML at data + *xml_off, *xmllen bytes long; else why not. */
const char *amldist__cache_check(const char *data, size_t n, const char *fp,
                                 size_t *xml_off, size_t *xmllen);
/* The entry's bytes: header for fp, then the XML. */
char *amldist__cache_entry(const char *fp, const char *xml, size_t xmllen,
                           size_t *n);

/* Distance class between two PCI devices (topo/dist.c). */
int amldist__pci_dist(hwloc_topology_t h, hwloc_obj_t a, hwloc_obj_t b);
/* The NUMA node local to an I/O object, or NULL when it is not exactly one
 * node of a machine that has several. */
hwloc_obj_t amldist__io_numa(hwloc_topology_t h, hwloc_obj_t io);

/* Fill every rank's cpus and NUMA node from the `allowed` cpus
 * (plan/cpus.c); the GPUs are already chosen. */
int amldist__plan_cpus_in(amldist_plan_t *p, const amldist_topo_t *t,
                          hwloc_const_bitmap_t allowed);

/* amldist_plan_options_t's versions (plan/options.c). */
extern const amldist__opts_kind_t amldist__plan_options_kind;

#endif /* AMLDIST_TOPO_INTERNAL_H */
