/* The supervisor's plugins against a fake job (launcher/job/hooks.h): the
 * hang watch's verdicts reach the supervisor through job_stop() and it
 * acts on no worker itself; a healthy job gets no verdict, nor one whose
 * output waits in its pipes, one amlrun could not watch (a late look, a
 * SIGCONT) or one stopped; the job API's
 * timers take the signals first, its topics reach every subscriber in
 * order, and plugins detach in reverse order. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#include "cli/options.h"
#include "job/hooks.h"
#include "job/job.h"
#include "output/msg.h"
#include "plugins/hang.h"
#include "util/clock.h"

/* The fake job and what its supervisor was told. */
struct fake {
    struct job j;
    struct job_spec s;
    struct amlrun_opts o;
    struct worker w[2];
    pid_t pid[2];
    int stops, syncs, drains;
    enum stop_reason reason;
    char why[256], peer[256];
};

static struct fake *fake_of(struct job *j)
{
    return (struct fake *)(void *)j; /* j is the first member */
}

static void fake_stop(struct job *j, enum stop_reason r,
                      const struct stop_detail *d)
{
    struct fake *f = fake_of(j);
    f->stops++;
    f->reason = r;
    snprintf(f->why, sizeof f->why, "%s", d && d->why ? d->why : "");
    snprintf(f->peer, sizeof f->peer, "%s",
             d && d->peer_text ? d->peer_text : "");
}

static int fake_sync(struct job *j)
{
    fake_of(j)->syncs++;
    return 0;
}

/* job_drain(): the pipes hold a line of every worker's, read now. */
static void fake_drain(struct job *j)
{
    struct fake *f = fake_of(j);
    f->drains++;
    for (int i = 0; i < 2; i++)
        f->w[i].out.out_ns = amldist__now_ns();
}

static const struct job_actions fake_actions = {fake_stop, fake_sync,
                                                fake_drain};
/* A supervisor with no drain: what the loop has read is all there is. */
static const struct job_actions no_drain = {fake_stop, fake_sync, NULL};

/* Two workers (sleeping children), started 10 s ago, silent since. */
static void fake_init(struct fake *f, double hang_timeout, double timeout)
{
    memset(f, 0, sizeof *f);
    options_init(&f->o, "amlrun");
    f->o.hang_timeout = hang_timeout;
    f->o.timeout = timeout;
    f->o.quiet = 1;
    f->s.o = &f->o;
    f->s.host = "testhost";
    f->s.nproc = 2;
    f->j.s = &f->s;
    f->j.n = 2;
    f->j.w = f->w;
    f->j.loop = amldist__loop_new();
    f->j.t_begin = now_s();
    policy_init(&f->j.p, 0);
    policy_attempt(&f->j.p);
    int64_t start = amldist__now_ns() - 10 * (int64_t)1000000000;
    for (int i = 0; i < 2; i++) {
        f->pid[i] = fork();
        if (f->pid[i] == 0) {
            pause();
            _exit(0);
        }
        f->w[i] = (struct worker){.job = &f->j, .pid = f->pid[i],
                                  .running = 1, .attempt = 0,
                                  .start_ns = start, .stack_fd = -1};
        f->w[i].id = (struct worker_id){i, i, 0, 2};
        f->w[i].out.fd = f->w[i].err.fd = -1;
    }
    f->j.live = 2;
}

static void fake_free(struct fake *f)
{
    job_plugins_detach(&f->j);
    for (int i = 0; i < 2; i++) {
        kill(f->pid[i], SIGKILL);
        waitpid(f->pid[i], NULL, 0);
    }
    amldist__loop_free(f->j.loop);
    options_free(&f->o);
}

/* Run the loop until the supervisor is told to stop, or `ms` pass;
 * `busy`: every worker writes a line each round (a healthy job). */
static void run_for(struct fake *f, long long ms, int busy)
{
    long long end = amldist__now_ms() + ms;
    while (!f->stops && amldist__now_ms() < end) {
        if (busy)
            for (int i = 0; i < 2; i++)
                f->w[i].out.out_ns = amldist__now_ns();
        amldist__loop_once(f->j.loop, 20);
    }
}

static int alive(pid_t pid)
{
    return waitpid(pid, NULL, WNOHANG) == 0;
}

static const struct job_plugin *const hang_only[] = {&hang_plugin, NULL};

/* Silent ranks: a hang, said to the supervisor, which alone acts. */
static void test_hang_verdict(void)
{
    struct fake f;
    fake_init(&f, 0.2, 0);
    CHECK_INT_EQ(job_plugins_attach(&f.j, hang_only, &no_drain), 0);
    job_hooks_attempt_start(&f.j, 1);
    run_for(&f, 3000, 0);
    CHECK_INT_EQ(f.stops, 1);
    CHECK_INT_EQ(f.reason, STOP_HANG);
    CHECK_STR_HAS(f.why, "hang: no rank wrote any output for");
    CHECK_STR_HAS(f.peer, "host testhost: hang: no progress for");
    CHECK(f.syncs >= 1); /* the signals were taken before the look */
    /* It acted on no worker: both still run, and the phase is the
     * supervisor's to change. */
    CHECK(alive(f.pid[0]) && alive(f.pid[1]));
    CHECK_INT_EQ(f.j.p.phase, PHASE_RUNNING);
    CHECK_INT_EQ(stop_row(f.reason)->restartable, 1);
    fake_free(&f);
}

