/*
 * One process per node: a Kubeflow PyTorchJob's pod, a node count equal to
 * the world, and the workers of a per-node launcher (launch.py) under an
 * outer launcher that runs one process per node.  The real launchers are in
 * tests/sh/multinode/multinode_{kubeflow,pernode_launcher}.sh.
 */
#include "layout_test.h"

#define POD_OLD(rank)                                                          \
    "MASTER_ADDR=job-master-0", "MASTER_PORT=23456", "RANK=" #rank,            \
        "WORLD_SIZE=3", "PET_NPROC_PER_NODE=4", "PET_NNODES=3"
#define POD_NEW(rank)                                                          \
    "MASTER_ADDR=job-master-0", "MASTER_PORT=23456", "RANK=" #rank,            \
        "WORLD_SIZE=12", "PET_NPROC_PER_NODE=4", "PET_NNODES=3",               \
        "PET_NODE_RANK=" #rank

/* WORLD_SIZE counts the pods: pod 2 of 3, alone in it. */
static void test_kubeflow_pods(void)
{
    amldist_t *h = layout_of(ENV(POD_OLD(2)), 0);
    CHECK_LAYOUT(h, 2, 3, 0, 1, 2, 3);
    CHECK_STR_EQ(amldist_source(h), "env");
    CHECK_STR_EQ(amldist_master_addr(h), "job-master-0");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE),
                  "one process per pod (Kubeflow: WORLD_SIZE=3 == "
                  "PET_NNODES=3)");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                  "RANK=2, the pod's index");
    amldist_free(h);
}

/* WORLD_SIZE counts pods times nprocPerNode, RANK is still the pod's. */
static void test_kubeflow_pods_times_nproc(void)
{
    amldist_t *h = layout_of(ENV(POD_NEW(1)), 0);
    CHECK_LAYOUT(h, 1, 3, 0, 1, 1, 3);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_WORLD_SIZE),
                  "WORLD_SIZE=12 is PET_NNODES=3 * PET_NPROC_PER_NODE=4");
    amldist_free(h);
    /* nprocPerNode auto: the operator counts one per pod. */
    h = layout_of(ENV("RANK=1", "WORLD_SIZE=2", "PET_NNODES=2",
                      "PET_NPROC_PER_NODE=auto", "MASTER_ADDR=m"),
                  0);
    CHECK_LAYOUT(h, 1, 2, 0, 1, 1, 2);
    amldist_free(h);
    /* An elastic range with equal ends is that count. */
    h = layout_of(ENV("RANK=1", "WORLD_SIZE=2", "PET_NNODES=2:2",
                      "MASTER_ADDR=m"),
                  0);
    CHECK_LAYOUT(h, 1, 2, 0, 1, 1, 2);
    amldist_free(h);
}

/* What does not fit the operator's scheme is left as the variables say. */
static void test_kubeflow_not_a_pod(void)
{
    /* A real range: elastic, the count is not known yet. */
    amldist_t *h = layout_of(ENV("RANK=1", "WORLD_SIZE=2", "PET_NNODES=1:4",
                                 "MASTER_ADDR=m"),
                             0);
    CHECK_LAYOUT(h, 1, 2, -1, -1, -1, -1);
    amldist_free(h);
    /* PET_NODE_RANK other than RANK. */
    h = layout_of(ENV("RANK=1", "WORLD_SIZE=2", "PET_NNODES=2",
                      "PET_NODE_RANK=0", "MASTER_ADDR=m"),
                  0);
    CHECK_LAYOUT(h, 1, 2, -1, -1, -1, -1);
    amldist_free(h);
    /* WORLD_SIZE neither pods nor pods * nproc. */
    h = layout_of(ENV("RANK=1", "WORLD_SIZE=5", "PET_NNODES=2",
                      "PET_NPROC_PER_NODE=2", "MASTER_ADDR=m"),
                  0);
    CHECK_LAYOUT(h, 1, 5, -1, -1, -1, -1);
    amldist_free(h);
    /* A local pair given: a worker, not the pod's process. */
    h = layout_of(ENV("RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1",
                      "LOCAL_WORLD_SIZE=2", "PET_NNODES=2",
                      "PET_NPROC_PER_NODE=2", "MASTER_ADDR=m"),
                  0);
    CHECK_LAYOUT(h, 3, 4, 1, 2, -1, -1);
    amldist_free(h);
    /* torchrun's workers inherit the pod's PET_*: the marker wins. */
    h = layout_of(ENV("TORCHELASTIC_RUN_ID=j", "RANK=3", "WORLD_SIZE=4",
                      "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1",
                      "GROUP_WORLD_SIZE=2", POD_OLD(1)),
                  0);
    CHECK(h == NULL || amldist_rank(h) == 3);
    amldist_free(h);
}

