/*
 * Golden binding plans for every hwloc XML fixture in ../shared/topologies,
 * for 1, 2, 4 and 8 ranks per node and each policy (none is checked for
 * every n as well: no cpus, same GPU/NUMA/NIC).  See plan_golden.h for how
 * the tables read; the values come from the machines' layouts:
 *
 * exclusive: the ranks whose GPU is on a NUMA node split its cores in equal
 *   blocks of floor(cores / ranks) whole cores, in local-rank order;
 * numa: every core of the GPU's node; socket: exclusive, and a NUMA node
 *   that no rank's GPU is on is split the same way among the ranks of a node
 *   with ranks (same package first).
 */
#include "plan_golden.h"

#define N(x) (sizeof(x) / sizeof *(x))

/*
 * AWS p4d.24xlarge: NUMA 0 = cores 0-23 with PUs {i, i+48}, NUMA 1 = PUs
 * 24-47 and 72-95.  GPUs 0-3 (10:1c, 10:1d, 20:1c, 20:1d) on NUMA 0, 4-7 on
 * NUMA 1.  Each EFA shares a host bridge (PHB) with two GPUs: 8 GPUs on 4
 * NICs, two each.
 */
static const struct place p4d_place[8] = {
    {0, "0000:10:1c.0", 0, "rdmap16s27", "PHB"},
    {1, "0000:10:1d.0", 0, "rdmap16s27", "PHB"},
    {2, "0000:20:1c.0", 0, "rdmap32s27", "PHB"},
    {3, "0000:20:1d.0", 0, "rdmap32s27", "PHB"},
    {4, "0000:90:1c.0", 1, "rdmap144s27", "PHB"},
    {5, "0000:90:1d.0", 1, "rdmap144s27", "PHB"},
    {6, "0000:a0:1c.0", 1, "rdmap160s27", "PHB"},
    {7, "0000:a0:1d.0", 1, "rdmap160s27", "PHB"},
};

/* g4dn.metal has the same cores per NUMA node as p4d, so the same cpus. */
static const struct golden two_by_24_cpus[] = {
    {1, "exclusive", {"0-23,48-71"}},
    {1, "numa", {"0-23,48-71"}},
    {1, "socket", {"0-95"}},
    {2, "exclusive", {"0-11,48-59", "12-23,60-71"}},
    {2, "numa", {"0-23,48-71", "0-23,48-71"}},
    {2, "socket", {"0-11,24-35,48-59,72-83", "12-23,36-47,60-71,84-95"}},
    {4, "exclusive", {"0-5,48-53", "6-11,54-59", "12-17,60-65", "18-23,66-71"}},
    {4, "numa", {"0-23,48-71", "0-23,48-71", "0-23,48-71", "0-23,48-71"}},
    {4, "socket",
     {"0-5,24-29,48-53,72-77", "6-11,30-35,54-59,78-83",
      "12-17,36-41,60-65,84-89", "18-23,42-47,66-71,90-95"}},
    {8, "exclusive",
     {"0-5,48-53", "6-11,54-59", "12-17,60-65", "18-23,66-71", "24-29,72-77",
      "30-35,78-83", "36-41,84-89", "42-47,90-95"}},
    {8, "numa",
     {"0-23,48-71", "0-23,48-71", "0-23,48-71", "0-23,48-71", "24-47,72-95",
      "24-47,72-95", "24-47,72-95", "24-47,72-95"}},
    {8, "socket",
     {"0-5,48-53", "6-11,54-59", "12-17,60-65", "18-23,66-71", "24-29,72-77",
      "30-35,78-83", "36-41,84-89", "42-47,90-95"}},
};

static void test_p4d(void)
{
    check_golden(fixture("aws-ofi-nccl/p4d-topology.xml"), p4d_place,
                 two_by_24_cpus, N(two_by_24_cpus));
}

/*
 * AWS g4dn.metal: 8 T4, GPUs 0-3 (18, 19, 35, 36) on NUMA 0, 4-7 (e7, e8,
 * f4, f5) on NUMA 1; the one EFA (rdmap197s0) is on NUMA 1: a GPU without
 * a local NIC gets it at SYS.
 */
