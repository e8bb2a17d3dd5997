/* Every way an environment can be wrong, and messages that name the
 * variable and its value. */
#include "layout_test.h"

static void test_missing_halves(void)
{
    CHECK_FAILS(ENV("RANK=3"), 0, AMLDIST_EMISSING,
                "RANK=3 is set but WORLD_SIZE is not");
    CHECK_FAILS(ENV("WORLD_SIZE=4"), 0, AMLDIST_EMISSING,
                "WORLD_SIZE=4 is set but RANK is not");
    CHECK_FAILS(ENV("OMPI_COMM_WORLD_RANK=1"), 0, AMLDIST_EMISSING,
                "OMPI_COMM_WORLD_RANK=1 is set but OMPI_COMM_WORLD_SIZE is not");
    CHECK_FAILS(ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                    "OMPI_COMM_WORLD_LOCAL_SIZE=2"),
                0, AMLDIST_EMISSING,
                "OMPI_COMM_WORLD_LOCAL_SIZE=2 is set but "
                "OMPI_COMM_WORLD_LOCAL_RANK is not");
    CHECK_FAILS(ENV("PMI_SIZE=2"), 0, AMLDIST_EMISSING,
                "PMI_SIZE=2 is set but PMI_RANK is not");
    CHECK_FAILS(ENV("MV2_COMM_WORLD_RANK=0"), 0, AMLDIST_EMISSING,
                "MV2_COMM_WORLD_SIZE");
    CHECK_FAILS(ENV("SLURM_PROCID=0"), 0, AMLDIST_EMISSING,
                "SLURM_PROCID=0 is set but SLURM_NTASKS is not");
    CHECK_FAILS(ENV("AMLDIST_LAUNCHER=amlrun"), 0, AMLDIST_EMISSING,
                "AMLDIST_LAUNCHER=amlrun is set but RANK and WORLD_SIZE");
}

static void test_malformed_integers(void)
{
    CHECK_FAILS(ENV("RANK=abc", "WORLD_SIZE=4"), 0, AMLDIST_EPARSE,
                "RANK=\"abc\"");
    CHECK_FAILS(ENV("RANK=-1", "WORLD_SIZE=4"), 0, AMLDIST_EPARSE,
                "RANK=\"-1\"");
    CHECK_FAILS(ENV("RANK=+1", "WORLD_SIZE=4"), 0, AMLDIST_EPARSE,
                "RANK=\"+1\"");
    CHECK_FAILS(ENV("RANK=1 ", "WORLD_SIZE=4"), 0, AMLDIST_EPARSE,
                "RANK=\"1 \"");
    CHECK_FAILS(ENV("RANK=", "WORLD_SIZE=4"), 0, AMLDIST_EPARSE, "RANK=\"\"");
    CHECK_FAILS(ENV("RANK=0", "WORLD_SIZE=0x10"), 0, AMLDIST_EPARSE,
                "WORLD_SIZE=\"0x10\"");
    CHECK_FAILS(ENV("RANK=0", "WORLD_SIZE=99999999999999999999"), 0,
                AMLDIST_ERANGE, "WORLD_SIZE=99999999999999999999");
    CHECK_FAILS(ENV("RANK=0", "WORLD_SIZE=4294967297"), 0, AMLDIST_ERANGE,
                "WORLD_SIZE=4294967297");
    CHECK_FAILS(ENV("RANK=0", "WORLD_SIZE=0"), 0, AMLDIST_ERANGE,
                "WORLD_SIZE=0");
    CHECK_FAILS(ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                    "OMPI_COMM_WORLD_LOCAL_RANK=x",
                    "OMPI_COMM_WORLD_LOCAL_SIZE=2"),
                0, AMLDIST_EPARSE, "OMPI_COMM_WORLD_LOCAL_RANK=\"x\"");
    CHECK_FAILS(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODEID=1z"),
                0, AMLDIST_EPARSE, "SLURM_NODEID=\"1z\"");
}

