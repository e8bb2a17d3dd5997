/*
 * amlrun's binding glue: options in, libamldist's topology and plan out.
 * Every decision is made by the library (amldist_topo(3)); this file only
 * composes the calls and turns their errors into "amlrun: ..." messages.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amldist.h"
#include "output/json.h"
#include "output/msg.h"
#include "worker/bind.h"
#include "worker/picture.h"

struct amlrun_binding {
    amldist_topo_t *topo; /* loaded here; NULL when borrowed */
    const amldist_topo_t *used; /* that one or the borrowed one */
    amldist_plan_t *plan;
    amldist_plan_options_t po; /* the plan's options, for bind_share() */
    int nlocal;
    int json;
    char gpu_ids[4096];
};

static int set_opt(amldist_plan_options_t *po, const char *name,
                   const char *value)
{
    if (value == NULL)
        return 0;
    if (amldist_plan_options_set(po, name, value) < 0) {
        fprintf(stderr, "amlrun: %s\n", amldist_last_error());
        return -1;
    }
    return 0;
}

/* Each warning line once, prefixed, before any rank starts. */
static void print_warnings(const char *w)
{
    while (w != NULL && *w != '\0') {
        size_t len = strcspn(w, "\n");
        fprintf(stderr, "amlrun: warning: %.*s\n", (int)len, w);
        w += len;
        if (*w == '\n')
            w++;
    }
}

int bind_setup(const struct amlrun_bind_opts *o, int nlocal,
               const amldist_topo_t *topo, struct amlrun_binding **out)
{
    amldist_plan_options_t po = AMLDIST_PLAN_OPTIONS_INIT;
    *out = NULL;
    if (o->cpu_bind != NULL && o->numa_binding != NULL) {
        fprintf(stderr, "amlrun: --numa-binding %s and --cpu-bind %s both "
                        "choose each rank's cpus: give one of them\n",
                o->numa_binding, o->cpu_bind);
        return -1;
    }
    if (set_opt(&po, "cpu-bind", o->cpu_bind) < 0 ||
        set_opt(&po, "numa-binding", o->numa_binding) < 0 ||
        set_opt(&po, "mem-bind", o->mem_bind) < 0 ||
        set_opt(&po, "nic-bind", o->nic_bind) < 0 ||
        set_opt(&po, "gpu-bind", o->gpu_bind) < 0)
        return -1;
    /* Everything off: no topology to read, nothing to add or apply. */
    if (po.cpu_bind == AMLDIST_CPU_BIND_NONE &&
        po.mem_bind == AMLDIST_MEM_BIND_NONE &&
        po.nic_bind == AMLDIST_NIC_BIND_NONE &&
        po.gpu_bind == AMLDIST_GPU_BIND_NONE && !o->report_bindings &&
        o->output == NULL &&
        !(po.flags & AMLDIST_PLAN_WIDEN))
        return 0;
    struct amlrun_binding *b = calloc(1, sizeof *b);
    if (b == NULL) {
        fprintf(stderr, "amlrun: binding: out of memory\n");
        return -1;
    }
    b->json = o->json;
    if (o->per_process)
        po.flags |= AMLDIST_PLAN_NODE_WIDE;
    if (topo == NULL && amldist_topo_load(&b->topo, o->topology, 0) < 0) {
        /* A machine whose topology cannot be read still runs its job; a
         * file the user named must be right. */
        fprintf(stderr, "amlrun: %s%s\n", o->topology ? "" : "warning: ",
                amldist_last_error());
        free(b);
        return o->topology != NULL ? -1 : 0;
    }
    if (topo == NULL)
        topo = b->topo;
    b->used = topo;
    b->po = po;
    b->nlocal = nlocal;
    if (amldist_plan_compute(topo, &po, nlocal, &b->plan) < 0) {
        fprintf(stderr, "amlrun: %s\n", amldist_last_error());
        bind_free(b);
        return -1;
    }
    print_warnings(amldist_plan_warnings(b->plan));
    *out = b;
    return 0;
}

