/*
 * Open MPI under a rankfile (mpirun -rf), and the node count and master of
 * its daemon variables where they cannot be trusted alone.  The variables
 * are those Open MPI 4.1 gave the ranks of real runs on namespace nodes
 * (tests/sh/layout/ompi_rankfile.sh and ompi_headnode.sh run them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layout_test.h"

/* Rank R of 4, two per node, on a daemon away from mpirun, which counts
 * the rankfile's 2 nodes as 4. */
#define REMOTE(R, LR)                                                          \
    "OMPI_COMM_WORLD_RANK=" #R, "OMPI_COMM_WORLD_SIZE=4",                     \
        "OMPI_COMM_WORLD_LOCAL_RANK=" #LR, "OMPI_COMM_WORLD_LOCAL_SIZE=2",    \
        "OMPI_MCA_orte_num_nodes=4", "OMPI_MCA_ess_base_num_procs=2",         \
        "OMPI_MCA_orte_hnp_uri=1408499712.0;tcp://10.231.0.10:44811",          \
        "OMPI_MCA_orte_local_daemon_uri=1408499712.1;tcp://10.231.0.11:4242"
/* Rank R on mpirun's own daemon. */
#define LOCAL(R, LR)                                                           \
    "OMPI_COMM_WORLD_RANK=" #R, "OMPI_COMM_WORLD_SIZE=4",                     \
        "OMPI_COMM_WORLD_LOCAL_RANK=" #LR, "OMPI_COMM_WORLD_LOCAL_SIZE=2",    \
        "OMPI_MCA_orte_num_nodes=2",                                           \
        "OMPI_MCA_orte_hnp_uri=1408499712.0;tcp://10.231.0.10:44811",          \
        "OMPI_MCA_orte_local_daemon_uri=1408499712.0;tcp://10.231.0.10:44811"

static char path[64];
static char var[96];

/* A rankfile with `text`; var is its OMPI_MCA_orte_rankfile. */
static void rankfile(const char *text)
{
    snprintf(path, sizeof path, "/tmp/amldist-rankfile-XXXXXX");
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK_INT_EQ((int)write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    snprintf(var, sizeof var, "OMPI_MCA_orte_rankfile=%s", path);
}

static const char rank0_on_n1[] = "rank 0=n1 slot=0\n"
                                  "rank 1=n1 slot=1\n"
                                  "rank 2=n0 slot=0\n"
                                  "rank 3=n0 slot=1\n";

/* Rank 0 on n1, mpirun on n0: n0's ranks are node 1, the master n1, and
 * the daemons' numbers (mpirun's node first, it the master) do not count. */
static void test_rankfile_rank0_away(void)
{
    rankfile(rank0_on_n1);
    amldist_t *h = layout_of(ENV(LOCAL(2, 0), var), AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 2, 4, 0, 2, 1, 2);
    CHECK_STR_EQ(amldist_master_addr(h), "n1");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "the host of rank 0");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NUM_NODES),
                  "count its nodes twice");
    amldist_free(h);
    h = layout_of(ENV(REMOTE(1, 1), var), AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 1, 4, 1, 2, 0, 2);
    CHECK_STR_EQ(amldist_master_addr(h), "n1");
    amldist_free(h);
    unlink(path);
}

/* mpirun --mca rmaps_rank_file_path FILE names it in another variable. */
static void test_rankfile_mca_spelling(void)
{
    rankfile(rank0_on_n1);
    snprintf(var, sizeof var, "OMPI_MCA_rmaps_rank_file_path=%s", path);
    amldist_t *h = layout_of(ENV(REMOTE(3, 1), var), AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 3, 4, 1, 2, 1, 2);
    CHECK_STR_EQ(amldist_master_addr(h), "n1");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                  "OMPI_MCA_rmaps_rank_file_path=");
    amldist_free(h);
    unlink(path);
}

/* Comments, blank lines, spaces around '=', lines out of rank order;
 * nodes are numbered by their first rank. */
