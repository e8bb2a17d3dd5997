/* Options, derived workers, export, and concurrent use. */
#include <pthread.h>

#include "layout_test.h"

static amldist_t *with_options(amldist_options_t *o)
{
    amldist_t *h = NULL;
    int rc = amldist_init_opts(&h, o);
    if (rc != 0)
        TEST__FAIL("amldist_init_opts: %s: %s", amldist_err_name(rc),
                   amldist_last_error());
    return h;
}

/* amlrun --nnodes 2 --node-rank 1 with no launcher around it. */
static void test_options_per_node(void)
{
    amldist_options_t o = AMLDIST_OPTIONS_INIT;
    o.envp = ENV("HOME=/");
    o.num_nodes = 2;
    o.node_rank = 1;
    o.master_addr = "10.1.1.1";
    o.master_port = 4000;
    amldist_t *h = with_options(&o);
    CHECK_LAYOUT(h, 1, 2, 0, 1, 1, 2);
    CHECK_STR_EQ(amldist_source(h), "options");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                 "option node_rank=1");
    CHECK_STR_EQ(amldist_master_addr(h), "10.1.1.1");
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_MASTER_ADDR),
                 "option master_addr=10.1.1.1");
    CHECK_INT_EQ(amldist_master_port(h), 4000);
    amldist_free(h);
}

static void test_options_half(void)
{
    amldist_options_t o = AMLDIST_OPTIONS_INIT;
    amldist_t *h = (amldist_t *)1;
    o.envp = ENV("HOME=/");
    o.num_nodes = 2;
    CHECK_INT_EQ(amldist_init_opts(&h, &o), AMLDIST_EMISSING);
    CHECK_STR_HAS(amldist_last_error(), "option num_nodes=2");
    o.num_nodes = 0;
    o.node_rank = 1;
    CHECK_INT_EQ(amldist_init_opts(&h, &o), AMLDIST_EMISSING);
    CHECK_STR_HAS(amldist_last_error(), "option node_rank=1");
    o.num_nodes = 1;
    o.node_rank = -1;
    h = with_options(&o);
    CHECK_LAYOUT(h, 0, 1, 0, 1, 0, 1);
    amldist_free(h);
}

static void test_options_override_env(void)
{
    amldist_options_t o = AMLDIST_OPTIONS_INIT;
    o.envp = ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                 "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=1",
                 "MASTER_ADDR=10.0.0.1", "MASTER_PORT=1111");
    o.flags = AMLDIST_NO_PMIX;
    o.num_nodes = 2;
    o.node_rank = 1;
    o.master_addr = "head";
    o.master_port = 2222;
    amldist_t *h = with_options(&o);
    CHECK_LAYOUT(h, 1, 2, 0, 1, 1, 2);
    CHECK_STR_EQ(amldist_source(h), "ompi");
    CHECK_STR_EQ(amldist_master_addr(h), "head");
    CHECK_INT_EQ(amldist_master_port(h), 2222);
    amldist_free(h);
}

/* Under a launcher an option may fill in or repeat a value, not replace it:
 * --node-rank 0 on Slurm's node 1 gave ranks 2,3 with NODE_RANK 0. */
static void test_options_conflict_env(void)
{
    amldist_options_t o = AMLDIST_OPTIONS_INIT;
    amldist_t *h = (amldist_t *)1;
    o.envp = ENV("SLURM_JOB_ID=7", "SLURM_STEP_ID=0", "SLURM_PROCID=1",
                 "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_NODEID=1",
                 "SLURM_NNODES=2", "SLURM_STEP_TASKS_PER_NODE=1(x2)");
    o.node_rank = 0;
    CHECK_INT_EQ(amldist_init_opts(&h, &o), AMLDIST_ECONFLICT);
    CHECK_STR_EQ(amldist_last_error(),
                 "option node_rank=0 conflicts with SLURM_NODEID=1");
    o.node_rank = -1;
    o.num_nodes = 1;
    CHECK_INT_EQ(amldist_init_opts(&h, &o), AMLDIST_ECONFLICT);
    CHECK_STR_HAS(amldist_last_error(), "option num_nodes=1 conflicts with ");
    CHECK_STR_HAS(amldist_last_error(), "SLURM_NNODES=2");
    /* the same values: fine */
    o.num_nodes = 2;
    o.node_rank = 1;
    h = with_options(&o);
    CHECK_LAYOUT(h, 1, 2, 0, 1, 1, 2);
    CHECK_STR_EQ(amldist_explain(h, AMLDIST_FIELD_NODE_RANK),
                 "option node_rank=1");
    amldist_free(h);
}