int bind_worker_env(const struct amlrun_binding *b, int local_rank,
                    int nlocal, char ***envp)
{
    int user_set = amldist_envp_get(*envp, "OMP_NUM_THREADS") != NULL;
    if (b != NULL && amldist_plan_rank_env(b->plan, local_rank, envp) < 0) {
        fprintf(stderr, "amlrun: %s\n", amldist_last_error());
        return -1;
    }
    if (user_set)
        return 0;
    /* The plan counts only this amlrun's ranks; the node's workers (nlocal)
     * decide for an unbound rank, and without a plan. */
    int n = amldist_plan_rank_omp_threads(b != NULL ? b->plan : NULL,
                                          local_rank, nlocal);
    char num[16];
    snprintf(num, sizeof num, "%d", n);
    if (n > 0 && amldist_envp_set(envp, "OMP_NUM_THREADS", num) < 0) {
        fprintf(stderr, "amlrun: worker environment: out of memory\n");
        return -1;
    }
    /* 1 for a rank with one core of its own is no choice to mention. */
    return n == 1 && (b == NULL ||
                      amldist_plan_rank_ncores(b->plan, local_rank) != 1);
}

int bind_apply_child(const struct amlrun_binding *b, int local_rank)
{
    if (b == NULL || amldist_plan_apply(b->plan, local_rank) == 0)
        return 0;
    return errno != 0 ? errno : EINVAL;
}

int bind_child_applies(const struct amlrun_binding *b, int local_rank)
{
    if (b == NULL)
        return 0;
    const char *cpus = amldist_plan_rank_cpus(b->plan, local_rank);
    return cpus == NULL || *cpus != '\0' ||
           b->po.mem_bind != AMLDIST_MEM_BIND_NONE;
}

void bind_say_locality(const struct amlrun_binding *b, FILE *f)
{
    if (b != NULL)
        fprintf(f, "amlrun: NUMA locality of GPUs and NICs %s (topology: "
                   "%s)\n",
                amldist_topo_locality(b->used),
                amldist_topo_source(b->used));
}

void bind_report(const struct amlrun_binding *b, int local_rank, int rank,
                 FILE *f)
{
    char line[8192];
    if (b == NULL)
        return;
    if (amldist_plan_format(b->plan, local_rank, rank,
                            b->json ? AMLDIST_FORMAT_JSON : 0u, line,
                            sizeof line) < 0)
        return;
    /* JSON lines stay bare so that tools can parse them as they come. */
    if (local_rank == 0 && !b->json)
        bind_say_locality(b, f);
    fprintf(f, "%s%s\n", b->json ? "" : "amlrun: ", line);
}

/* From the plan's queries, with the names of amldist_plan_format()'s JSON
 * so that --report-bindings=json and --dry-run=json say the same. */
void bind_json(const struct amlrun_binding *b, int lrank, struct json *j)
{
    if (b == NULL || lrank < 0 || lrank >= amldist_plan_size(b->plan)) {
        json_null(j, "binding");
        return;
    }
    const amldist_plan_t *p = b->plan;
    int gpu = amldist_plan_rank_gpu(p, lrank);
    const char *cpus = amldist_plan_rank_cpus(p, lrank);
    const char *nic = amldist_plan_rank_nic(p, lrank);
    json_object(j, "binding");
    json_id(j, "gpu", gpu);
    json_str(j, "gpu_busid", gpu >= 0 ? amldist_plan_rank_gpu_busid(p, lrank)
                                       : NULL);
    json_str(j, "cpus", cpus && *cpus ? cpus : NULL);
    json_int(j, "cores", amldist_plan_rank_ncores(p, lrank));
    json_id(j, "numa", amldist_plan_rank_numa(p, lrank));
    json_bool(j, "numa_guessed", amldist_plan_rank_numa_guessed(p, lrank) > 0);
    json_str(j, "nic", nic);
    if (nic) {
        json_int(j, "nic_port", amldist_plan_rank_nic_port(p, lrank));
        json_str(j, "nic_distance",
                 amldist_dist_name(amldist_plan_rank_nic_dist(p, lrank)));
    } else {
        json_null(j, "nic_port");
        json_null(j, "nic_distance");
    }
    json_close(j);
}

