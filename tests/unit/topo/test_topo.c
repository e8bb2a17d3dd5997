/*
 * Topology discovery: which PCI devices are GPUs and NICs, their order,
 * distance classes, NUMA locality, CUDA_VISIBLE_DEVICES, and files hwloc
 * must refuse.  Expected values read off `hwloc-ls --input FILE`.
 */
#include <stdio.h>

#include "plan_golden.h"

static void test_dgx2_gpus_not_nvswitches(void)
{
    amldist_topo_t *t = load(fixture("hwloc-tests/nvidiaDGX2.xml"));
    /* 16 V100 (class 0302); the 12 NVSwitches (class 0680) are not GPUs. */
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 16);
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 0), "0000:34:00.0");
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 7), "0000:5e:00.0");
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 8), "0000:b7:00.0");
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 15), "0000:e7:00.0");
    CHECK_STR_EQ(amldist_topo_gpu_uuid(t, 0),
                 "GPU-d3977428-7a30-086b-2e20-5c1eeed647c6");
    CHECK_INT_EQ(amldist_topo_num_nics(t), 0);
    CHECK_INT_EQ(amldist_topo_num_numa(t), 2);
    CHECK_INT_EQ(amldist_topo_num_cores(t), 4);
    CHECK(amldist_topo_gpu_busid(t, 16) == NULL);
    CHECK(amldist_topo_gpu_busid(t, -1) == NULL);
    amldist_topo_free(t);
}

static void test_vendor_and_class_filter(void)
{
    /* 32em64t: three NVIDIA 3D controllers; the Radeon VGA at 84:00.1 and
     * the Matrox VGA at 05:03.0 are not NVIDIA. */
    amldist_topo_t *t =
        load(fixture("hwloc-tests/32em64t-2n8c2t-pci-wholeio.xml"));
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 3);
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 2), "0000:84:00.0");
    CHECK_INT_EQ(amldist_topo_num_nics(t), 1);
    CHECK_STR_EQ(amldist_topo_nic_name(t, 0), "mlx5_0");
    CHECK_STR_EQ(amldist_topo_gpu_uuid(t, 0), "");
    amldist_topo_free(t);
    /* 24em64t: RDMA device mlx4_0 present, so eth0/eth1/ib0 are not NICs. */
    t = load(fixture("hwloc-tests/24em64t-2n6c2t-pci.xml"));
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 3);
    CHECK_INT_EQ(amldist_topo_num_nics(t), 1);
    CHECK_STR_EQ(amldist_topo_nic_name(t, 0), "mlx4_0");
    amldist_topo_free(t);
}

static void test_netdev_fallback(void)
{
    /* Without an RDMA device the network interfaces are the NICs, in PCI
     * order: ib0 at 04:00.0, then eth0, eth1 at 81:00.0/1. */
    amldist_topo_t *t = load("tests/topologies/32em64t-no-rdma.xml");
    CHECK_INT_EQ(amldist_topo_num_nics(t), 3);
    CHECK_STR_EQ(amldist_topo_nic_name(t, 0), "ib0");
    CHECK_STR_EQ(amldist_topo_nic_name(t, 1), "eth0");
    CHECK_STR_EQ(amldist_topo_nic_name(t, 2), "eth1");
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 2, 0), AMLDIST_DIST_PIX);
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 1, 1), AMLDIST_DIST_PHB);
    amldist_topo_free(t);
}

static void test_distance_classes(void)
{
    amldist_topo_t *t = load(fixture("hwloc-tests/nvidiaDGX2.xml"));
    /* 34 and 36 below one switch; 39 under a sibling switch of the same
     * tree; 57 under another host bridge of socket 0; b7 on socket 1. */
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 0, 0), AMLDIST_DIST_X);
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 0, 1), AMLDIST_DIST_PIX);
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 0, 2), AMLDIST_DIST_PXB);
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 0, 4), AMLDIST_DIST_NODE);
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 0, 8), AMLDIST_DIST_SYS);
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 9, 8), AMLDIST_DIST_PIX);
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 0, 16), AMLDIST_EINVAL);
    amldist_topo_free(t);

    t = load(fixture("aws-ofi-nccl/p4d-topology.xml"));
    /* GPUs and EFAs hang directly off host bridges, two GPUs a bridge. */
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 0, 1), AMLDIST_DIST_PHB);
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 0, 2), AMLDIST_DIST_NODE);
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 3, 4), AMLDIST_DIST_SYS);
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 0, 0), AMLDIST_DIST_PHB);
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 0, 1), AMLDIST_DIST_NODE);
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 0, 2), AMLDIST_DIST_SYS);
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 7, 3), AMLDIST_DIST_PHB);
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 0, 4), AMLDIST_EINVAL);
    amldist_topo_free(t);

    t = load(fixture("mpibind/coral-lassen.xml"));
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 0, 1), AMLDIST_DIST_PIX);
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 0, 0), AMLDIST_DIST_NODE);
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 0, 2), AMLDIST_DIST_SYS);
    amldist_topo_free(t);

    t = load(fixture("mpibind/cts1-pascal.xml"));
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 0, 1), AMLDIST_DIST_PIX);
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 1, 0), AMLDIST_DIST_PIX);
    amldist_topo_free(t);

    t = load(fixture("hwloc-tests/32em64t-2n8c2t-pci-normalio.xml"));
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 0, 0), AMLDIST_DIST_SYS);
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 1, 0), AMLDIST_DIST_PHB);
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 2, 0), AMLDIST_DIST_PIX);
    amldist_topo_free(t);

    CHECK_STR_EQ(amldist_dist_name(AMLDIST_DIST_NODE), "NODE");
    CHECK_STR_EQ(amldist_dist_name(42), "?");
}