static const struct place g4dn_place[8] = {
    {0, "0000:18:00.0", 0, "rdmap197s0", "SYS"},
    {1, "0000:19:00.0", 0, "rdmap197s0", "SYS"},
    {2, "0000:35:00.0", 0, "rdmap197s0", "SYS"},
    {3, "0000:36:00.0", 0, "rdmap197s0", "SYS"},
    {4, "0000:e7:00.0", 1, "rdmap197s0", "NODE"},
    {5, "0000:e8:00.0", 1, "rdmap197s0", "NODE"},
    {6, "0000:f4:00.0", 1, "rdmap197s0", "NODE"},
    {7, "0000:f5:00.0", 1, "rdmap197s0", "NODE"},
};

static void test_g4dn(void)
{
    check_golden(fixture("mpibind/g4dnmetal.xml"), g4dn_place, two_by_24_cpus,
                 N(two_by_24_cpus));
}

/*
 * NVIDIA DGX-2H, CPUs trimmed to 2 cores per socket: NUMA 0 = PUs 0-1,
 * NUMA 1 = PUs 24-25.  16 V100 (12 NVSwitches are not GPUs), 0-7 on
 * NUMA 0, 8-15 on NUMA 1; no NIC.  With 4 or 8 ranks on 2 cores the ranks
 * must share them.
 */
static const struct place dgx2_place[16] = {
    {0, "0000:34:00.0", 0, NULL, NULL},  {1, "0000:36:00.0", 0, NULL, NULL},
    {2, "0000:39:00.0", 0, NULL, NULL},  {3, "0000:3b:00.0", 0, NULL, NULL},
    {4, "0000:57:00.0", 0, NULL, NULL},  {5, "0000:59:00.0", 0, NULL, NULL},
    {6, "0000:5c:00.0", 0, NULL, NULL},  {7, "0000:5e:00.0", 0, NULL, NULL},
    {8, "0000:b7:00.0", 1, NULL, NULL},  {9, "0000:b9:00.0", 1, NULL, NULL},
    {10, "0000:bc:00.0", 1, NULL, NULL}, {11, "0000:be:00.0", 1, NULL, NULL},
    {12, "0000:e0:00.0", 1, NULL, NULL}, {13, "0000:e2:00.0", 1, NULL, NULL},
    {14, "0000:e5:00.0", 1, NULL, NULL}, {15, "0000:e7:00.0", 1, NULL, NULL},
};

static const struct golden dgx2_cpus[] = {
    {1, "exclusive", {"0-1"}},
    {1, "numa", {"0-1"}},
    {1, "socket", {"0-1,24-25"}},
    {2, "exclusive", {"0", "1"}},
    {2, "numa", {"0-1", "0-1"}},
    {2, "socket", {"0,24", "1,25"}},
    {4, "exclusive", {"0-1", "0-1", "0-1", "0-1"}},
    {4, "numa", {"0-1", "0-1", "0-1", "0-1"}},
    {4, "socket", {"0-1,24-25", "0-1,24-25", "0-1,24-25", "0-1,24-25"}},
    {8, "exclusive", {"0-1", "0-1", "0-1", "0-1", "0-1", "0-1", "0-1", "0-1"}},
    {8, "numa", {"0-1", "0-1", "0-1", "0-1", "0-1", "0-1", "0-1", "0-1"}},
    {8, "socket",
     {"0-1,24-25", "0-1,24-25", "0-1,24-25", "0-1,24-25", "0-1,24-25",
      "0-1,24-25", "0-1,24-25", "0-1,24-25"}},
    {16, "exclusive",
     {"0-1", "0-1", "0-1", "0-1", "0-1", "0-1", "0-1", "0-1", "24-25",
      "24-25", "24-25", "24-25", "24-25", "24-25", "24-25", "24-25"}},
};

static void test_dgx2(void)
{
    check_golden(fixture("hwloc-tests/nvidiaDGX2.xml"), dgx2_place, dgx2_cpus,
                 N(dgx2_cpus));
}

static void test_dgx2_shared_cores_warn(void)
{
    amldist_topo_t *t = load(fixture("hwloc-tests/nvidiaDGX2.xml"));
    amldist_plan_t *p = plan(t, "exclusive", 4);
    CHECK_STR_HAS(amldist_plan_warnings(p),
                  "NUMA node 0 has 2 usable cores for 4 ranks");
    amldist_plan_free(p);
    p = plan(t, "exclusive", 2);
    CHECK_STR_EQ(amldist_plan_warnings(p), "");
    amldist_plan_free(p);
    amldist_topo_free(t);
}