static void test_rankfile_syntax(void)
{
    rankfile("# two nodes, interleaved\n"
             "\n"
             "rank 3 = n0 slot=1\n"
             "  rank 1=n0 slot=0:1-2\n"
             "rank 0=n1 slot=0\n"
             "rank\t2=n1 slot=1\n");
    amldist_t *h = layout_of(ENV(REMOTE(3, 1), var), AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 3, 4, 1, 2, 1, 2);
    CHECK_STR_EQ(amldist_master_addr(h), "n1");
    amldist_free(h);
    unlink(path);
}

/* What the file cannot say, nobody says: every field it would give stays
 * unknown, with the reason, and the daemons are not asked instead. */
static void test_rankfile_unusable(void)
{
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"rank 0=+n1 slot=0\nrank 1=+n1 slot=1\nrank 2=+n0 slot=0\n"
         "rank 3=+n0 slot=1\n",
         "line 1 is not"},
        {"rank 0=n1 slot=0\nrank 1=n1 slot=1\nrank 3=n0 slot=1\n",
         "places no rank 2"},
        {"rank 0=n1 slot=0\nhost n1\n", "line 2 is not"},
        {"rank 9=n1 slot=0\n", "line 1 is not"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rankfile(bad[i].text);
        amldist_t *h = layout_of(ENV(LOCAL(2, 0), var), AMLDIST_NO_PMIX);
        CHECK_LAYOUT(h, 2, 4, 0, 2, -1, -1);
        CHECK(amldist_master_addr(h) == NULL);
        CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                      bad[i].why);
        amldist_free(h);
        unlink(path);
    }
    amldist_t *h = layout_of(
        ENV(REMOTE(2, 0), "OMPI_MCA_orte_rankfile=/nonexistent/rankfile"),
        AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 2, 4, 0, 2, -1, -1);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NUM_NODES),
                  "/nonexistent/rankfile: cannot read it here");
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "places rank 0, and cannot read it here");
    amldist_free(h);
}

/* "localhost" is mpirun's node to mpirun only: no master for the others,
 * the nodes still counted. */
static void test_rankfile_localhost(void)
{
    rankfile("rank 0=localhost slot=0\nrank 1=localhost slot=1\n"
             "rank 2=n1 slot=0\nrank 3=n1 slot=1\n");
    amldist_t *h = layout_of(ENV(REMOTE(2, 0), var), AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 2, 4, 0, 2, 1, 2);
    CHECK(amldist_master_addr(h) == NULL);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                  "\"localhost\", which is no address for the other nodes");
    amldist_free(h);
    unlink(path);
}

/* All ranks on one node: one node, whatever the daemons count. */
static void test_rankfile_one_node(void)
{
    amldist_t *h = layout_of(
        ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
            "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
            "OMPI_MCA_orte_num_nodes=2", "OMPI_MCA_ess_base_num_procs=2",
            "OMPI_MCA_orte_rankfile=/nonexistent/rankfile"),
        AMLDIST_NO_PMIX);
    CHECK_LAYOUT(h, 1, 2, 1, 2, 0, 1);
    amldist_free(h);
}

/* Without a rankfile, a node count above the daemons' is not used. */
static void test_more_nodes_than_daemons(void)
{
    amldist_t *h = layout_of(ENV("OMPI_COMM_WORLD_RANK=2",
                                 "OMPI_COMM_WORLD_SIZE=6",
                                 "OMPI_COMM_WORLD_LOCAL_RANK=0",
                                 "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                                 "OMPI_MCA_orte_num_nodes=6",
                                 "OMPI_MCA_ess_base_num_procs=3"),
                             AMLDIST_NO_PMIX);
    CHECK_INT_EQ(amldist_num_nodes(h), AMLDIST_EUNKNOWN);
    CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_NUM_NODES),
                  "OMPI_MCA_orte_num_nodes=6 is more than the "
                  "OMPI_MCA_ess_base_num_procs=3 daemons");
    amldist_free(h);
}

/* mpirun on a node that may run no rank: daemon 1 (node unknown) and the
 * last daemon (node known) give the same reason for the master. */
