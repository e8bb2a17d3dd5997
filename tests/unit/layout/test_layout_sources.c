/* Each source on its own: what it reads, and how it explains it. */
#include "layout_test.h"

static void test_nothing_at_all(void)
{
    amldist_t *h = layout_of(ENV("HOME=/root", "PATH=/bin"), 0);
    CHECK_LAYOUT(h, 0, 1, 0, 1, 0, 1);
    CHECK_STR_EQ(amldist_source(h), "default");
    CHECK_STR_EQ(amldist_master_addr(h), "127.0.0.1");
    CHECK_INT_EQ(amldist_master_port(h), 29500);
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_RANK),
                 "default (single process)");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "default (single process)");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_PORT), "29500");
    amldist_free(h);
}

static void test_nothing_but_master_port(void)
{
    amldist_t *h = layout_of(ENV("MASTER_PORT=1234"), 0);
    CHECK_INT_EQ(amldist_master_port(h), 1234);
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_MASTER_PORT),
                 "MASTER_PORT=1234");
    amldist_free(h);
}

static void test_canonical_full(void)
{
    amldist_t *h = layout_of(ENV("RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=1",
                                 "LOCAL_WORLD_SIZE=2", "NODE_RANK=1",
                                 "MASTER_ADDR=10.0.0.1", "MASTER_PORT=1234"),
                             0);
    CHECK_LAYOUT(h, 3, 8, 1, 2, 1, -1);
    CHECK_STR_EQ(amldist_source(h), "env");
    CHECK_STR_EQ(amldist_master_addr(h), "10.0.0.1");
    CHECK_INT_EQ(amldist_master_port(h), 1234);
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_RANK), "RANK=3");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_NODE_RANK), "NODE_RANK=1");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                 "MASTER_ADDR=10.0.0.1");
    /* Unknown values say so, and the getter's message explains. */
    CHECK_INT_EQ(amldist_num_nodes(h), AMLDIST_EUNKNOWN);
    CHECK_STR_HAS(amldist_last_error(), "unknown");
    amldist_free(h);
}

/* A Kubernetes PyTorchJob: one process per pod, no local variables. */
static void test_canonical_kubernetes(void)
{
    amldist_t *h = layout_of(ENV("RANK=2", "WORLD_SIZE=4",
                                 "MASTER_ADDR=job-master-0",
                                 "MASTER_PORT=23456"),
                             0);
    CHECK_LAYOUT(h, 2, 4, -1, -1, -1, -1);
    CHECK_STR_EQ(amldist_master_addr(h), "job-master-0");
    CHECK_INT_EQ(amldist_master_port(h), 23456);
    amldist_free(h);
}

static void test_canonical_ipv6_master(void)
{
    amldist_t *h = layout_of(ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=fd00::1"),
                             0);
    CHECK_STR_EQ(amldist_master_addr(h), "fd00::1");
    amldist_free(h);
}

static void test_canonical_one_process(void)
{
    amldist_t *h = layout_of(ENV("RANK=0", "WORLD_SIZE=1"), 0);
    CHECK_LAYOUT(h, 0, 1, 0, 1, 0, 1);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_LOCAL_RANK),
                  "derived: WORLD_SIZE=1");
    CHECK_STR_EQ(amldist_master_addr(h), "127.0.0.1");
    amldist_free(h);
}

static void test_torchrun(void)
{
    amldist_t *h = layout_of(ENV("RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1",
                                 "LOCAL_WORLD_SIZE=4", "GROUP_RANK=1",
                                 "ROLE_RANK=5", "TORCHELASTIC_RUN_ID=none",
                                 "MASTER_ADDR=node0", "MASTER_PORT=29400"),
                             0);
    CHECK_LAYOUT(h, 5, 8, 1, 4, 1, 2);
    CHECK_STR_EQ(amldist_source(h), "torchrun");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_NODE_RANK), "GROUP_RANK=1");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NUM_NODES),
                  "derived: WORLD_SIZE=8 / LOCAL_WORLD_SIZE=4");
    amldist_free(h);
    h = layout_of(ENV("RANK=5", "WORLD_SIZE=8", "GROUP_RANK=1",
                      "GROUP_WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=x"),
                  0);
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_NUM_NODES),
                 "GROUP_WORLD_SIZE=2");
    amldist_free(h);
}

