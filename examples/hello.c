/*
 * hello: print this process's place in the job, one KEY=VALUE per line, as
 * libamldist reads it from whatever launched us.  With --explain, one more
 * line per value saying where it came from:
 *
 *     $ mpirun -np 2 hello --explain
 *     RANK=1
 *     ...
 *     EXPLAIN_RANK=OMPI_COMM_WORLD_RANK=1
 */
#include <stdio.h>
#include <string.h>

#include <amldist.h>

static const char *const keys[AMLDIST_FIELD_COUNT] = {
    "RANK",      "WORLD_SIZE", "LOCAL_RANK",  "LOCAL_WORLD_SIZE",
    "NODE_RANK", "NUM_NODES",  "MASTER_ADDR", "MASTER_PORT",
};

static int value(const amldist_t *h, amldist_field_t f)
{
    switch (f) {
    case AMLDIST_FIELD_RANK: return amldist_rank(h);
    case AMLDIST_FIELD_WORLD_SIZE: return amldist_world_size(h);
    case AMLDIST_FIELD_LOCAL_RANK: return amldist_local_rank(h);
    case AMLDIST_FIELD_LOCAL_WORLD_SIZE: return amldist_local_world_size(h);
    case AMLDIST_FIELD_NODE_RANK: return amldist_node_rank(h);
    case AMLDIST_FIELD_NUM_NODES: return amldist_num_nodes(h);
    case AMLDIST_FIELD_MASTER_PORT: return amldist_master_port(h);
    default: return AMLDIST_EINVAL;
    }
}

int main(int argc, char **argv)
{
    int explain = argc > 1 && strcmp(argv[1], "--explain") == 0;
    if (argc > 2 || (argc == 2 && !explain)) {
        fprintf(stderr, "usage: hello [--explain]\n");
        return 2;
    }
    amldist_t *h;
    int rc = amldist_init(&h, 0);
    if (rc < 0) {
        fprintf(stderr, "hello: %s: %s\n", amldist_err_name(rc),
                amldist_last_error());
        return 1;
    }
    /* One write per process, so that lines of mpirun's ranks do not mix. */
    char out[8192];
    size_t n = 0;
    for (int f = 0; f < AMLDIST_FIELD_COUNT; f++) {
        if (f == AMLDIST_FIELD_MASTER_ADDR) {
            const char *a = amldist_master_addr(h);
            n += (size_t)snprintf(out + n, sizeof out - n, "%s=%s\n", keys[f],
                                  a != NULL ? a : "unknown");
        } else {
            int v = value(h, (amldist_field_t)f);
            if (v >= 0)
                n += (size_t)snprintf(out + n, sizeof out - n, "%s=%d\n",
                                      keys[f], v);
            else
                n += (size_t)snprintf(out + n, sizeof out - n, "%s=unknown\n",
                                      keys[f]);
        }
    }
    n += (size_t)snprintf(out + n, sizeof out - n, "SOURCE=%s\n",
                          amldist_source(h));
    for (int f = 0; explain && f < AMLDIST_FIELD_COUNT; f++)
        n += (size_t)snprintf(out + n, sizeof out - n, "EXPLAIN_%s=%s\n",
                              keys[f], amldist_explain(h, (amldist_field_t)f));
    fwrite(out, 1, n < sizeof out ? n : sizeof out - 1, stdout);
    amldist_free(h);
    return 0;
}
