/* Placeholder until topology and binding land (issue 4): binding is off. */
#include <stdio.h>

#include "bind.h"

int bind_setup(const struct amlrun_bind_opts *o, int nlocal,
               struct amlrun_binding **out)
{
    (void)o;
    (void)nlocal;
    *out = NULL;
    return 0;
}

int bind_worker_env(const struct amlrun_binding *b, int local_rank,
                    char ***envp)
{
    (void)b;
    (void)local_rank;
    (void)envp;
    return 0;
}

int bind_apply_child(const struct amlrun_binding *b, int local_rank)
{
    (void)b;
    (void)local_rank;
    return 0;
}

void bind_report(const struct amlrun_binding *b, int local_rank, int rank,
                 FILE *f)
{
    (void)b;
    (void)local_rank;
    (void)rank;
    (void)f;
}

void bind_free(struct amlrun_binding *b)
{
    (void)b;
}

int topo_main(const struct amlrun_bind_opts *o)
{
    (void)o;
    fprintf(stderr, "amlrun: --topo: topology support is not built yet\n");
    return 2;
}