static void test_headnode_master_alike(void)
{
    static const char want[] =
        "unknown: mpirun's node (OMPI_MCA_orte_hnp_uri) may run no rank, and "
        "then only the PMIx server knows the host of rank 0; give it: mpirun "
        "-x MASTER_ADDR=<rank 0's host> (or --master-addr)";
    for (int daemon = 1; daemon <= 2; daemon++) {
        char uri[96];
        snprintf(uri, sizeof uri,
                 "OMPI_MCA_orte_local_daemon_uri=1408499712.%d;"
                 "tcp://10.231.0.1%d:4242",
                 daemon, daemon);
        amldist_t *h = layout_of(
            ENV("OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4",
                "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                "OMPI_MCA_orte_num_nodes=2", "OMPI_MCA_ess_base_num_procs=3",
                "OMPI_MCA_orte_hnp_uri=1408499712.0;tcp://10.231.0.10:44811",
                uri),
            AMLDIST_NO_PMIX);
        CHECK(amldist_master_addr(h) == NULL);
        CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR), want);
        amldist_free(h);
    }
}

/* The rank on mpirun's node (daemon 0) and the one away from it under
 * EXTRA, without PMIx: the master of both, and its reason. */
static void placed_by(char *extra, const char *want_addr,
                      const char *want_why)
{
    for (int daemon = 0; daemon <= 1; daemon++) {
        char uri[96], rank[32];
        snprintf(uri, sizeof uri,
                 "OMPI_MCA_orte_local_daemon_uri=1408499712.%d;"
                 "tcp://10.231.0.1%d:4242",
                 daemon, daemon);
        snprintf(rank, sizeof rank, "OMPI_COMM_WORLD_RANK=%d", 2 * daemon);
        amldist_t *h = layout_of(
            ENV(rank, "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=0",
                "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_MCA_orte_num_nodes=2",
                "OMPI_MCA_ess_base_num_procs=2",
                "OMPI_MCA_orte_hnp_uri=1408499712.0;tcp://10.231.0.10:44811",
                uri, extra),
            AMLDIST_NO_PMIX);
        CHECK_INT_EQ(amldist_node_rank(h), daemon);
        if (want_addr == NULL)
            CHECK(amldist_master_addr(h) == NULL);
        else
            CHECK_STR_EQ(amldist_master_addr(h), want_addr);
        CHECK_STR_HAS(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                      want_why);
        amldist_free(h);
    }
}

/* Several app contexts, each with hosts of its own, or seq's hostfile order
 * put rank 0 anywhere: never mpirun's node by assumption, on every rank
 * alike; a policy that fills the first node first keeps it. */
static void test_layout_places_rank0(void)
{
    static const char fix[] = "; give it: mpirun -x MASTER_ADDR=<rank 0's "
                              "host> (or --master-addr)";
    char want[224];
    snprintf(want, sizeof want, "unknown: OMPI_NUM_APP_CTX=2: an app "
             "context's own --host may put rank 0 away from mpirun's "
             "node%s", fix);
    placed_by("OMPI_NUM_APP_CTX=2", NULL, want);
    snprintf(want, sizeof want, "unknown: OMPI_MCA_rmaps_base_mapping_"
             "policy=seq: the mapping, not mpirun's node, places rank 0%s",
             fix);
    placed_by("OMPI_MCA_rmaps_base_mapping_policy=seq", NULL, want);
    placed_by("OMPI_MCA_rmaps_base_mapping_policy=mindist:mlx5_0", NULL,
              "the mapping, not mpirun's node");
    placed_by("OMPI_MCA_rmaps_base_mapping_policy=ppr:2:node", "10.231.0.10",
              "mpirun's node, which runs rank 0");
    placed_by("OMPI_MCA_rmaps_base_mapping_policy=NODE", "10.231.0.10",
              "mpirun's node, which runs rank 0");
    placed_by("OMPI_NUM_APP_CTX=1", "10.231.0.10",
              "mpirun's node, which runs rank 0");
}

int main(void)
{
    RUN(test_rankfile_rank0_away);
    RUN(test_rankfile_mca_spelling);
    RUN(test_rankfile_syntax);
    RUN(test_rankfile_unusable);
    RUN(test_rankfile_localhost);
    RUN(test_rankfile_one_node);
    RUN(test_more_nodes_than_daemons);
    RUN(test_headnode_master_alike);
    RUN(test_layout_places_rank0);
    return test_summary();
}