static void test_amlrun_marker(void)
{
    amldist_t *h = layout_of(ENV("AMLDIST_LAUNCHER=amlrun", "RANK=1",
                                 "WORLD_SIZE=2", "LOCAL_RANK=1",
                                 "LOCAL_WORLD_SIZE=2", "NODE_RANK=0",
                                 "GROUP_WORLD_SIZE=1", "MASTER_ADDR=127.0.0.1",
                                 "MASTER_PORT=29500"),
                             0);
    CHECK_LAYOUT(h, 1, 2, 1, 2, 0, 1);
    CHECK_STR_EQ(amldist_source(h), "amlrun");
    amldist_free(h);
}

static void test_ompi_one_node(void)
{
    amldist_t *h = layout_of(ENV("OMPI_COMM_WORLD_RANK=2",
                                 "OMPI_COMM_WORLD_SIZE=4",
                                 "OMPI_COMM_WORLD_LOCAL_RANK=2",
                                 "OMPI_COMM_WORLD_LOCAL_SIZE=4",
                                 "OMPI_COMM_WORLD_NODE_RANK=2"),
                             0);
    CHECK_LAYOUT(h, 2, 4, 2, 4, 0, 1);
    CHECK_STR_EQ(amldist_source(h), "ompi");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_RANK),
                 "OMPI_COMM_WORLD_RANK=2");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK), "one node");
    CHECK_STR_EQ(amldist_master_addr(h), "127.0.0.1");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR), "single node");
    amldist_free(h);
}

/* Open MPI on two nodes: no variable holds the node index, and without the
 * PMIx server it stays unknown rather than RANK / LOCAL_SIZE. */
static void test_ompi_two_nodes_no_pmix(void)
{
    amldist_t *h = layout_of(ENV("OMPI_COMM_WORLD_RANK=5",
                                 "OMPI_COMM_WORLD_SIZE=8",
                                 "OMPI_COMM_WORLD_LOCAL_RANK=2",
                                 "OMPI_COMM_WORLD_LOCAL_SIZE=4",
                                 "OMPI_COMM_WORLD_NODE_RANK=2",
                                 "OMPI_MCA_orte_num_nodes=2"),
                             AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 5, 8, 2, 4, -1, 2);
    CHECK_INT_EQ(amldist_node_rank(h), AMLDIST_EUNKNOWN);
    CHECK_STR_HAS(amldist_last_error(), "OMPI_COMM_WORLD_NODE_RANK is not");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                  "AMLDIST_NO_PMIX");
    CHECK(amldist_master_addr(h) == NULL);
    CHECK_STR_HAS(amldist_last_error(), "unknown");
    amldist_free(h);
    /* The same through the environment variable. */
    h = layout_of(ENV("OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8",
                      "OMPI_COMM_WORLD_LOCAL_RANK=2",
                      "OMPI_COMM_WORLD_LOCAL_SIZE=4", "AMLDIST_NO_PMIX=1"),
                  0);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                  "AMLDIST_NO_PMIX");
    amldist_free(h);
}

/* PMIX_* in the array but not in this process's environment: the server
 * is not ours to ask. */
static void test_ompi_pmix_not_ours(void)
{
    unsetenv("PMIX_NAMESPACE");
    amldist_t *h = layout_of(ENV("OMPI_COMM_WORLD_RANK=5",
                                 "OMPI_COMM_WORLD_SIZE=8",
                                 "OMPI_COMM_WORLD_LOCAL_RANK=1",
                                 "OMPI_COMM_WORLD_LOCAL_SIZE=4",
                                 "PMIX_NAMESPACE=123", "PMIX_RANK=5"),
                             0);
    CHECK_INT_EQ(amldist_node_rank(h), AMLDIST_EUNKNOWN);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                  "no PMIx server");
    amldist_free(h);
}

