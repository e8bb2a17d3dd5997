/* torchrun 2.x's options (see torchopts.h). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/torchopts.h"
#include "output/msg.h"

/* The signals a user may list: those that ask a process to end.  SIGKILL
 * and SIGSTOP cannot be caught; SIGCHLD, SIGPIPE, SIGXFSZ and the job
 * control signals are amlrun's own (reaping, its output, Ctrl-Z); a fault
 * (SIGSEGV...) is no request. */
static const struct { const char *name; int sig; } listable[] = {
    {"SIGTERM", SIGTERM}, {"SIGINT", SIGINT},   {"SIGHUP", SIGHUP},
    {"SIGQUIT", SIGQUIT}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2},
    {"SIGALRM", SIGALRM}, {"SIGPWR", SIGPWR},   {"SIGXCPU", SIGXCPU},
    {"SIGVTALRM", SIGVTALRM}, {"SIGPROF", SIGPROF},
};
#define NLISTABLE (sizeof listable / sizeof listable[0])
#define WANT_SIGNALS "want a comma-separated list of SIGTERM, SIGINT, " \
    "SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGPWR, SIGXCPU, " \
    "SIGVTALRM, SIGPROF (signals that ask a job to end)"

static int refuse(const char *name, const char *val, const char *why)
{
    msg("%s%s: %s (see amlrun --help)", name, *val ? val : "''", why);
    return AMLRUN_EXIT_USAGE;
}

/* torchrun splits the list at commas and strips each name; so does
 * amlrun.  torchrun warns about a name it does not know and handles the
 * rest; amlrun refuses the line, so that a typo is not found the day the
 * signal comes. */
int on_signals_to_handle(struct amlrun_opts *o, const struct handler *h,
                         const char *name, const char *val)
{
    (void)h;
    unsigned long long set = 0;
    const char *p = val;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t n = strcspn(p, ", \t");
        const char *end = p + n;
        while (*end == ' ' || *end == '\t')
            end++;
        if (*end && *end != ',')
            return refuse(name, val, WANT_SIGNALS);
        size_t k = 0;
        while (k < NLISTABLE && (strlen(listable[k].name) != n ||
                                 strncmp(listable[k].name, p, n)))
            k++;
        if (k == NLISTABLE) {
            char why[sizeof WANT_SIGNALS + 64];
            snprintf(why, sizeof why, "'%.*s' is not one: %s",
                     n > 20 ? 20 : (int)n, p, WANT_SIGNALS);
            return refuse(name, val, n ? why : WANT_SIGNALS);
        }
        set |= 1ULL << listable[k].sig;
        if (!*end)
            break;
        p = end + 1;
    }
    o->stop_signals = set;
    o->signals_to_handle = val;
    return -1;
}

/* torchrun's handlers (torch/distributed/elastic/events/handlers.py):
 * "null" records nothing, "console" writes the agent's event to stderr,
 * "dynamic_rendezvous" is a null handler for this use.  Another would be
 * a Python logging.Handler registered in torchrun's own process. */
int on_event_log_handler(struct amlrun_opts *o, const struct handler *h,
                         const char *name, const char *val)
{
    (void)h;
    if (strcmp(val, "null") == 0 || strcmp(val, "dynamic_rendezvous") == 0)
        o->event_console = 0;
    else if (strcmp(val, "console") == 0)
        o->event_console = 1;
    else
        return refuse(name, val, "want null or console (a handler "
                      "registered in torchrun's Python cannot be: amlrun runs "
                      "no Python; --event-log FILE writes every event)");
    return -1;
}

/* torchrun loads a LogsSpecs subclass from the "torchrun.logs_specs"
 * entry points of its Python environment and calls it for every path. */
int on_logs_specs(struct amlrun_opts *o, const struct handler *h,
                  const char *name, const char *val)
{
    (void)o;
    (void)h;
    return refuse(name, val, "not supported: it names a Python class "
                  "(a torchrun.logs_specs entry point) that torchrun "
                  "imports, and amlrun runs no Python; --log-dir, "
                  "-r/--redirects, -t/--tee and --log-layout torchrun give "
                  "torchrun's default log files");
}
