/*
 * libamldist: topology and binding (see amldist_topo(3)).  Included by
 * <amldist.h>.
 *
 * A topology (amldist_topo_t) is loaded once, from this machine or from an
 * hwloc XML file, without initialising any GPU: it lists the NVIDIA GPUs
 * this process can use in PCI bus order (CUDA's order under
 * CUDA_DEVICE_ORDER=PCI_BUS_ID, restricted and renumbered by
 * CUDA_VISIBLE_DEVICES as CUDA does), the network devices, the NUMA nodes,
 * and the PCIe distance class between any two devices.
 *
 * A plan (amldist_plan_t) is a pure function of (topology, options, ranks on
 * this node): for each local rank its GPU, cores, NUMA node and NIC.  It is
 * computed in the parent before any fork; amldist_plan_apply() is the only
 * part meant to run between fork and exec and it is async-signal-safe.
 * Both handles are immutable once returned and may be read from any thread.
 */
#ifndef AMLDIST_TOPO_H
#define AMLDIST_TOPO_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct amldist_topo amldist_topo_t;
typedef struct amldist_plan amldist_plan_t;

/* Flags for amldist_topo_load(). */
enum {
    /* Ignore CUDA_VISIBLE_DEVICES: list every GPU this process can use. */
    AMLDIST_TOPO_ALL_GPUS = 1u << 0
};

/*
 * Load the topology: from the hwloc XML file `xml_path`, else from the file
 * named by HWLOC_XMLFILE, else from this machine.  PCI devices are kept and
 * hwloc's CUDA, NVML, OpenCL, GL, RSMI and Level Zero components are
 * disabled, so loading never touches a GPU driver.  On this machine, where
 * /proc/driver/nvidia/gpus exists, only the GPUs this process can use are
 * kept: those listed there (a container given some GPUs sees all of the
 * host's on the PCI bus but only its own there), not excluded by the driver,
 * with their /dev/nvidia<minor> node where /dev/nvidiactl exists, and none
 * under NVIDIA_VISIBLE_DEVICES=none or void; an XML topology keeps all of
 * its GPUs.  Unless flags has AMLDIST_TOPO_ALL_GPUS, the GPUs are then
 * restricted by CUDA_VISIBLE_DEVICES, whose indices count the usable GPUs.
 * `xml_path` may also be an NCCL topology file (NCCL_TOPO_FILE's format,
 * <system>): it then stands for a machine of its own, one package per
 * <cpu> with one core per CPU of its affinity, its GPUs and NICs (named by
 * <net name>, else "nic@BUSID") under them.  When GPUs or NICs of an hwloc
 * topology have no NUMA node (a VM) and NCCL_TOPO_FILE names an NCCL
 * topology file, the node that file gives them (or a PCI device above
 * them) by bus id is used (amldist_topo_locality()).
 * Errors: EINVAL, ENOMEM, ETOPO (unreadable, malformed or unusable file,
 * an NCCL graph file, an NCCL file without CPU affinities).
 */
AMLDIST_API int amldist_topo_load(amldist_topo_t **out, const char *xml_path,
                                  unsigned flags);
AMLDIST_API void amldist_topo_free(amldist_topo_t *t);

/*
 * Restrict the GPUs as CUDA_VISIBLE_DEVICES=`value` would (NULL: all of
 * them).  Entries are indices into the PCI-ordered list of usable GPUs or
 * GPU-UUID prefixes; as in CUDA, an invalid entry ends the list.  UUIDs are
 * known from hwloc's NVML data in XML files and from /proc/driver/nvidia on
 * a live machine.  MIG-UUIDs are taken to be on the one usable GPU.  When a
 * UUID cannot be resolved (or MIG instances are named while several GPUs
 * are usable) the topology has no visible GPU and amldist_topo_warnings()
 * says why (binding then ignores GPUs).
 */
AMLDIST_API int amldist_topo_set_visible(amldist_topo_t *t, const char *value);

