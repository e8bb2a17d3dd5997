/* Which source wins when several are set: nesting versus real conflicts. */
#include <string.h>

#include "layout_test.h"

#define OMPI4(r, lr, lw)                                                       \
    "OMPI_COMM_WORLD_RANK=" #r, "OMPI_COMM_WORLD_SIZE=4",                      \
        "OMPI_COMM_WORLD_LOCAL_RANK=" #lr, "OMPI_COMM_WORLD_LOCAL_SIZE=" #lw

/* Azure ML's PyTorch distribution sets both: the same job, agreeing. */
static void test_canonical_and_mpi_agree(void)
{
    amldist_t *h = layout_of(ENV("RANK=2", "WORLD_SIZE=4", OMPI4(2, 0, 2)),
                             AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 2, 4, 0, 2, -1, -1);
    CHECK_STR_EQ(amldist_source(h), "env");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_RANK), "RANK=2");
    /* What the canonical set lacks comes from the same job's MPI. */
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_LOCAL_RANK),
                 "OMPI_COMM_WORLD_LOCAL_RANK=0");
    amldist_free(h);
}

static void test_conflict_same_world(void)
{
    CHECK_FAILS(ENV("RANK=0", "WORLD_SIZE=4", OMPI4(2, 0, 2)), 0,
                AMLDIST_ECONFLICT,
                "RANK=0 conflicts with OMPI_COMM_WORLD_RANK=2 (both describe "
                "a job of WORLD_SIZE=4)");
    CHECK_FAILS(ENV("RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=1", OMPI4(2, 0, 2)),
                0, AMLDIST_ECONFLICT,
                "LOCAL_RANK=1 conflicts with OMPI_COMM_WORLD_LOCAL_RANK=0");
}

static void test_prefer_flags(void)
{
    amldist_t *h = layout_of(ENV("RANK=0", "WORLD_SIZE=4", OMPI4(2, 0, 2)),
                             AMLDIST_PREFER_CANONICAL);
    CHECK_INT_EQ(amldist_rank(h), 0);
    CHECK_STR_EQ(amldist_source(h), "env");
    amldist_free(h);
    h = layout_of(ENV("RANK=0", "WORLD_SIZE=4", OMPI4(2, 0, 2)),
                  AMLDIST_PREFER_LAUNCHER | AMLDIST_NO_PMIX);
    CHECK_INT_EQ(amldist_rank(h), 2);
    CHECK_STR_EQ(amldist_source(h), "ompi");
    amldist_free(h);
}

static void test_prefer_variable(void)
{
    amldist_t *h = layout_of(ENV("AMLDIST_PREFER=launcher", "RANK=0",
                                 "WORLD_SIZE=4", OMPI4(2, 0, 2)),
                             AMLDIST_NO_PMIX);
    CHECK_INT_EQ(amldist_rank(h), 2);
    amldist_free(h);
    h = layout_of(ENV("AMLDIST_PREFER=canonical", "RANK=0", "WORLD_SIZE=4",
                      OMPI4(2, 0, 2)),
                  0);
    CHECK_INT_EQ(amldist_rank(h), 0);
    amldist_free(h);
    CHECK_FAILS(ENV("AMLDIST_PREFER=mpi", "RANK=0", "WORLD_SIZE=4"), 0,
                AMLDIST_EPARSE, "AMLDIST_PREFER=\"mpi\"");
}

/*
 * The seed's launch.py under Azure ML's mpirun, one process per node: it
 * sets RANK and WORLD_SIZE (a multiple of the MPI world) without a marker.
 * The canonical set describes us; the MPI rank is the node index.
 */
static void test_nested_per_node_launcher(void)
{
    amldist_t *h = layout_of(
        ENV("RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1", "OMPI_COMM_WORLD_RANK=1",
            "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=0",
            "OMPI_COMM_WORLD_LOCAL_SIZE=1", "OMPI_MCA_orte_num_nodes=2",
            "MASTER_ADDR=10.0.0.4", "MASTER_PORT=6105"),
        AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 5, 8, 1, 4, 1, 2);
    CHECK_STR_EQ(amldist_source(h), "env");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                  "derived: OMPI_COMM_WORLD_RANK=1, one launcher per node");
    amldist_free(h);
}

/* Without proof of one launcher per node, the node index stays unknown. */
static void test_nested_no_node_guess(void)
{
    amldist_t *h = layout_of(ENV("RANK=5", "WORLD_SIZE=8",
                                 "OMPI_COMM_WORLD_RANK=1",
                                 "OMPI_COMM_WORLD_SIZE=2",
                                 "OMPI_COMM_WORLD_LOCAL_RANK=1",
                                 "OMPI_COMM_WORLD_LOCAL_SIZE=2"),
                             AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 5, 8, -1, -1, -1, -1);
    amldist_free(h);
}

