/*
 * amldist_bootstrap_bcast() without NCCL: rank 0 sends a line naming itself
 * and every rank prints what it received.
 *
 *     amlrun --nproc-per-node 4 build/examples/bootstrap_hello
 *     mpirun -np 4 build/examples/bootstrap_hello
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <amldist.h>

int main(void)
{
    amldist_t *layout;
    char msg[256] = "";
    int rc = amldist_init(&layout, 0);
    if (rc < 0) {
        fprintf(stderr, "bootstrap_hello: %s\n", amldist_last_error());
        return 1;
    }
    int rank = amldist_rank(layout), world = amldist_world_size(layout);
    if (rank == 0) {
        char host[64] = "?";
        gethostname(host, sizeof host - 1);
        snprintf(msg, sizeof msg, "hello from rank 0 (pid %d on %s)",
                 (int)getpid(), host);
    }
    if ((rc = amldist_bootstrap_bcast(layout, msg, sizeof msg, NULL)) < 0) {
        fprintf(stderr, "bootstrap_hello: %s (%s)\n", amldist_last_error(),
                amldist_err_name(rc));
        amldist_free(layout);
        return 1;
    }
    printf("rank %d/%d got: %s\n", rank, world, msg);
    amldist_free(layout);
    return strncmp(msg, "hello from rank 0 ", 18) ? 1 : 0;
}
