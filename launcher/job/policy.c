/* The supervisor's phases and their transitions (see policy.h). */
#include <signal.h>
#include <stdlib.h>

#include "output/exitstatus.h"
#include "output/msg.h"
#include "job/policy.h"

void policy_init(struct policy *p, int max_restarts)
{
    p->phase = PHASE_RUNNING;
    p->max_restarts = max_restarts;
    p->restarts = 0;
    p->fail = -1;
    p->fail_status = 0;
    p->stop_signal = 0;
    p->start_status = -1;
    p->verdict = 0;
    p->final_verdict = 0;
    p->peer_stopped = 0;
}

void policy_attempt(struct policy *p)
{
    p->phase = PHASE_RUNNING;
    p->fail = -1;
    p->fail_status = 0;
    p->verdict = 0;
    p->peer_stopped = 0;
}

/* RUNNING -> STOPPING: the stop sequence; in any other phase the workers
 * stop already (or have ended). */
static enum action begin_stop(struct policy *p)
{
    if (p->phase != PHASE_RUNNING)
        return ACT_NONE;
    p->phase = PHASE_STOPPING;
    return ACT_STOP;
}

enum action policy_failed(struct policy *p, int worker, int status)
{
    if (p->phase != PHASE_RUNNING)
        return ACT_NONE;
    p->fail = worker;
    p->fail_status = status;
    return begin_stop(p);
}

enum action policy_start_failed(struct policy *p, int status)
{
    p->start_status = status;
    return begin_stop(p);
}

enum action policy_peer_stop(struct policy *p)
{
    enum action a = begin_stop(p);
    if (a == ACT_STOP)
        p->peer_stopped = 1;
    return a;
}

enum action policy_stop_signal(struct policy *p, int sig, int live)
{
    if (!p->stop_signal) {
        /* The first, even while the workers stop for another reason (a
         * failure here or on another node): passed on, it ends the job
         * whatever restarts are left. */
        p->stop_signal = sig;
        return begin_stop(p) == ACT_STOP ? ACT_STOP : ACT_PASS;
    }
    return policy_deadline(p, live);
}

enum action policy_verdict(struct policy *p, int restartable, int status)
{
    if (!restartable) {
        p->final_verdict = status;
        return begin_stop(p);
    }
    if (p->phase != PHASE_RUNNING)
        return ACT_NONE;
    p->verdict = status;
    return begin_stop(p);
}

enum action policy_deadline(struct policy *p, int live)
{
    if (live <= 0 || p->phase == PHASE_KILLING)
        return ACT_NONE;
    p->phase = PHASE_KILLING;
    return ACT_KILL;
}

enum action policy_abort(struct policy *p)
{
    p->phase = PHASE_KILLING;
    return ACT_KILL;
}

enum phase policy_ended(struct policy *p, int control_plane, int console_gone)
{
    if (control_plane)
        p->phase = PHASE_WAITING;
    else if ((p->fail >= 0 || p->verdict) && p->restarts < p->max_restarts &&
             !p->stop_signal && !p->final_verdict && p->start_status < 0 &&
             !console_gone) {
        p->phase = PHASE_RESTARTING;
        p->restarts++;
    } else
        p->phase = PHASE_DONE;
    return p->phase;
}

enum phase policy_round(struct policy *p, int again, int restarts)
{
    if (again) {
        p->phase = PHASE_RESTARTING;
        p->restarts = restarts;
    } else {
        p->phase = PHASE_DONE;
    }
    return p->phase;
}

int policy_status(const struct policy *p)
{
    if (p->start_status >= 0)
        return p->start_status;
    if (p->fail >= 0)
        return status_exit_code(p->fail_status);
    if (p->verdict)
        return p->verdict;
    if (p->final_verdict)
        return p->final_verdict;
    return p->stop_signal ? policy_stopped_status(p->stop_signal) : 0;
}

/*
 * srun exits with the highest status of its tasks, a signal counting as
 * 128+n, and srun --kill-on-bad-exit (head-node mode passes it) ends the
 * step with SIGTERM as soon as one task fails.  Had the other nodes'
 * amlruns exited 143 then, the job's status would be 143, not the failing
 * rank's.  So a task of a Slurm step of several tasks that SIGTERM stopped
 * exits 1: lower than, or equal to, any status a failing task can have.
 * SIGINT (srun's double Ctrl-C) and a lone task keep 128+n.
 */
int policy_stopped_status(int sig)
{
    const char *step = getenv("SLURM_STEP_ID");
    const char *tasks = getenv("SLURM_STEP_NUM_TASKS");
    if (!step)
        step = getenv("SLURM_STEPID");
    if (!tasks)
        tasks = getenv("SLURM_NTASKS");
    if (sig != SIGTERM || !step || !*step || !tasks || atoi(tasks) < 2)
        return 128 + sig;
    return 1;
}