/* The variables Open MPI 4.1 gave rank R of `mpirun --host` on namespace
 * nodes (tests/sh/ompi_noderank.sh runs the real thing): daemon 0 is
 * mpirun, DAEMONS counts them all, only remote daemons' ranks see it. */
#define OMPI_2X2(R, LR)                                                        \
    "OMPI_COMM_WORLD_RANK=" #R, "OMPI_COMM_WORLD_SIZE=4",                     \
        "OMPI_COMM_WORLD_LOCAL_RANK=" #LR, "OMPI_COMM_WORLD_LOCAL_SIZE=2",    \
        "OMPI_MCA_orte_num_nodes=2",                                           \
        "OMPI_MCA_orte_hnp_uri=183959552.0;tcp://10.231.0.10:59097"
#define DAEMON(V) "OMPI_MCA_orte_local_daemon_uri=183959552." #V             \
                  ";tcp://10.231.0.11:59033"

static void check_node(amldist_t *h, int node, const char *why)
{
    CHECK(h != NULL);
    if (h == NULL)
        return;
    CHECK_INT_EQ(amldist_node_rank(h), node);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK), why);
    amldist_free(h);
}

/* mpirun's node runs ranks: its daemon is mpirun, node 0, whatever the
 * mapping (rank 2 under --map-by node lives there too). */
static void test_ompi_daemon_is_mpirun(void)
{
    check_node(layout_of(ENV(OMPI_2X2(2, 1),
                             "OMPI_MCA_orte_local_daemon_uri=183959552.0;"
                             "tcp://10.231.0.10:59097"),
                         AMLDIST_NO_PMIX),
               0, "is mpirun's");
}

/* Every daemon runs ranks (2 daemons, 2 nodes): the daemon is the node,
 * by slot (rank 2) and by node (rank 1) alike. */
static void test_ompi_daemon_every_node(void)
{
    check_node(layout_of(ENV(OMPI_2X2(2, 0), DAEMON(1),
                             "OMPI_MCA_ess_base_num_procs=2"),
                         AMLDIST_NO_PMIX),
               1, "daemon 1 (OMPI_MCA_orte_local_daemon_uri) of "
                  "OMPI_MCA_ess_base_num_procs=2");
    check_node(layout_of(ENV(OMPI_2X2(1, 0), DAEMON(1),
                             "OMPI_MCA_ess_base_num_procs=2"),
                         AMLDIST_NO_PMIX),
               1, "OMPI_MCA_orte_num_nodes=2");
    /* mpirun's node runs ranks, rank 0 among them: mpirun's one address is
     * the master. */
    amldist_t *h = layout_of(ENV(OMPI_2X2(2, 0), DAEMON(1),
                                 "OMPI_MCA_ess_base_num_procs=2"),
                             AMLDIST_NO_PMIX);
    CHECK_STR_EQ(amldist_master_addr(h), "10.231.0.10");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "mpirun's node, which runs rank 0");
    amldist_free(h);
    /* Several addresses: the first may be one the nodes cannot reach. */
    h = layout_of(ENV("OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4",
                      "OMPI_COMM_WORLD_LOCAL_RANK=0",
                      "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                      "OMPI_MCA_orte_num_nodes=2", DAEMON(1),
                      "OMPI_MCA_ess_base_num_procs=2",
                      "OMPI_MCA_orte_hnp_uri=183959552.0;"
                      "tcp://172.17.0.1,10.231.0.10:59097"),
                  AMLDIST_NO_PMIX);
    CHECK_INT_EQ(amldist_node_rank(h), 1);
    CHECK(amldist_master_addr(h) == NULL);
    amldist_free(h);
}

/* mpirun on a head node without ranks, or a --host entry left idle: 3
 * daemons for 2 nodes.  Daemon 1 is node 0 or 1, and the variables are the
 * same in both cases: unknown, said so.  The last daemon can only be the
 * last node.  Under --novm only mpirun's daemon can be idle. */
