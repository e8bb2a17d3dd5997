/* Placeholder until head-node mode lands (issue 6). */
#include <stdio.h>

#include "headnode.h"

int headnode_wanted(const struct headnode_opts *o)
{
    return o->hostfile != NULL || o->hosts != NULL;
}

int headnode_run(const struct headnode_opts *o, const char *self, int argc,
                 char *const argv[])
{
    (void)o;
    (void)self;
    (void)argc;
    (void)argv;
    fprintf(stderr, "amlrun: head-node mode is not built yet\n");
    return 2;
}