static void test_options_invalid(void)
{
    amldist_options_t o = AMLDIST_OPTIONS_INIT;
    amldist_t *h;
    o.envp = ENV("HOME=/");
    o.master_addr = "no such host!";
    CHECK_INT_EQ(amldist_init_opts(&h, &o), AMLDIST_EPARSE);
    CHECK_STR_HAS(amldist_last_error(), "option master_addr=\"no such host!\"");
    o.master_addr = NULL;
    o.master_port = 70000;
    CHECK_INT_EQ(amldist_init_opts(&h, &o), AMLDIST_ERANGE);
    CHECK_STR_HAS(amldist_last_error(), "option master_port=70000");
    o.master_port = 0;
    o.num_nodes = 2;
    o.node_rank = 2;
    CHECK_INT_EQ(amldist_init_opts(&h, &o), AMLDIST_ERANGE);
    CHECK_STR_HAS(amldist_last_error(), "option node_rank=2");
}

/* envp NULL in the options: this process's environment. */
static void test_options_environ(void)
{
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "3", 1);
    amldist_options_t o = AMLDIST_OPTIONS_INIT;
    amldist_t *h = with_options(&o);
    CHECK_INT_EQ(amldist_rank(h), 1);
    CHECK_INT_EQ(amldist_world_size(h), 3);
    amldist_free(h);
    CHECK_INT_EQ(amldist_init(&h, 0), 0);
    CHECK_INT_EQ(amldist_world_size(h), 3);
    amldist_free(h);
}

static amldist_t *two_node_launcher(void)
{
    return layout_of(ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                         "OMPI_COMM_WORLD_LOCAL_RANK=0",
                         "OMPI_COMM_WORLD_LOCAL_SIZE=1",
                         "OMPI_MCA_orte_num_nodes=2",
                         "AZ_BATCH_MASTER_NODE=10.0.0.4:6000"),
                     AMLDIST_NO_PMIX);
}

static void test_derive_child(void)
{
    amldist_t *p = two_node_launcher(), *c = NULL;
    CHECK_INT_EQ(amldist_node_rank(p), AMLDIST_EUNKNOWN);
    amldist_free(p);
    amldist_options_t o = AMLDIST_OPTIONS_INIT;
    o.envp = ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                 "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=1",
                 "AZ_BATCH_MASTER_NODE=10.0.0.4:6000");
    o.flags = AMLDIST_NO_PMIX;
    o.num_nodes = 2;
    o.node_rank = 1;
    p = with_options(&o);
    CHECK_INT_EQ(amldist_derive_child(p, 4, 2, &c), 0);
    CHECK_LAYOUT(c, 6, 8, 2, 4, 1, 2);
    CHECK_STR_EQ(amldist_source(c), "amlrun");
    CHECK_STR_HAS(amldist_explain(c, AMLDIST_FIELD_RANK),
                  "derived: 1 * 4 + 2 (launcher rank: OMPI_COMM_WORLD_RANK=1)");
    CHECK_STR_HAS(amldist_explain(c, AMLDIST_FIELD_WORLD_SIZE), "derived");
    CHECK_STR_EQ(amldist_master_addr(c), "10.0.0.4");
    CHECK_INT_EQ(amldist_master_port(c), 6105);
    amldist_free(c);
    amldist_free(p);
}

static void test_derive_child_unknown_local(void)
{
    amldist_t *p = layout_of(ENV("RANK=1", "WORLD_SIZE=2"), 0), *c;
    CHECK_INT_EQ(amldist_derive_child(p, 3, 0, &c), 0);
    CHECK_LAYOUT(c, 3, 6, -1, -1, -1, -1);
    CHECK_STR_HAS(amldist_explain(c, AMLDIST_FIELD_LOCAL_RANK), "unknown");
    amldist_free(c);
    amldist_free(p);
}