/*
 * IBM POWER8 (power8gpudistances): NUMA 0 = cores {0,1} {8,9} {16,17}
 * {24,25}, NUMA 1 = {80,81} {88,89} {96,97} {104,105}.  P100s on host
 * bridges 0002, 0003 (NUMA 0) and 000a, 000b (NUMA 1); no NIC.  With 8
 * ranks, ranks 0, 1, 4, 5 share NUMA 0 (GPUs r % 4), one core each.
 */
static const struct place power8_place[8] = {
    {0, "0002:01:00.0", 0, NULL, NULL}, {1, "0003:01:00.0", 0, NULL, NULL},
    {2, "000a:01:00.0", 1, NULL, NULL}, {3, "000b:01:00.0", 1, NULL, NULL},
    {0, "0002:01:00.0", 0, NULL, NULL}, {1, "0003:01:00.0", 0, NULL, NULL},
    {2, "000a:01:00.0", 1, NULL, NULL}, {3, "000b:01:00.0", 1, NULL, NULL},
};

static const struct golden power8_cpus[] = {
    {1, "exclusive", {"0-1,8-9,16-17,24-25"}},
    {1, "numa", {"0-1,8-9,16-17,24-25"}},
    {1, "socket", {"0-1,8-9,16-17,24-25,80-81,88-89,96-97,104-105"}},
    {2, "exclusive", {"0-1,8-9", "16-17,24-25"}},
    {2, "numa", {"0-1,8-9,16-17,24-25", "0-1,8-9,16-17,24-25"}},
    {2, "socket", {"0-1,8-9,80-81,88-89", "16-17,24-25,96-97,104-105"}},
    {4, "exclusive", {"0-1,8-9", "16-17,24-25", "80-81,88-89", "96-97,104-105"}},
    {4, "numa",
     {"0-1,8-9,16-17,24-25", "0-1,8-9,16-17,24-25",
      "80-81,88-89,96-97,104-105", "80-81,88-89,96-97,104-105"}},
    {4, "socket", {"0-1,8-9", "16-17,24-25", "80-81,88-89", "96-97,104-105"}},
    {8, "exclusive",
     {"0-1", "8-9", "80-81", "88-89", "16-17", "24-25", "96-97", "104-105"}},
    {8, "numa",
     {"0-1,8-9,16-17,24-25", "0-1,8-9,16-17,24-25",
      "80-81,88-89,96-97,104-105", "80-81,88-89,96-97,104-105",
      "0-1,8-9,16-17,24-25", "0-1,8-9,16-17,24-25",
      "80-81,88-89,96-97,104-105", "80-81,88-89,96-97,104-105"}},
    {8, "socket",
     {"0-1", "8-9", "80-81", "88-89", "16-17", "24-25", "96-97", "104-105"}},
};

static void test_power8(void)
{
    check_golden(fixture("hwloc-tests/power8gpudistances.xml"), power8_place,
                 power8_cpus, N(power8_cpus));
}

/*
 * LLNL Lassen (POWER9): 20 allowed cores per socket, 4 PUs each: NUMA 0 =
 * PUs 8-87, NUMA 8 = PUs 96-175.  GPUs 0004:04, 0004:05 on NUMA 0 and
 * 0035:03, 0035:04 on NUMA 8; the dual-port ConnectX-5s sit on other host
 * bridges of the same sockets (NODE): mlx5_0/1 on NUMA 0, mlx5_2/3 on
 * NUMA 8, spread one per GPU, then again from the start.
 */
static const struct place lassen_place[8] = {
    {0, "0004:04:00.0", 0, "mlx5_0", "NODE"},
    {1, "0004:05:00.0", 0, "mlx5_1", "NODE"},
    {2, "0035:03:00.0", 8, "mlx5_2", "NODE"},
    {3, "0035:04:00.0", 8, "mlx5_3", "NODE"},
    {0, "0004:04:00.0", 0, "mlx5_0", "NODE"},
    {1, "0004:05:00.0", 0, "mlx5_1", "NODE"},
    {2, "0035:03:00.0", 8, "mlx5_2", "NODE"},
    {3, "0035:04:00.0", 8, "mlx5_3", "NODE"},
};