const char *bind_gpu_ids(struct amlrun_binding *b)
{
    int n = b != NULL ? amldist_topo_num_gpus(b->used) : 0;
    size_t len = 0;
    if (n <= 0)
        return NULL;
    b->gpu_ids[0] = '\0';
    for (int i = 0; i < n && len + 32 < sizeof b->gpu_ids; i++)
        len += (size_t)snprintf(b->gpu_ids + len, sizeof b->gpu_ids - len,
                                "%s%s", i ? "," : "",
                                amldist_topo_gpu_busid(b->used, i));
    return b->gpu_ids;
}

int bind_share(struct amlrun_binding *b, int first, int machine_ranks)
{
    if (b == NULL || (b->po.gpu_first == first &&
                      b->po.machine_ranks == machine_ranks))
        return 0;
    amldist_plan_options_t po = b->po;
    amldist_plan_t *plan;
    po.gpu_first = first;
    po.machine_ranks = machine_ranks;
    if (amldist_plan_compute(b->used, &po, b->nlocal, &plan) < 0) {
        fprintf(stderr, "amlrun: %s\n", amldist_last_error());
        return -1;
    }
    amldist_plan_free(b->plan);
    b->plan = plan;
    b->po = po;
    print_warnings(amldist_plan_warnings(plan));
    return 0;
}

const char *bind_gpu_note(const struct amlrun_binding *b)
{
    return b != NULL ? amldist_topo_gpu_note(b->used) : NULL;
}

void bind_free(struct amlrun_binding *b)
{
    if (b == NULL)
        return;
    amldist_plan_free(b->plan);
    amldist_topo_free(b->topo);
    free(b);
}

int bind_picture(const struct amlrun_binding *b, const char *path)
{
    if (b == NULL || b->plan == NULL) {
        fprintf(stderr, "amlrun: --output %s: no topology to draw\n", path);
        return -1;
    }
    return picture_draw(b->plan, b->used, path);
}

/* --topo --output: the plan of `nlocal` ranks, one per GPU when 0. */
static int topo_picture(const struct amlrun_bind_opts *o,
                        const amldist_topo_t *t, int nlocal)
{
    struct amlrun_binding *b;
    if (nlocal <= 0)
        nlocal = amldist_topo_num_gpus(t) > 0 ? amldist_topo_num_gpus(t) : 1;
    if (bind_setup(o, nlocal, t, &b) < 0)
        return AMLRUN_EXIT_USAGE;
    int rc = bind_picture(b, o->output) < 0 ? AMLRUN_EXIT_SYSTEM : 0;
    bind_free(b);
    return rc;
}

int topo_main(const struct amlrun_bind_opts *o, int nlocal, int json)
{
    amldist_topo_t *t;
    /* A topology that does not load is a bad --topology, as in a run (2);
     * a matrix that cannot be printed is amlrun's failure (125). */
    if (amldist_topo_load(&t, o->topology, 0) < 0) {
        fprintf(stderr, "amlrun: --topo: %s\n", amldist_last_error());
        return AMLRUN_EXIT_USAGE;
    }
    int rc = json ? topo_json(t, stdout) : amldist_topo_print_matrix(t, stdout);
    if (rc < 0)
        fprintf(stderr, "amlrun: --topo: %s\n", amldist_last_error());
    else if (o->output != NULL)
        rc = topo_picture(o, t, nlocal) != 0 ? -1 : 0;
    amldist_topo_free(t);
    return rc < 0 ? AMLRUN_EXIT_SYSTEM : 0;
}
