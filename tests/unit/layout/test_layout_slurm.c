/*
 * Slurm steps whose rank 0 is not on the first node of the sorted node list
 * (issue 22): srun -m arbitrary and heterogeneous steps.  The variables are
 * those Slurm 22.05 gave each task of the real steps in
 * tests/sh/slurm/slurm_arbitrary.sh and slurm_het.sh; the cases Slurm's
 * two-node test cluster cannot make (three nodes, a hostfile) are built
 * from them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layout_test.h"

/* srun -w n1 -n1 : -w n0 -n2: node ids in component order (n1 is node 0),
 * node list and tasks per node sorted by name. */
#define HET_STEP                                                               \
    "SLURM_JOB_ID=19101", "SLURM_STEP_ID=0", "SLURM_HET_SIZE=2",               \
        "SLURM_PACK_SIZE=2", "SLURM_NTASKS=3", "SLURM_STEP_NUM_TASKS=3",       \
        "SLURM_NNODES=2", "SLURM_STEP_NUM_NODES=2",                            \
        "SLURM_STEP_NODELIST=n[0-1]", "SLURM_STEP_TASKS_PER_NODE=2,1",         \
        "SLURM_TASKS_PER_NODE=2,1", "SLURM_DISTRIBUTION=block"

static void test_het_step(void)
{
    /* Rank 0, alone on n1. */
    amldist_t *h = layout_of(
        ENV(HET_STEP, "SLURMD_NODENAME=n1", "SLURM_GTIDS=0", "SLURM_PROCID=0",
            "SLURM_LOCALID=0", "SLURM_NODEID=0"),
        0);
    CHECK_LAYOUT(h, 0, 3, 0, 1, 0, 2);
    CHECK_STR_EQ(amldist_master_addr(h), "n1");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE),
                 "SLURM_GTIDS=0 (the step's tasks on this node)");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "this host: SLURM_GTIDS=0 on SLURMD_NODENAME=n1");
    amldist_free(h);
    /* Rank 2, the second of two on n0: the same master. */
    h = layout_of(ENV(HET_STEP, "SLURMD_NODENAME=n0", "SLURM_GTIDS=1,2",
                      "SLURM_PROCID=2", "SLURM_LOCALID=1", "SLURM_NODEID=1"),
                  0);
    CHECK_LAYOUT(h, 2, 3, 1, 2, 1, 2);
    CHECK_STR_EQ(amldist_master_addr(h), "n1");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "the other host of SLURM_STEP_NODELIST=n[0-1]");
    amldist_free(h);
}

/* Without SLURM_GTIDS: the local world size from this host's place in the
 * sorted list, never SLURM_NODEID's; the master is not known, and said. */
static void test_het_step_without_gtids(void)
{
    amldist_t *h = layout_of(
        ENV(HET_STEP, "SLURMD_NODENAME=n1", "SLURM_PROCID=0",
            "SLURM_LOCALID=0", "SLURM_NODEID=0"),
        0);
    CHECK_LAYOUT(h, 0, 3, 0, 1, 0, 2);
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE),
                 "SLURM_STEP_TASKS_PER_NODE=2,1 at SLURMD_NODENAME=n1, entry "
                 "1 of SLURM_STEP_NODELIST");
    CHECK(amldist_master_addr(h) == NULL);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "unknown: a heterogeneous step can put rank 0 on any of "
                  "the 2 hosts");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "set MASTER_ADDR");
    amldist_free(h);
    /* MASTER_ADDR then names it. */
    h = layout_of(ENV(HET_STEP, "SLURMD_NODENAME=n0", "SLURM_PROCID=1",
                      "SLURM_LOCALID=0", "SLURM_NODEID=1", "MASTER_ADDR=n1"),
                  0);
    CHECK_LAYOUT(h, 1, 3, 0, 2, 1, 2);
    CHECK_STR_EQ(amldist_master_addr(h), "n1");
    amldist_free(h);
    /* Nor this host's name: the local world size is not known either. */
    h = layout_of(ENV(HET_STEP, "SLURM_PROCID=1", "SLURM_LOCALID=0",
                      "SLURM_NODEID=1"),
                  0);
    CHECK_INT_EQ(amldist_local_world_size(h), AMLDIST_EUNKNOWN);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE),
                  "unknown: a heterogeneous step without SLURM_GTIDS");
    amldist_free(h);
}

/* srun -m arbitrary over three nodes: rank 1 on n0, rank 0 on n2. */
#define ARB_STEP                                                               \
    "SLURM_JOB_ID=77", "SLURM_STEP_ID=0", "SLURM_DISTRIBUTION=arbitrary",      \
        "SLURM_STEP_NUM_TASKS=4", "SLURM_STEP_NUM_NODES=3",                    \
        "SLURM_STEP_NODELIST=n[0-2]", "SLURM_STEP_TASKS_PER_NODE=2,1(x2)",     \
        "SLURM_PROCID=1", "SLURM_LOCALID=0", "SLURM_NODEID=0",                 \
        "SLURMD_NODENAME=n0", "SLURM_GTIDS=1,3"

static char hostfile[] = "/tmp/amldist-test-hostfile.XXXXXX";
static char hostfile_var[64];