static void test_ompi_daemon_idle(void)
{
    amldist_t *h = layout_of(ENV(OMPI_2X2(0, 0), DAEMON(1),
                                 "OMPI_MCA_ess_base_num_procs=3"),
                             AMLDIST_NO_PMIX);
    CHECK_INT_EQ(amldist_node_rank(h), AMLDIST_EUNKNOWN);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                  "daemon 1 of OMPI_MCA_ess_base_num_procs=3 for 2 nodes: 1 "
                  "idle may lie below it (mpirun --novm tells)");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                  "AMLDIST_NO_PMIX");
    /* mpirun's node may run no rank: not the master. */
    CHECK(amldist_master_addr(h) == NULL);
    amldist_free(h);
    check_node(layout_of(ENV(OMPI_2X2(1, 0), DAEMON(2),
                             "OMPI_MCA_ess_base_num_procs=3"),
                         AMLDIST_NO_PMIX),
               1, "daemon 2");
    check_node(layout_of(ENV(OMPI_2X2(0, 0), DAEMON(1),
                             "OMPI_MCA_ess_base_num_procs=3",
                             "OMPI_MCA_orte_no_vm=1"),
                         AMLDIST_NO_PMIX),
               0, "OMPI_MCA_orte_no_vm=1");
    check_node(layout_of(ENV(OMPI_2X2(1, 0), DAEMON(2),
                             "OMPI_MCA_ess_base_num_procs=3",
                             "OMPI_MCA_orte_no_vm=1"),
                         AMLDIST_NO_PMIX),
               1, "OMPI_MCA_orte_no_vm=1");
    /* Two idle daemons under --novm cannot happen: not believed. */
    h = layout_of(ENV(OMPI_2X2(1, 0), DAEMON(2),
                      "OMPI_MCA_ess_base_num_procs=4", "OMPI_MCA_orte_no_vm=1"),
                  AMLDIST_NO_PMIX);
    CHECK_INT_EQ(amldist_node_rank(h), AMLDIST_EUNKNOWN);
    amldist_free(h);
}

/* Daemon variables that do not add up leave the node rank unknown (they
 * are Open MPI's internals, not the user's: no error). */
static void test_ompi_daemon_nonsense(void)
{
    static const char *const bad[][2] = {
        {DAEMON(1), "OMPI_MCA_ess_base_num_procs=1"},  /* fewer than nodes */
        {DAEMON(5), "OMPI_MCA_ess_base_num_procs=3"},  /* beyond the count */
        {DAEMON(1), "OMPI_MCA_ess_base_num_procs=x"},  /* not a number */
        {DAEMON(1), "HOME=/"},                         /* count missing */
        {"OMPI_MCA_orte_local_daemon_uri=7.1;tcp://x", /* another mpirun */
         "OMPI_MCA_ess_base_num_procs=2"},
        {"OMPI_MCA_orte_local_daemon_uri=183959552.-1;tcp://x",
         "OMPI_MCA_ess_base_num_procs=2"},
        {"OMPI_MCA_orte_local_daemon_uri=183959552.1", /* no contact */
         "OMPI_MCA_ess_base_num_procs=2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        amldist_t *h = layout_of(ENV(OMPI_2X2(2, 0), (char *)bad[i][0],
                                     (char *)bad[i][1]),
                                 AMLDIST_NO_PMIX);
        CHECK(h != NULL);
        if (h == NULL)
            continue;
        CHECK_INT_EQ(amldist_node_rank(h), AMLDIST_EUNKNOWN);
        CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK), "unknown");
        amldist_free(h);
    }
}

static char *const ompi8[] = {
    "OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8",
    "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=4", NULL};

static amldist_t *ompi8_with(const char *a, const char *b)
{
    char *env[8];
    int n = 0;
    for (; ompi8[n] != NULL; n++)
        env[n] = ompi8[n];
    env[n++] = (char *)a;
    if (b != NULL)
        env[n++] = (char *)b;
    env[n] = NULL;
    return layout_of(env, AMLDIST_NO_PMIX);
}