/* "this machine" or the XML path the topology came from. */
AMLDIST_API const char *amldist_topo_source(const amldist_topo_t *t);
/* Where the GPUs' and NICs' NUMA locality came from, for messages: "from
 * hwloc", "from the NCCL topology file PATH", or "from NCCL_TOPO_FILE=PATH
 * for N GPUs and M NICs (hwloc gives them none), else from hwloc".
 * Since AMLDIST_1.1. */
AMLDIST_API const char *amldist_topo_locality(const amldist_topo_t *t);
/* Notes from discovery, one per line ("" when none): a GPU without NUMA
 * locality, an unresolved CUDA_VISIBLE_DEVICES entry ... */
AMLDIST_API const char *amldist_topo_warnings(const amldist_topo_t *t);

/* GPUs, by CUDA index under the current visibility (0 .. num_gpus-1). */
AMLDIST_API int amldist_topo_num_gpus(const amldist_topo_t *t);
/* NVIDIA GPUs on the PCI bus (or in the XML file), usable or not. */
AMLDIST_API int amldist_topo_num_pci_gpus(const amldist_topo_t *t);
/* One sentence on how the GPU list was reached, for messages: how many
 * GPUs the machine has, how many this process can use and why, and what
 * CUDA_VISIBLE_DEVICES selects, e.g. "8 NVIDIA GPUs on the PCI bus, 2
 * usable by this process (/proc/driver/nvidia/gpus lists only 0000:07:00.0,
 * 0000:0f:00.0, as in a container given some GPUs)". */
AMLDIST_API const char *amldist_topo_gpu_note(const amldist_topo_t *t);
/* "0000:10:1c.0", or NULL for a bad index. */
AMLDIST_API const char *amldist_topo_gpu_busid(const amldist_topo_t *t,
                                               int gpu);
/* "GPU-....", or "" when the topology does not say. */
AMLDIST_API const char *amldist_topo_gpu_uuid(const amldist_topo_t *t,
                                              int gpu);
/* OS index of the GPU's NUMA node, or AMLDIST_EUNKNOWN when the machine
 * gives no single NUMA node for it. */
AMLDIST_API int amldist_topo_gpu_numa(const amldist_topo_t *t, int gpu);

/* NICs: OpenFabrics devices (mlx5_0, EFA ...) when there are any, else the
 * network interfaces on PCI; in PCI bus order. */
AMLDIST_API int amldist_topo_num_nics(const amldist_topo_t *t);
AMLDIST_API const char *amldist_topo_nic_name(const amldist_topo_t *t,
                                              int nic);
/* NUMA nodes, and the cores (PUs where the machine lists no cores). */
AMLDIST_API int amldist_topo_num_numa(const amldist_topo_t *t);
AMLDIST_API int amldist_topo_num_cores(const amldist_topo_t *t);

/*
 * PCIe distance classes, nearest first, as nvidia-smi topo -m and NCCL name
 * them: X the device itself; PIX at most one PCIe switch between them; PXB
 * several bridges, no host bridge; PHB through a PCIe host bridge; NODE
 * across host bridges within a NUMA node; SYS across NUMA nodes (or where a
 * device's NUMA locality is unknown).
 */
typedef enum {
    AMLDIST_DIST_X = 0,
    AMLDIST_DIST_PIX,
    AMLDIST_DIST_PXB,
    AMLDIST_DIST_PHB,
    AMLDIST_DIST_NODE,
    AMLDIST_DIST_SYS
} amldist_dist_t;

/* "X", "PIX", ... or "?" */
AMLDIST_API const char *amldist_dist_name(int dist);
/* Class between GPU a and GPU b, or between GPU a and NIC b
 * (amldist_topo_gpu_nic_dist); negative AMLDIST_EINVAL for a bad index. */
AMLDIST_API int amldist_topo_gpu_gpu_dist(const amldist_topo_t *t, int a,
                                          int b);