static void write_hostfile(const char *text)
{
    FILE *f = fopen(hostfile, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    fputs(text, f);
    fclose(f);
}

static void test_arbitrary_hostfile(void)
{
    write_hostfile("# rank 0 first\n  n2 \nn0\nn1\nn0\n");
    amldist_t *h = layout_of(ENV(ARB_STEP, hostfile_var), 0);
    CHECK_LAYOUT(h, 1, 4, 0, 2, 0, 3);
    CHECK_STR_EQ(amldist_master_addr(h), "n2");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "first host of SLURM_HOSTFILE=/tmp/amldist-test-hostfile.");
    amldist_free(h);
    /* Comma-separated, with host lists, as Slurm reads it too. */
    write_hostfile("n[2,0],n1,n0\n");
    h = layout_of(ENV(ARB_STEP, hostfile_var), 0);
    CHECK_STR_EQ(amldist_master_addr(h), "n2");
    amldist_free(h);
}

/* A hostfile that puts task 0 here while Slurm did not (SLURM_GTIDS), or
 * one this node cannot read: no master rather than a wrong one. */
static void test_arbitrary_hostfile_unusable(void)
{
    write_hostfile("n0\nn1\nn2\nn0\n");
    amldist_t *h = layout_of(ENV(ARB_STEP, hostfile_var), 0);
    CHECK(amldist_master_addr(h) == NULL);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "names n0 first, but SLURM_GTIDS=1,3 on n0 says task 0 is "
                  "elsewhere");
    amldist_free(h);
    write_hostfile("\n# nothing\n");
    h = layout_of(ENV(ARB_STEP, hostfile_var), 0);
    CHECK(amldist_master_addr(h) == NULL);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "it names no host");
    amldist_free(h);
    h = layout_of(ENV(ARB_STEP, "SLURM_HOSTFILE=/nonexistent/hosts"), 0);
    CHECK(amldist_master_addr(h) == NULL);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "SLURM_HOSTFILE=/nonexistent/hosts, but this node cannot "
                  "read it: No such file or directory; set MASTER_ADDR");
    amldist_free(h);
    /* srun -w n2,n0,n1,n0: no hostfile reaches the tasks. */
    h = layout_of(ENV(ARB_STEP), AMLDIST_NO_PMIX);
    CHECK(amldist_master_addr(h) == NULL);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "srun -m arbitrary can put rank 0 on any of the 3 hosts of "
                  "SLURM_STEP_NODELIST=n[0-2], and no SLURM_HOSTFILE names "
                  "them");
    amldist_free(h);
}

/* Rank 0's own node knows it runs task 0, but on three nodes the others
 * cannot know where: every rank the same answer, so none here either. */
static void test_arbitrary_rank0_node_alike(void)
{
    amldist_t *h = layout_of(
        ENV("SLURM_JOB_ID=77", "SLURM_STEP_ID=0",
            "SLURM_DISTRIBUTION=arbitrary", "SLURM_STEP_NUM_TASKS=4",
            "SLURM_STEP_NUM_NODES=3", "SLURM_STEP_NODELIST=n[0-2]",
            "SLURM_STEP_TASKS_PER_NODE=2,1(x2)", "SLURM_PROCID=0",
            "SLURM_LOCALID=0", "SLURM_NODEID=2", "SLURMD_NODENAME=n2",
            "SLURM_GTIDS=0"),
        0);
    CHECK_LAYOUT(h, 0, 4, 0, 1, 2, 3);
    CHECK(amldist_master_addr(h) == NULL);
    amldist_free(h);
}

/* A SLURM_GTIDS that does not hold this task, or is not a list of task
 * ids of the step, is not this step's: the tasks-per-node list counts. */
static void test_gtids_not_ours(void)
{
    static const char *const bad[] = {"SLURM_GTIDS=0,2", "SLURM_GTIDS=1,,2",
                                      "SLURM_GTIDS=1,9", "SLURM_GTIDS=x",
                                      "SLURM_GTIDS="};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        amldist_t *h = layout_of(
            ENV("SLURM_JOB_ID=5", "SLURM_STEP_ID=0", "SLURM_PROCID=1",
                "SLURM_NTASKS=4", "SLURM_LOCALID=1", "SLURM_NODEID=0",
                "SLURM_NNODES=2", "SLURM_TASKS_PER_NODE=3,1",
                "SLURM_STEP_NODELIST=n[0-1]", (char *)bad[i]),
            0);
        CHECK_INT_EQ(amldist_local_world_size(h), 3);
        CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE),
                     "SLURM_TASKS_PER_NODE=3,1 at node 0");
        CHECK_STR_EQ(amldist_master_addr(h), "n0");
        amldist_free(h);
    }
}

/* One node: whatever the layout, rank 0 is there. */
static void test_one_node(void)
{
    amldist_t *h = layout_of(
        ENV("SLURM_JOB_ID=5", "SLURM_STEP_ID=0", "SLURM_DISTRIBUTION=arbitrary",
            "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=1",
            "SLURM_NODEID=0", "SLURM_NNODES=1", "SLURM_TASKS_PER_NODE=2",
            "SLURM_STEP_NODELIST=n1"),
        0);
    CHECK_STR_EQ(amldist_master_addr(h), "n1");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                 "the one host of SLURM_STEP_NODELIST=n1 (srun -m arbitrary)");
    amldist_free(h);
}

int main(void)
{
    int fd = mkstemp(hostfile);
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }
    close(fd);
    snprintf(hostfile_var, sizeof hostfile_var, "SLURM_HOSTFILE=%s", hostfile);
    RUN(test_het_step);
    RUN(test_het_step_without_gtids);
    RUN(test_arbitrary_hostfile);
    RUN(test_arbitrary_hostfile_unusable);
    RUN(test_arbitrary_rank0_node_alike);
    RUN(test_gtids_not_ours);
    RUN(test_one_node);
    unlink(hostfile);
    return test_summary();
}
