/* The supervisor's plugins (see plugins.h). */
#include "plugins/events.h"
#include "plugins/hang.h"
#include "plugins/plane.h"
#include "plugins/query.h"
#include "plugins/straggler.h"
#include "run/plugins.h"

/* The order of every callback: at the job's end the query socket closes
 * first, then the slowest-rank lines (this node's, then the job's); the
 * event log comes last, so that its events follow what the others did. */
const struct job_plugin *const job_plugin_list[] = {
    &query_plugin, &straggler_plugin, &plane_plugin, &hang_plugin,
    &events_plugin, NULL,
};

void plugins_job_start(struct eventlog *e, const struct amlrun_opts *o,
                       const char *host, int node, int nproc,
                       const char *entry)
{
    events_job_start(e, o, host, node, nproc, entry);
}
