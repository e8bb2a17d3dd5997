/*
 * The supervisor's policy: the phase of this node's workers and every
 * change of phase, in one place, in the manner of torchelastic's
 * WorkerState (HEALTHY, UNHEALTHY, STOPPED, FAILED, SUCCEEDED).  Pure
 * bookkeeping: it signals no process and prints nothing; each event
 * returns what the supervisor is to do, and the phase says where it is.
 *
 *   RUNNING  --a worker fails, a stop signal, the host's stop order,
 *              a worker that cannot start, a hang, --timeout-->
 *              STOPPING  (the stop sequence)
 *   STOPPING --the --term-timeout deadline, a second stop signal-->
 *              KILLING  (SIGKILL)
 *   any      --every worker ended (policy_ended)--> RESTARTING after a
 *              failure with restarts left, WAITING with a control plane
 *              (policy_round decides), else DONE
 *   WAITING  --policy_round--> RESTARTING (a new round) or DONE
 *   RESTARTING --policy_attempt--> RUNNING
 *
 * A hang (--hang-timeout) is a failure of the attempt: it counts as a
 * restart when restarts are left.  --timeout ends the job for good.
 * A stop signal ends the job for good: no restart follows it, and a second
 * one (while workers still run) means "now", in any later attempt too.
 */
#ifndef AMLRUN_POLICY_H
#define AMLRUN_POLICY_H

enum phase {
    PHASE_RUNNING,    /* the attempt's workers run */
    PHASE_STOPPING,   /* told to stop (SIGTERM, or the user's signal) */
    PHASE_KILLING,    /* SIGKILL sent */
    PHASE_WAITING,    /* ended here; the job's control plane decides */
    PHASE_RESTARTING, /* ended here: another attempt follows */
    PHASE_DONE,       /* ended: the job is over */
};

enum action {
    ACT_NONE,
    ACT_STOP, /* the stop sequence: the signal to every worker, SIGCONT
                 after it, SIGKILL at the --term-timeout deadline */
    ACT_PASS, /* pass the stop signal on (the workers stop already) */
    ACT_KILL, /* SIGKILL every worker now */
};

struct policy {
    enum phase phase;
    int max_restarts;
    int restarts;     /* restarts done (with a control plane: the job's) */
    int fail;         /* the attempt's first failed worker, -1 */
    int fail_status;  /* its wait status */
    int stop_signal;  /* the signal that stopped the job, 0 */
    int start_status; /* amlrun's exit status after a failed start, -1 */
    int verdict;      /* a watchdog's verdict failed the attempt (a hang):
                         its exit status, 0 none */
    int final_verdict; /* a watchdog's verdict ended the job (--timeout):
                          its exit status, 0 none */
    int peer_stopped; /* the attempt's workers were stopped while running
                         for the control plane's host */
};

void policy_init(struct policy *p, int max_restarts);
/* An attempt starts: RUNNING, no failure yet. */
void policy_attempt(struct policy *p);

/* Worker `worker` ended with wait status `status`, a failure: ACT_STOP
 * when it is the attempt's first while RUNNING (then p->fail), else
 * ACT_NONE (the workers stop already). */
enum action policy_failed(struct policy *p, int worker, int status);
/* A worker could not start; the job ends with exit status `status`. */
enum action policy_start_failed(struct policy *p, int status);
/* The control plane's host ordered every node's workers stopped (or ended
 * the job): p->peer_stopped when they were running. */
enum action policy_peer_stop(struct policy *p);
/* Stop signal `sig` with `live` workers running.  The first ends the job:
 * ACT_STOP, or ACT_PASS when the workers stop already.  A later one is
 * ACT_KILL while workers run and SIGKILL was not sent, else ACT_NONE. */
enum action policy_stop_signal(struct policy *p, int sig, int live);
/* A plugin's verdict (output/stopreason.h's row: restartable, its exit
 * status).  Restartable (a hang): a failure of the attempt, ACT_STOP while
 * RUNNING (then p->verdict), else ACT_NONE.  Not restartable (--timeout):
 * the job ends whatever restarts are left; ACT_STOP while RUNNING, else
 * ACT_NONE (the workers stop already). */
enum action policy_verdict(struct policy *p, int restartable, int status);
/* The --term-timeout deadline: ACT_KILL while workers run. */
enum action policy_deadline(struct policy *p, int live);
/* The supervisor cannot watch its workers any longer: ACT_KILL. */
enum action policy_abort(struct policy *p);

/* Every worker of the attempt has ended and its output is drained; the
 * phase that follows.  With a control plane: WAITING.  Else RESTARTING
 * (one more restart counted) after a failure or a hang with restarts left,
 * unless --timeout, a
 * stop signal, a failed start or amlrun's console being gone
 * (console_gone) ends the job: DONE. */
enum phase policy_ended(struct policy *p, int control_plane,
                        int console_gone);
/* The control plane's decision: a new round (`again`, restarts being the
 * job's count of them) or the end of the job. */
enum phase policy_round(struct policy *p, int again, int restarts);

/* This node's exit status for the attempt: the failed start's, the first
 * failure's, a verdict's (a hang's: AMLRUN_EXIT_HANG), the stop signal's
 * (policy_stopped_status), or 0. */
int policy_status(const struct policy *p);
/* The exit status of a node that stop signal `sig` ended: 128+sig, but 1
 * for SIGTERM in a Slurm step of several tasks (see policy.c). */
int policy_stopped_status(int sig);

#endif /* AMLRUN_POLICY_H */
