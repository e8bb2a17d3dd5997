/*
 * The GPUs this process can use: a container given some GPUs sees every
 * host GPU on the PCI bus (and so in hwloc) but only its own under
 * /proc/driver/nvidia/gpus and /dev.  The driver is faked: a directory
 * standing for /proc/driver/nvidia/gpus (AMLDIST_TEST_NVIDIA_GPUS_DIR, which
 * also applies the filter to an XML topology) and one for /dev
 * (AMLDIST_TEST_DEV_DIR), next to the p4d export with 8 A100s:
 *   host GPU 0..7 = 0000:10:1c.0 10:1d.0 20:1c.0 20:1d.0 90:1c.0 90:1d.0
 *                   a0:1c.0 a0:1d.0 (NUMA 0 for the first four, 1 after).
 * The container here is given host GPUs 3 and 6.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plan_golden.h"

#define P4D "aws-ofi-nccl/p4d-topology.xml"

static char tmp[64];

static void put(const char *rel, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp, rel);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        TEST__FAIL("cannot create %s", path);
    fputs(text, f);
    fclose(f);
}

/* One GPU's directory, in the driver's format (see
 * docs/gpu-runs/2026-11-23-h100-1/machine.txt). */
static void gpu(const char *busid, int minor, const char *uuid,
                const char *excluded)
{
    char rel[128], text[512];
    snprintf(rel, sizeof rel, "%s/gpus/%s", tmp, busid);
    mkdir(rel, 0755);
    snprintf(rel, sizeof rel, "gpus/%s/information", busid);
    snprintf(text, sizeof text,
             "Model: \t\t NVIDIA A100-SXM4-40GB\n"
             "IRQ:   \t\t 41\n"
             "GPU UUID: \t %s\n"
             "Video BIOS: \t 92.00.45.00.03\n"
             "Bus Type: \t PCIe\n"
             "DMA Size: \t 47 bits\n"
             "DMA Mask: \t 0x7fffffffffff\n"
             "Bus Location: \t %s\n"
             "Device Minor: \t %d\n"
             "GPU Firmware: \t N/A\n"
             "GPU Excluded:\t %s\n",
             uuid, busid, minor, excluded);
    put(rel, text);
}

/* A container given host GPUs 3 and 6. */
static void container(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/amldist-usable.XXXXXX");
    if (mkdtemp(tmp) == NULL)
        TEST__FAIL("mkdtemp failed");
    char path[128];
    snprintf(path, sizeof path, "%s/gpus", tmp);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/dev", tmp);
    mkdir(path, 0755);
    gpu("0000:20:1d.0", 3, "GPU-33333333-aaaa-bbbb-cccc-000000000003", "No");
    gpu("0000:a0:1c.0", 6, "GPU-66666666-aaaa-bbbb-cccc-000000000006", "No");
    snprintf(path, sizeof path, "%s/gpus", tmp);
    setenv("AMLDIST_TEST_NVIDIA_GPUS_DIR", path, 1);
    snprintf(path, sizeof path, "%s/dev", tmp);
    setenv("AMLDIST_TEST_DEV_DIR", path, 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("NVIDIA_VISIBLE_DEVICES");
    unsetenv("HWLOC_XMLFILE");
}

static void cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK_INT_EQ(system(cmd), 0);
}

static amldist_topo_t *load_env(const char *rel)
{
    amldist_topo_t *t = NULL;
    if (amldist_topo_load(&t, fixture(rel), 0) != 0)
        TEST__FAIL("amldist_topo_load(%s): %s", rel, amldist_last_error());
    return t;
}

/* test_warm()'s: a fixture loaded and planned, nothing set or made. */
static void warm_load(void)
{
    amldist_topo_t *t = load_env(P4D);
    if (t) {
        amldist_plan_free(plan(t, "exclusive", 4));
        amldist_topo_free(t);
    }
}