/* amlrun's --nnodes (or num_nodes) equal to WORLD_SIZE: one per node. */
static void test_nodes_equal_world(void)
{
    amldist_options_t o = AMLDIST_OPTIONS_INIT;
    amldist_t *h = NULL;
    o.envp = ENV("RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=m");
    o.num_nodes = 2;
    CHECK_INT_EQ(amldist_init_opts(&h, &o), 0);
    CHECK_LAYOUT(h, 1, 2, 0, 1, 1, 2);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_LOCAL_RANK),
                  "option num_nodes=2 equals WORLD_SIZE=2 (one process per "
                  "node)");
    amldist_free(h);
    /* A node rank given must be the rank's. */
    o.node_rank = 0;
    CHECK_INT_EQ(amldist_init_opts(&h, &o), 0);
    CHECK_LAYOUT(h, 1, 2, 0, 1, 0, 2);
    amldist_free(h);
    /* Two ranks on this node and two nodes: more than the world. */
    o.node_rank = -1;
    o.envp = ENV("RANK=1", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2",
                 "MASTER_ADDR=m");
    CHECK_INT_EQ(amldist_init_opts(&h, &o), AMLDIST_ERANGE);
    CHECK(h == NULL);
    CHECK_STR_HAS(amldist_last_error(), "local world size 2 "
                                        "(LOCAL_WORLD_SIZE=2) and 2 nodes");
}

/* An MPI launcher's node index stays its own business (daemon order). */
static void test_nodes_equal_world_mpi(void)
{
    amldist_t *h = layout_of(ENV("OMPI_COMM_WORLD_RANK=1",
                                 "OMPI_COMM_WORLD_SIZE=2",
                                 "OMPI_COMM_WORLD_LOCAL_RANK=0",
                                 "OMPI_COMM_WORLD_LOCAL_SIZE=1",
                                 "OMPI_MCA_orte_num_nodes=2"),
                             AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 1, 2, 0, 1, -1, 2);
    amldist_free(h);
}

#define OUTER_ONE_PER_NODE(r, n)                                               \
    "OMPI_COMM_WORLD_RANK=" #r, "OMPI_COMM_WORLD_SIZE=" #n,                    \
        "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=1"

/* launch.py's worker without a node count from the outer launcher: its
 * numbering says 3 workers per node. */
static void test_per_node_launcher_workers(void)
{
    amldist_t *h = layout_of(ENV("RANK=4", "WORLD_SIZE=6", "LOCAL_RANK=1",
                                 OUTER_ONE_PER_NODE(1, 2)),
                             AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 4, 6, 1, 3, -1, -1);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE),
                  "WORLD_SIZE=6 / OMPI_COMM_WORLD_SIZE=2, one launcher per "
                  "node");
    amldist_free(h);
    /* Without LOCAL_RANK the rank alone must fall in the block. */
    h = layout_of(ENV("RANK=5", "WORLD_SIZE=6", OUTER_ONE_PER_NODE(1, 2)),
                  AMLDIST_NO_PMIX);
    CHECK_INT_EQ(amldist_local_world_size(h), 3);
    amldist_free(h);
}

/* Numbers that do not fit rank = outer rank * k + local rank: no guess. */
static void test_per_node_launcher_inconsistent(void)
{
    amldist_t *h = layout_of(ENV("RANK=1", "WORLD_SIZE=6", "LOCAL_RANK=1",
                                 OUTER_ONE_PER_NODE(1, 2)),
                             AMLDIST_NO_PMIX);
    CHECK_INT_EQ(amldist_local_world_size(h), AMLDIST_EUNKNOWN);
    amldist_free(h);
    h = layout_of(ENV("RANK=4", "WORLD_SIZE=6", "LOCAL_RANK=0",
                      OUTER_ONE_PER_NODE(1, 2)),
                  AMLDIST_NO_PMIX);
    CHECK_INT_EQ(amldist_local_world_size(h), AMLDIST_EUNKNOWN);
    amldist_free(h);
    /* Two outer processes on the node: each numbers its own from 0. */
    h = layout_of(ENV("RANK=4", "WORLD_SIZE=6", "LOCAL_RANK=1",
                      "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                      "OMPI_COMM_WORLD_LOCAL_RANK=1",
                      "OMPI_COMM_WORLD_LOCAL_SIZE=2"),
                  AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 4, 6, 1, -1, -1, -1);
    amldist_free(h);
}

/* The outer launcher's node and master carry over to the workers of the
 * one launcher on its node (Hydra's proxy, mpirun's node). */
static void test_per_node_launcher_outer_node(void)
{
    amldist_t *h = layout_of(
        ENV("RANK=0", "WORLD_SIZE=6", "LOCAL_RANK=0", OUTER_ONE_PER_NODE(0, 2),
            "OMPI_MCA_orte_num_nodes=2",
            "OMPI_MCA_orte_hnp_uri=183959552.0;tcp://10.231.0.10:59097",
            "OMPI_MCA_orte_local_daemon_uri=183959552.0;"
            "tcp://10.231.0.10:59097"),
        AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 0, 6, 0, 3, 0, 2);
    CHECK_STR_EQ(amldist_master_addr(h), "10.231.0.10");
    amldist_free(h);
}

int main(void)
{
    RUN(test_kubeflow_pods);
    RUN(test_kubeflow_pods_times_nproc);
    RUN(test_kubeflow_not_a_pod);
    RUN(test_nodes_equal_world);
    RUN(test_nodes_equal_world_mpi);
    RUN(test_per_node_launcher_workers);
    RUN(test_per_node_launcher_inconsistent);
    RUN(test_per_node_launcher_outer_node);
    return test_summary();
}