static void test_azureml_multi_node(void)
{
    amldist_t *h = ompi8_with("AZ_BATCH_MASTER_NODE=10.0.0.4:6000", NULL);
    CHECK_STR_EQ(amldist_master_addr(h), "10.0.0.4");
    CHECK_INT_EQ(amldist_master_port(h), 6105);
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                 "AZ_BATCH_MASTER_NODE=10.0.0.4:6000");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_PORT), "6105");
    CHECK_STR_EQ(amldist_source(h), "ompi");
    amldist_free(h);
}

static void test_azureml_keeps_master_port(void)
{
    amldist_t *h = ompi8_with("AZ_BATCH_MASTER_NODE=10.0.0.4:6000",
                              "MASTER_PORT=7000");
    CHECK_INT_EQ(amldist_master_port(h), 7000);
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_MASTER_PORT),
                 "MASTER_PORT=7000");
    amldist_free(h);
}

static void test_azureml_ipv6(void)
{
    amldist_t *h = ompi8_with("AZ_BATCH_MASTER_NODE=[fd00::4]:6000", NULL);
    CHECK_STR_EQ(amldist_master_addr(h), "fd00::4");
    amldist_free(h);
}

static void test_azureml_single_node(void)
{
    char *const env[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                         "OMPI_COMM_WORLD_LOCAL_RANK=1",
                         "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                         "AZ_BATCHAI_MPI_MASTER_NODE=10.0.0.5",
                         "AZ_BATCH_MASTER_NODE=10.0.0.4:6000", NULL};
    amldist_t *h = layout_of(env, 0);
    CHECK_STR_EQ(amldist_master_addr(h), "10.0.0.5");
    CHECK_INT_EQ(amldist_master_port(h), 54965);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "AZ_BATCHAI_MPI_MASTER_NODE=10.0.0.5");
    amldist_free(h);
    /* Unlike aml_mpienv.py, a MASTER_PORT that is set is kept here too. */
    char *const env2[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                          "OMPI_COMM_WORLD_LOCAL_RANK=1",
                          "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                          "AZ_BATCHAI_MPI_MASTER_NODE=10.0.0.5",
                          "MASTER_PORT=7000", NULL};
    h = layout_of(env2, 0);
    CHECK_INT_EQ(amldist_master_port(h), 7000);
    amldist_free(h);
}

/* Only one of the two Azure variables: it stands in for the other. */
static void test_azureml_fallbacks(void)
{
    amldist_t *h = ompi8_with("AZ_BATCHAI_MPI_MASTER_NODE=head", NULL);
    CHECK_STR_EQ(amldist_master_addr(h), "head");
    CHECK_INT_EQ(amldist_master_port(h), 6105);
    amldist_free(h);
}

/* A MASTER_ADDR already set wins over Azure's (aml_mpienv.py overwrites). */
static void test_master_addr_over_azureml(void)
{
    amldist_t *h = ompi8_with("AZ_BATCH_MASTER_NODE=10.0.0.4:6000",
                              "MASTER_ADDR=10.9.9.9");
    CHECK_STR_EQ(amldist_master_addr(h), "10.9.9.9");
    amldist_free(h);
}

static void test_mpich_intel(void)
{
    amldist_t *h = layout_of(ENV("PMI_RANK=3", "PMI_SIZE=4",
                                 "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2",
                                 "PMI_FD=5"),
                             0);
    CHECK_LAYOUT(h, 3, 4, 1, 2, -1, -1);
    CHECK_STR_EQ(amldist_source(h), "mpich");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_LOCAL_RANK),
                 "MPI_LOCALRANKID=1");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK), "MPICH");
    amldist_free(h);
    h = layout_of(ENV("PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1",
                      "MPI_LOCALNRANKS=2"),
                  0);
    CHECK_LAYOUT(h, 1, 2, 1, 2, 0, 1);
    amldist_free(h);
}

