/*
 * Binding plans in the awkward cases: a GPU without NUMA locality,
 * CUDA_VISIBLE_DEVICES, CPU jobs, explicit lists, the mpirun trap, NICs
 * shared out, the environment, the report line, and applying a plan to
 * this very process.  Expected values worked out by hand (see
 * test_plan_golden.c for the machines' layouts).
 */
#include <errno.h>
#include <stdio.h>

#include "plan_golden.h"

static amldist_plan_t *plan_opts(amldist_topo_t *t, amldist_plan_options_t *o,
                                 int n)
{
    amldist_plan_t *p = NULL;
    int rc = amldist_plan_compute(t, o, n, &p);
    if (rc != 0)
        TEST__FAIL("plan of %d ranks: %d %s", n, rc, amldist_last_error());
    return p;
}

static const char *get(char **env, const char *name)
{
    size_t n = strlen(name);
    for (char **e = env; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static void free_env(char **env)
{
    for (char **e = env; e && *e; e++)
        free(*e);
    free(env);
}

static char **heap_env(const char *const *vars)
{
    size_t n = 0;
    while (vars[n] != NULL)
        n++;
    char **env = calloc(n + 1, sizeof *env);
    for (size_t i = 0; i < n; i++)
        env[i] = strdup(vars[i]);
    return env;
}

static void test_numa_unknown(void)
{
    /* p4d with host bridge a0 (GPUs 6, 7) moved to the machine: ranks 0-5
     * are placed first (4 on NUMA 0, 2 on NUMA 1), then 6 and 7 go to the
     * less loaded NUMA 1, which then splits its 24 cores among 4. */
    amldist_topo_t *t = load("tests/topologies/p4d-numa-unknown.xml");
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    o.mem_bind = AMLDIST_MEM_BIND_LOCAL;
    amldist_plan_t *p = plan_opts(t, &o, 8);
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 5), "30-35,78-83");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 6), "36-41,84-89");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 7), "42-47,90-95");
    CHECK_INT_EQ(amldist_plan_rank_numa(p, 6), 1);
    CHECK_INT_EQ(amldist_plan_rank_numa_guessed(p, 6), 1);
    CHECK_INT_EQ(amldist_plan_rank_numa_guessed(p, 5), 0);
    CHECK_STR_EQ(amldist_plan_rank_nic(p, 6), "rdmap160s27");
    CHECK_STR_HAS(amldist_plan_warnings(p),
                  "GPU 0000:a0:1c.0 has no known NUMA node: rank 6 is placed "
                  "on NUMA node 1");
    /* No memory policy on a guessed node. */
    char line[512];
    amldist_plan_format(p, 6, 6, 0, line, sizeof line);
    CHECK_STR_EQ(line, "rank 6 (local 6): gpu 6 0000:a0:1c.0, cpus "
                       "36-41,84-89 (6 cores), numa 1 (guessed), nic "
                       "rdmap160s27:1 PHB, mem default");
    amldist_plan_format(p, 5, 5, 0, line, sizeof line);
    CHECK_STR_HAS(line, "numa 1, nic rdmap144s27:1 PHB, mem local");
    amldist_plan_free(p);

    /* Visible: 6, 7 (unknown), 0 (NUMA 0).  Rank 2 (GPU 0) is placed
     * first; rank 0 goes to the empty NUMA 1, rank 1 to NUMA 0 (a tie, the
     * first node wins).  NUMA 0 is split between ranks 1 and 2. */
    amldist_topo_set_visible(t, "6,7,0");
    o.mem_bind = AMLDIST_MEM_BIND_NONE;
    p = plan_opts(t, &o, 3);
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "24-47,72-95");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 1), "0-11,48-59");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 2), "12-23,60-71");
    CHECK_INT_EQ(amldist_plan_rank_numa(p, 0), 1);
    CHECK_INT_EQ(amldist_plan_rank_numa(p, 1), 0);
    CHECK_INT_EQ(amldist_plan_rank_numa_guessed(p, 2), 0);
    amldist_plan_free(p);
    amldist_topo_free(t);
}

