/* Hydra's proxy, as lib/sources/mpich.c reads it: its command line, and
 * under Slurm (--launcher slurm --proxy-id -1) the node index and count of
 * its srun step (issue 39). */
#include <string.h>

#include "layout_test.h"
#include "sources/sources.h"

/* An argv as /proc/<pid>/cmdline holds it: "a\0b\0...\0". */
#define ARGV(s) s, sizeof s

static void test_proxy_args(void)
{
    amldist__hydra_proxy_t p;
    /* mpiexec.hydra -launcher ssh: the proxy's place in Hydra's list. */
    CHECK_INT_EQ(amldist__hydra_proxy_args(
                     ARGV("/usr/bin/hydra_pmi_proxy\0--control-port\0n0:1\0"
                          "--launcher\0ssh\0--proxy-id\0001"),
                     &p),
                 1);
    CHECK_INT_EQ(p.id, 1);
    CHECK_STR_EQ(p.launcher, "ssh");
    /* Under Slurm (what MPICH 4.0.2 runs): srun numbers the proxies. */
    CHECK_INT_EQ(amldist__hydra_proxy_args(
                     ARGV("/usr/bin/hydra_pmi_proxy\0--control-port\0n0:4\0"
                          "--rmk\0slurm\0--launcher\0slurm\0--demux\0poll\0"
                          "--pgid\0000\0--proxy-id\0-1"),
                     &p),
                 1);
    CHECK_INT_EQ(p.id, -1);
    CHECK_STR_EQ(p.launcher, "slurm");
    /* No --launcher, bare name: a proxy still. */
    CHECK_INT_EQ(amldist__hydra_proxy_args(
                     ARGV("hydra_pmi_proxy\0--proxy-id\0007"), &p),
                 1);
    CHECK_INT_EQ(p.id, 7);
    CHECK_STR_EQ(p.launcher, "");
    /* Not a proxy, or one whose id is not a number: none. */
    CHECK_INT_EQ(amldist__hydra_proxy_args(
                     ARGV("/bin/sh\0--proxy-id\0001"), &p),
                 0);
    CHECK_INT_EQ(amldist__hydra_proxy_args(
                     ARGV("/usr/bin/hydra_pmi_proxy_x\0--proxy-id\0001"), &p),
                 0);
    CHECK_INT_EQ(amldist__hydra_proxy_args(
                     ARGV("hydra_pmi_proxy\0--proxy-id\0-2"), &p),
                 0);
    CHECK_INT_EQ(amldist__hydra_proxy_args(
                     ARGV("hydra_pmi_proxy\0--proxy-id\0x1"), &p),
                 0);
    CHECK_INT_EQ(amldist__hydra_proxy_args(
                     ARGV("hydra_pmi_proxy\0--launcher\0slurm"), &p),
                 0);
    /* --proxy-id as the last word, with no value; a cut-off command line
     * (no final NUL). */
    CHECK_INT_EQ(amldist__hydra_proxy_args(
                     ARGV("hydra_pmi_proxy\0--proxy-id"), &p),
                 0);
    static const char cut[] = {'h', 'y', 'd', 'r', 'a'};
    CHECK_INT_EQ(amldist__hydra_proxy_args(cut, sizeof cut, &p), 0);
    CHECK_INT_EQ(amldist__hydra_proxy_args("", 0, &p), 0);
}

/* A rank of `world` as mpich.c has it before the proxy's step is read. */
static struct amldist rank_of(long world)
{
    struct amldist r;
    amldist__reading_init(&r, "mpich");
    amldist__set(&r, AMLDIST_FIELD_WORLD_SIZE, world, "PMI_SIZE=%ld", world);
    return r;
}

static void slurm_node(char *const envp[], long proxy_pid, long world,
                       struct amldist *r)
{
    amldist__env_t env = {envp, 0};
    *r = rank_of(world);
    amldist__hydra_slurm_node(&env, proxy_pid, r);
}

/* What MPICH 4.0.2's proxy on n1 passed on to its ranks (tried for real:
 * salloc -N2 mpiexec.hydra -n 4). */
#define PROXY_STEP(node)                                                       \
    "SLURM_TASK_PID=2650", "SLURM_PROCID=" node, "SLURM_NODEID=" node,         \
        "SLURM_LOCALID=0", "SLURM_STEP_NUM_NODES=2",                           \
        "SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_TASKS_PER_NODE=1(x2)"

