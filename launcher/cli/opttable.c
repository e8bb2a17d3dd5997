/* amlrun's option table (see opttable.h). */
#include <stddef.h>
#include <string.h>

#include "cli/opttable.h"
#include "rdzv/backends.h"

const struct option_def opttable[] = {
    {"nproc-per-node", ARG_REQUIRED | PET, O_NPROC},
    {"nnodes", ARG_REQUIRED | PET, O_NNODES},
    {"node-rank", ARG_REQUIRED | PET, O_NODE_RANK},
    {"master-addr", ARG_REQUIRED | PET, O_MASTER_ADDR},
    {"master-port", ARG_REQUIRED | PET, O_MASTER_PORT},
    {"local-addr", ARG_REQUIRED | PET, O_LOCAL_ADDR},
    {"standalone", ARG_NONE | PET, O_STANDALONE},
    {"no-node-check", ARG_NONE, O_NO_NODE_CHECK},
    {"mode", ARG_REQUIRED, O_MODE},
    {"run-id", ARG_REQUIRED, O_RUN_ID},
    {"rdzv-id", ARG_REQUIRED | PET, O_RUN_ID},
    {"rdzv-endpoint", ARG_REQUIRED | PET, O_RDZV_ENDPOINT},
    {"rdzv-backend", ARG_REQUIRED | PET, O_RDZV_BACKEND},
    {"max-restarts", ARG_REQUIRED | PET, O_MAX_RESTARTS},
    {"term-timeout", ARG_REQUIRED, O_TERM_TIMEOUT},
    {"ignore-sighup", ARG_NONE, O_IGNORE_SIGHUP},
    {"module", ARG_NONE | PET, O_MODULE},
    {"no-python", ARG_NONE | PET, O_NO_PYTHON},
    {"use-env", ARG_NONE, O_USE_ENV},
    {"legacy-launch", ARG_NONE, O_LEGACY},
    {"python", ARG_REQUIRED, O_PYTHON},
    {"prefix", ARG_OPTIONAL, O_PREFIX},
    {"tee", ARG_REQUIRED | PET, O_TEE},
    {"log-dir", ARG_REQUIRED | PET, O_LOG_DIR},
    {"ranks", ARG_REQUIRED, O_RANKS},
    {"local-ranks-filter", ARG_REQUIRED, O_LOCAL_RANKS},
    {"redirects", ARG_REQUIRED | PET, O_REDIRECTS},
    {"log-layout", ARG_REQUIRED, O_LOG_LAYOUT},
    {"stdin", ARG_REQUIRED, O_STDIN},
    {"dry-run", ARG_OPTIONAL, O_DRY_RUN},
    {"verbose", ARG_NONE, O_VERBOSE},
    {"quiet", ARG_NONE, O_QUIET},
    {"cpu-bind", ARG_REQUIRED, O_CPU_BIND},
    {"mem-bind", ARG_REQUIRED, O_MEM_BIND},
    {"nic-bind", ARG_REQUIRED, O_NIC_BIND},
    {"gpu-bind", ARG_REQUIRED, O_GPU_BIND},
    {"numa-binding", ARG_REQUIRED, O_NUMA_BINDING}, /* torchrun 2.x */
    {"topology", ARG_REQUIRED, O_TOPOLOGY},
    {"report-bindings", ARG_OPTIONAL, O_REPORT_BINDINGS},
    {"topo", ARG_OPTIONAL, O_TOPO},
    {"output", ARG_REQUIRED, O_OUTPUT},
    {"hostfile", ARG_REQUIRED, O_HOSTFILE},
    {"hosts", ARG_REQUIRED, O_HOSTS},
    {"launcher", ARG_REQUIRED, O_LAUNCHER},
    {"help", ARG_NONE, O_HELP},
    {"version", ARG_NONE, O_VERSION},
    /* torchrun's, accepted for its command lines (see amlrun(1)) */
    {"monitor-interval", ARG_REQUIRED | PET, O_MONITOR_INTERVAL},
    {"start-method", ARG_REQUIRED | PET, O_START_METHOD},
    {"rdzv-conf", ARG_REQUIRED | PET, O_RDZV_CONF},
    {"role", ARG_REQUIRED | PET, O_ROLE},
    {"run-path", ARG_NONE | PET, O_RUN_PATH},
    {"signals-to-handle", ARG_REQUIRED | PET, O_SIGNALS_TO_HANDLE},
    {"event-log-handler", ARG_REQUIRED | PET, O_EVENT_LOG_HANDLER},
    {"logs-specs", ARG_REQUIRED, O_LOGS_SPECS},
    {"event-log", ARG_REQUIRED, O_EVENT_LOG},
    {"result-json", ARG_REQUIRED, O_RESULT_JSON},
    /* a running job, asked (query/client.h) */
    {"status", ARG_OPTIONAL, O_STATUS},
    {"stacks", ARG_NONE, O_STACKS},
    {"hang-timeout", ARG_REQUIRED, O_HANG_TIMEOUT},
    {"hang-report", ARG_REQUIRED, O_HANG_REPORT},
    {"timeout", ARG_REQUIRED, O_TIMEOUT},
    {"make-secret", ARG_NONE, O_MAKE_SECRET},
    {NULL, ARG_NONE, O_COUNT},
};