/* Ranks that write lines are making progress: no verdict. */
static void test_healthy_no_verdict(void)
{
    struct fake f;
    fake_init(&f, 0.2, 0);
    CHECK_INT_EQ(job_plugins_attach(&f.j, hang_only, &fake_actions), 0);
    job_hooks_attempt_start(&f.j, 1);
    run_for(&f, 1000, 1);
    CHECK_INT_EQ(f.stops, 0);
    /* An attempt that ended takes its look with it. */
    job_hooks_attempt_end(&f.j);
    run_for(&f, 500, 0);
    CHECK_INT_EQ(f.stops, 0);
    fake_free(&f);
}

/* A look finds no sign of life, but the pipes hold what the workers wrote
 * (the look came before the loop read them): read first, no verdict. */
static void test_drain_before_verdict(void)
{
    struct fake f;
    fake_init(&f, 0.2, 0);
    CHECK_INT_EQ(job_plugins_attach(&f.j, hang_only, &fake_actions), 0);
    job_hooks_attempt_start(&f.j, 1);
    run_for(&f, 1000, 0);
    CHECK_INT_EQ(f.stops, 0);
    CHECK(f.drains >= 2);
    fake_free(&f);
}

/* A look that fires long after it was due (amlrun was stopped, or blocked
 * on its console): the clock starts again, even with nothing to read. */
static void test_late_look(void)
{
    struct fake f;
    fake_init(&f, 0.3, 0);
    CHECK_INT_EQ(job_plugins_attach(&f.j, hang_only, &no_drain), 0);
    job_hooks_attempt_start(&f.j, 1);
    /* The ranks were last seen at the start; amlrun sleeps through the
     * look (as stopped) and then runs its loop again. */
    for (int i = 0; i < 2; i++)
        f.w[i].out.out_ns = amldist__now_ns();
    usleep(800000);
    run_for(&f, 150, 0);
    CHECK_INT_EQ(f.stops, 0);
    /* With the clock restarted, silence is a hang again. */
    run_for(&f, 3000, 0);
    CHECK_INT_EQ(f.stops, 1);
    CHECK_INT_EQ(f.reason, STOP_HANG);
    fake_free(&f);
}

/* amlrun continued (SIGCONT) since the last look: the same. */
static void test_continued(void)
{
    struct fake f;
    fake_init(&f, 0.3, 0);
    CHECK_INT_EQ(job_plugins_attach(&f.j, hang_only, &no_drain), 0);
    job_hooks_attempt_start(&f.j, 1);
    run_for(&f, 250, 1);
    f.j.cont_ns = amldist__now_ns();
    run_for(&f, 200, 0); /* the look at 0.55 s: 0.3 s since the lines */
    CHECK_INT_EQ(f.stops, 0);
    run_for(&f, 3000, 0);
    CHECK_INT_EQ(f.stops, 1);
    fake_free(&f);
}

/* Workers stopped (SIGSTOP, Ctrl-Z: the supervisor saw them stop) are not
 * hung, however long; once continued, their clock starts then. */
static void test_stopped_workers(void)
{
    struct fake f;
    fake_init(&f, 0.2, 0);
    CHECK_INT_EQ(job_plugins_attach(&f.j, hang_only, &no_drain), 0);
    job_hooks_attempt_start(&f.j, 1);
    f.w[0].stopped = f.w[1].stopped = SIGSTOP;
    run_for(&f, 800, 0);
    CHECK_INT_EQ(f.stops, 0);
    f.w[0].stopped = f.w[1].stopped = 0;
    f.w[0].cont_ns = f.w[1].cont_ns = amldist__now_ns();
    run_for(&f, 100, 0);
    CHECK_INT_EQ(f.stops, 0);
    run_for(&f, 3000, 0);
    CHECK_INT_EQ(f.stops, 1);
    fake_free(&f);
}

/* --timeout: the job ends whatever restarts are left. */
static void test_timeout_verdict(void)
{
    struct fake f;
    fake_init(&f, 0, 0.2);
    CHECK_INT_EQ(job_plugins_attach(&f.j, hang_only, &fake_actions), 0);
    run_for(&f, 3000, 1);
    CHECK_INT_EQ(f.stops, 1);
    CHECK_INT_EQ(f.reason, STOP_TIMEOUT);
    CHECK_STR_HAS(f.why, "--timeout 0.2: the job ran");
    CHECK_STR_HAS(f.peer, "--timeout 0.2: the job stops");
    CHECK_INT_EQ(stop_row(f.reason)->restartable, 0);
    CHECK(alive(f.pid[0]) && alive(f.pid[1]));
    fake_free(&f);
}

/* ---- the job API itself, with two plugins of the test's ---- */

static char order[64];

static void note(char c)
{
    size_t n = strlen(order);
    if (n + 1 < sizeof order) {
        order[n] = c;
        order[n + 1] = '\0';
    }
}

