/* The node agents' agreement on worker counts (see nodecheck.h). */
#include <limits.h>
#include <string.h>

#include "amldist.h"
#include "msg.h"
#include "nodecheck.h"

int nodecheck_run(const struct amlrun_opts *o, const struct plan *p)
{
    int agents = amldist_world_size(p->layout);
    if (agents <= 1 || o->no_node_check)
        return -1;
    amldist_bootstrap_options_t bo = AMLDIST_BOOTSTRAP_OPTIONS_INIT;
    /* The nodes join here, as torchrun's agents join its rendezvous: a
     * join timeout given in --rdzv-conf bounds the wait; else the
     * bootstrap's own (AMLDIST_BOOTSTRAP_TIMEOUT, 300 s). */
    double join = rdzv_conf_join_timeout(
        &o->rdzv_conf, o->standalone || strcmp(o->rdzv_backend, "c10d") == 0);
    if (join > 0) {
        double ms = join * 1000;
        bo.timeout_ms = ms >= INT_MAX ? INT_MAX : (int)ms;
    }
    if (o->verbose)
        msg("checking with the other %d amlruns of this job that each starts "
            "%d workers (at %s, bootstrap port)", agents - 1, p->nproc,
            amldist_master_addr(p->layout));
    int rc = amldist_bootstrap_agree(p->layout, p->nproc,
                                     "workers per node", &bo);
    if (rc == 0)
        return -1;
    if (rc == AMLDIST_ECONFLICT || rc == AMLDIST_EPEER) {
        msg("the job's amlruns start different numbers of workers, so their "
            "ranks would not fit together: %s; no worker started (give every "
            "node the same --nproc-per-node)", amldist_last_error());
        return AMLRUN_EXIT_USAGE;
    }
    msg("cannot check the worker count with the other amlruns of this job: "
        "%s; no worker started", amldist_last_error());
    return AMLRUN_EXIT_SYSTEM;
}
