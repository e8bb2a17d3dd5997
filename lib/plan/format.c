/* --report-bindings: one line (or one JSON object) per rank. */
#include <linux/mempolicy.h>
#include <stdio.h>

#include "topo/topo_internal.h"

/* What the child will really do, which --mem-bind may not have achieved
 * (a guessed NUMA node gets no memory policy). */
static const char *mem_name(const struct amldist__rank *r)
{
    if (r->mem_mode == MPOL_PREFERRED)
        return "local";
    if (r->mem_mode == MPOL_BIND)
        return "strict";
    return "default";
}

static int text(const struct amldist__rank *r,
                int lrank, int rank, char *buf, size_t size)
{
    char who[48], gpu[48], cpus[64], numa[32], nic[112];
    if (rank >= 0)
        snprintf(who, sizeof who, "rank %d (local %d)", rank, lrank);
    else
        snprintf(who, sizeof who, "local rank %d", lrank);
    if (r->gpu >= 0)
        snprintf(gpu, sizeof gpu, "gpu %d %s", r->gpu, r->busid);
    else
        snprintf(gpu, sizeof gpu, "gpu none");
    if (r->bind_cpus)
        snprintf(cpus, sizeof cpus, " (%d core%s)", r->ncores,
                 r->ncores == 1 ? "" : "s");
    else
        cpus[0] = '\0';
    if (r->numa >= 0)
        snprintf(numa, sizeof numa, "numa %d%s", r->numa,
                 r->numa_guessed ? " (guessed)" : "");
    else
        snprintf(numa, sizeof numa, "numa ?");
    if (r->nic >= 0 && r->nicport > 0)
        snprintf(nic, sizeof nic, "nic %s:%d %s", r->nicname, r->nicport,
                 amldist_dist_name(r->nic_dist));
    else if (r->nic >= 0)
        snprintf(nic, sizeof nic, "nic %s %s", r->nicname,
                 amldist_dist_name(r->nic_dist));
    else
        snprintf(nic, sizeof nic, "nic none");
    return snprintf(buf, size, "%s: %s, cpus %s%s, %s, %s, mem %s", who, gpu,
                    r->bind_cpus ? r->cpulist : "unbound", cpus, numa, nic,
                    mem_name(r));
}

/* Names come from sysfs and hwloc: quote defensively all the same. */
static void json_str(char *out, size_t size, const char *s)
{
    size_t o = 0;
    if (size < 3)
        return;
    out[o++] = '"';
    for (; *s != '\0' && o + 8 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(out + o, size - o, "\\%c", c);
        else if (c < 0x20)
            o += (size_t)snprintf(out + o, size - o, "\\u%04x", c);
        else
            out[o++] = (char)c;
    }
    out[o++] = '"';
    out[o] = '\0';
}

static int json(const struct amldist__rank *r,
                int lrank, int rank, char *buf, size_t size)
{
    char busid[48] = "null", cpus[4096] = "null", nic[160] = "null";
    char gpu[16] = "null", numa[16] = "null", port[16] = "null";
    char dist[16] = "null", rk[16] = "null";
    if (rank >= 0)
        snprintf(rk, sizeof rk, "%d", rank);
    if (r->gpu >= 0) {
        snprintf(gpu, sizeof gpu, "%d", r->gpu);
        json_str(busid, sizeof busid, r->busid);
    }
    if (r->bind_cpus)
        json_str(cpus, sizeof cpus, r->cpulist);
    if (r->numa >= 0)
        snprintf(numa, sizeof numa, "%d", r->numa);
    if (r->nic >= 0) {
        json_str(nic, sizeof nic, r->nicname);
        snprintf(port, sizeof port, "%d", r->nicport);
        snprintf(dist, sizeof dist, "\"%s\"", amldist_dist_name(r->nic_dist));
    }
    return snprintf(buf, size,
                    "{\"rank\":%s,\"local_rank\":%d,\"gpu\":%s,"
                    "\"gpu_busid\":%s,\"cpus\":%s,\"cores\":%d,\"numa\":%s,"
                    "\"numa_guessed\":%s,\"nic\":%s,\"nic_port\":%s,"
                    "\"nic_distance\":%s,\"mem_bind\":\"%s\"}",
                    rk, lrank, gpu, busid, cpus, r->ncores, numa,
                    r->numa_guessed ? "true" : "false", nic, port, dist,
                    mem_name(r));
}

int amldist_plan_format(const amldist_plan_t *p, int lrank, int rank,
                        unsigned flags, char *buf, size_t size)
{
    if (p == NULL || lrank < 0 || lrank >= p->n || (buf == NULL && size > 0))
        return AMLDIST_EINVAL;
    const struct amldist__rank *r = &p->ranks[lrank];
    if (flags & AMLDIST_FORMAT_JSON)
        return json(r, lrank, rank, buf, size);
    return text(r, lrank, rank, buf, size);
}