static void test_cuda_visible_devices(void)
{
    amldist_topo_t *t = load(fixture("aws-ofi-nccl/p4d-topology.xml"));
    amldist_topo_set_visible(t, "4,5,6,7");
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    o.gpu_bind = AMLDIST_GPU_BIND_SINGLE;
    amldist_plan_t *p = plan_opts(t, &o, 4);
    static const char *const cpus[] = {"24-29,72-77", "30-35,78-83",
                                       "36-41,84-89", "42-47,90-95"};
    static const char *const nics[] = {"rdmap144s27", "rdmap144s27",
                                       "rdmap160s27", "rdmap160s27"};
    for (int r = 0; r < 4; r++) {
        CHECK_INT_EQ(amldist_plan_rank_gpu(p, r), r);
        CHECK_INT_EQ(amldist_plan_rank_numa(p, r), 1);
        CHECK_STR_EQ(amldist_plan_rank_cpus(p, r), cpus[r]);
        CHECK_STR_EQ(amldist_plan_rank_nic(p, r), nics[r]);
    }
    CHECK_STR_EQ(amldist_plan_rank_gpu_busid(p, 2), "0000:a0:1c.0");
    char **env = NULL;
    CHECK_INT_EQ(amldist_plan_rank_env(p, 2, &env), 0);
    /* The rank sees only its GPU, named as the inherited list named it. */
    int seen = 0;
    for (char **e = env; e && *e; e++) {
        seen += strcmp(*e, "CUDA_VISIBLE_DEVICES=6") == 0;
        seen += strcmp(*e, "AMLDIST_GPU_INDEX=0") == 0;
        seen += strcmp(*e, "AMLDIST_GPU=0000:a0:1c.0") == 0;
        free(*e);
    }
    free(env);
    CHECK_INT_EQ(seen, 3);
    amldist_plan_free(p);
    amldist_topo_free(t);

    t = load(fixture("hwloc-tests/nvidiaDGX2.xml"));
    amldist_topo_set_visible(t, "GPU-27ce06e8,GPU-d3977428");
    p = plan_opts(t, &o, 2);
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "24-25");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 1), "0-1");
    env = NULL;
    CHECK_INT_EQ(amldist_plan_rank_env(p, 0, &env), 0);
    CHECK_STR_EQ(get(env, "CUDA_VISIBLE_DEVICES"), "GPU-27ce06e8");
    free_env(env);
    amldist_plan_free(p);
    amldist_topo_free(t);
}

static void test_uuid_unresolved_is_cpu_job(void)
{
    /* p4d has no UUIDs: the GPUs are ignored and the 48 cores are cut in
     * NUMA order into 3 blocks of 16: rank 1 spans both nodes. */
    amldist_topo_t *t = load(fixture("aws-ofi-nccl/p4d-topology.xml"));
    amldist_topo_set_visible(t, "GPU-1234");
    amldist_plan_t *p = plan(t, "exclusive", 3);
    CHECK_INT_EQ(amldist_plan_rank_gpu(p, 0), AMLDIST_EUNKNOWN);
    CHECK(amldist_plan_rank_gpu_busid(p, 0) == NULL);
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "0-15,48-63");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 1), "16-31,64-79");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 2), "32-47,80-95");
    CHECK_INT_EQ(amldist_plan_rank_numa(p, 0), 0);
    CHECK_INT_EQ(amldist_plan_rank_numa(p, 1), AMLDIST_EUNKNOWN);
    CHECK_INT_EQ(amldist_plan_rank_numa(p, 2), 1);
    CHECK_INT_EQ(amldist_plan_rank_ncores(p, 1), 16);
    /* NICs of a CPU job: those on the rank's node, then the least used. */
    CHECK_STR_EQ(amldist_plan_rank_nic(p, 0), "rdmap16s27");
    CHECK_STR_EQ(amldist_plan_rank_nic(p, 1), "rdmap32s27");
    CHECK_STR_EQ(amldist_plan_rank_nic(p, 2), "rdmap144s27");
    CHECK_STR_HAS(amldist_plan_warnings(p), "gives no GPU UUIDs");
    amldist_plan_free(p);
    p = plan(t, "numa", 3);
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "0-23,48-71");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 1), "0-95");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 2), "24-47,72-95");
    amldist_plan_free(p);
    amldist_topo_free(t);
}