/* Hydra's variables in an array that is not this process's environment:
 * no proxy is looked for (its node index would be another process's), and
 * the explanation says where the node index would have come from. */
static void test_mpich_not_ours(void)
{
    amldist_t *h = layout_of(ENV("PMI_RANK=2", "PMI_SIZE=4",
                                 "MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=2",
                                 "PMI_FD=7"),
                             0);
    CHECK_LAYOUT(h, 2, 4, 0, 2, -1, -1);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                  "no Hydra proxy (hydra_pmi_proxy --proxy-id)");
    amldist_free(h);
    /* Per-node: one amlrun per node (MPI_LOCALNRANKS=1) is node PMI_RANK. */
    h = layout_of(ENV("PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=0",
                      "MPI_LOCALNRANKS=1"),
                  AMLDIST_ONE_PER_NODE);
    CHECK_LAYOUT(h, 1, 2, 0, 1, 1, 2);
    amldist_free(h);
    /* Malformed or half-missing variables fail, naming them. */
    CHECK_FAILS(ENV("PMI_RANK=x", "PMI_SIZE=4"), 0, AMLDIST_EPARSE,
                "PMI_RANK");
    CHECK_FAILS(ENV("PMI_RANK=1", "PMI_SIZE=4", "MPI_LOCALRANKID=0"), 0,
                AMLDIST_EMISSING, "MPI_LOCALNRANKS");
    CHECK_FAILS(ENV("PMI_RANK=4", "PMI_SIZE=4"), 0, AMLDIST_ERANGE,
                "PMI_RANK");
}

static void test_mvapich2(void)
{
    amldist_t *h = layout_of(ENV("MV2_COMM_WORLD_RANK=6",
                                 "MV2_COMM_WORLD_SIZE=8",
                                 "MV2_COMM_WORLD_LOCAL_RANK=2",
                                 "MV2_COMM_WORLD_LOCAL_SIZE=4"),
                             0);
    CHECK_LAYOUT(h, 6, 8, 2, 4, -1, -1);
    CHECK_STR_EQ(amldist_source(h), "mvapich2");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_WORLD_SIZE),
                 "MV2_COMM_WORLD_SIZE=8");
    amldist_free(h);
}

static void test_pmix_without_server(void)
{
    CHECK_FAILS(ENV("PMIX_RANK=3", "PMIX_NAMESPACE=prterun-x-1"),
                AMLDIST_NO_PMIX, AMLDIST_EMISSING, "PMIX_RANK=3");
    CHECK_STR_HAS(amldist_last_error(), "world size is unknown");
}

static void test_slurm_step(void)
{
    amldist_t *h = layout_of(
        ENV("SLURM_JOB_ID=12", "SLURM_STEP_ID=0", "SLURM_PROCID=5",
            "SLURM_NTASKS=8", "SLURM_LOCALID=1", "SLURM_NODEID=2",
            "SLURM_NNODES=3", "SLURM_TASKS_PER_NODE=3(x2),2",
            "SLURM_STEP_NODELIST=gpu[009-011]",
            "SLURM_JOB_NODELIST=gpu[001-100]"),
        0);
    CHECK_LAYOUT(h, 5, 8, 1, 2, 2, 3);
    CHECK_STR_EQ(amldist_source(h), "slurm");
    CHECK_STR_EQ(amldist_master_addr(h), "gpu009");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                 "first host of SLURM_STEP_NODELIST=gpu[009-011]");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE),
                 "SLURM_TASKS_PER_NODE=3(x2),2 at node 2");
    CHECK_INT_EQ(amldist_master_port(h), 29500);
    amldist_free(h);
}