static void test_subset_listed(void)
{
    container();
    amldist_topo_t *t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_pci_gpus(t), 8);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 2);
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 0), "0000:20:1d.0");
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 1), "0000:a0:1c.0");
    CHECK_INT_EQ(amldist_topo_gpu_numa(t, 0), 0);
    CHECK_INT_EQ(amldist_topo_gpu_numa(t, 1), 1);
    /* The file has no NVML data: the UUIDs come from the driver's files. */
    CHECK_STR_EQ(amldist_topo_gpu_uuid(t, 1),
                 "GPU-66666666-aaaa-bbbb-cccc-000000000006");
    const char *note = amldist_topo_gpu_note(t);
    CHECK_STR_HAS(note, "8 NVIDIA GPUs on the PCI bus, 2 usable by this "
                        "process (");
    CHECK_STR_HAS(note, "/gpus lists only 0000:20:1d.0, 0000:a0:1c.0, as in "
                        "a container given some GPUs)");
    CHECK_STR_HAS(amldist_topo_warnings(t), "2 usable by this process");
    /* Every rank lands on a usable GPU, next to its NUMA node. */
    amldist_plan_t *p = plan(t, "exclusive", 4);
    CHECK_STR_EQ(amldist_plan_rank_gpu_busid(p, 0), "0000:20:1d.0");
    CHECK_STR_EQ(amldist_plan_rank_gpu_busid(p, 1), "0000:a0:1c.0");
    CHECK_STR_EQ(amldist_plan_rank_gpu_busid(p, 2), "0000:20:1d.0");
    CHECK_INT_EQ(amldist_plan_rank_numa(p, 1), 1);
    amldist_plan_free(p);
    amldist_topo_free(t);
    /* AMLDIST_TOPO_ALL_GPUS ignores CUDA_VISIBLE_DEVICES, not the driver. */
    setenv("CUDA_VISIBLE_DEVICES", "0", 1);
    t = load(fixture(P4D));
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 2);
    amldist_topo_free(t);
    cleanup();
}

static void test_cuda_visible_indexes_usable(void)
{
    container();
    /* Index 1 is the second usable GPU (host GPU 6), not host GPU 1. */
    setenv("CUDA_VISIBLE_DEVICES", "1", 1);
    amldist_topo_t *t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 1);
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 0), "0000:a0:1c.0");
    CHECK_STR_HAS(amldist_topo_gpu_note(t),
                  "; CUDA_VISIBLE_DEVICES=1 selects 1 of them");
    /* --gpu-bind single names it as the inherited list did. */
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    amldist_plan_t *p = NULL;
    CHECK_INT_EQ(amldist_plan_options_set(&o, "gpu-bind", "single"), 0);
    CHECK_INT_EQ(amldist_plan_compute(t, &o, 1, &p), 0);
    char **env = NULL;
    CHECK_INT_EQ(amldist_plan_rank_env(p, 0, &env), 0);
    int found = 0;
    for (char **e = env; e != NULL && *e != NULL; e++) {
        found += strcmp(*e, "CUDA_VISIBLE_DEVICES=1") == 0;
        found += strcmp(*e, "AMLDIST_GPU=0000:a0:1c.0") == 0;
        free(*e);
    }
    free(env);
    CHECK_INT_EQ(found, 2);
    amldist_plan_free(p);
    /* Host index 3 is past the usable list: CUDA would stop there. */
    amldist_topo_set_visible(t, "0,3");
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 1);
    CHECK_STR_HAS(amldist_topo_warnings(t),
                  "entry \"3\" names no GPU of the 2 this process can use "
                  "(of 8 on the PCI bus)");
    amldist_topo_set_visible(t, "GPU-3333");
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 1);
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 0), "0000:20:1d.0");
    amldist_topo_set_visible(t, NULL);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 2);
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 1), "0000:a0:1c.0");
    amldist_topo_free(t);
    cleanup();
}

static void test_nvidia_visible_devices_none(void)
{
    container();
    setenv("NVIDIA_VISIBLE_DEVICES", "none", 1);
    amldist_topo_t *t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 0);
    CHECK_INT_EQ(amldist_topo_num_pci_gpus(t), 8);
    CHECK_STR_EQ(amldist_topo_gpu_note(t),
                 "8 NVIDIA GPUs on the PCI bus, none usable by this process "
                 "(NVIDIA_VISIBLE_DEVICES=none)");
    amldist_plan_t *p = plan(t, "exclusive", 2);
    CHECK_INT_EQ(amldist_plan_rank_gpu(p, 0), AMLDIST_EUNKNOWN);
    amldist_plan_free(p);
    amldist_topo_free(t);
    setenv("NVIDIA_VISIBLE_DEVICES", "void", 1);
    t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 0);
    amldist_topo_free(t);
    /* A list is the runtime's request, already applied to the proc
     * directory: it is only named in the explanation. */
    setenv("NVIDIA_VISIBLE_DEVICES", "3,6", 1);
    t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 2);
    CHECK_STR_HAS(amldist_topo_gpu_note(t), "; NVIDIA_VISIBLE_DEVICES=3,6");
    amldist_topo_free(t);
    cleanup();
}

static void test_device_nodes(void)
{
    container();
    /* No nvidiactl: the nodes may not be created yet, so not checked. */
    amldist_topo_t *t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 2);
    amldist_topo_free(t);
    /* With it, a GPU whose node is missing cannot be opened. */
    put("dev/nvidiactl", "");
    put("dev/nvidia3", "");
    t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 1);
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 0), "0000:20:1d.0");
    CHECK_STR_HAS(amldist_topo_gpu_note(t),
                  "1 usable by this process (");
    CHECK_STR_HAS(amldist_topo_gpu_note(t),
                  "/dev has no device node for 0000:a0:1c.0 (nvidia6)");
    amldist_topo_free(t);
    put("dev/nvidia6", "");
    t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 2);
    amldist_topo_free(t);
    cleanup();
}