static void test_explicit_lists(void)
{
    amldist_topo_t *t = load(fixture("aws-ofi-nccl/p4d-topology.xml"));
    amldist_plan_t *p = plan(t, "0-3:4-7,52", 2);
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "0-3");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 1), "4-7,52");
    CHECK_INT_EQ(amldist_plan_rank_ncores(p, 1), 4); /* 52 is core 4's twin */
    CHECK_INT_EQ(amldist_plan_rank_numa(p, 1), 0);
    amldist_plan_free(p);
    p = plan(t, "0:30", 2);
    CHECK_INT_EQ(amldist_plan_rank_numa(p, 1), 1);
    amldist_plan_free(p);

    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    CHECK_INT_EQ(amldist_plan_options_set(&o, "cpu-bind", "0-3:4-7"), 0);
    CHECK_INT_EQ(amldist_plan_compute(t, &o, 3, &p), AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "local rank 2");
    o.cpu_list = "0:200";
    CHECK_INT_EQ(amldist_plan_compute(t, &o, 2, &p), AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "local rank 1's cpus 200");
    o.cpu_list = "0-3:4";
    o.inherited_cpus = "0-3";
    CHECK_INT_EQ(amldist_plan_compute(t, &o, 2, &p), AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "may use (0-3)");
    amldist_topo_free(t);
}

static void test_option_parsing(void)
{
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    CHECK_INT_EQ(o.cpu_bind, AMLDIST_CPU_BIND_EXCLUSIVE);
    CHECK_INT_EQ(o.nic_bind, AMLDIST_NIC_BIND_EXPORT);
    CHECK_INT_EQ(amldist_plan_options_set(&o, "cpu-bind", "socket,widen"), 0);
    CHECK_INT_EQ(o.cpu_bind, AMLDIST_CPU_BIND_SOCKET);
    CHECK(o.flags & AMLDIST_PLAN_WIDEN);
    CHECK_INT_EQ(amldist_plan_options_set(&o, "cpu-bind", "sockets"),
                 AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "--cpu-bind sockets");
    CHECK_INT_EQ(amldist_plan_options_set(&o, "cpu-bind", "numa,wide"),
                 AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_plan_options_set(&o, "cpu-bind", "1-2x"),
                 AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_plan_options_set(&o, "mem-bind", "strict"), 0);
    CHECK_INT_EQ(o.mem_bind, AMLDIST_MEM_BIND_STRICT);
    CHECK_INT_EQ(amldist_plan_options_set(&o, "mem-bind", "bind"),
                 AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_plan_options_set(&o, "nic-bind", "nccl"), 0);
    CHECK_INT_EQ(amldist_plan_options_set(&o, "gpu-bind", "single"), 0);
    CHECK_INT_EQ(amldist_plan_options_set(&o, "gpu-bind", "all"),
                 AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_plan_options_set(&o, "cpu", "none"), AMLDIST_EINVAL);

    amldist_topo_t *t = load(fixture("mpibind/cts1-pascal.xml"));
    amldist_plan_t *p = NULL;
    CHECK_INT_EQ(amldist_plan_compute(t, NULL, 0, &p), AMLDIST_EINVAL);
    o.version = 99;
    CHECK_INT_EQ(amldist_plan_compute(t, &o, 1, &p), AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "options_t version 99");
    CHECK(p == NULL);
    CHECK_INT_EQ(amldist_plan_compute(t, NULL, 1, &p), 0);
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "0-17,36-53");
    CHECK(amldist_plan_rank_cpus(p, 1) == NULL);
    CHECK_INT_EQ(amldist_plan_rank_gpu(p, 1), AMLDIST_EINVAL);
    amldist_plan_free(p);
    amldist_topo_free(t);
}

/* torchrun 2.x's --numa-binding names, and the package and l3 policies
 * where the golden tables do not reach: CPU jobs, one L3 for several ranks,
 * a topology without caches. */
