/* Composing a worker's environment (see workerenv.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/msg.h"
#include "worker/torchver.h"
#include "worker/workerenv.h"

const char *worker_id_str(int v, char *buf)
{
    if (v < 0)
        return "?";
    snprintf(buf, 12, "%d", v);
    return buf;
}

static int set_int(char ***env, const char *name, int v)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%d", v);
    return amldist_envp_set(env, name, buf);
}

/*
 * NCCL's asynchronous error handling makes a rank whose peer died abort
 * instead of hanging in a collective.  Its variable changed names: torch
 * < 2.2 reads only NCCL_ASYNC_ERROR_HANDLING (torchrun 1.13 to 2.1 set it);
 * torch >= 2.2 reads TORCH_NCCL_ASYNC_ERROR_HANDLING (torchrun >= 2.2 sets
 * only that), and warns on every rank whenever the old name is set.  So
 * each worker gets the one name its torch reads (e->torch, torchver.h),
 * exactly as the matching torchrun does.  Only when that torch is unknown
 * (no torch under the worker's Python, a command not run under Python) are
 * both set, so that neither an old torch loses the handling nor a new one
 * misses it: a warning is better than a hang.  A user who set either name
 * keeps it and gets neither, so that a value meant as "off" is never
 * overridden through the other name.
 */
static int user_sets_nccl_handling(char *const *env)
{
    return amldist_envp_get(env, "NCCL_ASYNC_ERROR_HANDLING") ||
           amldist_envp_get(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING");
}

static int nccl_error_handling(char ***env, int torch)
{
    if (user_sets_nccl_handling(*env))
        return 0;
    if (torch < TORCH_NEW_NCCL_NAME &&
        amldist_envp_set(env, "NCCL_ASYNC_ERROR_HANDLING", "1") < 0)
        return -1;
    if ((torch == 0 || torch >= TORCH_NEW_NCCL_NAME) &&
        amldist_envp_set(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1") < 0)
        return -1;
    return 0;
}

int workers_torch(const struct command *c, char *const *base)
{
    /* The version only picks that name: with the user's own, no Python is
     * started to ask (tens of milliseconds of every start). */
    return user_sets_nccl_handling(base) ? 0 : torch_version(c, base);
}

/* What torchrun's agent sets beside the layout, in one place. */
static int torchrun_defaults(char ***env, const struct env_spec *e,
                             int restart, int in_place)
{
    const struct amlrun_opts *o = e->o;
    if (set_int(env, "TORCHELASTIC_RESTART_COUNT", restart) < 0 ||
        set_int(env, "TORCHELASTIC_MAX_RESTARTS", o->max_restarts) < 0 ||
        amldist_envp_set(env, "TORCHELASTIC_RUN_ID", o->run_id) < 0 ||
        amldist_envp_set(env, "ROLE_NAME", o->role) < 0 ||
        nccl_error_handling(env, e->torch) < 0)
        return -1;
    /* torchrun 2.x exports its list (a nested torchrun reads it). */
    if (o->signals_to_handle &&
        amldist_envp_set(env, "TORCHELASTIC_SIGNALS_TO_HANDLE",
                         o->signals_to_handle) < 0)
        return -1;
    /* amlrun hosts no store: rank 0's TCPStore is the job's, as torchrun
     * says with False when its agent's store is not used.  In place the
     * launcher above may host one: its value stands. */
    if (!in_place &&
        amldist_envp_set(env, "TORCHELASTIC_USE_AGENT_STORE", "False") < 0)
        return -1;
    return 0;
}

char **worker_env(struct env_spec *e, int index, int restart,
                  struct worker_id *id)
{
    amldist_t *child = NULL;
    const amldist_t *l = e->layout;
    if (e->ctl && e->ctl->rz && e->ctl->numbering) {
        if (amldist_rdzv_worker_layout(e->ctl->rz, index, &child) < 0) {
            msg("layout of local worker %d: %s", index, amldist_last_error());
            return NULL;
        }
        l = child;
    } else if (e->nproc > 0) {
        if (amldist_derive_child(e->layout, e->nproc, index, &child) < 0) {
            msg("layout of local worker %d of %d: %s", index, e->nproc,
                amldist_last_error());
            return NULL;
        }
        l = child;
    }
    char **env = NULL;
    /* bind_worker_env() and amldist_envp_set() grow this array in place. */
    if (amldist_export_envp(l, e->base, &env) < 0) {
        msg("environment of local worker %d: %s", index, amldist_last_error());
        goto out;
    }
    id->rank = amldist_rank(l);
    id->local = amldist_local_rank(l);
    id->node = amldist_node_rank(l);
    id->world = amldist_world_size(l);
    if (torchrun_defaults(&env, e, restart, e->nproc == 0) < 0)
        goto nomem;
    /* The binding plan is per worker of this amlrun: its index, not the
     * node-wide local rank (several amlruns may share a node).  The
     * library sets OMP_NUM_THREADS by its one rule: the rank's cores when
     * they are its own, 1 when it shares them or runs unbound beside other
     * workers (torchrun's default: each worker's thread per core would
     * oversubscribe the node). */
    int nlocal = amldist_local_world_size(l);
    int shared = bind_worker_env(e->binding, e->nproc > 0 ? index : id->local,
                                 nlocal, &env);
    if (shared < 0)
        goto fail;
    if (shared) {
        /* Once per node: in place, every process composes its own. */
        if (!e->omp_noted && !e->o->quiet && (e->nproc > 0 || id->local == 0))
            msg("OMP_NUM_THREADS not set: using 1 for workers that share "
                "cores (%d workers on this node; set it to tune)", nlocal);
        e->omp_noted = 1;
    }
    amldist_free(child);
    return env;
nomem:
    msg("environment of local worker %d: out of memory", index);
fail:
    amldist_envp_free(env);
out:
    amldist_free(child);
    return NULL;
}