static void test_numa_locality(void)
{
    amldist_topo_t *t = load(fixture("mpibind/coral-lassen.xml"));
    CHECK_INT_EQ(amldist_topo_gpu_numa(t, 1), 0);
    CHECK_INT_EQ(amldist_topo_gpu_numa(t, 2), 8);
    CHECK_STR_EQ(amldist_topo_warnings(t), "");
    amldist_topo_free(t);
    t = load("tests/topologies/p4d-numa-unknown.xml");
    CHECK_INT_EQ(amldist_topo_gpu_numa(t, 5), 1);
    CHECK_INT_EQ(amldist_topo_gpu_numa(t, 6), AMLDIST_EUNKNOWN);
    CHECK_INT_EQ(amldist_topo_gpu_numa(t, 7), AMLDIST_EUNKNOWN);
    CHECK_STR_HAS(amldist_topo_warnings(t), "GPU 0000:a0:1c.0 has no known");
    /* Unknown locality is never NODE: SYS to everything off its bridge. */
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 5, 6), AMLDIST_DIST_SYS);
    CHECK_INT_EQ(amldist_topo_gpu_gpu_dist(t, 6, 7), AMLDIST_DIST_PHB);
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 6, 3), AMLDIST_DIST_PHB);
    amldist_topo_free(t);
}

/* NCCL topology files stand for their machine (test_ncclxml.c has the
 * details); a graph file, and AWS g5's without CPU masks, are refused. */
static void test_nccl_files(void)
{
    static const struct {
        const char *file;
        int gpus; /* -1: refused */
    } files[] = {
        {"nccl-topo/azure/ndv4-topo.xml", 8},
        {"nccl-topo/azure/ndv5-topo.xml", 8},
        {"nccl-topo/azure/ndv2-topo.xml", 8},
        {"nccl-topo/azure/ncv4-topo.xml", 4},
        {"nccl-topo/azure/ncv4-graph.xml", -1},
        {"nccl-topo/aws/p4d-24xl-topo.xml", 8},
        {"nccl-topo/aws/p4de-24xl-topo.xml", 8},
        {"nccl-topo/aws/p5.48xl-topo.xml", 8},
        {"nccl-topo/aws/g5.48xl-topo.xml", -1}};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        amldist_topo_t *t = (amldist_topo_t *)1;
        const char *path = fixture(files[i].file);
        int rc = amldist_topo_load(&t, path, 0);
        if (files[i].gpus < 0) {
            if (rc != AMLDIST_ETOPO || t != NULL)
                TEST__FAIL("%s: rc %d", path, rc);
            CHECK_STR_HAS(amldist_last_error(), "NCCL");
            CHECK_STR_HAS(amldist_last_error(), files[i].file);
            continue;
        }
        CHECK_INT_EQ(rc, 0);
        if (rc == 0) {
            CHECK_INT_EQ(amldist_topo_num_gpus(t), files[i].gpus);
            CHECK_STR_HAS(amldist_topo_locality(t), files[i].file);
            amldist_topo_free(t);
        }
    }
    amldist_topo_t *t = NULL;
    CHECK_INT_EQ(amldist_topo_load(&t, "/nonexistent/topo.xml", 0),
                 AMLDIST_ETOPO);
    CHECK_STR_HAS(amldist_last_error(), "/nonexistent/topo.xml");
    CHECK_INT_EQ(amldist_topo_load(NULL, NULL, 0), AMLDIST_EINVAL);
}

