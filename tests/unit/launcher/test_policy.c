/* The supervisor's phases and their transitions (launcher/job/policy.c):
 * what each event does in each phase, what an ended attempt leads to, and
 * the exit status a node ends with. */
#include <signal.h>
#include <stdlib.h>

#include "test.h"

#include "job/policy.h"

#define EXITED(n) ((n) << 8) /* a wait status */

static void test_start(void)
{
    struct policy p;
    policy_init(&p, 3);
    CHECK_INT_EQ(p.phase, PHASE_RUNNING);
    CHECK_INT_EQ(p.fail, -1);
    CHECK_INT_EQ(p.restarts, 0);
    CHECK_INT_EQ(p.stop_signal, 0);
    CHECK_INT_EQ(p.start_status, -1);
    CHECK_INT_EQ(policy_status(&p), 0);
    /* Every worker succeeded: the job is over. */
    CHECK_INT_EQ(policy_ended(&p, 0, 0), PHASE_DONE);
    CHECK_INT_EQ(policy_status(&p), 0);
}

/* The attempt's first failure stops the others; later ones do not count. */
static void test_first_failure(void)
{
    struct policy p;
    policy_init(&p, 0);
    CHECK_INT_EQ(policy_failed(&p, 2, EXITED(3)), ACT_STOP);
    CHECK_INT_EQ(p.phase, PHASE_STOPPING);
    CHECK_INT_EQ(p.fail, 2);
    CHECK_INT_EQ(policy_failed(&p, 0, SIGTERM), ACT_NONE);
    CHECK_INT_EQ(p.fail, 2);
    CHECK_INT_EQ(policy_status(&p), 3);
    /* The deadline with workers left: SIGKILL, once. */
    CHECK_INT_EQ(policy_deadline(&p, 1), ACT_KILL);
    CHECK_INT_EQ(p.phase, PHASE_KILLING);
    CHECK_INT_EQ(policy_deadline(&p, 1), ACT_NONE);
    CHECK_INT_EQ(policy_failed(&p, 1, SIGKILL), ACT_NONE);
    /* No restarts allowed. */
    CHECK_INT_EQ(policy_ended(&p, 0, 0), PHASE_DONE);
    CHECK_INT_EQ(policy_status(&p), 3);
}

static void test_deadline_without_workers(void)
{
    struct policy p;
    policy_init(&p, 0);
    CHECK_INT_EQ(policy_failed(&p, 0, EXITED(1)), ACT_STOP);
    CHECK_INT_EQ(policy_deadline(&p, 0), ACT_NONE);
    CHECK_INT_EQ(p.phase, PHASE_STOPPING);
}

/* Restarts after failures, up to --max-restarts; a new attempt forgets the
 * last one's failure. */
static void test_restarts(void)
{
    struct policy p;
    policy_init(&p, 2);
    for (int attempt = 0; attempt < 3; attempt++) {
        policy_attempt(&p);
        CHECK_INT_EQ(p.phase, PHASE_RUNNING);
        CHECK_INT_EQ(p.fail, -1);
        CHECK_INT_EQ(policy_failed(&p, attempt, EXITED(7)), ACT_STOP);
        CHECK_INT_EQ(policy_ended(&p, 0, 0),
                     attempt < 2 ? PHASE_RESTARTING : PHASE_DONE);
        CHECK_INT_EQ(p.restarts, attempt < 2 ? attempt + 1 : 2);
    }
    CHECK_INT_EQ(p.fail, 2);
    CHECK_INT_EQ(policy_status(&p), 7);
    /* A failure, then success on the restart: status 0. */
    policy_init(&p, 1);
    policy_failed(&p, 0, EXITED(1));
    CHECK_INT_EQ(policy_ended(&p, 0, 0), PHASE_RESTARTING);
    policy_attempt(&p);
    CHECK_INT_EQ(policy_ended(&p, 0, 0), PHASE_DONE);
    CHECK_INT_EQ(policy_status(&p), 0);
}

/* What ends the job whatever restarts are left. */
static void test_no_restart(void)
{
    struct policy p;
    policy_init(&p, 5);
    policy_failed(&p, 0, EXITED(1));
    CHECK_INT_EQ(policy_ended(&p, 0, 1), PHASE_DONE); /* console gone */
    CHECK_INT_EQ(p.restarts, 0);

    policy_init(&p, 5);
    policy_failed(&p, 0, EXITED(1));
    CHECK_INT_EQ(policy_stop_signal(&p, SIGINT, 1), ACT_PASS);
    CHECK_INT_EQ(policy_ended(&p, 0, 0), PHASE_DONE);
    CHECK_INT_EQ(policy_status(&p), 1); /* the failure came first */

    policy_init(&p, 5);
    CHECK_INT_EQ(policy_start_failed(&p, 127), ACT_STOP);
    CHECK_INT_EQ(p.phase, PHASE_STOPPING);
    CHECK_INT_EQ(policy_ended(&p, 0, 0), PHASE_DONE);
    CHECK_INT_EQ(policy_status(&p), 127);
}