static void test_numa_binding(void)
{
    static const struct {
        const char *name;
        amldist_cpu_bind_t want;
    } modes[] = {{"node", AMLDIST_CPU_BIND_NUMA},
                 {"socket", AMLDIST_CPU_BIND_PACKAGE},
                 {"exclusive", AMLDIST_CPU_BIND_EXCLUSIVE},
                 {"core-complex", AMLDIST_CPU_BIND_L3}};
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        CHECK_INT_EQ(amldist_plan_options_set(&o, "numa-binding",
                                              modes[i].name), 0);
        CHECK_INT_EQ(o.cpu_bind, modes[i].want);
    }
    CHECK_INT_EQ(amldist_plan_options_set(&o, "numa-binding", "numa"),
                 AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "node, socket, exclusive or "
                                        "core-complex");
    CHECK_INT_EQ(amldist_plan_options_set(&o, "cpu-bind", "l3,widen"), 0);
    CHECK_INT_EQ(o.cpu_bind, AMLDIST_CPU_BIND_L3);

    /* p4d as a CPU job (its GPUs hidden): one L3 per package of 24 cores.
     * Blocks of 16 cores put ranks 0 and 1 on NUMA 0, which has one L3
     * domain for two: they split it; rank 2 has NUMA 1's alone. */
    amldist_topo_t *t = load(fixture("aws-ofi-nccl/p4d-topology.xml"));
    amldist_topo_set_visible(t, "GPU-1234");
    amldist_plan_t *p = plan(t, "l3", 3);
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "0-11,48-59");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 1), "12-23,60-71");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 2), "24-47,72-95");
    CHECK_INT_EQ(amldist_plan_rank_numa(p, 1), 0);
    CHECK_STR_HAS(amldist_plan_warnings(p), "NUMA node 0 has 1 L3 domain "
                                            "(cores under one last-level "
                                            "cache) for 2 ranks");
    amldist_plan_free(p);
    /* package: rank 1's block spans both packages, so it gets both. */
    p = plan(t, "package", 3);
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "0-23,48-71");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 1), "0-95");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 2), "24-47,72-95");
    amldist_plan_free(p);
    amldist_topo_free(t);

    /* Lassen: 4 GPU ranks on an L3 of 2 cores each would be one domain
     * each; 48 ranks (24 a node, 10 domains) leave ranks sharing a
     * domain's 2 cores three ways (they share them, with a warning). */
    t = load(fixture("mpibind/coral-lassen.xml"));
    p = plan(t, "l3", 48);
    CHECK_STR_HAS(amldist_plan_warnings(p), "has 2 usable cores for 3 "
                                            "ranks: they share them");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "8-15");
    amldist_plan_free(p);
    amldist_topo_free(t);

    /* No cache in the topology: exclusive blocks, with a warning. */
    t = load("tests/topologies/synthetic-2pkg-4core-nocache.xml");
    p = plan(t, "l3", 4);
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "0-1");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 3), "6-7");
    CHECK_STR_HAS(amldist_plan_warnings(p), "shows no cache above the cores "
                                            "of NUMA node 1");
    amldist_plan_free(p);
    amldist_topo_free(t);
}

static void test_mpirun_trap(void)
{
    /* amlrun bound to cpu 0 (mpirun's default) for 8 GPU ranks. */
    amldist_topo_t *t = load(fixture("aws-ofi-nccl/p4d-topology.xml"));
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    o.inherited_cpus = "0";
    amldist_plan_t *p = plan_opts(t, &o, 8);
    CHECK_STR_HAS(amldist_plan_warnings(p), "`mpirun --bind-to none`");
    CHECK_STR_HAS(amldist_plan_warnings(p), "bound to cpus 0 (1 core)");
    for (int r = 0; r < 8; r++)
        CHECK_STR_EQ(amldist_plan_rank_cpus(p, r), "0");
    CHECK_STR_HAS(amldist_plan_warnings(p),
                  "GPU 0000:90:1c.0 is on NUMA node 1, which has none of "
                  "the CPUs amlrun may use");
    amldist_plan_free(p);

    o.flags = AMLDIST_PLAN_WIDEN;
    p = plan_opts(t, &o, 8);
    CHECK_STR_HAS(amldist_plan_warnings(p), "widened to all allowed cpus 0-95");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "0-5,48-53");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 7), "42-47,90-95");
    amldist_plan_free(p);
    o.cpu_bind = AMLDIST_CPU_BIND_NONE;
    p = plan_opts(t, &o, 8);
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 3), "0-95");
    amldist_plan_free(p);

    /* A Slurm-like allocation of socket 0 with enough cores: no trap, the
     * ranks of NUMA 1's GPUs get socket 0's cores beside the others. */
    o = (amldist_plan_options_t)AMLDIST_PLAN_OPTIONS_INIT;
    o.inherited_cpus = "0-23,48-71";
    p = plan_opts(t, &o, 2);
    CHECK_STR_EQ(amldist_plan_warnings(p), "");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "0-11,48-59");
    amldist_plan_free(p);
    amldist_topo_free(t);
}

