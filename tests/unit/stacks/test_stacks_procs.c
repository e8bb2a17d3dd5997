/*
 * The stacks of workers whose processes are not plain children
 * (launcher/stacks/capture*.c): workers born in a PID namespace of their
 * own (amlrun's pidns containment), a worker some other tracer already
 * holds (strace, gdb), a worker's own child processes, and the capture
 * run beside a loop that must not wait for it (stk_capture_start).
 *
 * Under valgrind the targets run on valgrind's machine: the cases that
 * read them are skipped there.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#include "stacks/capture.h"
#include "stacks/stacks.h"

#define TIMEOUT_MS 5000

void proc_spin(void);
void proc_parent_waits(void);
void *proc_thread_spins(void *arg);

static volatile unsigned long counter;

__attribute__((noinline)) void proc_spin(void)
{
    for (;;)
        counter++;
}

/* A parent that waits for its child, which spins. */
__attribute__((noinline)) void proc_parent_waits(void)
{
    pid_t kid = fork();
    if (kid == 0)
        proc_spin();
    while (waitpid(kid, NULL, 0) < 0 && errno == EINTR) {
    }
    _exit(0);
}

static long tracer_of(pid_t pid)
{
    char path[64], line[256];
    long tracer = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "TracerPid: %ld", &tracer) == 1)
            break;
    if (f)
        fclose(f);
    return tracer;
}

static void end_child(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

static struct stk_target target(pid_t pid, int rank)
{
    struct stk_target t = {.rank = rank, .local_rank = rank, .pid = pid,
                           .last_progress_s = -1, .python_fd = -1};
    return t;
}

static const struct stk_frame *frame_in(const struct stk_thread *t,
                                        const char *fn)
{
    for (size_t i = 0; t && i < t->nnative; i++)
        if (t->native[i].function && strstr(t->native[i].function, fn))
            return &t->native[i];
    return NULL;
}

static void dump_rank(const struct stk_rank *r)
{
    fprintf(stderr, "# rank %d pid %d: %zu threads, error: %s\n", r->rank,
            (int)r->pid, r->nthreads, r->error ? r->error : "-");
    for (size_t i = 0; i < r->nthreads; i++) {
        const struct stk_thread *t = &r->threads[i];
        fprintf(stderr, "#  thread %d pid %d (%s)\n", (int)t->tid,
                (int)t->pid, t->name ? t->name : "?");
        for (size_t k = 0; k < t->nnative && k < 6; k++)
            fprintf(stderr, "#    %s\n", t->native[k].function
                                             ? t->native[k].function : "?");
    }
}

/* A spinner, running in its function (its counter moves). */
static pid_t fork_spinner(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        proc_spin();
    }
    return pid;
}

/* ---- a PID namespace: amlrun's pidns containment ---- */

/* The capturer unshares CLONE_NEWPID, as amlrun's guard_start() does,
 * forks the namespace's init and then a worker in it, and reads the
 * worker: its pid is the capturer's view of it. */
static void test_pid_namespace(void)
{
    if (unshare(CLONE_NEWPID) < 0) {
        printf("# no PID namespace here (%s): nothing to check\n",
               strerror(errno));
        return;
    }
    pid_t init = fork();
    if (init == 0) {
        for (;;)
            pause();
    }
    CHECK(init > 0);
    pid_t pid = fork_spinner();
    CHECK(pid > 0);
    usleep(50000);
    struct stk_target t = target(pid, 0);
    struct stk_set s = {0};
    CHECK_INT_EQ(stk_capture(&t, 1, NULL, TIMEOUT_MS, &s), 0);
    const struct stk_rank *r = &s.ranks[0];
    CHECK(r->error == NULL);
    CHECK(r->nthreads == 1 && frame_in(&r->threads[0], "proc_spin"));
    if (r->error || !r->nthreads || !frame_in(&r->threads[0], "proc_spin"))
        dump_rank(r);
    /* Its children are still born in the namespace: the next one is not
     * the namespace's first (pid 1, the init), nor the capturer's pid. */
    pid_t kid = fork();
    if (kid == 0)
        _exit(getpid() > 1 && getpid() < 1000 ? 0 : 1);
    int status = -1;
    CHECK(waitpid(kid, &status, 0) == kid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(tracer_of(pid) == 0);
    stk_set_free(&s);
    end_child(pid);
    end_child(init);
}

/* ---- a worker someone else traces ---- */

static void test_traced_elsewhere(void)
{
    pid_t pid = fork_spinner();
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t tracer = fork();
    if (tracer == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char ok = ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0 ? 'y' : 'n';
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    char ok = 0;
    CHECK(read(p[0], &ok, 1) == 1 && ok == 'y');
    close(p[0]);
    close(p[1]);
    struct stk_target t = target(pid, 0);
    struct stk_set s = {0};
    CHECK_INT_EQ(stk_capture(&t, 1, NULL, TIMEOUT_MS, &s), 0);
    char want[64];
    snprintf(want, sizeof want, "already traced by pid %d", (int)tracer);
    CHECK_STR_HAS(s.ranks[0].error, want);
    CHECK(s.ranks[0].error && !strstr(s.ranks[0].error, "security module"));
    stk_set_free(&s);
    end_child(tracer);
    end_child(pid);
}

/* ---- a worker's children ---- */

static int has_frame(const struct stk_rank *r, pid_t pid, const char *fn)
{
    for (size_t i = 0; i < r->nthreads; i++)
        if (r->threads[i].pid == pid && frame_in(&r->threads[i], fn))
            return 1;
    return 0;
}

static pid_t child_of(pid_t pid)
{
    char path[64];
    int kid = 0;
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid,
             (int)pid);
    for (int i = 0; i < 2000 && kid == 0; i++) {
        FILE *f = fopen(path, "r");
        if (!f || fscanf(f, "%d", &kid) != 1)
            kid = 0;
        if (f)
            fclose(f);
        if (!kid)
            usleep(5000);
    }
    return (pid_t)kid;
}

/* A worker waits for its child, which spins: both are read, the child's
 * threads under the worker's rank, after the worker's own. */
static void test_children(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        proc_parent_waits();
    }
    pid_t kid = child_of(pid);
    CHECK(kid > 0);
    usleep(50000);
    struct stk_target t = target(pid, 5);
    struct stk_set s = {0};
    CHECK_INT_EQ(stk_capture(&t, 1, NULL, TIMEOUT_MS, &s), 0);
    CHECK_INT_EQ(s.n, 1);
    const struct stk_rank *r = &s.ranks[0];
    CHECK(r->nthreads >= 2);
    CHECK(r->nthreads && r->threads[0].tid == pid && r->threads[0].pid == pid);
    CHECK(has_frame(r, pid, "proc_parent_waits"));
    CHECK(has_frame(r, kid, "proc_spin"));
    CHECK(r->error == NULL);
    if (!has_frame(r, kid, "proc_spin") || r->error)
        dump_rank(r);
    CHECK(tracer_of(kid) == 0 && tracer_of(pid) == 0);
    stk_set_free(&s);
    kill(kid, SIGKILL);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
}