static void test_slurm_step(void)
{
    struct amldist r;
    slurm_node(ENV(PROXY_STEP("1")), 2650, 4, &r);
    CHECK_INT_EQ(r.val[AMLDIST_FIELD_NODE_RANK], 1);
    CHECK_STR_HAS(r.why[AMLDIST_FIELD_NODE_RANK],
                  "SLURM_NODEID=1 of the Hydra proxy's srun step");
    CHECK_STR_HAS(r.why[AMLDIST_FIELD_NODE_RANK], "pid 2650 = SLURM_TASK_PID");
    CHECK_INT_EQ(r.val[AMLDIST_FIELD_NUM_NODES], 2);
    CHECK_STR_HAS(r.why[AMLDIST_FIELD_NUM_NODES], "SLURM_STEP_NUM_NODES=2");
    slurm_node(ENV(PROXY_STEP("0")), 2650, 2, &r);
    CHECK_INT_EQ(r.val[AMLDIST_FIELD_NODE_RANK], 0);
    CHECK_INT_EQ(r.val[AMLDIST_FIELD_NUM_NODES], 2);
}

/* SLURM_* that are not the proxy's step (a step around mpiexec.hydra,
 * whose task is not the proxy): nothing taken, and said why. */
static void test_slurm_other_step(void)
{
    struct amldist r;
    slurm_node(ENV(PROXY_STEP("1")), 2651, 4, &r);
    CHECK(!amldist__known(&r, AMLDIST_FIELD_NODE_RANK));
    CHECK(!amldist__known(&r, AMLDIST_FIELD_NUM_NODES));
    CHECK_STR_HAS(r.why[AMLDIST_FIELD_NODE_RANK],
                  "SLURM_TASK_PID=2650 here is not that proxy (pid 2651)");
    slurm_node(ENV("SLURM_NODEID=1", "SLURM_STEP_NUM_NODES=2"), 2650, 4, &r);
    CHECK(!amldist__known(&r, AMLDIST_FIELD_NODE_RANK));
    CHECK_STR_HAS(r.why[AMLDIST_FIELD_NODE_RANK], "SLURM_TASK_PID unset");
}

/* A node index that cannot be one, a count that is not one proxy a node. */
static void test_slurm_bad_values(void)
{
    struct amldist r;
    slurm_node(ENV("SLURM_TASK_PID=9", "SLURM_STEP_NUM_NODES=2"), 9, 4, &r);
    CHECK(!amldist__known(&r, AMLDIST_FIELD_NODE_RANK));
    CHECK_STR_HAS(r.why[AMLDIST_FIELD_NODE_RANK], "SLURM_NODEID unset");
    slurm_node(ENV("SLURM_TASK_PID=9", "SLURM_NODEID=2",
                   "SLURM_STEP_NUM_NODES=2", "SLURM_STEP_NUM_TASKS=2"),
               9, 4, &r);
    CHECK(!amldist__known(&r, AMLDIST_FIELD_NODE_RANK));
    CHECK_STR_HAS(r.why[AMLDIST_FIELD_NODE_RANK],
                  "SLURM_NODEID=2 is no node index below PMI_SIZE=4 and "
                  "SLURM_STEP_NUM_NODES=2");
    slurm_node(ENV("SLURM_TASK_PID=9", "SLURM_NODEID=4"), 9, 4, &r);
    CHECK(!amldist__known(&r, AMLDIST_FIELD_NODE_RANK));
    slurm_node(ENV("SLURM_TASK_PID=9", "SLURM_NODEID=x"), 9, 4, &r);
    CHECK(!amldist__known(&r, AMLDIST_FIELD_NODE_RANK));
    /* Two tasks a node: the node index stands (the proxy took it), the
     * count is not the proxies'. */
    slurm_node(ENV("SLURM_TASK_PID=9", "SLURM_NODEID=1",
                   "SLURM_STEP_NUM_NODES=2", "SLURM_STEP_NUM_TASKS=4"),
               9, 8, &r);
    CHECK_INT_EQ(r.val[AMLDIST_FIELD_NODE_RANK], 1);
    CHECK(!amldist__known(&r, AMLDIST_FIELD_NUM_NODES));
    CHECK_STR_HAS(r.why[AMLDIST_FIELD_NUM_NODES],
                  "SLURM_STEP_NUM_NODES=2 and SLURM_STEP_NUM_TASKS=4, not "
                  "one proxy a node");
    /* More nodes than ranks. */
    slurm_node(ENV("SLURM_TASK_PID=9", "SLURM_NODEID=0",
                   "SLURM_STEP_NUM_NODES=3", "SLURM_STEP_NUM_TASKS=3"),
               9, 2, &r);
    CHECK_INT_EQ(r.val[AMLDIST_FIELD_NODE_RANK], 0);
    CHECK(!amldist__known(&r, AMLDIST_FIELD_NUM_NODES));
}

int main(void)
{
    RUN(test_proxy_args);
    RUN(test_slurm_step);
    RUN(test_slurm_other_step);
    RUN(test_slurm_bad_values);
    return test_summary();
}