/* The step's own counts win over the job's. */
static void test_slurm_step_variables_first(void)
{
    amldist_t *h = layout_of(
        ENV("SLURM_PROCID=1", "SLURM_NTASKS=8", "SLURM_STEP_NUM_TASKS=2",
            "SLURM_LOCALID=0", "SLURM_NODEID=1", "SLURM_NNODES=4",
            "SLURM_STEP_NUM_NODES=2", "SLURM_TASKS_PER_NODE=2(x4)",
            "SLURM_STEP_TASKS_PER_NODE=1(x2)", "SLURM_JOB_NODELIST=n[1-4]"),
        0);
    CHECK_LAYOUT(h, 1, 2, 0, 1, 1, 2);
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_WORLD_SIZE),
                 "SLURM_STEP_NUM_TASKS=2");
    CHECK_STR_EQ(amldist_master_addr(h), "n1");
    amldist_free(h);
}

/* The batch script sees SLURM_PROCID=0 and the allocation's task count,
 * but it is one process, not rank 0 of them. */
static void test_slurm_batch_script(void)
{
    amldist_t *h = layout_of(ENV("SLURM_JOB_ID=12", "SLURM_PROCID=0",
                                 "SLURM_NTASKS=4", "SLURM_NODEID=0",
                                 "SLURM_JOB_NODELIST=n[1-2]"),
                             0);
    CHECK_LAYOUT(h, 0, 1, 0, 1, 0, 1);
    CHECK_STR_EQ(amldist_source(h), "default");
    amldist_free(h);
}

/* srun --mpi=pmix: the PMIx namespace names the Slurm step, so Slurm fills
 * in what the (here unreachable) PMIx server would have. */
static void test_pmix_under_srun(void)
{
    amldist_t *h = layout_of(
        ENV("PMIX_RANK=3", "PMIX_NAMESPACE=slurm.pmix.12.0", "SLURM_JOB_ID=12",
            "SLURM_STEP_ID=0", "SLURM_PROCID=3", "SLURM_NTASKS=4",
            "SLURM_LOCALID=1", "SLURM_NODEID=1", "SLURM_NNODES=2",
            "SLURM_TASKS_PER_NODE=2(x2)", "SLURM_STEP_NODELIST=n[1-2]"),
        AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 3, 4, 1, 2, 1, 2);
    CHECK_STR_EQ(amldist_source(h), "pmix");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_WORLD_SIZE),
                 "SLURM_NTASKS=4");
    CHECK_STR_EQ(amldist_master_addr(h), "n1");
    amldist_free(h);
}

/* srun --mpi=pmi2 (MpiDefault=pmi2): PMI_RANK and PMI_SIZE as MPICH's Hydra
 * would set them, and PMI_JOBID=<job>.<step> naming this Slurm step, whose
 * variables fill in the local rank, node and master (issue 11). */
#define SRUN_STEP                                                              \
    "SLURM_JOB_ID=32403", "SLURM_STEP_ID=0", "SLURM_PROCID=2",                 \
        "SLURM_STEP_NUM_TASKS=4", "SLURM_LOCALID=0", "SLURM_NODEID=1",         \
        "SLURM_STEP_NUM_NODES=2", "SLURM_STEP_TASKS_PER_NODE=2(x2)",           \
        "SLURM_STEP_NODELIST=n[0-1]"
static void test_pmi2_under_srun(void)
{
    amldist_t *h = layout_of(ENV("PMI_RANK=2", "PMI_SIZE=4", "PMI_FD=11",
                                 "PMI_JOBID=32403.0", SRUN_STEP),
                             0);
    CHECK_LAYOUT(h, 2, 4, 0, 2, 1, 2);
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_RANK), "PMI_RANK=2");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_LOCAL_RANK),
                 "SLURM_LOCALID=0");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                 "SLURM_NODEID=1");
    CHECK_STR_EQ(amldist_master_addr(h), "n0");
    amldist_free(h);
    /* SLURM_STEPID, the older spelling, names the step as well. */
    h = layout_of(ENV("PMI_RANK=0", "PMI_SIZE=2", "PMI_JOBID=7.3",
                      "SLURM_JOB_ID=7", "SLURM_STEPID=3", "SLURM_PROCID=0",
                      "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_NODEID=0",
                      "SLURM_NNODES=2", "SLURM_TASKS_PER_NODE=1(x2)",
                      "SLURM_JOB_NODELIST=a[1-2]"),
                  0);
    CHECK_LAYOUT(h, 0, 2, 0, 1, 0, 2);
    amldist_free(h);
}