static void test_world_not_multiple(void)
{
    CHECK_FAILS(ENV("RANK=1", "WORLD_SIZE=3", "OMPI_COMM_WORLD_RANK=1",
                    "OMPI_COMM_WORLD_SIZE=2"),
                0, AMLDIST_ECONFLICT,
                "WORLD_SIZE=3 conflicts with OMPI_COMM_WORLD_SIZE=2");
}

/* amlrun started once per node by mpirun, two nodes of two workers: the
 * marker makes the canonical set authoritative, even with the same world. */
static void test_marker_beats_outer_mpi(void)
{
    amldist_t *h = layout_of(
        ENV("AMLDIST_LAUNCHER=amlrun", "RANK=3", "WORLD_SIZE=4",
            "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "NODE_RANK=1",
            "GROUP_WORLD_SIZE=2", OMPI4(1, 0, 1)),
        0);
    CHECK_LAYOUT(h, 3, 4, 1, 2, 1, 2);
    CHECK_STR_EQ(amldist_source(h), "amlrun");
    amldist_free(h);
    h = layout_of(ENV("TORCHELASTIC_RUN_ID=j", "RANK=0", "WORLD_SIZE=4",
                      "GROUP_RANK=0", OMPI4(3, 1, 2)),
                  0);
    CHECK_INT_EQ(amldist_rank(h), 0);
    CHECK_STR_EQ(amldist_source(h), "torchrun");
    amldist_free(h);
}

/* A marked set that cannot be an inner launcher's inside the MPI world
 * (leftovers in mpirun's shell, which reach its node's ranks only): refused
 * naming the variables and the fix, or set aside by AMLDIST_PREFER. */
static void test_marked_leftover(void)
{
    amldist_t *h = NULL;
    CHECK_INT_EQ(amldist_init_from(&h,
                                   ENV("TORCHELASTIC_RUN_ID=none", "RANK=0",
                                       "WORLD_SIZE=1", "GROUP_RANK=0",
                                       OMPI4(1, 0, 1)),
                                   0),
                 AMLDIST_ECONFLICT);
    CHECK_STR_HAS(amldist_last_error(),
                  "torchrun's RANK=0 WORLD_SIZE=1 cannot be an inner "
                  "launcher's inside OMPI_COMM_WORLD_SIZE=4");
    CHECK_STR_HAS(amldist_last_error(),
                  "unset RANK WORLD_SIZE GROUP_RANK TORCHELASTIC_RUN_ID "
                  "there, or set AMLDIST_PREFER=launcher");
    CHECK_INT_EQ(amldist_init_from(&h,
                                   ENV("AMLDIST_LAUNCHER=amlrun", "RANK=1",
                                       "WORLD_SIZE=6", OMPI4(1, 0, 1)),
                                   0),
                 AMLDIST_ECONFLICT);
    CHECK_STR_HAS(amldist_last_error(), "unset RANK WORLD_SIZE "
                                        "AMLDIST_LAUNCHER there");
    h = layout_of(ENV("AMLDIST_LAUNCHER=amlrun", "RANK=0", "WORLD_SIZE=1",
                      OMPI4(1, 0, 1)),
                  AMLDIST_PREFER_LAUNCHER);
    CHECK_INT_EQ(amldist_rank(h), 1);
    CHECK_INT_EQ(amldist_world_size(h), 4);
    CHECK_STR_EQ(amldist_source(h), "ompi");
    amldist_free(h);
    /* Two workers per MPI process: a multiple, an inner launcher's. */
    h = layout_of(ENV("AMLDIST_LAUNCHER=amlrun", "RANK=5", "WORLD_SIZE=8",
                      OMPI4(2, 0, 1)),
                  0);
    CHECK_INT_EQ(amldist_rank(h), 5);
    CHECK_STR_EQ(amldist_source(h), "amlrun");
    amldist_free(h);
}

/* Half a canonical pair beside a launcher (a leftover WORLD_SIZE=4 in
 * mpirun's shell, mpirun -x RANK=7, srun's whole environment): refused
 * naming the variables and both ways out, or set aside by
 * AMLDIST_PREFER=launcher before the missing half is an error. */