static void test_invariants(void)
{
    CHECK_FAILS(ENV("RANK=4", "WORLD_SIZE=4"), 0, AMLDIST_ERANGE,
                "rank 4 (RANK=4) must be below the world size 4 "
                "(WORLD_SIZE=4)");
    CHECK_FAILS(ENV("RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=2",
                    "LOCAL_WORLD_SIZE=2"),
                0, AMLDIST_ERANGE,
                "local rank 2 (LOCAL_RANK=2) must be below the local world "
                "size 2 (LOCAL_WORLD_SIZE=2)");
    CHECK_FAILS(ENV("RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=0",
                    "LOCAL_WORLD_SIZE=8"),
                0, AMLDIST_ERANGE,
                "local world size 8 (LOCAL_WORLD_SIZE=8) must be at most "
                "world size 4 (WORLD_SIZE=4)");
    CHECK_FAILS(ENV("RANK=1", "WORLD_SIZE=4", "NODE_RANK=2",
                    "GROUP_WORLD_SIZE=2"),
                0, AMLDIST_ERANGE,
                "node rank 2 (NODE_RANK=2) must be below the node count 2 "
                "(GROUP_WORLD_SIZE=2)");
    CHECK_FAILS(ENV("RANK=1", "WORLD_SIZE=4", "GROUP_WORLD_SIZE=5"), 0,
                AMLDIST_ERANGE, "GROUP_WORLD_SIZE=5");
    CHECK_FAILS(ENV("OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4",
                    "OMPI_COMM_WORLD_LOCAL_RANK=1",
                    "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                    "OMPI_MCA_orte_num_nodes=1"),
                0, AMLDIST_ERANGE, "OMPI_MCA_orte_num_nodes=1");
    CHECK_FAILS(ENV("OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=4"), 0,
                AMLDIST_ERANGE, "OMPI_COMM_WORLD_RANK=5");
    CHECK_FAILS(ENV("SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NODEID=3",
                    "SLURM_TASKS_PER_NODE=2(x2)"),
                0, AMLDIST_ERANGE,
                "SLURM_TASKS_PER_NODE=2(x2) has no entry for node 3");
}

static void test_ports(void)
{
    CHECK_FAILS(ENV("MASTER_PORT=0"), 0, AMLDIST_ERANGE, "MASTER_PORT=0");
    CHECK_FAILS(ENV("MASTER_PORT=65536"), 0, AMLDIST_ERANGE,
                "MASTER_PORT=65536");
    CHECK_FAILS(ENV("MASTER_PORT=http"), 0, AMLDIST_EPARSE,
                "MASTER_PORT=\"http\"");
    amldist_t *h = layout_of(ENV("MASTER_PORT=65535"), 0);
    CHECK_INT_EQ(amldist_master_port(h), 65535);
    amldist_free(h);
}

static void test_addresses(void)
{
    CHECK_FAILS(ENV("MASTER_ADDR=bad host"), 0, AMLDIST_EPARSE,
                "MASTER_ADDR=\"bad host\"");
    CHECK_FAILS(ENV("MASTER_ADDR=010.0.0.1"), 0, AMLDIST_EPARSE,
                "MASTER_ADDR=\"010.0.0.1\"");
    CHECK_FAILS(ENV("MASTER_ADDR=node1:29500"), 0, AMLDIST_EPARSE,
                "MASTER_ADDR=\"node1:29500\"");
    char *const az[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
                        "OMPI_COMM_WORLD_LOCAL_RANK=0",
                        "OMPI_COMM_WORLD_LOCAL_SIZE=1",
                        "AZ_BATCH_MASTER_NODE=10.0.0.4:99999", NULL};
    CHECK_FAILS(az, AMLDIST_NO_PMIX, AMLDIST_EPARSE,
                "AZ_BATCH_MASTER_NODE=\"10.0.0.4:99999\"");
    char *const az6[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
                         "OMPI_COMM_WORLD_LOCAL_RANK=0",
                         "OMPI_COMM_WORLD_LOCAL_SIZE=1",
                         "AZ_BATCH_MASTER_NODE=[10.0.0.4]:6000", NULL};
    CHECK_FAILS(az6, AMLDIST_NO_PMIX, AMLDIST_EPARSE, "AZ_BATCH_MASTER_NODE");
    CHECK_FAILS(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2",
                    "SLURM_STEP_NODELIST=gpu[3-1]"),
                0, AMLDIST_EPARSE, "SLURM_STEP_NODELIST=\"gpu[3-1]\"");
    CHECK_FAILS(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODEID=0",
                    "SLURM_TASKS_PER_NODE=2(x"),
                0, AMLDIST_EPARSE, "SLURM_TASKS_PER_NODE=\"2(x\"");
}