static void test_nic_spread_over_netdevs(void)
{
    /* No RDMA device: ib0 (PIX to GPU 2), eth0, eth1 (PHB to GPUs 1, 2).
     * Rank 0 (GPU 0) sees all three at SYS: ib0 first.  Rank 1 (GPU 1)
     * sees all at PHB: ib0 is used, eth0 next.  Rank 2: ib0 at PIX. */
    amldist_topo_t *t = load("tests/topologies/32em64t-no-rdma.xml");
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    o.nic_bind = AMLDIST_NIC_BIND_UCX;
    amldist_plan_t *p = plan_opts(t, &o, 3);
    CHECK_STR_EQ(amldist_plan_rank_nic(p, 0), "ib0");
    CHECK_STR_EQ(amldist_plan_rank_nic(p, 1), "eth0");
    CHECK_STR_EQ(amldist_plan_rank_nic(p, 2), "ib0");
    CHECK_INT_EQ(amldist_plan_rank_nic_dist(p, 0), AMLDIST_DIST_SYS);
    CHECK_INT_EQ(amldist_plan_rank_nic_dist(p, 1), AMLDIST_DIST_PHB);
    CHECK_INT_EQ(amldist_plan_rank_nic_dist(p, 2), AMLDIST_DIST_PIX);
    CHECK_INT_EQ(amldist_plan_rank_nic_port(p, 1), 0);
    char **env = NULL;
    CHECK_INT_EQ(amldist_plan_rank_env(p, 1, &env), 0);
    int ucx = 0;
    for (char **e = env; *e; e++) {
        ucx += strcmp(*e, "UCX_NET_DEVICES=eth0") == 0;
        free(*e);
    }
    free(env);
    CHECK_INT_EQ(ucx, 1);
    amldist_plan_free(p);
    amldist_topo_free(t);
}