static const struct golden lassen_cpus[] = {
    {1, "exclusive", {"8-87"}},
    {1, "numa", {"8-87"}},
    {1, "socket", {"8-87,96-175"}},
    {2, "exclusive", {"8-47", "48-87"}},
    {2, "numa", {"8-87", "8-87"}},
    {2, "socket", {"8-47,96-135", "48-87,136-175"}},
    {4, "exclusive", {"8-47", "48-87", "96-135", "136-175"}},
    {4, "numa", {"8-87", "8-87", "96-175", "96-175"}},
    {4, "socket", {"8-47", "48-87", "96-135", "136-175"}},
    {8, "exclusive",
     {"8-27", "28-47", "96-115", "116-135", "48-67", "68-87", "136-155",
      "156-175"}},
    {8, "numa",
     {"8-87", "8-87", "96-175", "96-175", "8-87", "8-87", "96-175",
      "96-175"}},
    {8, "socket",
     {"8-27", "28-47", "96-115", "116-135", "48-67", "68-87", "136-155",
      "156-175"}},
    /* One L3 per core pair (8 PUs): 8-15, 16-23, ... on NUMA 0, 96-103,
     * ... on NUMA 8; a node's ranks take them in order. */
    {1, "l3", {"8-15"}},
    {1, "package", {"8-87"}},
    {2, "l3", {"8-15", "16-23"}},
    {2, "package", {"8-87", "8-87"}},
    {4, "l3", {"8-15", "16-23", "96-103", "104-111"}},
    {4, "package", {"8-87", "8-87", "96-175", "96-175"}},
    {8, "l3",
     {"8-15", "16-23", "96-103", "104-111", "24-31", "32-39", "112-119",
      "120-127"}},
    {8, "package",
     {"8-87", "8-87", "96-175", "96-175", "8-87", "8-87", "96-175",
      "96-175"}},
};

static void test_lassen(void)
{
    check_golden(fixture("mpibind/coral-lassen.xml"), lassen_place,
                 lassen_cpus, N(lassen_cpus));
}

/*
 * LLNL CTS-1 Pascal node: NUMA 0 = cores {i, i+36} for i 0-17, NUMA 1 =
 * {18+i, 54+i}.  Both P100s and the ConnectX-5 are under one PCIe switch
 * on NUMA 0 (PIX); NUMA 1 has no GPU, which only socket hands out.  18
 * cores for 4 ranks: 4 each, 2 left over; for 8 ranks: 2 each.
 */
static const struct place pascal_place[8] = {
    {0, "0000:04:00.0", 0, "mlx5_0", "PIX"},
    {1, "0000:07:00.0", 0, "mlx5_0", "PIX"},
    {0, "0000:04:00.0", 0, "mlx5_0", "PIX"},
    {1, "0000:07:00.0", 0, "mlx5_0", "PIX"},
    {0, "0000:04:00.0", 0, "mlx5_0", "PIX"},
    {1, "0000:07:00.0", 0, "mlx5_0", "PIX"},
    {0, "0000:04:00.0", 0, "mlx5_0", "PIX"},
    {1, "0000:07:00.0", 0, "mlx5_0", "PIX"},
};

#define PASCAL_N0 "0-17,36-53"
static const struct golden pascal_cpus[] = {
    {1, "exclusive", {PASCAL_N0}},
    {1, "numa", {PASCAL_N0}},
    {1, "socket", {"0-71"}},
    {2, "exclusive", {"0-8,36-44", "9-17,45-53"}},
    {2, "numa", {PASCAL_N0, PASCAL_N0}},
    {2, "socket", {"0-8,18-26,36-44,54-62", "9-17,27-35,45-53,63-71"}},
    {4, "exclusive", {"0-3,36-39", "4-7,40-43", "8-11,44-47", "12-15,48-51"}},
    {4, "numa", {PASCAL_N0, PASCAL_N0, PASCAL_N0, PASCAL_N0}},
    {4, "socket",
     {"0-3,18-21,36-39,54-57", "4-7,22-25,40-43,58-61",
      "8-11,26-29,44-47,62-65", "12-15,30-33,48-51,66-69"}},
    {8, "exclusive",
     {"0-1,36-37", "2-3,38-39", "4-5,40-41", "6-7,42-43", "8-9,44-45",
      "10-11,46-47", "12-13,48-49", "14-15,50-51"}},
    {8, "numa",
     {PASCAL_N0, PASCAL_N0, PASCAL_N0, PASCAL_N0, PASCAL_N0, PASCAL_N0,
      PASCAL_N0, PASCAL_N0}},
    {8, "socket",
     {"0-1,18-19,36-37,54-55", "2-3,20-21,38-39,56-57",
      "4-5,22-23,40-41,58-59", "6-7,24-25,42-43,60-61",
      "8-9,26-27,44-45,62-63", "10-11,28-29,46-47,64-65",
      "12-13,30-31,48-49,66-67", "14-15,32-33,50-51,68-69"}},
};