AMLDIST_API int amldist_topo_gpu_nic_dist(const amldist_topo_t *t, int gpu,
                                          int nic);

/*
 * `amlrun --topo`: the GPU and NIC matrix of distance classes, each GPU's
 * CPU and NUMA affinity, and legends.  Returns 0 or AMLDIST_ESYS.
 */
AMLDIST_API int amldist_topo_print_matrix(const amldist_topo_t *t, FILE *f);

/* --cpu-bind policies. */
typedef enum {
    AMLDIST_CPU_BIND_NONE = 0, /* leave the inherited affinity alone */
    AMLDIST_CPU_BIND_NUMA,     /* every core of the GPU's NUMA node */
    AMLDIST_CPU_BIND_EXCLUSIVE, /* those cores in equal blocks, none shared */
    AMLDIST_CPU_BIND_SOCKET,   /* exclusive, plus cores of rank-less nodes */
    AMLDIST_CPU_BIND_LIST,     /* cpu_list: one cpu list per rank */
    AMLDIST_CPU_BIND_PACKAGE,  /* every core of the GPU's package */
    AMLDIST_CPU_BIND_L3        /* one last-level cache's cores per rank */
} amldist_cpu_bind_t;

typedef enum {
    AMLDIST_MEM_BIND_NONE = 0, /* the kernel's default (local first touch) */
    AMLDIST_MEM_BIND_LOCAL,    /* MPOL_PREFERRED: the rank's NUMA node */
    AMLDIST_MEM_BIND_STRICT    /* MPOL_BIND: only the rank's NUMA nodes */
} amldist_mem_bind_t;

typedef enum {
    AMLDIST_NIC_BIND_NONE = 0, /* no NIC variables */
    AMLDIST_NIC_BIND_EXPORT,   /* AMLDIST_NIC only (NCCL chooses itself) */
    AMLDIST_NIC_BIND_UCX,      /* also UCX_NET_DEVICES=dev:port */
    AMLDIST_NIC_BIND_NCCL      /* also NCCL_IB_HCA==dev:port */
} amldist_nic_bind_t;

typedef enum {
    AMLDIST_GPU_BIND_NONE = 0, /* every rank sees every GPU */
    AMLDIST_GPU_BIND_SINGLE    /* CUDA_VISIBLE_DEVICES = the rank's GPU */
} amldist_gpu_bind_t;

/* Flags for amldist_plan_options_t. */
enum {
    /* When the launcher's own affinity is narrower than the cgroup allows
     * and too small for its ranks (mpirun's default --bind-to core), plan
     * over the whole allowed cpuset instead of warning. */
    AMLDIST_PLAN_WIDEN = 1u << 0,
    /* Every process of the node computes the same plan for itself
     * (per-process mode under mpirun or srun): ignore this process's own
     * affinity, which its launcher set for it alone, and plan over the
     * node's allowed cpus. */
    AMLDIST_PLAN_NODE_WIDE = 1u << 1
};