static void test_rank_env(void)
{
    amldist_topo_t *t = load(fixture("aws-ofi-nccl/p4d-topology.xml"));
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    o.nic_bind = AMLDIST_NIC_BIND_NCCL;
    amldist_plan_t *p = plan_opts(t, &o, 8);
    static const char *const base[] = {"PATH=/bin", "AMLDIST_CPUS=stale",
                                       NULL};
    char **env = heap_env(base);
    CHECK_INT_EQ(amldist_plan_rank_env(p, 3, &env), 0);
    CHECK_STR_EQ(get(env, "PATH"), "/bin");
    CHECK_STR_EQ(get(env, "AMLDIST_CPUS"), "18-23,66-71");
    CHECK_STR_EQ(get(env, "OMP_NUM_THREADS"), "6");
    CHECK_STR_EQ(get(env, "AMLDIST_GPU"), "0000:20:1d.0");
    CHECK_STR_EQ(get(env, "AMLDIST_GPU_INDEX"), "3");
    CHECK_STR_EQ(get(env, "AMLDIST_NUMA"), "0");
    CHECK_STR_EQ(get(env, "AMLDIST_NIC"), "rdmap32s27");
    CHECK_STR_EQ(get(env, "NCCL_IB_HCA"), "=rdmap32s27:1");
    CHECK_STR_EQ(get(env, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
    CHECK(get(env, "CUDA_VISIBLE_DEVICES") == NULL);
    CHECK(get(env, "UCX_NET_DEVICES") == NULL);
    free_env(env);
    amldist_plan_free(p);

    o.nic_bind = AMLDIST_NIC_BIND_NONE;
    o.cpu_bind = AMLDIST_CPU_BIND_NONE;
    p = plan_opts(t, &o, 2);
    static const char *const omp[] = {"OMP_NUM_THREADS=3", NULL};
    env = heap_env(omp);
    CHECK_INT_EQ(amldist_plan_rank_env(p, 1, &env), 0);
    CHECK_STR_EQ(get(env, "OMP_NUM_THREADS"), "3");
    CHECK(get(env, "AMLDIST_NIC") == NULL);
    CHECK(get(env, "AMLDIST_CPUS") == NULL);
    CHECK_STR_EQ(get(env, "AMLDIST_NUMA"), "0");
    CHECK_INT_EQ(amldist_plan_rank_env(p, 2, &env), AMLDIST_EINVAL);
    free_env(env);
    /* Unbound beside another worker: 1, as torchrun gives. */
    env = heap_env(base);
    CHECK_INT_EQ(amldist_plan_rank_env(p, 0, &env), 0);
    CHECK_STR_EQ(get(env, "OMP_NUM_THREADS"), "1");
    free_env(env);
    amldist_plan_free(p);
    /* One unbound worker alone: left to OpenMP. */
    p = plan_opts(t, &o, 1);
    env = heap_env(base);
    CHECK_INT_EQ(amldist_plan_rank_env(p, 0, &env), 0);
    CHECK(get(env, "OMP_NUM_THREADS") == NULL);
    free_env(env);
    amldist_plan_free(p);
    amldist_topo_free(t);
}

/* The one OMP_NUM_THREADS rule: cores of its own, else 1 among several. */
static void test_omp_threads(void)
{
    CHECK_INT_EQ(amldist_plan_rank_omp_threads(NULL, 0, 1), 0);
    CHECK_INT_EQ(amldist_plan_rank_omp_threads(NULL, 3, 4), 1);
    amldist_topo_t *t = load(fixture("aws-ofi-nccl/p4d-topology.xml"));
    amldist_plan_t *p = plan(t, "exclusive", 8); /* 6 cores each */
    CHECK_INT_EQ(amldist_plan_rank_omp_threads(p, 5, 8), 6);
    CHECK_INT_EQ(amldist_plan_rank_omp_threads(p, 8, 8), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_plan_rank_omp_threads(p, -1, 8), AMLDIST_EINVAL);
    amldist_plan_free(p);
    p = plan(t, "numa", 8); /* 4 ranks on each node's 24 cores */
    CHECK_INT_EQ(amldist_plan_rank_ncores(p, 0), 24);
    CHECK_INT_EQ(amldist_plan_rank_omp_threads(p, 0, 8), 1);
    amldist_plan_free(p);
    p = plan(t, "numa", 2); /* GPUs 0 and 1 share NUMA node 0 */
    CHECK_INT_EQ(amldist_plan_rank_omp_threads(p, 1, 2), 1);
    amldist_plan_free(p);
    p = plan(t, "l3", 2); /* one L3 per package: they split it */
    CHECK_INT_EQ(amldist_plan_rank_omp_threads(p, 1, 2), 12);
    amldist_plan_free(p);
    /* 100 ranks on 48 cores: each shares, whatever its core count. */
    p = plan(t, "exclusive", 100);
    for (int r = 0; r < 100; r++)
        CHECK_INT_EQ(amldist_plan_rank_omp_threads(p, r, 100), 1);
    amldist_plan_free(p);
    /* One rank of a plan unbound, but its node has other workers (another
     * amlrun's): 1; alone: nothing. */
    p = plan(t, "none", 1);
    CHECK_INT_EQ(amldist_plan_rank_omp_threads(p, 0, 2), 1);
    CHECK_INT_EQ(amldist_plan_rank_omp_threads(p, 0, 1), 0);
    amldist_plan_free(p);
    amldist_topo_free(t);
}

/* Launchers of one machine splitting its GPUs: this one's ranks come
 * after gpu_first of the machine's, of machine_ranks in all.  With enough
 * GPUs none is shared; with too few the ranks on a GPU that another rank of
 * the machine also has are marked, and the warning counts the machine's. */
static void test_machine_share(void)
{
    amldist_topo_t *t = load(fixture("aws-ofi-nccl/p4d-topology.xml"));
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    o.cpu_bind = AMLDIST_CPU_BIND_NONE;
    o.gpu_first = 2;
    o.machine_ranks = 4;
    amldist_plan_t *p = plan_opts(t, &o, 2);
    CHECK_INT_EQ(amldist_plan_rank_gpu(p, 0), 2);
    CHECK_INT_EQ(amldist_plan_rank_gpu(p, 1), 3);
    char **env = heap_env((const char *const[]){NULL});
    CHECK_INT_EQ(amldist_plan_rank_env(p, 1, &env), 0);
    CHECK_STR_EQ(get(env, "AMLDIST_GPU"), "0000:20:1d.0");
    CHECK(get(env, "AMLDIST_GPU_SHARED") == NULL);
    free_env(env);
    CHECK_STR_EQ(amldist_plan_warnings(p), "");
    amldist_plan_free(p);
    /* Cores too are cut as one launcher would cut them for the machine's 4
     * ranks (GPUs 0..3 are on NUMA node 0): the second launcher's ranks get
     * the blocks of machine ranks 2 and 3, never the first one's. */
    o.cpu_bind = AMLDIST_CPU_BIND_EXCLUSIVE;
    p = plan_opts(t, &o, 2);
    o.gpu_first = 0;
    amldist_plan_t *first = plan_opts(t, &o, 2);
    CHECK_STR_EQ(amldist_plan_rank_cpus(first, 0), "0-5,48-53");
    CHECK_STR_EQ(amldist_plan_rank_cpus(first, 1), "6-11,54-59");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "12-17,60-65");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 1), "18-23,66-71");
    amldist_plan_free(first);
    amldist_plan_free(p);
    o.cpu_bind = AMLDIST_CPU_BIND_NONE;
    /* The second of two launchers with 6 ranks each on 8 GPUs: ranks 6..11
     * of the machine take GPUs 6, 7, 0, 1, 2, 3; all but the first two
     * share theirs with the first launcher's ranks 0..3. */
    o.gpu_first = 6;
    o.machine_ranks = 12;
    p = plan_opts(t, &o, 6);
    static const int gpu[6] = {6, 7, 0, 1, 2, 3};
    for (int r = 0; r < 6; r++) {
        CHECK_INT_EQ(amldist_plan_rank_gpu(p, r), gpu[r]);
        env = heap_env((const char *const[]){NULL});
        CHECK_INT_EQ(amldist_plan_rank_env(p, r, &env), 0);
        CHECK_STR_EQ(get(env, "AMLDIST_GPU_SHARED") ? "1" : "0",
                     r < 2 ? "0" : "1");
        free_env(env);
    }
    CHECK_STR_HAS(amldist_plan_warnings(p),
                  "12 ranks on 8 GPUs of this machine (its launchers "
                  "together)");
    amldist_plan_free(p);
    /* Impossible shares are refused, naming them. */
    o.gpu_first = -1;
    amldist_plan_t *bad = NULL;
    CHECK_INT_EQ(amldist_plan_compute(t, &o, 2, &bad), AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "gpu_first -1");
    CHECK(bad == NULL);
    amldist_topo_free(t);
}