static void on_topic(void *self, struct job *j, const void *data)
{
    (void)j;
    note(*(const char *)self);
    note(*(const char *)data);
}

static void on_fire(void *arg)
{
    note(*(const char *)arg);
}

static int attach_a(struct job *j, void **self)
{
    *self = "a";
    return job_subscribe(j, TOPIC_HANG, on_topic, *self);
}

static int attach_b(struct job *j, void **self)
{
    *self = "b";
    return job_subscribe(j, TOPIC_HANG, on_topic, *self);
}

static int attach_off(struct job *j, void **self)
{
    (void)j;
    *self = NULL; /* not active in this job */
    return 0;
}

static void detach_note(void *self, struct job *j)
{
    (void)j;
    note((char)(*(const char *)self - 'a' + 'A'));
}

static void never(void *self, struct job *j, int started)
{
    (void)self;
    (void)j;
    (void)started;
    note('!');
}

static const struct job_plugin plug_a = {.name = "a", .attach = attach_a,
                                         .detach = detach_note};
static const struct job_plugin plug_b = {.name = "b", .attach = attach_b,
                                         .detach = detach_note};
static const struct job_plugin plug_off = {.name = "off",
                                           .attach = attach_off,
                                           .attempt_start = never};

static void test_hooks(void)
{
    static const struct job_plugin *const list[] = {&plug_a, &plug_off,
                                                     &plug_b, NULL};
    struct fake f;
    fake_init(&f, 0, 0);
    order[0] = '\0';
    CHECK_INT_EQ(job_plugins_attach(&f.j, list, &fake_actions), 0);
    /* An inactive plugin is never called. */
    job_hooks_attempt_start(&f.j, 1);
    CHECK_STR_EQ(order, "");
    /* Topics: every subscriber, in order. */
    job_publish(&f.j, TOPIC_HANG, "x");
    job_publish(&f.j, TOPIC_MARKS, "y"); /* nobody's */
    CHECK_STR_EQ(order, "axbx");
    /* Timers: the signals first; a cancelled one never fires. */
    order[0] = '\0';
    f.syncs = 0;
    long long now = amldist__now_ms();
    int t1 = job_timer(&f.j, now + 10, on_fire, "1");
    int t2 = job_timer(&f.j, now + 20, on_fire, "2");
    CHECK(t1 > 0 && t2 > 0);
    job_timer_cancel(&f.j, t1);
    for (int k = 0; k < 10 && !order[0]; k++)
        amldist__loop_once(f.j.loop, 50);
    CHECK_STR_EQ(order, "2");
    CHECK_INT_EQ(f.syncs, 1);
    /* job_stop reaches the supervisor's handler. */
    job_stop(&f.j, STOP_TIMEOUT, &(struct stop_detail){"why", NULL});
    CHECK_INT_EQ(f.stops, 1);
    CHECK_STR_EQ(f.why, "why");
    /* Detached in reverse order, a timer left pending cancelled. */
    order[0] = '\0';
    CHECK(job_timer(&f.j, amldist__now_ms() + 10, on_fire, "3") > 0);
    job_plugins_detach(&f.j);
    CHECK_STR_EQ(order, "BA");
    for (int k = 0; k < 3; k++)
        amldist__loop_once(f.j.loop, 20);
    CHECK_STR_EQ(order, "BA");
    fake_free(&f);
}

/* The stop reasons' table: names as the event log and --hang-report
 * write them, and a row for every reason. */
static void test_reason_table(void)
{
    CHECK_STR_EQ(stop_row(STOP_HANG)->name, "hang");
    CHECK_STR_EQ(stop_row(STOP_TIMEOUT)->name, "timeout");
    CHECK_STR_EQ(stop_row(STOP_FAILURE)->name, "failure");
    CHECK_STR_EQ(stop_row(STOP_SIGNAL)->name, "signal");
    CHECK_STR_EQ(stop_row(STOP_DEADLINE)->name, "deadline");
    CHECK_STR_EQ(stop_row(STOP_PEER)->name, "peer");
    CHECK_STR_EQ(stop_row(STOP_REQUEST)->name, "request");
    CHECK_INT_EQ(stop_row(STOP_HANG)->exit_status, 124);
    CHECK_STR_EQ(stop_row(STOP_HANG)->time_field, "idle_s");
    CHECK_STR_EQ(stop_row(STOP_TIMEOUT)->time_field, "run_s");
    CHECK(stop_row(STOP_REQUEST)->stacks_head == NULL);
    CHECK_STR_EQ(stop_row((enum stop_reason)99)->name, "request");
    for (int r = 0; r < STOP_NREASONS; r++)
        CHECK(stop_row((enum stop_reason)r)->name != NULL);
}

int main(void)
{
    RUN(test_hang_verdict);
    RUN(test_healthy_no_verdict);
    RUN(test_drain_before_verdict);
    RUN(test_late_look);
    RUN(test_continued);
    RUN(test_stopped_workers);
    RUN(test_timeout_verdict);
    RUN(test_hooks);
    RUN(test_reason_table);
    return test_summary();
}
