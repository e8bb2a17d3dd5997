/* The mode decision and the number of workers (see mode.h). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mode.h"
#include "msg.h"

/* --standalone: a port nobody listens on now, from the kernel (bind to 0);
 * rank 0 binds it a moment later, as torchrun does. */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(s);
    return port;
}

static int count_nproc(const struct amlrun_opts *o, struct plan *p)
{
    if (o->nproc_kind == NPROC_NUM) {
        p->nproc = o->nproc;
        return -1;
    }
    if (o->nproc_kind == NPROC_UNSET) {
        p->nproc = 1;
        return -1;
    }
    /* gpu|auto: the GPUs this process can use, counted by the library as
     * binding counts them (the driver's list, NVIDIA_VISIBLE_DEVICES,
     * CUDA_VISIBLE_DEVICES); the topology is kept for bind_setup(), so it
     * is read once. */
    if (amldist_topo_load(&p->topo, o->bind.topology, 0) < 0) {
        msg("%s%s", o->bind.topology ? "" : "warning: counting GPUs: ",
            amldist_last_error());
        if (o->bind.topology)
            return AMLRUN_EXIT_USAGE;
        p->topo = NULL;
    }
    int gpus = p->topo ? amldist_topo_num_gpus(p->topo) : 0;
    if (gpus > 0) {
        p->nproc = gpus;
        return -1;
    }
    if (o->nproc_kind == NPROC_GPU) {
        msg("--nproc-per-node gpu: no usable GPU: %s",
            p->topo ? amldist_topo_gpu_note(p->topo)
                    : "the topology could not be read");
        return AMLRUN_EXIT_USAGE;
    }
    /* auto without GPUs: one worker per core we may run on. */
    cpu_set_t set;
    p->nproc = sched_getaffinity(0, sizeof set, &set) == 0
                   ? CPU_COUNT(&set)
                   : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (p->nproc < 1)
        p->nproc = 1;
    return -1;
}

/* Sources that mean "a launcher started this process as one rank". */
static int is_launcher_source(const char *src)
{
    return strcmp(src, "default") != 0 && strcmp(src, "options") != 0;
}

int plan_make(const struct amlrun_opts *o, struct plan *p)
{
    memset(p, 0, sizeof *p);
    amldist_options_t ao = AMLDIST_OPTIONS_INIT;
    /* Never connect to the PMIx server: under Open MPI 4.1 a process that
     * did so (even one we exec afterwards) fails in MPI_Init. */
    ao.flags |= AMLDIST_NO_PMIX;
    ao.num_nodes = o->nnodes;
    ao.node_rank = o->node_rank;
    ao.master_addr = o->master_addr;
    ao.master_port = o->master_port;
    if (o->standalone) {
        ao.num_nodes = 1;
        ao.node_rank = 0;
        if (!ao.master_addr)
            ao.master_addr = "127.0.0.1";
        if (ao.master_port <= 0 && (ao.master_port = free_port()) < 0) {
            msg("--standalone: cannot find a free port on 127.0.0.1");
            return AMLRUN_EXIT_SYSTEM;
        }
    }
    if (amldist_init_opts(&p->layout, &ao) < 0) {
        msg("cannot work out this job's layout: %s", amldist_last_error());
        return AMLRUN_EXIT_USAGE;
    }
    const char *src = amldist_source(p->layout);
    /* Workers would fail later, inside init_process_group, with less to go
     * on: say now why there is no master and how to give one. */
    if (amldist_master_addr(p->layout) == NULL)
        msg("warning: MASTER_ADDR is not known, workers will not get it (%s); "
            "give --master-addr or MASTER_ADDR",
            amldist_explain(p->layout, AMLDIST_FIELD_MASTER_ADDR));
    if (o->mode == MODE_PROCESS) {
        p->mode = MODE_PROCESS;
        snprintf(p->why, sizeof p->why, "per-process (--mode process; "
                 "layout from %s)", src);
    } else if (o->mode == MODE_NODE || o->nproc_kind != NPROC_UNSET) {
        p->mode = MODE_NODE;
        snprintf(p->why, sizeof p->why, "per-node (%s; layout of this node "
                 "from %s)", o->mode == MODE_NODE ? "--mode node"
                 : "--nproc-per-node given", src);
    } else if (is_launcher_source(src)) {
        p->mode = MODE_PROCESS;
        snprintf(p->why, sizeof p->why, "per-process (started by a launcher: "
                 "layout from %s, no --nproc-per-node)", src);
    } else {
        p->mode = MODE_NODE;
        snprintf(p->why, sizeof p->why, "per-node (no launcher found: one "
                 "worker unless --nproc-per-node)");
    }
    if (p->mode == MODE_NODE) {
        int rc = count_nproc(o, p);
        if (rc >= 0) {
            plan_free(p);
            return rc;
        }
    }
    return -1;
}

void plan_free(struct plan *p)
{
    amldist_free(p->layout);
    p->layout = NULL;
    amldist_topo_free(p->topo);
    p->topo = NULL;
}
