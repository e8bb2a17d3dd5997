/*
 * The reader of NCCL topology files (lib/topo/ncclxml.c) and the machine
 * made of one (lib/topo/ncclxml_use.c), over small files written here:
 * Linux cpumasks, the kinds of <pci> by class, nesting, <net> names, and
 * each malformed input named with its line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "topo/ncclxml.h"

static char path[64];

static void put(const char *text)
{
    snprintf(path, sizeof path, "/tmp/amldist-ncclxml-%ld.xml", (long)getpid());
    FILE *f = fopen(path, "w");
    if (f == NULL)
        TEST__FAIL("cannot create %s", path);
    fputs(text, f);
    fclose(f);
}

static char *mask_list(const char *text)
{
    static char buf[256];
    hwloc_bitmap_t s = hwloc_bitmap_alloc();
    if (amldist__nx_mask(text, s) < 0)
        snprintf(buf, sizeof buf, "bad");
    else
        hwloc_bitmap_list_snprintf(buf, sizeof buf, s);
    hwloc_bitmap_free(s);
    return buf;
}

static void test_mask(void)
{
    CHECK_STR_EQ(mask_list("00ffffff"), "0-23");
    CHECK_STR_EQ(mask_list("00000000,0000ffff,ff000000"), "24-47");
    CHECK_STR_EQ(mask_list("000000ff,ffff0000,00ffffff"), "0-23,48-71");
    CHECK_STR_EQ(mask_list("ff,00000001"), "0,32-39");
    CHECK_STR_EQ(mask_list("F0"), "4-7");
    CHECK_STR_EQ(mask_list(""), "bad");
    CHECK_STR_EQ(mask_list("0f,ff"), "bad");     /* a short inner word */
    CHECK_STR_EQ(mask_list("ff,"), "bad");
    CHECK_STR_EQ(mask_list("0x00ff"), "bad");
    CHECK_STR_EQ(mask_list("123456789"), "bad"); /* a word of 9 digits */
}

static const char p4d_like[] =
    "<!-- a comment -->\n"
    "<system version=\"1\">\n"
    "  <cpu numaid=\"1\" affinity=\"0000ff00\">\n"
    "    <pci busid=\"FFFF:FF:01.0\" class=\"0x060400\">\n"
    "      <pci busid=\"0000:10:1C.0\" class=\"0x030200\" vendor=\"0x10de\""
    " device=\"0x20b0\"/>\n"
    "      <pci busid=\"0000:10:1b.0\" class=\"0x020000\">\n"
    "        <nic><net name=\"rdmap16s27\" dev=\"0\" port=\"2\"/></nic>\n"
    "      </pci>\n"
    "    </pci>\n"
    "    <nic><net name=\"eth0\"/></nic>\n"
    "  </cpu>\n"
    "  <cpu numaid=\"0\" affinity=\"000000ff\">\n"
    "    <pci busid=\"0001:00:00.0\" class=\"0x030200\"/>\n"
    "    <pci busid=\"0101:00:00.0\" class=\"0x020700\"/>\n"
    "  </cpu>\n"
    "</system>\n";

static void test_read(void)
{
    put(p4d_like);
    struct amldist__nx *nx = NULL;
    CHECK_INT_EQ(amldist__nx_read(path, &nx), 0);
    if (nx == NULL)
        return;
    CHECK_INT_EQ(nx->ncpus, 2);
    CHECK_INT_EQ(nx->cpus[0].numaid, 1);
    CHECK_INT_EQ(nx->ndevs, 5);
    CHECK_INT_EQ(nx->ngpus, 2);
    CHECK_INT_EQ(nx->nnics, 2);
    const struct amldist__nx_dev *g = amldist__nx_find(nx, "0000:10:1c.0");
    CHECK(g != NULL);
    if (g != NULL) {
        CHECK_INT_EQ(g->kind, AMLDIST__NX_GPU);
        CHECK_STR_EQ(g->busid, "0000:10:1c.0");
        CHECK_INT_EQ(nx->cpus[g->cpu].numaid, 1);
        CHECK_INT_EQ(g->depth, 1);
        CHECK_INT_EQ(nx->devs[g->parent].kind, AMLDIST__NX_BRIDGE);
        CHECK_INT_EQ((int)g->device, 0x20b0);
    }
    const struct amldist__nx_dev *n = amldist__nx_find(nx, "0000:10:1B.0");
    CHECK(n != NULL);
    if (n != NULL) {
        CHECK_STR_EQ(n->net, "rdmap16s27");
        CHECK_INT_EQ(n->port, 2);
    }
    n = amldist__nx_find(nx, "0101:00:00.0");
    CHECK(n != NULL && n->kind == AMLDIST__NX_NIC && n->net[0] == '\0');
    CHECK_STR_HAS(nx->notes, "a NIC of NUMA node 1 has no PCI bus id");
    CHECK(amldist__nx_find(nx, "0000:99:00.0") == NULL);
    CHECK_INT_EQ(amldist__nx_sniff(path), 1);
    amldist__nx_free(nx);
    unlink(path);
}