static void test_half_leftover(void)
{
    amldist_t *h = NULL;
    CHECK_INT_EQ(amldist_init_from(&h, ENV("WORLD_SIZE=4", OMPI4(1, 0, 1)), 0),
                 AMLDIST_EMISSING);
    CHECK_STR_HAS(amldist_last_error(),
                  "WORLD_SIZE=4 is set but RANK is not (set both, or unset "
                  "it), beside OMPI_COMM_WORLD_SIZE=4");
    CHECK_STR_HAS(amldist_last_error(),
                  "unset WORLD_SIZE there, or set AMLDIST_PREFER=launcher");
    CHECK_INT_EQ(amldist_init_from(&h, ENV("RANK=7", OMPI4(1, 0, 1)), 0),
                 AMLDIST_EMISSING);
    CHECK_STR_HAS(amldist_last_error(), "mpirun -x");
    CHECK_STR_HAS(amldist_last_error(),
                  "unset RANK there, or set AMLDIST_PREFER=launcher");
    static char *const srun[] = {
        "RANK=7", "SLURM_JOB_ID=9", "SLURM_STEP_ID=0", "SLURM_PROCID=1",
        "SLURM_NTASKS=2", "SLURM_LOCALID=1", "SLURM_NODEID=0", NULL};
    CHECK_INT_EQ(amldist_init_from(&h, srun, 0), AMLDIST_EMISSING);
    CHECK_STR_HAS(amldist_last_error(), "beside SLURM_NTASKS=2");
    h = layout_of(srun, AMLDIST_PREFER_LAUNCHER);
    CHECK_INT_EQ(amldist_rank(h), 1);
    CHECK_STR_EQ(amldist_source(h), "slurm");
    amldist_free(h);
    for (int i = 0; i < 2; i++) {
        h = layout_of(i ? ENV("RANK=7", OMPI4(1, 0, 1), "AMLDIST_PREFER=launcher")
                        : ENV("WORLD_SIZE=4", "LOCAL_RANK=x", OMPI4(1, 0, 1)),
                      i ? 0 : AMLDIST_PREFER_LAUNCHER);
        CHECK_INT_EQ(amldist_rank(h), 1);
        CHECK_INT_EQ(amldist_world_size(h), 4);
        CHECK_STR_EQ(amldist_source(h), "ompi");
        amldist_free(h);
    }
    /* Without a launcher there is nothing to prefer: the reader's words. */
    CHECK_FAILS(ENV("RANK=7", "AMLDIST_PREFER=launcher"), 0, AMLDIST_EMISSING,
                "RANK=7 is set but WORLD_SIZE is not (set both, or unset "
                "it)");
}

/* mpirun inside an srun step (or sbatch): Slurm is outside MPI. */
static void test_mpi_beats_slurm(void)
{
    amldist_t *h = layout_of(ENV("SLURM_JOB_ID=9", "SLURM_STEP_ID=0",
                                 "SLURM_PROCID=0", "SLURM_NTASKS=4",
                                 "SLURM_LOCALID=0", "SLURM_NODEID=0",
                                 OMPI4(2, 2, 4)),
                             0);
    CHECK_LAYOUT(h, 2, 4, 2, 4, 0, 1);
    CHECK_STR_EQ(amldist_source(h), "ompi");
    amldist_free(h);
}

static void test_canonical_and_slurm(void)
{
    CHECK_FAILS(ENV("RANK=1", "WORLD_SIZE=4", "SLURM_PROCID=2",
                    "SLURM_NTASKS=4"),
                0, AMLDIST_ECONFLICT,
                "RANK=1 conflicts with SLURM_PROCID=2");
    /* torchrun per node under srun: world 8 over Slurm's 2 tasks. */
    amldist_t *h = layout_of(ENV("RANK=5", "WORLD_SIZE=8", "SLURM_PROCID=1",
                                 "SLURM_NTASKS=2", "SLURM_LOCALID=0",
                                 "SLURM_NODEID=1", "SLURM_NNODES=2",
                                 "SLURM_TASKS_PER_NODE=1(x2)",
                                 "SLURM_STEP_NODELIST=n[1-2]"),
                             0);
    CHECK_LAYOUT(h, 5, 8, -1, 4, 1, 2);
    amldist_free(h);
}

/* Within the MPI family the most specific reader wins. */
static void test_mpi_family_order(void)
{
    amldist_t *h = layout_of(ENV("PMIX_RANK=2", "PMI_RANK=2", "PMI_SIZE=4",
                                 "MV2_COMM_WORLD_RANK=2",
                                 "MV2_COMM_WORLD_SIZE=4", OMPI4(2, 2, 4)),
                             0);
    CHECK_STR_EQ(amldist_source(h), "ompi");
    amldist_free(h);
    h = layout_of(ENV("PMIX_RANK=2", "PMI_RANK=2", "PMI_SIZE=4",
                      "MV2_COMM_WORLD_RANK=2", "MV2_COMM_WORLD_SIZE=4"),
                  0);
    CHECK_STR_EQ(amldist_source(h), "mvapich2");
    amldist_free(h);
    h = layout_of(ENV("PMIX_RANK=2", "PMI_RANK=2", "PMI_SIZE=4"), 0);
    CHECK_STR_EQ(amldist_source(h), "mpich");
    amldist_free(h);
}