/* The PMI side and Slurm disagree about the step they both name. */
static void test_pmi2_under_srun_conflict(void)
{
    CHECK_FAILS(ENV("PMI_RANK=3", "PMI_SIZE=4", "PMI_JOBID=32403.0",
                    SRUN_STEP),
                0, AMLDIST_ECONFLICT,
                "PMI_RANK=3 conflicts with SLURM_PROCID=2 (PMI_JOBID=32403.0 "
                "is this Slurm step)");
    CHECK_FAILS(ENV("PMI_RANK=2", "PMI_SIZE=8", "PMI_JOBID=32403.0",
                    SRUN_STEP),
                0, AMLDIST_ECONFLICT,
                "PMI_SIZE=8 conflicts with SLURM_STEP_NUM_TASKS=4");
}

/* A PMI_JOBID of another step (or none: Hydra) is a launcher of its own
 * inside the step, mpiexec under srun: its reading stands alone. */
static void test_pmi_of_another_step(void)
{
    static const char *const ids[] = {"PMI_JOBID=32403.1", "PMI_JOBID=32403",
                                      "PMI_JOBID=132403.0",
                                      "PMI_JOBID=kvs_123_0", "PMI_FD=5"};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        amldist_t *h = layout_of(ENV("PMI_RANK=1", "PMI_SIZE=2",
                                     "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2",
                                     (char *)ids[i], SRUN_STEP),
                                 0);
        CHECK_LAYOUT(h, 1, 2, 1, 2, 0, 1);
        CHECK_STR_EQ(amldist_source(h), "mpich");
        amldist_free(h);
    }
}

/* srun --mpi=pmix whose PMIx rank is not Slurm's: a conflict naming both. */
static void test_pmix_under_srun_conflict(void)
{
    CHECK_FAILS(ENV("PMIX_RANK=1", "PMIX_NAMESPACE=slurm.pmix.32403.0",
                    SRUN_STEP),
                AMLDIST_NO_PMIX, AMLDIST_ECONFLICT,
                "PMIX_RANK=1 conflicts with SLURM_PROCID=2 "
                "(PMIX_NAMESPACE=slurm.pmix.32403.0 is this Slurm step)");
}

int main(void)
{
    RUN(test_nothing_at_all);
    RUN(test_nothing_but_master_port);
    RUN(test_canonical_full);
    RUN(test_canonical_kubernetes);
    RUN(test_canonical_ipv6_master);
    RUN(test_canonical_one_process);
    RUN(test_torchrun);
    RUN(test_amlrun_marker);
    RUN(test_ompi_one_node);
    RUN(test_ompi_two_nodes_no_pmix);
    RUN(test_ompi_pmix_not_ours);
    RUN(test_ompi_daemon_is_mpirun);
    RUN(test_ompi_daemon_every_node);
    RUN(test_ompi_daemon_idle);
    RUN(test_ompi_daemon_nonsense);
    RUN(test_azureml_multi_node);
    RUN(test_azureml_keeps_master_port);
    RUN(test_azureml_ipv6);
    RUN(test_azureml_single_node);
    RUN(test_azureml_fallbacks);
    RUN(test_master_addr_over_azureml);
    RUN(test_mpich_intel);
    RUN(test_mpich_not_ours);
    RUN(test_mvapich2);
    RUN(test_pmix_without_server);
    RUN(test_slurm_step);
    RUN(test_slurm_step_variables_first);
    RUN(test_slurm_batch_script);
    RUN(test_pmix_under_srun);
    RUN(test_pmi2_under_srun);
    RUN(test_pmi2_under_srun_conflict);
    RUN(test_pmi_of_another_step);
    RUN(test_pmix_under_srun_conflict);
    return test_summary();
}
