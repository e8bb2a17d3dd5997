/*
 * amldist_bootstrap_agree(): every rank checks one number against rank 0's
 * before anything depends on it (amlrun's node agents: their worker counts,
 * from which every worker's RANK is computed).  Two exchanges of the
 * bootstrap: rank 0's value goes out, then a barrier in which a rank that
 * disagrees checks in as failed, so that every rank, rank 0 too, returns the
 * same verdict and none goes ahead alone.
 */
#include <stdio.h>
#include <string.h>

#include "bootstrap/bootstrap_internal.h"

int amldist_bootstrap_agree(const amldist_t *layout, int value,
                            const char *what,
                            const amldist_bootstrap_options_t *opts)
{
    amldist__bs_params_t p, barrier;
    unsigned char wire[4];
    int rc;

    amldist__clear_error();
    if (!what)
        what = "value";
    /* Both calls are numbered first, on every rank alike, so that the
     * ranks' later calls stay in step whatever happens in between. */
    if ((rc = amldist__bs_setup(layout, opts, &p)) < 0 ||
        (rc = amldist__bs_setup(layout, opts, &barrier)) < 0 || p.world <= 1)
        return rc;
    amldist__net_put_u32(wire, (uint32_t)value);
    /* Rank 0's value out.  A rank that fails here returns at once (rank 0:
     * a rank never came); the others learn it at the barrier's timeout. */
    if ((rc = amldist__bs_exchange(&p, wire, sizeof wire)) < 0)
        return rc;
    int theirs = (int)amldist__net_get_u32(wire);
    char mine[AMLDIST__BS_WHY_LEN] = "";
    int differs = theirs != value;
    if (differs)
        snprintf(mine, sizeof mine, "%s: rank %d has %d, rank 0 has %d", what,
                 p.rank, value, theirs);
    barrier.barrier = 1;
    barrier.failed = differs;
    memcpy(barrier.why, mine, sizeof barrier.why);
    unsigned char verdict = 1;
    rc = amldist__bs_exchange(&barrier, &verdict, sizeof verdict);
    /* A rank that disagrees says so itself; the others return EPEER with
     * its message, from the barrier. */
    if (differs)
        return amldist__fail(AMLDIST_ECONFLICT, "%s", mine);
    return rc;
}