/* A stop signal ends the job; a second one while workers run means now;
 * a failure after it is not the job's. */
static void test_stop_signals(void)
{
    unsetenv("SLURM_STEP_ID");
    unsetenv("SLURM_STEPID");
    struct policy p;
    policy_init(&p, 3);
    CHECK_INT_EQ(policy_stop_signal(&p, SIGTERM, 2), ACT_STOP);
    CHECK_INT_EQ(p.phase, PHASE_STOPPING);
    CHECK_INT_EQ(p.stop_signal, SIGTERM);
    CHECK_INT_EQ(policy_failed(&p, 0, SIGTERM), ACT_NONE);
    CHECK_INT_EQ(p.fail, -1);
    CHECK_INT_EQ(policy_stop_signal(&p, SIGINT, 1), ACT_KILL);
    CHECK_INT_EQ(p.phase, PHASE_KILLING);
    CHECK_INT_EQ(p.stop_signal, SIGTERM); /* the first one's */
    CHECK_INT_EQ(policy_stop_signal(&p, SIGINT, 1), ACT_NONE);
    CHECK_INT_EQ(policy_ended(&p, 0, 0), PHASE_DONE);
    CHECK_INT_EQ(policy_status(&p), 128 + SIGTERM);

    /* Again with no worker left: nothing to do. */
    policy_init(&p, 0);
    CHECK_INT_EQ(policy_stop_signal(&p, SIGHUP, 0), ACT_STOP);
    CHECK_INT_EQ(policy_stop_signal(&p, SIGHUP, 0), ACT_NONE);
    CHECK_INT_EQ(p.phase, PHASE_STOPPING);
}

/* With a control plane: every ended attempt waits for the job's decision,
 * and a stop signal stays for good. */
static void test_control_plane(void)
{
    struct policy p;
    policy_init(&p, 3);
    CHECK_INT_EQ(policy_peer_stop(&p), ACT_STOP);
    CHECK_INT_EQ(policy_peer_stop(&p), ACT_NONE);
    CHECK_INT_EQ(policy_ended(&p, 1, 0), PHASE_WAITING);
    CHECK_INT_EQ(policy_status(&p), 0); /* stopped by the host: no failure */
    /* Signals while waiting: passed on (to no one); the phase stays. */
    CHECK_INT_EQ(policy_stop_signal(&p, SIGINT, 0), ACT_PASS);
    CHECK_INT_EQ(p.phase, PHASE_WAITING);
    CHECK_INT_EQ(policy_round(&p, 1, 2), PHASE_RESTARTING);
    CHECK_INT_EQ(p.restarts, 2);
    policy_attempt(&p);
    CHECK_INT_EQ(p.phase, PHASE_RUNNING);
    /* The stop signal of an earlier round: another one means now. */
    CHECK_INT_EQ(policy_stop_signal(&p, SIGTERM, 4), ACT_KILL);
    CHECK_INT_EQ(policy_ended(&p, 1, 0), PHASE_WAITING);
    CHECK_INT_EQ(policy_round(&p, 0, 0), PHASE_DONE);
    CHECK_INT_EQ(p.restarts, 2);
}

/* Workers stopped while running for the host are marked, for the end of
 * the job: a host that then says the job succeeded is not believed.  Not
 * when they had ended already; not in the next attempt. */
static void test_peer_stopped(void)
{
    struct policy p;
    policy_init(&p, 1);
    policy_attempt(&p);
    CHECK_INT_EQ(p.peer_stopped, 0);
    CHECK_INT_EQ(policy_peer_stop(&p), ACT_STOP);
    CHECK_INT_EQ(p.peer_stopped, 1);
    CHECK_INT_EQ(policy_ended(&p, 1, 0), PHASE_WAITING);
    CHECK_INT_EQ(policy_round(&p, 1, 1), PHASE_RESTARTING);
    policy_attempt(&p);
    CHECK_INT_EQ(p.peer_stopped, 0);
    CHECK_INT_EQ(policy_ended(&p, 1, 0), PHASE_WAITING);
    CHECK_INT_EQ(policy_peer_stop(&p), ACT_NONE); /* they had ended */
    CHECK_INT_EQ(p.peer_stopped, 0);
}

static void test_abort(void)
{
    struct policy p;
    policy_init(&p, 0);
    CHECK_INT_EQ(policy_abort(&p), ACT_KILL);
    CHECK_INT_EQ(p.phase, PHASE_KILLING);
    CHECK_INT_EQ(policy_deadline(&p, 3), ACT_NONE);
}

/* A Slurm step's task that SIGTERM stopped exits 1, so that srun's status
 * (its tasks' highest) is the failing task's. */