static void test_excluded_by_driver(void)
{
    container();
    gpu("0000:a0:1c.0", 6, "GPU-66666666-aaaa-bbbb-cccc-000000000006",
        "Yes");
    amldist_topo_t *t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 1);
    CHECK_STR_HAS(amldist_topo_gpu_note(t),
                  "the driver excludes 0000:a0:1c.0");
    amldist_topo_free(t);
    cleanup();
}

static void test_every_gpu_listed(void)
{
    container();
    static const char *const rest[] = {"0000:10:1c.0", "0000:10:1d.0",
                                       "0000:20:1c.0", "0000:90:1c.0",
                                       "0000:90:1d.0", "0000:a0:1d.0"};
    for (size_t i = 0; i < sizeof rest / sizeof *rest; i++)
        gpu(rest[i], (int)i + 10, "GPU-00000000", "No");
    amldist_topo_t *t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 8);
    CHECK_STR_HAS(amldist_topo_gpu_note(t),
                  "8 NVIDIA GPUs on the PCI bus, all usable (");
    CHECK_STR_EQ(amldist_topo_warnings(t), "");
    amldist_topo_free(t);
    cleanup();
}

static void test_no_driver(void)
{
    /* No proc directory (no driver, as on the test machines): every GPU on
     * the bus counts, as before. */
    setenv("AMLDIST_TEST_NVIDIA_GPUS_DIR", "/nonexistent/gpus", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    amldist_topo_t *t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 8);
    CHECK_STR_EQ(amldist_topo_gpu_note(t),
                 "8 NVIDIA GPUs on the PCI bus, all counted (no "
                 "/nonexistent/gpus: the NVIDIA driver is not loaded)");
    amldist_topo_free(t);
    /* Without the test variable an XML file keeps its GPUs: this process's
     * driver says nothing about that machine. */
    unsetenv("AMLDIST_TEST_NVIDIA_GPUS_DIR");
    setenv("NVIDIA_VISIBLE_DEVICES", "none", 1);
    t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 8);
    char want[1200];
    snprintf(want, sizeof want, "8 NVIDIA GPUs in %s", fixture(P4D));
    CHECK_STR_EQ(amldist_topo_gpu_note(t), want);
    amldist_topo_free(t);
    t = load_env("hwloc-tests/nvidiaDGX2.xml");
    amldist_topo_set_visible(t, "15");
    snprintf(want, sizeof want, "16 NVIDIA GPUs in %s; "
             "CUDA_VISIBLE_DEVICES=15 selects 1 of them",
             fixture("hwloc-tests/nvidiaDGX2.xml"));
    CHECK_STR_EQ(amldist_topo_gpu_note(t), want);
    amldist_topo_free(t);
}

static void test_mig(void)
{
    container();
    /* A container given one GPU: its MIG instances are on that GPU, one
     * CUDA device each. */
    char path[128];
    snprintf(path, sizeof path, "rm -rf %s/gpus/0000:a0:1c.0", tmp);
    CHECK_INT_EQ(system(path), 0);
    setenv("CUDA_VISIBLE_DEVICES", "MIG-aaaa,MIG-bbbb,MIG-cccc", 1);
    amldist_topo_t *t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 3);
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 2), "0000:20:1d.0");
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    amldist_plan_t *p = NULL;
    CHECK_INT_EQ(amldist_plan_options_set(&o, "gpu-bind", "single"), 0);
    CHECK_INT_EQ(amldist_plan_compute(t, &o, 3, &p), 0);
    char **env = NULL;
    CHECK_INT_EQ(amldist_plan_rank_env(p, 2, &env), 0);
    int found = 0;
    for (char **e = env; e != NULL && *e != NULL; e++) {
        found += strcmp(*e, "CUDA_VISIBLE_DEVICES=MIG-cccc") == 0;
        free(*e);
    }
    free(env);
    CHECK_INT_EQ(found, 1);
    amldist_plan_free(p);
    amldist_topo_free(t);
    /* With several GPUs usable the parent of each is unknown. */
    gpu("0000:a0:1c.0", 6, "GPU-66666666", "No");
    t = load_env(P4D);
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 0);
    CHECK_STR_HAS(amldist_topo_warnings(t), "names MIG instances and 2 GPUs "
                                            "are usable");
    amldist_topo_free(t);
    cleanup();
}

int main(void)
{
    test_warm(warm_load);
    RUN(test_subset_listed);
    RUN(test_cuda_visible_indexes_usable);
    RUN(test_nvidia_visible_devices_none);
    RUN(test_device_nodes);
    RUN(test_excluded_by_driver);
    RUN(test_every_gpu_listed);
    RUN(test_no_driver);
    RUN(test_mig);
    return test_summary();
}