static void test_pascal(void)
{
    check_golden(fixture("mpibind/cts1-pascal.xml"), pascal_place,
                 pascal_cpus, N(pascal_cpus));
}

/*
 * HP SL390s G7 (24em64t): NUMA 0 = cores {0,12} {2,14} {4,16} {6,18}
 * {8,20} {10,22}, NUMA 1 = the odd PUs alike.  NVIDIA GPUs in bus order:
 * 06:00.0 (NUMA 0), 11:00.0 and 14:00.0 (NUMA 1); the ATI VGA is not one.
 * The only NIC, mlx4_0 (no port state in the file), is on NUMA 0 behind
 * another bridge of GPU 0's host bridge: PHB for GPU 0, SYS for the rest.
 * 8 ranks: NUMA 0 has ranks 0, 3, 6 (2 cores each), NUMA 1 has 1, 2, 4, 5,
 * 7 (1 core each, one left over).
 */
static const struct place sl390_place[8] = {
    {0, "0000:06:00.0", 0, "mlx4_0", "PHB"},
    {1, "0000:11:00.0", 1, "mlx4_0", "SYS"},
    {2, "0000:14:00.0", 1, "mlx4_0", "SYS"},
    {0, "0000:06:00.0", 0, "mlx4_0", "PHB"},
    {1, "0000:11:00.0", 1, "mlx4_0", "SYS"},
    {2, "0000:14:00.0", 1, "mlx4_0", "SYS"},
    {0, "0000:06:00.0", 0, "mlx4_0", "PHB"},
    {1, "0000:11:00.0", 1, "mlx4_0", "SYS"},
};

#define SL_N0 "0,2,4,6,8,10,12,14,16,18,20,22"
#define SL_N1 "1,3,5,7,9,11,13,15,17,19,21,23"
static const struct golden sl390_cpus[] = {
    {1, "exclusive", {SL_N0}},
    {1, "numa", {SL_N0}},
    {1, "socket", {"0-23"}},
    {2, "exclusive", {SL_N0, SL_N1}},
    {2, "numa", {SL_N0, SL_N1}},
    {2, "socket", {SL_N0, SL_N1}},
    {4, "exclusive",
     {"0,2,4,12,14,16", "1,3,5,13,15,17", "7,9,11,19,21,23",
      "6,8,10,18,20,22"}},
    {4, "numa", {SL_N0, SL_N1, SL_N1, SL_N0}},
    {4, "socket",
     {"0,2,4,12,14,16", "1,3,5,13,15,17", "7,9,11,19,21,23",
      "6,8,10,18,20,22"}},
    {8, "exclusive",
     {"0,2,12,14", "1,13", "3,15", "4,6,16,18", "5,17", "7,19", "8,10,20,22",
      "9,21"}},
    {8, "numa", {SL_N0, SL_N1, SL_N1, SL_N0, SL_N1, SL_N1, SL_N0, SL_N1}},
    {8, "socket",
     {"0,2,12,14", "1,13", "3,15", "4,6,16,18", "5,17", "7,19", "8,10,20,22",
      "9,21"}},
};

static void test_sl390(void)
{
    check_golden(fixture("hwloc-tests/24em64t-2n6c2t-pci.xml"), sl390_place,
                 sl390_cpus, N(sl390_cpus));
}

/*
 * Supermicro X9DRG-HF (32em64t): NUMA 0 = cores {i, 16+i} for i 0-7, NUMA 1
 * = {8+i, 24+i}.  Tesla 03:00.0 on NUMA 0, 83:00.0 and 84:00.0 on NUMA 1
 * (the Radeon at 84:00.1 is not a GPU).  mlx5_0 shares 84:00.0's bridge
 * (PIX), is PHB to 83:00.0 and SYS to 03:00.0.  Exported with the default
 * I/O filter and with all I/O: the same plan.
 */
static const struct place x9_place[8] = {
    {0, "0000:03:00.0", 0, "mlx5_0", "SYS"},
    {1, "0000:83:00.0", 1, "mlx5_0", "PHB"},
    {2, "0000:84:00.0", 1, "mlx5_0", "PIX"},
    {0, "0000:03:00.0", 0, "mlx5_0", "SYS"},
    {1, "0000:83:00.0", 1, "mlx5_0", "PHB"},
    {2, "0000:84:00.0", 1, "mlx5_0", "PIX"},
    {0, "0000:03:00.0", 0, "mlx5_0", "SYS"},
    {1, "0000:83:00.0", 1, "mlx5_0", "PHB"},
};