/* ---- a thread that never stops, beside one that does ---- */

__attribute__((noinline)) void *proc_thread_spins(void *arg)
{
    (void)arg;
    proc_spin();
    return NULL;
}

/* A worker whose main thread waits for its vfork child (uninterruptible
 * sleep: it never stops for ptrace) while another thread spins, read
 * through the asynchronous calls: the capture ends, says the waiting
 * thread's state, and still shows the spinning thread's frames. */
static void test_async_unstoppable(void)
{
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pthread_t th;
        if (pthread_create(&th, NULL, proc_thread_spins, NULL) != 0 ||
            write(p[1], "v", 1) != 1)
            _exit(4);
        if (vfork() == 0) {
            pause();
            _exit(0);
        }
        _exit(0);
    }
    char c;
    CHECK(read(p[0], &c, 1) == 1);
    for (int i = 0; i < 2000; i++) {
        char path[64], buf[512] = "";
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        if (f && fgets(buf, sizeof buf, f) && strstr(buf, ") D "))
            i = 2000;
        if (f)
            fclose(f);
        usleep(5000);
    }
    pid_t spinner = fork_spinner();
    struct stk_target t[2] = {target(pid, 0), target(spinner, 1)};
    struct stk_capture *k = stk_capture_start(t, 2, "h", 2000);
    CHECK(k != NULL);
    struct pollfd pf = {.fd = k ? stk_capture_fd(k) : -1, .events = POLLIN};
    /* The caller's loop goes on until the descriptor says it is over. */
    long turns = 0;
    while (k && poll(&pf, 1, 10) == 0)
        turns++;
    printf("# the caller's loop turned %ld times during the capture\n",
           turns);
    struct stk_set s = {0};
    CHECK_INT_EQ(k ? stk_capture_collect(k, &s) : -1, 0);
    CHECK_INT_EQ(s.n, 2);
    const struct stk_rank *r = s.n == 2 ? &s.ranks[0] : NULL;
    CHECK(r && r->error && strstr(r->error, "did not stop in time: state D"));
    CHECK(r && has_frame(r, pid, "proc_thread_spins"));
    CHECK(s.n == 2 && has_frame(&s.ranks[1], spinner, "proc_spin"));
    CHECK(s.n == 2 && s.ranks[1].error == NULL);
    if (r && (!r->error || !has_frame(r, pid, "proc_thread_spins")))
        dump_rank(r);
    stk_set_free(&s);
    pid_t kid = child_of(pid);
    if (kid > 0)
        kill(kid, SIGKILL);
    end_child(pid);
    end_child(spinner);
}

int main(void)
{
    static const char *const native_cases[] = {"test_pid_namespace",
                                               "test_traced_elsewhere",
                                               "test_children",
                                               "test_async_unstoppable"};
    if (test_under_valgrind()) {
        for (size_t i = 0; i < sizeof native_cases / sizeof *native_cases; i++)
            printf("ok - %s # SKIP the targets run on valgrind's machine\n",
                   native_cases[i]);
        return test_summary();
    }
    RUN(test_pid_namespace);
    RUN(test_traced_elsewhere);
    RUN(test_children);
    RUN(test_async_unstoppable);
    return test_summary();
}
