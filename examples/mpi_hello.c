/*
 * mpi_hello: libamldist and MPI in one program.  It reads its layout (asking
 * the PMIx server, with --via-pmix, by hiding the OMPI_* variables from the
 * library), then calls MPI_Init and prints what MPI says beside it, so that
 * a PMIx query before MPI_Init is shown not to disturb it.  --late reads the
 * layout after MPI_Init instead.  --exec reads it with AMLDIST_NO_PMIX and
 * re-executes itself first, as amlrun's per-process mode does: Open MPI 4
 * refuses MPI_Init to a program exec'ed by a rank that talked to PMIx.
 *
 *     mpirun -np 4 mpi_hello [--via-pmix] [--late | --exec]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <amldist.h>

extern char **environ;

static int has(int argc, char **argv, const char *opt)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], opt) == 0)
            return 1;
    return 0;
}

/* environ without Open MPI's rank variables: the library falls back to
 * PMIX_RANK and the PMIx server. */
static char **without_ompi(void)
{
    size_t n = 0, k = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + 1, sizeof *env);
    if (env == NULL)
        exit(1);
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "OMPI_COMM_WORLD_", 16) != 0 &&
            strncmp(environ[i], "OMPI_MCA_orte_num_nodes=", 24) != 0)
            env[k++] = environ[i];
    return env;
}

int main(int argc, char **argv)
{
    int via_pmix = has(argc, argv, "--via-pmix");
    int late = has(argc, argv, "--late"), exec = has(argc, argv, "--exec");
    amldist_t *h = NULL;
    char **env = via_pmix ? without_ompi() : environ;
    int mrank, msize;
    if (late)
        MPI_Init(&argc, &argv);
    int rc = amldist_init_from(&h, env, exec ? AMLDIST_NO_PMIX : 0);
    if (rc < 0) {
        fprintf(stderr, "mpi_hello: %s: %s\n", amldist_err_name(rc),
                amldist_last_error());
        return 1;
    }
    if (exec) {
        char *args[] = {argv[0], NULL, NULL};
        if (via_pmix)
            args[1] = "--via-pmix";
        amldist_free(h);
        execv("/proc/self/exe", args);
        perror("mpi_hello: execv");
        return 127;
    }
    if (!late)
        MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mrank);
    MPI_Comm_size(MPI_COMM_WORLD, &msize);
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("RANK=%d WORLD_SIZE=%d LOCAL_RANK=%d LOCAL_WORLD_SIZE=%d "
           "NODE_RANK=%d NUM_NODES=%d SOURCE=%s MPI_RANK=%d MPI_SIZE=%d "
           "MPI_SUM=%d\n",
           amldist_rank(h), amldist_world_size(h), amldist_local_rank(h),
           amldist_local_world_size(h), amldist_node_rank(h),
           amldist_num_nodes(h), amldist_source(h), mrank, msize, sum);
    fflush(stdout);
    MPI_Finalize();
    amldist_free(h);
    if (via_pmix)
        free(env);
    return 0;
}