/* Azure ML's PyTorch distribution, one process per node, read by a per-node
 * launcher (amlrun --nproc-per-node): it says so with AMLDIST_ONE_PER_NODE,
 * and the node's own layout is complete. */
#define AZ_NODE1 "WORLD_SIZE=2", "NODE_RANK=1", "RANK=1", "LOCAL_RANK=0",     \
                 "MASTER_ADDR=10.0.0.4", "MASTER_PORT=6105"
static void test_one_per_node_flag(void)
{
    amldist_t *h = layout_of(ENV(AZ_NODE1), AMLDIST_ONE_PER_NODE);
    CHECK_LAYOUT(h, 1, 2, 0, 1, 1, 2);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_LOCAL_WORLD_SIZE),
                  "AMLDIST_ONE_PER_NODE");
    amldist_free(h);
    /* Without the flag the same variables describe one process of many. */
    h = layout_of(ENV(AZ_NODE1), 0);
    CHECK_LAYOUT(h, 1, 2, 0, -1, 1, -1);
    amldist_free(h);
    /* An MPI launcher that says one process here but not the node index. */
    h = layout_of(ENV("OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=3",
                      "OMPI_COMM_WORLD_LOCAL_RANK=0",
                      "OMPI_COMM_WORLD_LOCAL_SIZE=1"),
                  AMLDIST_ONE_PER_NODE | AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 2, 3, 0, 1, 2, 3);
    amldist_free(h);
}

/* What rules the premise out leaves the unknowns unknown. */
static void test_one_per_node_refused(void)
{
    static const unsigned f = AMLDIST_ONE_PER_NODE;
    /* RANK and WORLD_SIZE alone: could be two launchers on one node. */
    amldist_t *h = layout_of(ENV("RANK=0", "WORLD_SIZE=2"), f);
    CHECK_LAYOUT(h, 0, 2, -1, -1, -1, -1);
    amldist_free(h);
    h = layout_of(ENV("PMI_RANK=0", "PMI_SIZE=2"), f);
    CHECK_LAYOUT(h, 0, 2, -1, -1, -1, -1);
    amldist_free(h);
    /* Second on its node. */
    h = layout_of(ENV("RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1",
                      "NODE_RANK=1"), f);
    CHECK_LAYOUT(h, 3, 4, 1, -1, 1, -1);
    amldist_free(h);
    /* First on node 1, but rank 2: two launchers per node. */
    h = layout_of(ENV("RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=0",
                      "NODE_RANK=1"), f);
    CHECK_LAYOUT(h, 2, 4, 0, -1, 1, -1);
    amldist_free(h);
    /* Alone, but the launcher counts other nodes than processes. */
    h = layout_of(ENV("RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=0",
                      "LOCAL_WORLD_SIZE=2"), f);
    CHECK_LAYOUT(h, 1, 4, 0, 2, -1, -1);
    amldist_free(h);
}

/* One node: every rank is local, whoever says it is one node. */
static void test_one_node_local_world(void)
{
    /* One launcher under an MPI world of one (mpirun -np 1 launch.py). */
    amldist_t *h = layout_of(
        ENV("RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=2", "OMPI_COMM_WORLD_RANK=0",
            "OMPI_COMM_WORLD_SIZE=1", "OMPI_COMM_WORLD_LOCAL_RANK=0",
            "OMPI_COMM_WORLD_LOCAL_SIZE=1"),
        AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 2, 4, 2, 4, 0, 1);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NUM_NODES),
                  "derived: OMPI_COMM_WORLD_LOCAL_SIZE");
    CHECK(strstr(amldist_explain(h, AMLDIST_FIELD_NUM_NODES),
                 "derived: derived:") == NULL);
    amldist_free(h);
    /* An option that says one node. */
    amldist_options_t o = AMLDIST_OPTIONS_INIT;
    o.envp = ENV("RANK=2", "WORLD_SIZE=4");
    o.num_nodes = 1;
    CHECK_INT_EQ(amldist_init_opts(&h, &o), 0);
    CHECK_LAYOUT(h, 2, 4, 2, 4, 0, 1);
    amldist_free(h);
}

int main(void)
{
    RUN(test_canonical_and_mpi_agree);
    RUN(test_conflict_same_world);
    RUN(test_prefer_flags);
    RUN(test_prefer_variable);
    RUN(test_nested_per_node_launcher);
    RUN(test_nested_no_node_guess);
    RUN(test_world_not_multiple);
    RUN(test_marker_beats_outer_mpi);
    RUN(test_marked_leftover);
    RUN(test_half_leftover);
    RUN(test_mpi_beats_slurm);
    RUN(test_canonical_and_slurm);
    RUN(test_mpi_family_order);
    RUN(test_one_per_node_flag);
    RUN(test_one_per_node_refused);
    RUN(test_one_node_local_world);
    return test_summary();
}