static void test_derive_child_errors(void)
{
    amldist_t *p = layout_of(ENV("RANK=1", "WORLD_SIZE=2"), 0), *c = NULL;
    CHECK_INT_EQ(amldist_derive_child(p, 4, 4, &c), AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "worker index 4 of nproc 4");
    CHECK_INT_EQ(amldist_derive_child(p, 0, 0, &c), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_derive_child(p, 4, -1, &c), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_derive_child(NULL, 4, 0, &c), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_derive_child(p, 4, 0, NULL), AMLDIST_EINVAL);
    amldist_free(p);
    p = layout_of(ENV("RANK=1", "WORLD_SIZE=1000000000"), 0);
    CHECK_INT_EQ(amldist_derive_child(p, 4, 0, &c), AMLDIST_ERANGE);
    CHECK_STR_HAS(amldist_last_error(), "WORLD_SIZE=1000000000");
    CHECK(c == NULL);
    amldist_free(p);
}

static const char *find(char **env, const char *name)
{
    size_t n = strlen(name);
    const char *found = NULL;
    for (; *env != NULL; env++)
        if (strncmp(*env, name, n) == 0 && (*env)[n] == '=') {
            if (found != NULL)
                return "DUPLICATE";
            found = *env + n + 1;
        }
    return found;
}

static void test_export_envp(void)
{
    amldist_t *h = layout_of(ENV("TORCHELASTIC_RUN_ID=x", "RANK=5",
                                 "WORLD_SIZE=8", "LOCAL_RANK=1",
                                 "LOCAL_WORLD_SIZE=4", "GROUP_RANK=1",
                                 "MASTER_ADDR=fd00::1", "MASTER_PORT=29400"),
                             0);
    char **env = NULL;
    CHECK_INT_EQ(amldist_export_envp(h, ENV("PATH=/bin", "RANK=99",
                                            "AMLDIST_LAUNCHER=amlrun",
                                            "FOO=bar=baz"),
                                     &env),
                 0);
    CHECK_STR_EQ(find(env, "RANK"), "5");
    CHECK_STR_EQ(find(env, "WORLD_SIZE"), "8");
    CHECK_STR_EQ(find(env, "LOCAL_RANK"), "1");
    CHECK_STR_EQ(find(env, "LOCAL_WORLD_SIZE"), "4");
    CHECK_STR_EQ(find(env, "NODE_RANK"), "1");
    CHECK_STR_EQ(find(env, "GROUP_RANK"), "1");
    CHECK_STR_EQ(find(env, "GROUP_WORLD_SIZE"), "2");
    CHECK_STR_EQ(find(env, "ROLE_RANK"), "5");
    CHECK_STR_EQ(find(env, "ROLE_WORLD_SIZE"), "8");
    CHECK_STR_EQ(find(env, "MASTER_ADDR"), "fd00::1");
    CHECK_STR_EQ(find(env, "MASTER_PORT"), "29400");
    CHECK_STR_EQ(find(env, "AMLDIST_LAUNCHER"), "amlrun");
    CHECK_STR_EQ(find(env, "PATH"), "/bin");
    CHECK_STR_EQ(find(env, "FOO"), "bar=baz");
    amldist_envp_free(env);
    amldist_free(h);
}

/* Unknown values are not written, and a stale one from the base goes. */
static void test_export_envp_unknown(void)
{
    amldist_t *h = layout_of(ENV("RANK=2", "WORLD_SIZE=4",
                                 "MASTER_ADDR=head"),
                             0);
    char **env = NULL;
    CHECK_INT_EQ(amldist_export_envp(h, ENV("LOCAL_RANK=7", "NODE_RANK=3"),
                                     &env),
                 0);
    CHECK(find(env, "LOCAL_RANK") == NULL);
    CHECK(find(env, "NODE_RANK") == NULL);
    CHECK(find(env, "GROUP_WORLD_SIZE") == NULL);
    CHECK_STR_EQ(find(env, "RANK"), "2");
    amldist_envp_free(env);
    CHECK_INT_EQ(amldist_export_envp(h, NULL, &env), 0);
    CHECK_STR_EQ(find(env, "WORLD_SIZE"), "4");
    amldist_envp_free(env);
    CHECK_INT_EQ(amldist_export_envp(NULL, NULL, &env), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_export_envp(h, NULL, NULL), AMLDIST_EINVAL);
    amldist_envp_free(NULL);
    amldist_free(h);
}

