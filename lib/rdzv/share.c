/*
 * What an agent asks of the rendezvous beyond the values every agent must
 * share: the address it is known by (--local-addr), the machine it runs on
 * (so that agents of one machine split its GPUs), where the forming
 * round's lines go, the master port it offers for each round, and the
 * warnings when the round does otherwise than this agent asked (another
 * node's master address won, the host's timeouts differ).
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdzv/handle.h"
#include "util/u64map.h"

/* One machine for GPU purposes is one boot of one kernel: network
 * namespaces and containers of a host share /proc's boot id (and the
 * host's GPUs), separate hosts never do.  Its hostname stands in where
 * the boot id cannot be read. */
static uint64_t machine_id(const char *gpu_ids)
{
    char boot[128] = "";
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, boot, sizeof boot - 1);
        boot[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    if (!boot[0] && gethostname(boot, sizeof boot - 1) < 0)
        return 0;
    uint64_t h = amldist__bs_hash(boot, AMLDIST__BS_HASH_START);
    h = amldist__bs_hash("|gpus|", h);
    h = amldist__bs_hash(gpu_ids, h);
    return h ? h : 1; /* 0 means "shares with none" */
}

void amldist__rz_note_options(amldist_rdzv_t *r,
                              const amldist_rdzv_options_t *o)
{
    amldist__strlcpy(r->me.local_addr, o->local_addr ? o->local_addr : "",
                     sizeof r->me.local_addr);
    r->me.machine = o->gpu_ids ? machine_id(o->gpu_ids) : 0;
    amldist__strlcpy(r->asked_master_addr,
                     o->master_addr ? o->master_addr : "",
                     sizeof r->asked_master_addr);
    r->asked_master_port = o->master_port > 0 ? o->master_port : 0;
    r->asked_last_call_ms = o->last_call_ms;
    r->asked_join_timeout_ms = o->join_timeout_ms;
    r->sk.note_fd = o->note_fd;
    amldist__strlcpy(r->sk.note_prefix, o->note_prefix ? o->note_prefix : "",
                     sizeof r->sk.note_prefix);
}

/* A port nobody listens on now (the kernel's pick); 0 when none. */
int amldist__rz_free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    socklen_t len = sizeof a;
    int port = 0;
    if (bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(s);
    return port;
}

static void add(char *buf, size_t size, size_t *n, const char *fmt, ...)
    AMLDIST__PRINTF(4, 5);
static void add(char *buf, size_t size, size_t *n, const char *fmt, ...)
{
    va_list ap;
    if (*n >= size)
        return;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *n, size - *n, fmt, ap);
    va_end(ap);
    *n += k > 0 ? (size_t)k : 0;
}

void amldist__rz_note_round(amldist_rdzv_t *r)
{
    const amldist__rz_round_t *rd = &r->cur;
    char buf[2048];
    size_t n = 0;
    buf[0] = '\0';
    if (r->asked_master_addr[0] &&
        strcmp(r->asked_master_addr, rd->master_addr) != 0)
        add(buf, sizeof buf, &n, "this node's master address %s is not "
            "used: MASTER_ADDR=%s is %s (under a rendezvous the host's "
            "options and node 0 decide)\n", r->asked_master_addr,
            rd->master_addr, amldist__rz_addr_source(rd->flags));
    if (r->asked_master_port > 0 && r->asked_master_port != rd->master_port)
        add(buf, sizeof buf, &n, "this node's master port %d is not used: "
            "MASTER_PORT=%d is %s\n", r->asked_master_port, rd->master_port,
            rd->flags & AMLDIST__RZ_F_PORT_OPTION
                ? "the rendezvous host's --master-port"
                : "the free port node 0 picked (the host gave none)");
    if (r->asked_last_call_ms >= 0 &&
        r->asked_last_call_ms != rd->last_call_ms)
        add(buf, sizeof buf, &n, "this node's last_call_timeout=%g is not "
            "used: the rendezvous host's %g applies (it forms the rounds)\n",
            r->asked_last_call_ms / 1000.0, rd->last_call_ms / 1000.0);
    if (r->cfg.join_timeout_ms != rd->join_timeout_ms)
        add(buf, sizeof buf, &n, "this node's join timeout %g s differs "
            "from the rendezvous host's %g s: the host's decides when a "
            "round that does not form ends the job\n",
            r->cfg.join_timeout_ms / 1000.0, rd->join_timeout_ms / 1000.0);
    free(r->warnings);
    r->warnings = n ? strdup(buf) : NULL;
}

/* The nodes of one machine split its GPUs: in node order, each node's
 * ranks come after those of the machine's nodes before it, as if one
 * launcher started them all (its local rank r gets GPU (first + r) mod the
 * GPUs).  A node whose machine is unknown (0) has the machine alone.  One
 * pass with each machine's ranks so far, then each node its machine's sum
 * (issue 40: not every node against every other, 16 M pairs at 4,096). */
void amldist__rz_share_gpus(amldist__rz_round_t *rd, const uint64_t *machine)
{
    int n = rd->nnodes;
    amldist__u64map_t groups;
    int *sum = malloc((size_t)(n ? n : 1) * sizeof *sum);
    if (!sum || amldist__u64map_init(&groups, (size_t)n) < 0) {
        free(sum);
        /* Out of memory: the pairs after all. */
        for (int i = 0; i < n; i++) {
            int first = 0, all = 0;
            for (int k = 0; k < n; k++) {
                if (k != i && (machine[i] == 0 || machine[k] != machine[i]))
                    continue;
                if (k < i)
                    first += rd->nproc[k];
                all += rd->nproc[k];
            }
            rd->gpu_first[i] = first;
            rd->machine_ranks[i] = all;
        }
        return;
    }
    int ngroups = 0;
    for (int i = 0; i < n; i++) {
        int g = machine[i] ? amldist__u64map_get(&groups, machine[i]) : -1;
        if (machine[i] && g < 0) {
            g = ngroups++;
            sum[g] = 0;
            amldist__u64map_put(&groups, machine[i], g);
        }
        rd->gpu_first[i] = g < 0 ? 0 : sum[g];
        if (g >= 0)
            sum[g] += rd->nproc[i];
        rd->machine_ranks[i] = g; /* its group, until the sums are whole */
    }
    for (int i = 0; i < n; i++)
        rd->machine_ranks[i] = rd->machine_ranks[i] < 0
                                   ? rd->nproc[i]
                                   : sum[rd->machine_ranks[i]];
    amldist__u64map_free(&groups);
    free(sum);
}

int amldist_rdzv_gpu_share(const amldist_rdzv_t *r, int *first,
                           int *machine_ranks)
{
    amldist__clear_error();
    if (!r || !first || !machine_ranks || r->cur.round < 0)
        return amldist__fail(AMLDIST_EINVAL, "amldist_rdzv_gpu_share: bad "
                             "argument");
    *first = r->cur.gpu_first[r->cur.node];
    *machine_ranks = r->cur.machine_ranks[r->cur.node];
    return 0;
}

const char *amldist_rdzv_warnings(const amldist_rdzv_t *r)
{
    return r && r->warnings ? r->warnings : "";
}