/* Initialise with AMLDIST_PLAN_OPTIONS_INIT so later fields keep defaults. */
#define AMLDIST_PLAN_OPTIONS_VERSION 2
typedef struct {
    unsigned version;             /* AMLDIST_PLAN_OPTIONS_VERSION */
    unsigned flags;               /* AMLDIST_PLAN_* */
    amldist_cpu_bind_t cpu_bind;  /* default EXCLUSIVE */
    const char *cpu_list;         /* LIST: "0-3:4-7,12:..." one per rank */
    amldist_mem_bind_t mem_bind;  /* default NONE */
    amldist_nic_bind_t nic_bind;  /* default EXPORT */
    amldist_gpu_bind_t gpu_bind;  /* default NONE */
    /* CPUs the launcher inherited, as a list ("0-15"); NULL: this process's
     * affinity for a live topology, every allowed CPU for an XML file. */
    const char *inherited_cpus;
    /* Since version 2.  Several launchers of one machine splitting its
     * GPUs (amldist_rdzv_gpu_share()): this launcher's ranks come after
     * gpu_first ranks of the others, of machine_ranks in all (0: this
     * launcher's alone).  Local rank r gets GPU (gpu_first + r) mod the
     * visible GPUs; ranks of the machine that land on one GPU are told so
     * (AMLDIST_GPU_SHARED).  With GPUs, cores and NICs are planned for all
     * the machine's ranks and this launcher keeps its slice. */
    int gpu_first;
    int machine_ranks;
} amldist_plan_options_t;
#define AMLDIST_PLAN_OPTIONS_INIT                                              \
    {AMLDIST_PLAN_OPTIONS_VERSION, 0u, AMLDIST_CPU_BIND_EXCLUSIVE, NULL,       \
     AMLDIST_MEM_BIND_NONE, AMLDIST_NIC_BIND_EXPORT, AMLDIST_GPU_BIND_NONE,   \
     NULL, 0, 0}

/*
 * Set one option from its command-line text, so that every launcher parses
 * them alike.  name: "cpu-bind" (none|numa|exclusive|socket|package|l3|LIST,
 * with an optional ",widen"), "numa-binding" (torchrun 2.x's names for
 * cpu-bind: node = numa, socket = package, exclusive, core-complex = l3),
 * "mem-bind" (none|local|strict), "nic-bind" (none|export|ucx|nccl),
 * "gpu-bind" (none|single).  A LIST is kept by
 * pointer: `value` must outlive the options.  EINVAL names the bad value.
 */
AMLDIST_API int amldist_plan_options_set(amldist_plan_options_t *o,
                                         const char *name, const char *value);

/*
 * Plan `nlocal` ranks (local ranks 0 .. nlocal-1).  Local rank r uses GPU
 * r % num_gpus.  Errors: EINVAL (bad option, explicit list too short or a
 * cpu outside the allowed ones), ENOMEM.  Situations that still give a
 * usable plan (too few cores, unknown NUMA locality, the mpirun trap) are
 * described by amldist_plan_warnings().
 */
AMLDIST_API int amldist_plan_compute(const amldist_topo_t *t,
                                     const amldist_plan_options_t *o,
                                     int nlocal, amldist_plan_t **out);
AMLDIST_API void amldist_plan_free(amldist_plan_t *p);
/* Warnings, one per line, each a full sentence with its fix ("" if none). */
AMLDIST_API const char *amldist_plan_warnings(const amldist_plan_t *p);
AMLDIST_API int amldist_plan_size(const amldist_plan_t *p);

/* Per-rank results; a bad rank gives AMLDIST_EINVAL / NULL. */
/* The rank's GPU as a CUDA index, or AMLDIST_EUNKNOWN without GPUs. */
AMLDIST_API int amldist_plan_rank_gpu(const amldist_plan_t *p, int lrank);
AMLDIST_API const char *amldist_plan_rank_gpu_busid(const amldist_plan_t *p,
                                                    int lrank);
/* The cpu list the rank is bound to ("" when cpu binding is off). */
AMLDIST_API const char *amldist_plan_rank_cpus(const amldist_plan_t *p,
                                               int lrank);
/* Whole or partial cores in that list (0 when binding is off). */
AMLDIST_API int amldist_plan_rank_ncores(const amldist_plan_t *p, int lrank);
/* OS index of the rank's NUMA node, or AMLDIST_EUNKNOWN (its cores span
 * several nodes, or its GPU's locality is unknown and the node was chosen
 * only to spread ranks: amldist_plan_rank_numa_guessed() is then 1). */
AMLDIST_API int amldist_plan_rank_numa(const amldist_plan_t *p, int lrank);
AMLDIST_API int amldist_plan_rank_numa_guessed(const amldist_plan_t *p,
                                               int lrank);