static void test_hwloc_xmlfile_env(void)
{
    const char *path = fixture("mpibind/cts1-pascal.xml");
    setenv("HWLOC_XMLFILE", path, 1);
    amldist_topo_t *t = NULL;
    CHECK_INT_EQ(amldist_topo_load(&t, NULL, 0), 0);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 2);
    CHECK_STR_EQ(amldist_topo_source(t), path);
    amldist_topo_free(t);
    unsetenv("HWLOC_XMLFILE");
}

static void test_visible_indices(void)
{
    amldist_topo_t *t = load(fixture("aws-ofi-nccl/p4d-topology.xml"));
    CHECK_INT_EQ(amldist_topo_set_visible(t, "4,5,6,7"), 0);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 4);
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 0), "0000:90:1c.0");
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 3), "0000:a0:1d.0");
    amldist_topo_set_visible(t, "1, 0");
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 2);
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 0), "0000:10:1d.0");
    /* CUDA stops at the first bad entry: 9 does not exist. */
    amldist_topo_set_visible(t, "0,1,9,2");
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 2);
    CHECK_STR_HAS(amldist_topo_warnings(t), "entry \"9\"");
    amldist_topo_set_visible(t, "3,3");
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 1);
    amldist_topo_set_visible(t, "");
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 0);
    amldist_topo_set_visible(t, "-1");
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 0);
    amldist_topo_set_visible(t, NULL);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 8);
    CHECK_STR_EQ(amldist_topo_warnings(t), "");
    amldist_topo_free(t);
}

static void test_visible_uuids(void)
{
    amldist_topo_t *t = load(fixture("hwloc-tests/nvidiaDGX2.xml"));
    CHECK_INT_EQ(amldist_topo_set_visible(t, "GPU-27ce06e8,GPU-d3977428"), 0);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 2);
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 0), "0000:b7:00.0");
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 1), "0000:34:00.0");
    /* "GPU-" alone matches all 16: ambiguous, so the list ends there. */
    amldist_topo_set_visible(t, "GPU-");
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 0);
    amldist_topo_free(t);
    /* p4d's file has no NVML data: UUIDs cannot be resolved. */
    t = load(fixture("aws-ofi-nccl/p4d-topology.xml"));
    amldist_topo_set_visible(t, "GPU-5bfda7ef");
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 0);
    CHECK_STR_HAS(amldist_topo_warnings(t), "gives no GPU UUIDs");
    amldist_topo_free(t);
}

static void test_visible_from_environment(void)
{
    setenv("CUDA_VISIBLE_DEVICES", "2", 1);
    amldist_topo_t *t = NULL;
    const char *path = fixture("aws-ofi-nccl/p4d-topology.xml");
    CHECK_INT_EQ(amldist_topo_load(&t, path, 0), 0);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 1);
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 0), "0000:20:1c.0");
    amldist_topo_free(t);
    CHECK_INT_EQ(amldist_topo_load(&t, path, AMLDIST_TOPO_ALL_GPUS), 0);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 8);
    amldist_topo_free(t);
    unsetenv("CUDA_VISIBLE_DEVICES");
}

static void test_matrix(void)
{
    amldist_topo_t *t = load(fixture("mpibind/cts1-pascal.xml"));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK_INT_EQ(amldist_topo_print_matrix(t, f), 0);
    fclose(f);
    CHECK_STR_HAS(text, "2 GPUs, 1 NIC, 2 NUMA nodes, 36 cores\n");
    CHECK_STR_HAS(text, "\nGPU0   X      PIX    PIX    0-17,36-53    0\n");
    CHECK_STR_HAS(text, "\nNIC0   PIX    PIX    X\n");
    CHECK_STR_HAS(text, "\nNIC0: mlx5_0  0000:08:00.0  port 1 active\n");
    free(text);
    amldist_topo_free(t);
}

static void test_this_machine(void)
{
    amldist_topo_t *t = NULL;
    unsetenv("HWLOC_XMLFILE");
    CHECK_INT_EQ(amldist_topo_load(&t, NULL, 0), 0);
    CHECK_STR_EQ(amldist_topo_source(t), "this machine");
    CHECK(amldist_topo_num_cores(t) >= 1);
    CHECK(amldist_topo_num_numa(t) >= 1);
    CHECK(amldist_topo_num_gpus(t) >= 0);
    amldist_topo_free(t);
}

int main(void)
{
    test_warm(test_distance_classes);
    RUN(test_dgx2_gpus_not_nvswitches);
    RUN(test_vendor_and_class_filter);
    RUN(test_netdev_fallback);
    RUN(test_distance_classes);
    RUN(test_numa_locality);
    RUN(test_nccl_files);
    RUN(test_hwloc_xmlfile_env);
    RUN(test_visible_indices);
    RUN(test_visible_uuids);
    RUN(test_visible_from_environment);
    RUN(test_matrix);
    RUN(test_this_machine);
    return test_summary();
}
