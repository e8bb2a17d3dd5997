/*
 * bench/stacks_capture.sh's program: the pauses a capture causes
 * (launcher/stacks, issue 37).  N workers sleep 1 ms at a time and note
 * their longest gap between two wake-ups (a ptrace stop shows as one); one
 * more worker's main thread is in an uninterruptible sleep (waiting for
 * its vfork child) beside a thread that sleeps the same way.  The bench's
 * loop polls the capture's descriptor every millisecond, as amlrun's loop
 * would, and notes its own longest gap.  Prints: the capture's time, the
 * loop's longest pause, the longest stop of a healthy worker.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stacks/stacks.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Sleep 1 ms at a time; on SIGUSR1's byte on `ask`, write the longest gap
 * (ms) to `ans`. */
static void sleeper(int ask, int ans)
{
    double last = now_ms(), worst = 0;
    struct pollfd pf = {.fd = ask, .events = POLLIN};
    for (;;) {
        int r = poll(&pf, 1, 1);
        double t = now_ms();
        if (t - last > worst)
            worst = t - last;
        last = t;
        if (r == 1) {
            if (write(ans, &worst, sizeof worst) != sizeof worst)
                _exit(1);
            _exit(0);
        }
    }
}

static void *sleeper_thread(void *arg)
{
    (void)arg;
    for (;;)
        usleep(1000);
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 64;
    setvbuf(stdout, NULL, _IOLBF, 0);
    pid_t *pid = calloc((size_t)n + 1, sizeof *pid);
    int (*ask)[2] = calloc((size_t)n, sizeof *ask), ans[2];
    struct stk_target *t = calloc((size_t)n + 1, sizeof *t);
    if (pipe(ans) < 0)
        return 2;
    for (int i = 0; i < n; i++) {
        if (pipe(ask[i]) < 0)
            return 2;
        if ((pid[i] = fork()) == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            sleeper(ask[i][0], ans[1]);
        }
        t[i] = (struct stk_target){.rank = i, .pid = pid[i],
                                   .last_progress_s = -1, .python_fd = -1};
    }
    if ((pid[n] = fork()) == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pthread_t th;
        pthread_create(&th, NULL, sleeper_thread, NULL);
        if (vfork() == 0) {
            pause();
            _exit(0);
        }
        _exit(0);
    }
    t[n] = (struct stk_target){.rank = n, .pid = pid[n],
                               .last_progress_s = -1, .python_fd = -1};
    usleep(300000);
    double t0 = now_ms(), last = t0, pause_ms = 0;
    struct stk_capture *k = stk_capture_start(t, (size_t)n + 1, "h", 10000);
    if (!k)
        return 2;
    struct pollfd pf = {.fd = stk_capture_fd(k), .events = POLLIN};
    for (;;) {
        int r = poll(&pf, 1, 1);
        double now = now_ms();
        if (now - last > pause_ms)
            pause_ms = now - last;
        last = now;
        if (r == 1)
            break;
    }
    double took = now_ms() - t0;
    struct stk_set s = {NULL, 0};
    if (stk_capture_collect(k, &s) < 0)
        return 2;
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double w;
        if (write(ask[i][1], "q", 1) != 1 ||
            read(ans[0], &w, sizeof w) != sizeof w)
            return 2;
        if (w > worst)
            worst = w;
    }
    printf("workers %d + 1 with a thread in D state\n", n);
    printf("capture_ms %.1f\n", took);
    printf("loop_longest_pause_ms %.1f\n", pause_ms);
    printf("healthy_longest_stop_ms %.1f\n", worst);
    printf("d_state_rank: %s\n", s.ranks[n].error ? s.ranks[n].error : "-");
    stk_set_free(&s);
    char path[64];
    int kid = 0;
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid[n],
             (int)pid[n]);
    FILE *f = fopen(path, "r");
    if (f && fscanf(f, "%d", &kid) == 1 && kid > 0)
        kill(kid, SIGKILL); /* the vfork child: it holds our stdout */
    if (f)
        fclose(f);
    for (int i = 0; i <= n; i++) {
        kill(pid[i], SIGKILL);
        waitpid(pid[i], NULL, 0);
    }
    return 0;
}