static void test_report_formats(void)
{
    amldist_topo_t *t = load(fixture("aws-ofi-nccl/p4d-topology.xml"));
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    o.mem_bind = AMLDIST_MEM_BIND_LOCAL;
    amldist_plan_t *p = plan_opts(t, &o, 8);
    char buf[1024];
    int n = amldist_plan_format(p, 4, 12, 0, buf, sizeof buf);
    CHECK_STR_EQ(buf, "rank 12 (local 4): gpu 4 0000:90:1c.0, cpus "
                      "24-29,72-77 (6 cores), numa 1, nic rdmap144s27:1 PHB, "
                      "mem local");
    CHECK_INT_EQ(n, (int)strlen(buf));
    amldist_plan_format(p, 4, -1, AMLDIST_FORMAT_JSON, buf, sizeof buf);
    CHECK_STR_EQ(buf, "{\"rank\":null,\"local_rank\":4,\"gpu\":4,"
                      "\"gpu_busid\":\"0000:90:1c.0\",\"cpus\":\"24-29,72-77\","
                      "\"cores\":6,\"numa\":1,\"numa_guessed\":false,"
                      "\"nic\":\"rdmap144s27\",\"nic_port\":1,"
                      "\"nic_distance\":\"PHB\",\"mem_bind\":\"local\"}");
    CHECK_INT_EQ(amldist_plan_format(p, 8, 0, 0, buf, sizeof buf),
                 AMLDIST_EINVAL);
    amldist_plan_free(p);
    amldist_topo_free(t);

    t = load(fixture("hwloc-tests/nvidiaDGX2.xml"));
    o.cpu_bind = AMLDIST_CPU_BIND_NONE;
    o.mem_bind = AMLDIST_MEM_BIND_NONE;
    p = plan_opts(t, &o, 1);
    amldist_plan_format(p, 0, 0, 0, buf, sizeof buf);
    CHECK_STR_EQ(buf, "rank 0 (local 0): gpu 0 0000:34:00.0, cpus unbound, "
                      "numa 0, nic none, mem default");
    amldist_plan_format(p, 0, 0, AMLDIST_FORMAT_JSON, buf, sizeof buf);
    CHECK_STR_HAS(buf, "\"cpus\":null,\"cores\":0,\"numa\":0");
    CHECK_STR_HAS(buf, "\"nic\":null,\"nic_port\":null");
    amldist_plan_free(p);
    amldist_topo_free(t);
}

