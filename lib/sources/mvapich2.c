/* MVAPICH2: MV2_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE.  It exports no
 * node index; one node (LOCAL_SIZE == SIZE) is node 0, see layout/layout.c. */
#include "sources/sources.h"

int amldist__src_mvapich2(const amldist__env_t *env, struct amldist *r)
{
    amldist__reading_init(r, "mvapich2");
    int rc = amldist__env_quad(env, r, "MV2_COMM_WORLD_RANK",
                               "MV2_COMM_WORLD_SIZE",
                               "MV2_COMM_WORLD_LOCAL_RANK",
                               "MV2_COMM_WORLD_LOCAL_SIZE");
    if (rc == 1)
        amldist__why(r, AMLDIST_FIELD_NODE_RANK,
                     "unknown: MVAPICH2 exports no node index");
    return rc;
}