static void test_machine(void)
{
    setenv("AMLDIST_TOPOLOGY_CACHE", "0", 1);
    unsetenv("NCCL_TOPO_FILE");
    put(p4d_like);
    amldist_topo_t *t = NULL;
    CHECK_INT_EQ(amldist_topo_load(&t, path, 0), 0);
    if (t == NULL)
        return;
    CHECK_INT_EQ(amldist_topo_num_gpus(t), 2);
    CHECK_INT_EQ(amldist_topo_num_nics(t), 2);
    CHECK_INT_EQ(amldist_topo_num_numa(t), 2);
    CHECK_INT_EQ(amldist_topo_num_cores(t), 16);
    /* PCI order: 0000:10:1c.0 (node 1) before 0001:00:00.0 (node 0). */
    CHECK_STR_EQ(amldist_topo_gpu_busid(t, 0), "0000:10:1c.0");
    CHECK_INT_EQ(amldist_topo_gpu_numa(t, 0), 1);
    CHECK_INT_EQ(amldist_topo_gpu_numa(t, 1), 0);
    CHECK_STR_EQ(amldist_topo_nic_name(t, 0), "rdmap16s27");
    CHECK_STR_EQ(amldist_topo_nic_name(t, 1), "nic@0101:00:00.0");
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 0, 0), AMLDIST_DIST_PIX);
    CHECK_INT_EQ(amldist_topo_gpu_nic_dist(t, 0, 1), AMLDIST_DIST_SYS);
    CHECK_STR_HAS(amldist_topo_locality(t), "from the NCCL topology file ");
    CHECK_STR_HAS(amldist_topo_source(t), "NCCL topology file ");
    amldist_plan_options_t o = AMLDIST_PLAN_OPTIONS_INIT;
    o.cpu_bind = AMLDIST_CPU_BIND_NUMA;
    amldist_plan_t *p = NULL;
    CHECK_INT_EQ(amldist_plan_compute(t, &o, 2, &p), 0);
    if (p != NULL) {
        CHECK_STR_EQ(amldist_plan_rank_cpus(p, 0), "8-15");
        CHECK_STR_EQ(amldist_plan_rank_cpus(p, 1), "0-7");
        CHECK_STR_EQ(amldist_plan_rank_nic(p, 0), "rdmap16s27");
    }
    amldist_plan_free(p);
    amldist_topo_free(t);
    unlink(path);
}

/* A malformed file: its error names the file, and the line when known. */
static void bad(const char *text, const char *says)
{
    put(text);
    struct amldist__nx *nx = NULL;
    CHECK_INT_EQ(amldist__nx_read(path, &nx), AMLDIST_ETOPO);
    CHECK(nx == NULL);
    CHECK_STR_HAS(amldist_last_error(), path);
    CHECK_STR_HAS(amldist_last_error(), says);
    unlink(path);
}

static void test_errors(void)
{
    bad("<system><cpu numaid=\"0\"></system>", "not well-formed XML (line 1");
    bad("", "not well-formed XML");
    bad("<graphs version=\"1\"/>", "is an NCCL graph file (NCCL_GRAPH_FILE");
    bad("<topology/>", "its root element is <topology>, not <system>");
    bad("<system/>", "has no <cpu> element");
    bad("<system>\n<cpu/>\n</system>", "line 2: <cpu> without a numaid");
    bad("<system><cpu numaid=\"x\"/></system>", "bad numaid \"x\"");
    bad("<system><cpu numaid=\"0\"/><cpu numaid=\"0\"/></system>",
        "numaid listed twice");
    bad("<system><cpu numaid=\"0\" affinity=\"zz\"/></system>",
        "bad affinity (not a Linux cpumask) \"zz\"");
    bad("<system><cpu numaid=\"0\" affinity=\"ff\"/>"
        "<cpu numaid=\"1\" affinity=\"180\"/></system>",
        "affinity overlaps");
    bad("<system><cpu numaid=\"0\"><pci busid=\"10:1c.0\"/></cpu></system>",
        "bad PCI bus id \"10:1c.0\"");
    bad("<system><cpu numaid=\"0\"><pci busid=\"0000:10:1c.0\"/>"
        "<pci busid=\"0000:10:1C.0\"/></cpu></system>",
        "PCI bus id listed twice");
    bad("<system><cpu numaid=\"0\"><pci busid=\"0000:10:1c.0\" "
        "class=\"0xzz\"/></cpu></system>",
        "bad class, vendor or device");
    /* External entities are refused, nothing fetched. */
    bad("<!DOCTYPE system [<!ENTITY e SYSTEM \"/etc/passwd\">]>"
        "<system><cpu numaid=\"&e;\"/></system>",
        "external entity");
}

static void test_no_affinity(void)
{
    /* AWS g5: switches only, no affinity: read, but no machine. */
    put("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:00:16.0\"/>"
        "</cpu></system>");
    struct amldist__nx *nx = NULL;
    CHECK_INT_EQ(amldist__nx_read(path, &nx), 0);
    if (nx != NULL) {
        CHECK_INT_EQ(nx->ngpus, 0);
        CHECK_INT_EQ(nx->devs[0].kind, AMLDIST__NX_OTHER);
        CHECK(amldist__nx_hwloc_xml(nx) == NULL);
        CHECK_STR_HAS(amldist_last_error(), "gives no CPUs (affinity) for "
                                            "NUMA node 0");
    }
    amldist__nx_free(nx);
    amldist_topo_t *t = NULL;
    CHECK_INT_EQ(amldist_topo_load(&t, path, 0), AMLDIST_ETOPO);
    CHECK(t == NULL);
    unlink(path);
}

int main(void)
{
    RUN(test_mask);
    RUN(test_read);
    RUN(test_machine);
    RUN(test_errors);
    RUN(test_no_affinity);
    return test_summary();
}
