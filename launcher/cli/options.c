/* struct amlrun_opts: its defaults, what follows from it, its end (see
 * options.h). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"

/* The default --python, told apart from one given by its address: the
 * workers' command then chooses the python3 that has torch. */
const char options_default_python[] = "python3";

void options_init(struct amlrun_opts *o, const char *argv0)
{
    memset(o, 0, sizeof *o);
    o->node_rank = -1;
    o->term_timeout = 30.0;
    o->run_id = "none";
    o->role = "default";
    o->rdzv_backend = "static";
    /* torchrun reads it from its environment, not an option; an empty one
     * leaves its default prefix */
    o->prefix_template = getenv("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE");
    if (o->prefix_template && !*o->prefix_template)
        o->prefix_template = NULL;
    /* torchrun 2.x's default --signals-to-handle */
    o->stop_signals = 1ULL << SIGTERM | 1ULL << SIGINT | 1ULL << SIGHUP |
                      1ULL << SIGQUIT;
    /* torchrun runs scripts under $PYTHON_EXEC, else its own Python. */
    o->python = getenv("AMLRUN_PYTHON");
    if (!o->python || !*o->python)
        o->python = getenv("PYTHON_EXEC");
    if (!o->python || !*o->python)
        o->python = options_default_python; /* chosen: worker/pychoose.h */
    /* A copy of the seed's launch.py (a link named launch or launch.py)
     * behaves as torch.distributed.launch did. */
    const char *base = strrchr(argv0, '/');
    base = base ? base + 1 : argv0;
    if (strcmp(base, "launch") == 0 || strcmp(base, "launch.py") == 0)
        o->legacy = 1;
}

int headnode_wanted(const struct headnode_opts *o)
{
    return o->hostfile != NULL || o->hosts != NULL || o->launcher != NULL;
}

int options_c10d(const struct amlrun_opts *o)
{
    /* on_rdzv_backend() took "static" or a backend of the registry */
    return !o->standalone && strcmp(o->rdzv_backend, "static") != 0;
}

int options_torchrun_layout(const struct amlrun_opts *o)
{
    return o->log_layout == LOG_LAYOUT_TORCHRUN ||
           (o->log_layout == LOG_LAYOUT_AUTO && o->redirects_given);
}

void options_free(struct amlrun_opts *o)
{
    std_map_free(&o->redirects);
    std_map_free(&o->tee);
    free(o->ranks.r);
    free(o->local_ranks.r);
    free(o->owned_addr);
    o->ranks.r = o->local_ranks.r = NULL;
    o->owned_addr = NULL;
}