/* The kernel's view of this process, as a worker would read it. */
static void status_field(const char *name, char *out, size_t size)
{
    char line[512];
    out[0] = '\0';
    FILE *f = fopen("/proc/self/status", "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, name, strlen(name)) == 0) {
            sscanf(line + strlen(name), ":%*[ \t]%255s", out);
            (void)size;
        }
    if (f != NULL)
        fclose(f);
}

static int numa_maps_has(const char *policy)
{
    char line[1024];
    int found = 0;
    FILE *f = fopen("/proc/self/numa_maps", "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        found |= strstr(line, policy) != NULL;
    if (f != NULL)
        fclose(f);
    return found;
}

static void test_apply_here(void)
{
    /* Each case runs in its own forked process: binding it is harmless. */
    amldist_topo_t *t = load(NULL);
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    o.mem_bind = AMLDIST_MEM_BIND_LOCAL;
    int n = amldist_topo_num_cores(t) >= 2 ? 2 : 1;
    amldist_plan_t *p = plan_opts(t, &o, n);
    int last = n - 1;
    CHECK_INT_EQ(amldist_plan_apply(p, last), 0);
    char cpus[256], mems[256], before[256];
    status_field("Cpus_allowed_list", cpus, sizeof cpus);
    CHECK_STR_EQ(cpus, amldist_plan_rank_cpus(p, last));
    status_field("Mems_allowed_list", mems, sizeof mems);
    snprintf(before, sizeof before, "%d", amldist_plan_rank_numa(p, last));
    if (amldist_topo_num_numa(t) == 1) {
        CHECK_STR_EQ(mems, before);
        CHECK(numa_maps_has(" prefer:0 ") || numa_maps_has(" prefer=0"));
    }
    amldist_plan_free(p);
    o.mem_bind = AMLDIST_MEM_BIND_STRICT;
    p = plan_opts(t, &o, 1);
    CHECK_INT_EQ(amldist_plan_apply(p, 0), 0);
    if (amldist_topo_num_numa(t) == 1)
        CHECK(numa_maps_has(" bind:0 "));
    errno = 0;
    CHECK_INT_EQ(amldist_plan_apply(p, 1), AMLDIST_EINVAL);
    CHECK_INT_EQ(errno, EINVAL);
    amldist_plan_free(p);
    amldist_topo_free(t);
}

static void test_own_affinity_and_node_wide(void)
{
    /* This process pinned to its first allowed cpu, as mpirun's default
     * --bind-to core would: a per-node plan sees the trap, a node-wide
     * (per-process mode) plan does not. */
    amldist_topo_t *t = load(NULL);
    if (amldist_topo_num_cores(t) < 2) {
        amldist_topo_free(t);
        return;
    }
    amldist_plan_t *p = plan(t, "exclusive", 2);
    char first[32];
    snprintf(first, sizeof first, "%s", amldist_plan_rank_cpus(p, 0));
    amldist_plan_free(p);
    p = plan(t, first, 1);
    CHECK_INT_EQ(amldist_plan_apply(p, 0), 0);
    amldist_plan_free(p);
    p = plan(t, "exclusive", 2);
    CHECK_STR_HAS(amldist_plan_warnings(p), "`mpirun --bind-to none`");
    CHECK_STR_EQ(amldist_plan_rank_cpus(p, 1), first);
    amldist_plan_free(p);
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    o.flags = AMLDIST_PLAN_NODE_WIDE;
    p = plan_opts(t, &o, 2);
    CHECK_STR_EQ(amldist_plan_warnings(p), "");
    CHECK(strcmp(amldist_plan_rank_cpus(p, 1), first) != 0);
    amldist_plan_free(p);
    amldist_topo_free(t);
}

int main(void)
{
    test_warm(test_numa_binding);
    RUN(test_numa_unknown);
    RUN(test_cuda_visible_devices);
    RUN(test_uuid_unresolved_is_cpu_job);
    RUN(test_explicit_lists);
    RUN(test_option_parsing);
    RUN(test_numa_binding);
    RUN(test_omp_threads);
    RUN(test_mpirun_trap);
    RUN(test_nic_spread_over_netdevs);
    RUN(test_rank_env);
    RUN(test_machine_share);
    RUN(test_report_formats);
    RUN(test_apply_here);
    RUN(test_own_affinity_and_node_wide);
    return test_summary();
}