static const struct golden x9_cpus[] = {
    {1, "exclusive", {"0-7,16-23"}},
    {1, "numa", {"0-7,16-23"}},
    {1, "socket", {"0-31"}},
    {2, "exclusive", {"0-7,16-23", "8-15,24-31"}},
    {2, "numa", {"0-7,16-23", "8-15,24-31"}},
    {2, "socket", {"0-7,16-23", "8-15,24-31"}},
    {4, "exclusive", {"0-3,16-19", "8-11,24-27", "12-15,28-31", "4-7,20-23"}},
    {4, "numa", {"0-7,16-23", "8-15,24-31", "8-15,24-31", "0-7,16-23"}},
    {4, "socket", {"0-3,16-19", "8-11,24-27", "12-15,28-31", "4-7,20-23"}},
    {8, "exclusive",
     {"0-1,16-17", "8,24", "9,25", "2-3,18-19", "10,26", "11,27", "4-5,20-21",
      "12,28"}},
    {8, "numa",
     {"0-7,16-23", "8-15,24-31", "8-15,24-31", "0-7,16-23", "8-15,24-31",
      "8-15,24-31", "0-7,16-23", "8-15,24-31"}},
    {8, "socket",
     {"0-1,16-17", "8,24", "9,25", "2-3,18-19", "10,26", "11,27", "4-5,20-21",
      "12,28"}},
};

static void test_x9_wholeio(void)
{
    check_golden(fixture("hwloc-tests/32em64t-2n8c2t-pci-wholeio.xml"),
                 x9_place, x9_cpus, N(x9_cpus));
}

static void test_x9_normalio(void)
{
    check_golden(fixture("hwloc-tests/32em64t-2n8c2t-pci-normalio.xml"),
                 x9_place, x9_cpus, N(x9_cpus));
}

/*
 * Azure NDm A100 v4 (tests/topologies/azure-ndm-a100-v4.xml, written from
 * published facts): 4 NUMA nodes of 24 single-thread cores (0-23, 24-47,
 * 48-71, 72-95), two a package, an L3 for each 4 cores.  In PCI order GPUs
 * 0-1 are on NUMA 1, 2-3 on 0, 4-5 on 3, 6-7 on 2, each beside its own IB
 * NIC on the same node (NODE: separate host bridges).
 */
static const struct place ndm_place[8] = {
    {0, "0001:00:00.0", 1, "mlx5_ib0", "NODE"},
    {1, "0002:00:00.0", 1, "mlx5_ib1", "NODE"},
    {2, "0003:00:00.0", 0, "mlx5_ib2", "NODE"},
    {3, "0004:00:00.0", 0, "mlx5_ib3", "NODE"},
    {4, "000b:00:00.0", 3, "mlx5_ib4", "NODE"},
    {5, "000c:00:00.0", 3, "mlx5_ib5", "NODE"},
    {6, "000d:00:00.0", 2, "mlx5_ib6", "NODE"},
    {7, "000e:00:00.0", 2, "mlx5_ib7", "NODE"},
};

static const struct golden ndm_cpus[] = {
    {2, "l3", {"24-27", "28-31"}},
    {2, "package", {"0-47", "0-47"}},
    {2, "exclusive", {"24-35", "36-47"}},
    {8, "l3",
     {"24-27", "28-31", "0-3", "4-7", "72-75", "76-79", "48-51", "52-55"}},
    {8, "package",
     {"0-47", "0-47", "0-47", "0-47", "48-95", "48-95", "48-95", "48-95"}},
    {8, "numa",
     {"24-47", "24-47", "0-23", "0-23", "72-95", "72-95", "48-71", "48-71"}},
};

static void test_ndm_a100_v4(void)
{
    check_golden("tests/topologies/azure-ndm-a100-v4.xml", ndm_place,
                 ndm_cpus, N(ndm_cpus));
}

int main(void)
{
    test_warm(test_p4d);
    RUN(test_ndm_a100_v4);
    RUN(test_p4d);
    RUN(test_g4dn);
    RUN(test_dgx2);
    RUN(test_dgx2_shared_cores_warn);
    RUN(test_power8);
    RUN(test_lassen);
    RUN(test_pascal);
    RUN(test_sl390);
    RUN(test_x9_wholeio);
    RUN(test_x9_normalio);
    return test_summary();
}
