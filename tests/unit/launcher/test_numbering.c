/* The static rendezvous's one numbering rule for a whole job
 * (launcher/worker/control.c, issue 39): each amlrun of a job split
 * unevenly across nodes, read from its launcher's variables, gets the
 * same answer. */
#include <stdio.h>

#include "worker/control.h"
#include "test.h"

#define ENV(...) ((char *const[]){__VA_ARGS__, NULL})

static int numbering(char *const *env, char *why, size_t size)
{
    amldist_t *l = NULL;
    why[0] = '\0';
    if (amldist_init_from(&l, env, AMLDIST_NO_PMIX) != 0) {
        TEST__FAIL("amldist_init_from: %s", amldist_last_error());
        return -2;
    }
    int n = control_numbering(l, why, size);
    amldist_free(l);
    return n;
}

/* Open MPI: `--host n0:3,n1:1 -np 4` (num_nodes 2 on every rank): the
 * lone amlrun on n1 answers as n0's do. */
static void test_ompi_uneven(void)
{
    char why[768];
#define OMPI(r, lr, ls, vpid)                                                  \
    ENV("OMPI_COMM_WORLD_RANK=" #r, "OMPI_COMM_WORLD_SIZE=4",                  \
        "OMPI_COMM_WORLD_LOCAL_RANK=" #lr, "OMPI_COMM_WORLD_LOCAL_SIZE=" #ls,  \
        "OMPI_MCA_orte_num_nodes=2", "OMPI_MCA_ess_base_num_procs=2",          \
        "OMPI_MCA_orte_hnp_uri=7.0;tcp://10.0.0.1:1",                          \
        "OMPI_MCA_orte_local_daemon_uri=7." #vpid ";tcp://10.0.0.2:1")
    CHECK_INT_EQ(numbering(OMPI(0, 0, 3, 0), why, sizeof why), 0);
    CHECK_INT_EQ(numbering(OMPI(2, 2, 3, 0), why, sizeof why), 0);
    CHECK_INT_EQ(numbering(OMPI(3, 0, 1, 1), why, sizeof why), 0);
    /* One per node: the rendezvous numbers them. */
    CHECK_INT_EQ(numbering(ENV("OMPI_COMM_WORLD_RANK=1",
                               "OMPI_COMM_WORLD_SIZE=2",
                               "OMPI_COMM_WORLD_LOCAL_RANK=0",
                               "OMPI_COMM_WORLD_LOCAL_SIZE=1",
                               "OMPI_MCA_orte_num_nodes=2"),
                           why, sizeof why),
                 1);
#undef OMPI
}

/* Slurm: `srun -N2 -n4`, block: 3 tasks on n0, 1 on n1. */
static void test_slurm_uneven(void)
{
    char why[768];
    CHECK_INT_EQ(numbering(ENV("SLURM_JOB_ID=5", "SLURM_STEP_ID=0",
                               "SLURM_PROCID=3", "SLURM_STEP_NUM_TASKS=4",
                               "SLURM_LOCALID=0", "SLURM_NODEID=1",
                               "SLURM_STEP_NUM_NODES=2",
                               "SLURM_STEP_TASKS_PER_NODE=3,1",
                               "SLURM_STEP_NODELIST=n[0-1]"),
                           why, sizeof why),
                 0);
}

/* Hydra names a node index only: shared nodes are refused, by the sharing
 * amlruns and by a lone one whose node index is not its rank; one amlrun
 * per node still runs. */
static void test_hydra_no_count(void)
{
    char why[768];
    CHECK_INT_EQ(numbering(ENV("PMI_RANK=1", "PMI_SIZE=4", "MPI_LOCALRANKID=1",
                               "MPI_LOCALNRANKS=3", "NODE_RANK=0"),
                           why, sizeof why),
                 -1);
    CHECK_STR_HAS(why, "3 of them on this node (MPI_LOCALNRANKS=3)");
    CHECK_STR_HAS(why, "start one amlrun per node: mpiexec -ppn 1");
    /* The lone amlrun's node index (here an outer NODE_RANK: the reader
     * needs a real proxy for its own) is not its rank. */
    CHECK_INT_EQ(numbering(ENV("RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=0",
                               "LOCAL_WORLD_SIZE=1", "NODE_RANK=1"),
                           why, sizeof why),
                 -1);
    CHECK_STR_HAS(why, "this one alone on node 1 (NODE_RANK=1), not node 3");
    CHECK_INT_EQ(numbering(ENV("RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=0",
                               "LOCAL_WORLD_SIZE=1", "NODE_RANK=1"),
                           why, sizeof why),
                 1);
    CHECK_INT_EQ(numbering(ENV("PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=0",
                               "MPI_LOCALNRANKS=1"),
                           why, sizeof why),
                 1);
}

int main(void)
{
    RUN(test_ompi_uneven);
    RUN(test_slurm_uneven);
    RUN(test_hydra_no_count);
    return test_summary();
}