static void test_markers_and_flags(void)
{
    CHECK_FAILS(ENV("AMLDIST_LAUNCHER=mpirun", "RANK=0", "WORLD_SIZE=1"), 0,
                AMLDIST_EPARSE, "AMLDIST_LAUNCHER=\"mpirun\"");
    CHECK_FAILS(ENV("RANK=0", "WORLD_SIZE=4", "NODE_RANK=1", "GROUP_RANK=0"),
                0, AMLDIST_ECONFLICT, "NODE_RANK=1 conflicts with GROUP_RANK=0");
    CHECK_FAILS(ENV("HOME=/"),
                AMLDIST_PREFER_CANONICAL | AMLDIST_PREFER_LAUNCHER,
                AMLDIST_EINVAL, "exclusive");
}

static void test_bad_arguments(void)
{
    CHECK_INT_EQ(amldist_init_from(NULL, ENV("RANK=0"), 0), AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "out is NULL");
    amldist_options_t o = AMLDIST_OPTIONS_INIT;
    amldist_t *h = (amldist_t *)1;
    o.version = 99;
    CHECK_INT_EQ(amldist_init_opts(&h, &o), AMLDIST_EINVAL);
    CHECK(h == NULL);
    CHECK_STR_HAS(amldist_last_error(), "options_t version 99");
    CHECK_INT_EQ(amldist_init_opts(&h, NULL), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_rank(NULL), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_world_size(NULL), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_local_rank(NULL), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_local_world_size(NULL), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_node_rank(NULL), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_num_nodes(NULL), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_master_port(NULL), AMLDIST_EINVAL);
    CHECK(amldist_master_addr(NULL) == NULL);
    CHECK(amldist_source(NULL) == NULL);
    CHECK(amldist_explain(NULL, AMLDIST_FIELD_RANK) == NULL);
    h = layout_of(ENV("HOME=/"), 0);
    CHECK(amldist_explain(h, AMLDIST_FIELD_COUNT) == NULL);
    CHECK(amldist_explain(h, (amldist_field_t)-1) == NULL);
    CHECK_STR_HAS(amldist_last_error(), "out of range");
    amldist_free(h);
    amldist_free(NULL);
}

/* A failure leaves no stale message behind a later success. */
static void test_error_cleared(void)
{
    amldist_t *h;
    CHECK(amldist_init_from(&h, ENV("RANK=x", "WORLD_SIZE=1"), 0) < 0);
    CHECK(amldist_last_error()[0] != '\0');
    CHECK_INT_EQ(amldist_init_from(&h, ENV("RANK=0", "WORLD_SIZE=1"), 0), 0);
    CHECK_STR_EQ(amldist_last_error(), "");
    amldist_free(h);
}

int main(void)
{
    RUN(test_missing_halves);
    RUN(test_malformed_integers);
    RUN(test_invariants);
    RUN(test_ports);
    RUN(test_addresses);
    RUN(test_markers_and_flags);
    RUN(test_bad_arguments);
    RUN(test_error_cleared);
    return test_summary();
}