/* What a launcher writes for its worker reads back the same, as amlrun. */
static void test_round_trip(void)
{
    amldist_options_t o = AMLDIST_OPTIONS_INIT;
    o.envp = ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                 "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=1",
                 "OMPI_MCA_orte_num_nodes=2",
                 "AZ_BATCH_MASTER_NODE=10.0.0.4:6000");
    o.node_rank = 1;
    amldist_t *p = with_options(&o), *c, *back;
    CHECK_INT_EQ(amldist_derive_child(p, 2, 1, &c), 0);
    char **env;
    CHECK_INT_EQ(amldist_export_envp(c, o.envp, &env), 0);
    back = layout_of(env, 0);
    CHECK_LAYOUT(back, 3, 4, 1, 2, 1, 2);
    CHECK_STR_EQ(amldist_source(back), "amlrun");
    CHECK_STR_EQ(amldist_master_addr(back), "10.0.0.4");
    CHECK_INT_EQ(amldist_master_port(back), 6105);
    amldist_free(back);
    amldist_envp_free(env);
    amldist_free(c);
    amldist_free(p);
}

static void test_export_env(void)
{
    setenv("NODE_RANK", "9", 1);
    amldist_t *h = layout_of(ENV("RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1",
                                 "LOCAL_WORLD_SIZE=2", "MASTER_PORT=3000"),
                             0);
    CHECK_INT_EQ(amldist_export_env(h), 0);
    CHECK_STR_EQ(getenv("RANK"), "1");
    CHECK_STR_EQ(getenv("ROLE_WORLD_SIZE"), "2");
    CHECK_STR_EQ(getenv("NODE_RANK"), "0");
    CHECK_STR_EQ(getenv("GROUP_WORLD_SIZE"), "1");
    CHECK_STR_EQ(getenv("MASTER_ADDR"), "127.0.0.1");
    CHECK_STR_EQ(getenv("MASTER_PORT"), "3000");
    CHECK_STR_EQ(getenv("AMLDIST_LAUNCHER"), "amlrun");
    amldist_free(h);
    CHECK_INT_EQ(amldist_init(&h, 0), 0);
    CHECK_STR_EQ(amldist_source(h), "amlrun");
    CHECK_LAYOUT(h, 1, 2, 1, 2, 0, 1);
    amldist_free(h);
    CHECK_INT_EQ(amldist_export_env(NULL), AMLDIST_EINVAL);
}

/* Each thread sees its own last error, and shared handles read alike. */
static amldist_t *shared;

static void *worker(void *arg)
{
    long bad = (long)arg;
    for (int i = 0; i < 200; i++) {
        amldist_t *h = NULL;
        int rc = amldist_init_from(&h, bad ? ENV("RANK=x", "WORLD_SIZE=2")
                                           : ENV("RANK=1", "WORLD_SIZE=2"),
                                   0);
        if (bad ? rc != AMLDIST_EPARSE ||
                      strstr(amldist_last_error(), "RANK=\"x\"") == NULL
                : rc != 0 || amldist_last_error()[0] != '\0')
            return (void *)1;
        amldist_free(h);
        if (amldist_rank(shared) != 3 || amldist_world_size(shared) != 4)
            return (void *)1;
    }
    return NULL;
}

static void test_threads(void)
{
    shared = layout_of(ENV("RANK=3", "WORLD_SIZE=4"), 0);
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        CHECK_INT_EQ(pthread_create(&t[i], NULL, worker, (void *)(i % 2)), 0);
    for (int i = 0; i < 4; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        CHECK(ret == NULL);
    }
    amldist_free(shared);
}

int main(void)
{
    RUN(test_options_per_node);
    RUN(test_options_half);
    RUN(test_options_override_env);
    RUN(test_options_conflict_env);
    RUN(test_options_invalid);
    RUN(test_options_environ);
    RUN(test_derive_child);
    RUN(test_derive_child_unknown_local);
    RUN(test_derive_child_errors);
    RUN(test_export_envp);
    RUN(test_export_envp_unknown);
    RUN(test_round_trip);
    RUN(test_export_env);
    RUN(test_threads);
    return test_summary();
}
