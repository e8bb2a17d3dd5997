/* Binding options from their command-line text (one parser for every
 * launcher). */
#include <stddef.h>
#include <string.h>

#include "topo/topo_internal.h"

/* Bytes of amldist_plan_options_t in each version (util/optversion.c).  A
 * version that adds field F makes the last entry
 * offsetof(amldist_plan_options_t, F) and appends the sizeof. */
static const size_t plan_options_sizes[AMLDIST_PLAN_OPTIONS_VERSION + 1] = {
    [1] = offsetof(amldist_plan_options_t, gpu_first),
    [2] = sizeof(amldist_plan_options_t),
};
const amldist__opts_kind_t amldist__plan_options_kind = {
    "amldist_plan_options_t", "AMLDIST_PLAN_OPTIONS_INIT",
    AMLDIST_PLAN_OPTIONS_VERSION, plan_options_sizes};

struct name_value {
    const char *name;
    int value;
};

static const struct name_value cpu_names[] = {
    {"none", AMLDIST_CPU_BIND_NONE},
    {"numa", AMLDIST_CPU_BIND_NUMA},
    {"exclusive", AMLDIST_CPU_BIND_EXCLUSIVE},
    {"socket", AMLDIST_CPU_BIND_SOCKET},
    {"package", AMLDIST_CPU_BIND_PACKAGE},
    {"l3", AMLDIST_CPU_BIND_L3},
    {NULL, 0}};
/* torchrun 2.x's --numa-binding modes, as the --cpu-bind policy that means
 * the same: its socket is every core of the package (amlrun's socket gives
 * each rank its own share of them), its core-complex one L3 per rank. */
static const struct name_value numa_binding_names[] = {
    {"node", AMLDIST_CPU_BIND_NUMA},
    {"socket", AMLDIST_CPU_BIND_PACKAGE},
    {"exclusive", AMLDIST_CPU_BIND_EXCLUSIVE},
    {"core-complex", AMLDIST_CPU_BIND_L3},
    {NULL, 0}};
static const struct name_value mem_names[] = {
    {"none", AMLDIST_MEM_BIND_NONE},
    {"local", AMLDIST_MEM_BIND_LOCAL},
    {"strict", AMLDIST_MEM_BIND_STRICT},
    {NULL, 0}};
static const struct name_value nic_names[] = {
    {"none", AMLDIST_NIC_BIND_NONE},
    {"export", AMLDIST_NIC_BIND_EXPORT},
    {"ucx", AMLDIST_NIC_BIND_UCX},
    {"nccl", AMLDIST_NIC_BIND_NCCL},
    {NULL, 0}};
static const struct name_value gpu_names[] = {
    {"none", AMLDIST_GPU_BIND_NONE},
    {"single", AMLDIST_GPU_BIND_SINGLE},
    {NULL, 0}};

static int lookup(const struct name_value *t, const char *s, size_t len,
                  int *out)
{
    for (; t->name != NULL; t++)
        if (strlen(t->name) == len && strncmp(t->name, s, len) == 0) {
            *out = t->value;
            return 0;
        }
    return -1;
}

/* "0-3:4-7,12:..." - digits, commas, dashes, one list per rank. */
static int valid_cpu_lists(const char *s)
{
    if (s[0] == '\0' || s[strspn(s, "0123456789,-:")] != '\0')
        return 0;
    return 1;
}

/* The value of option `opt` named in table t, or AMLDIST_EINVAL naming the
 * names it takes (`expected`). */
static int named(const char *opt, const struct name_value *t,
                 const char *expected, const char *value)
{
    int v;
    if (lookup(t, value, strlen(value), &v) < 0)
        return amldist__fail(AMLDIST_EINVAL, "--%s %s: expected %s", opt,
                             value, expected);
    return v;
}

static int set_cpu(amldist_plan_options_t *o, const char *v)
{
    size_t len = strcspn(v, ",");
    const char *mod = v[len] == ',' ? v + len + 1 : NULL;
    int policy;
    if (v[0] >= '0' && v[0] <= '9') {
        if (!valid_cpu_lists(v))
            return amldist__fail(AMLDIST_EINVAL,
                                 "--cpu-bind %s: a cpu list is LIST[:LIST...] "
                                 "with LIST like 0-3,8 (one per local rank)",
                                 v);
        o->cpu_bind = AMLDIST_CPU_BIND_LIST;
        o->cpu_list = v;
        return 0;
    }
    if (lookup(cpu_names, v, len, &policy) < 0 ||
        (mod != NULL && strcmp(mod, "widen") != 0))
        return amldist__fail(AMLDIST_EINVAL,
                             "--cpu-bind %s: expected none, numa, exclusive, "
                             "socket, package, l3 or a cpu list, optionally "
                             "followed by \",widen\"",
                             v);
    o->cpu_bind = (amldist_cpu_bind_t)policy;
    if (mod != NULL)
        o->flags |= AMLDIST_PLAN_WIDEN;
    return 0;
}

int amldist_plan_options_set(amldist_plan_options_t *o, const char *name,
                             const char *value)
{
    amldist__clear_error();
    if (o == NULL || name == NULL || value == NULL)
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_plan_options_set: NULL argument");
    /* Every field written here is in version 1: a field added later may be
     * written only when o->version has it. */
    int v = amldist__opts_version(&amldist__plan_options_kind,
                                  "amldist_plan_options_set", o->version);
    if (v < 0)
        return v;
    if (strcmp(name, "cpu-bind") == 0)
        return set_cpu(o, value);
    /* The enumerated options: their names' table, and the field set. */
    if (strcmp(name, "numa-binding") == 0) {
        v = named(name, numa_binding_names,
                  "node, socket, exclusive or core-complex", value);
        if (v >= 0)
            o->cpu_bind = (amldist_cpu_bind_t)v;
    } else if (strcmp(name, "mem-bind") == 0) {
        v = named(name, mem_names, "none, local or strict", value);
        if (v >= 0)
            o->mem_bind = (amldist_mem_bind_t)v;
    } else if (strcmp(name, "nic-bind") == 0) {
        v = named(name, nic_names, "none, export, ucx or nccl", value);
        if (v >= 0)
            o->nic_bind = (amldist_nic_bind_t)v;
    } else if (strcmp(name, "gpu-bind") == 0) {
        v = named(name, gpu_names, "none or single", value);
        if (v >= 0)
            o->gpu_bind = (amldist_gpu_bind_t)v;
    } else {
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_plan_options_set: unknown option \"%s\"",
                             name);
    }
    return v < 0 ? v : 0;
}