/* A hang is a failure of the attempt: status 124, and a restart while
 * restarts are left; --timeout ends the job, whatever restarts are left,
 * even while the workers stop for another reason. */
static void test_hang(void)
{
    struct policy p;
    policy_init(&p, 1);
    CHECK_INT_EQ(policy_verdict(&p, 1, 124), ACT_STOP);
    CHECK_INT_EQ(p.phase, PHASE_STOPPING);
    CHECK_INT_EQ(policy_verdict(&p, 1, 124), ACT_NONE);
    /* The workers' ends by our SIGTERM are no failure of their own. */
    CHECK_INT_EQ(policy_failed(&p, 1, SIGTERM), ACT_NONE);
    CHECK_INT_EQ(p.fail, -1);
    CHECK_INT_EQ(policy_status(&p), 124);
    CHECK_INT_EQ(policy_ended(&p, 0, 0), PHASE_RESTARTING);
    CHECK_INT_EQ(p.restarts, 1);
    policy_attempt(&p);
    CHECK_INT_EQ(policy_status(&p), 0);
    CHECK_INT_EQ(policy_verdict(&p, 1, 124), ACT_STOP);
    CHECK_INT_EQ(policy_ended(&p, 0, 0), PHASE_DONE);
    CHECK_INT_EQ(policy_status(&p), 124);

    policy_init(&p, 5);
    CHECK_INT_EQ(policy_verdict(&p, 0, 124), ACT_STOP);
    CHECK_INT_EQ(policy_ended(&p, 0, 0), PHASE_DONE);
    CHECK_INT_EQ(policy_status(&p), 124);
    /* During a failure's stop: the failure's status, no restart. */
    policy_init(&p, 5);
    CHECK_INT_EQ(policy_failed(&p, 0, EXITED(3)), ACT_STOP);
    CHECK_INT_EQ(policy_verdict(&p, 0, 124), ACT_NONE);
    CHECK_INT_EQ(policy_ended(&p, 0, 0), PHASE_DONE);
    CHECK_INT_EQ(policy_status(&p), 3);
}

static void test_stopped_status(void)
{
    unsetenv("SLURM_STEP_ID");
    unsetenv("SLURM_STEPID");
    unsetenv("SLURM_STEP_NUM_TASKS");
    unsetenv("SLURM_NTASKS");
    CHECK_INT_EQ(policy_stopped_status(SIGTERM), 143);
    CHECK_INT_EQ(policy_stopped_status(SIGINT), 130);
    setenv("SLURM_STEP_ID", "0", 1);
    setenv("SLURM_STEP_NUM_TASKS", "2", 1);
    CHECK_INT_EQ(policy_stopped_status(SIGTERM), 1);
    CHECK_INT_EQ(policy_stopped_status(SIGINT), 130);
    setenv("SLURM_STEP_NUM_TASKS", "1", 1);
    CHECK_INT_EQ(policy_stopped_status(SIGTERM), 143);
    unsetenv("SLURM_STEP_ID");
    unsetenv("SLURM_STEP_NUM_TASKS");
    setenv("SLURM_STEPID", "3", 1); /* the older names */
    setenv("SLURM_NTASKS", "4", 1);
    CHECK_INT_EQ(policy_stopped_status(SIGTERM), 1);
    setenv("SLURM_STEPID", "", 1);
    CHECK_INT_EQ(policy_stopped_status(SIGTERM), 143);

    struct policy p;
    setenv("SLURM_STEPID", "3", 1);
    policy_init(&p, 0);
    policy_stop_signal(&p, SIGTERM, 1);
    CHECK_INT_EQ(policy_status(&p), 1);
}

/* A verdict's exit status is its reason's (stopreason.h), whatever the
 * reason: a restartable one restarts while restarts are left. */
static void test_verdict_status(void)
{
    struct policy p;
    policy_init(&p, 1);
    CHECK_INT_EQ(policy_verdict(&p, 1, 77), ACT_STOP);
    CHECK_INT_EQ(policy_status(&p), 77);
    CHECK_INT_EQ(policy_ended(&p, 0, 0), PHASE_RESTARTING);
    policy_attempt(&p);
    CHECK_INT_EQ(policy_status(&p), 0);
    CHECK_INT_EQ(policy_verdict(&p, 0, 78), ACT_STOP);
    CHECK_INT_EQ(policy_ended(&p, 0, 0), PHASE_DONE);
    CHECK_INT_EQ(policy_status(&p), 78);
}

int main(void)
{
    RUN(test_start);
    RUN(test_first_failure);
    RUN(test_deadline_without_workers);
    RUN(test_restarts);
    RUN(test_no_restart);
    RUN(test_stop_signals);
    RUN(test_control_plane);
    RUN(test_peer_stopped);
    RUN(test_abort);
    RUN(test_hang);
    RUN(test_verdict_status);
    RUN(test_stopped_status);
    return test_summary();
}