/* NIC name and port (0 for a network interface), or NULL / EUNKNOWN. */
AMLDIST_API const char *amldist_plan_rank_nic(const amldist_plan_t *p,
                                              int lrank);
AMLDIST_API int amldist_plan_rank_nic_port(const amldist_plan_t *p,
                                           int lrank);
/* amldist_dist_t between the rank's GPU and its NIC (EUNKNOWN without). */
AMLDIST_API int amldist_plan_rank_nic_dist(const amldist_plan_t *p,
                                           int lrank);

/*
 * Add the rank's variables to *envp, a NULL-terminated array allocated with
 * malloc/realloc whose strings are each allocated with malloc (*envp may be
 * NULL): AMLDIST_GPU (bus id), AMLDIST_GPU_INDEX, AMLDIST_CPUS,
 * AMLDIST_NUMA, AMLDIST_NIC, CUDA_DEVICE_ORDER=PCI_BUS_ID,
 * CUDA_VISIBLE_DEVICES (--gpu-bind single), UCX_NET_DEVICES or NCCL_IB_HCA
 * (--nic-bind), and OMP_NUM_THREADS unless *envp sets it (see
 * amldist_plan_rank_omp_threads; not set where that gives 0).  Replaced
 * strings are freed.  Returns 0, EINVAL or ENOMEM.
 */
AMLDIST_API int amldist_plan_rank_env(const amldist_plan_t *p, int lrank,
                                      char ***envp);

/*
 * The OMP_NUM_THREADS a rank should get when its user set none: its cores
 * when it is bound to cores no other rank of the plan has; 1 when it shares
 * cores with another, or runs unbound beside other workers (torchrun's
 * rule); 0 (leave it unset) for one unbound worker alone.  p may be NULL
 * (nothing planned); nlocal is the number of workers on the node, which
 * counts when the rank is unbound.  AMLDIST_EINVAL for a bad rank.
 * Since AMLDIST_1.1.
 */
AMLDIST_API int amldist_plan_rank_omp_threads(const amldist_plan_t *p,
                                              int lrank, int nlocal);

/*
 * Bind the calling thread (in a child between fork and exec: the whole
 * future program) as planned for `lrank`: sched_setaffinity and
 * set_mempolicy system calls on data prepared by amldist_plan_compute(),
 * nothing else.  Async-signal-safe.  Returns 0, or AMLDIST_EBIND with errno
 * set by the failed call (AMLDIST_EINVAL with errno EINVAL for a bad rank);
 * no message is recorded.
 */
AMLDIST_API int amldist_plan_apply(const amldist_plan_t *p, int lrank);

/*
 * Write the topology `t` the plan was computed on as an hwloc XML file at
 * `path`, annotated for lstopo(1) to draw the plan: each rank's PUs and
 * cores, GPU and NIC get an "lstopoStyle" colour and a Misc object named
 * "rank N", and the root one "lstopoLegend" line per rank ("rank N
 * (#rrggbb): cores LIST; GPU BUSID; NIC NAME").  `t` itself is unchanged.
 * Returns 0, AMLDIST_EINVAL, AMLDIST_ENOMEM or AMLDIST_ESYS (not written).
 * Since AMLDIST_1.1.
 */
AMLDIST_API int amldist_plan_export_xml(const amldist_plan_t *p,
                                        const amldist_topo_t *t,
                                        const char *path);

/* Flags for amldist_plan_format(). */
enum { AMLDIST_FORMAT_JSON = 1u << 0 };
/*
 * The rank's --report-bindings line (without newline), or its JSON object
 * with AMLDIST_FORMAT_JSON; `rank` is its global rank (negative: omitted).
 * Returns the length snprintf would have written, or AMLDIST_EINVAL.
 */
AMLDIST_API int amldist_plan_format(const amldist_plan_t *p, int lrank,
                                    int rank, unsigned flags, char *buf,
                                    size_t size);

#ifdef __cplusplus
}
#endif

#endif /* AMLDIST_TOPO_H */