static const struct { char c; enum opt_id id; } short_options[] = {
    {'m', O_MODULE}, {'v', O_VERBOSE}, {'q', O_QUIET},
    {'h', O_HELP},   {'V', O_VERSION},
    /* torchrun's, with a value: -r 3, -r3, -t 0:1,1:2 */
    {'r', O_REDIRECTS}, {'t', O_TEE},
};

/* How `name` (up to n bytes, '_' as '-') compares with option `d`'s:
 * 2 the same, 1 a prefix of it, 0 neither. */
static int name_match(const struct option_def *d, const char *name, size_t n)
{
    size_t j = 0;
    while (j < n && d->name[j] == (name[j] == '_' ? '-' : name[j]))
        j++;
    if (j < n)
        return 0;
    return d->name[j] == '\0' ? 2 : 1;
}

size_t opttable_candidates(const char *name, const struct option_def **out,
                           size_t max)
{
    size_t n = strcspn(name, "="), count = 0;
    unsigned char seen[O_COUNT] = {0};
    for (const struct option_def *d = opttable; d->name; d++) {
        if (!name_match(d, name, n) || seen[d->id])
            continue;
        seen[d->id] = 1;
        if (count < max)
            out[count] = d;
        count++;
    }
    return count;
}

const struct option_def *opttable_find(const char *name)
{
    size_t n = strcspn(name, "=");
    if (n == 0)
        return NULL;
    for (const struct option_def *d = opttable; d->name; d++)
        if (name_match(d, name, n) == 2)
            return d;
    const struct option_def *only;
    return opttable_candidates(name, &only, 1) == 1 ? only : NULL;
}

const struct option_def *opttable_short(char c)
{
    for (size_t k = 0; k < sizeof short_options / sizeof short_options[0]; k++) {
        if (short_options[k].c != c)
            continue;
        for (const struct option_def *d = opttable; d->name; d++)
            if (d->id == short_options[k].id)
                return d;
    }
    return NULL;
}

int opttable_takes_value(const char *name)
{
    const struct option_def *d = opttable_find(name);
    return d != NULL && (d->arg & ARG_MASK) == ARG_REQUIRED;
}

/* What each option's value may be, by option: the parser's words (the
 * library's, for the binding modes), or a kind of path.  Kept beside the
 * table so that the completions and --help say the same; the tests try
 * every word with --dry-run and look for each list in --help.
 * --rdzv-backend's: static, then the names of the library's registry of
 * rendezvous backends (lib/rdzv/backends.h), one literal at compile time. */
#define BACKEND_WORD(name, ops) " " name
static const struct { enum opt_id id; const char *values; } option_values[] = {
    {O_NPROC, "gpu auto cpu"},
    {O_RDZV_BACKEND, "static" AMLDIST__RZ_BACKENDS(BACKEND_WORD)},
    {O_MODE, "auto node process"},
    {O_TEE, "0 1 2 3"},
    {O_REDIRECTS, "0 1 2 3"},
    {O_LOG_LAYOUT, "amlrun torchrun"},
    {O_STDIN, "all none"},
    {O_CPU_BIND, "none numa exclusive socket package l3"},
    {O_NUMA_BINDING, "node socket exclusive core-complex"},
    {O_MEM_BIND, "none local strict"},
    {O_NIC_BIND, "none export ucx nccl"},
    {O_GPU_BIND, "none single"},
    {O_REPORT_BINDINGS, "json"},
    {O_DRY_RUN, "json"},
    {O_TOPO, "json"},
    {O_STATUS, "json"},
    {O_RESULT_JSON, "<file>"},
    {O_HANG_REPORT, "<file>"},
    {O_LAUNCHER, "mpirun slurm"},
    {O_START_METHOD, "spawn fork forkserver"},
    {O_PYTHON, "<command>"},
    {O_LOG_DIR, "<dir>"},
    {O_TOPOLOGY, "<file>"},
    {O_OUTPUT, "<file>"},
    {O_HOSTFILE, "<file>"},
};
#undef BACKEND_WORD

const char *opttable_values(const struct option_def *d)
{
    for (size_t k = 0; k < sizeof option_values / sizeof option_values[0]; k++)
        if (option_values[k].id == d->id)
            return option_values[k].values;
    return NULL;
}

void opttable_print_spec(FILE *f)
{
    static const char *const kinds[] = {"none", "required", "optional"};
    for (const struct option_def *d = opttable; d->name; d++) {
        const char *v = opttable_values(d);
        fprintf(f, "long\t%s\t%s\t%s\n", d->name, kinds[d->arg & ARG_MASK],
                v ? v : "");
    }
    for (size_t k = 0; k < sizeof short_options / sizeof short_options[0]; k++)
        for (const struct option_def *d = opttable; d->name; d++)
            if (d->id == short_options[k].id) {
                fprintf(f, "short\t%c\t%s\n", short_options[k].c, d->name);
                break;
            }
}
