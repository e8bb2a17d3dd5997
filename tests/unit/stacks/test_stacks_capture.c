/*
 * Reading the stacks of real processes (launcher/stacks/capture*.c): this
 * program's own children stand in for amlrun's workers (it is their
 * parent, as amlrun is): a C loop in a named function, a read() that
 * blocks, a stopped one, ones that exit during the capture, a non-dumpable
 * one under an unprivileged capturer, Python workers through the
 * faulthandler channel (one thread, two threads, -S, stopped), and 64 at
 * once.  Every target must run on afterwards, with no ptrace stop left.
 *
 * Under valgrind (--trace-children=yes) the targets run on valgrind's
 * machine, whose stacks are valgrind's own: the cases are skipped there.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "amldist.h"
#include "test.h"

#include "stacks/capture.h"
#include "stacks/channel.h"
#include "stacks/stacks.h"

#define TIMEOUT_MS 5000

/* ---- the targets' code (children forked from here) ---- */

void spin_in_c(void);
void blocked_in_read(int fd, int ack);

static volatile unsigned long counter;
static int ready_fd = -1; /* a target says it is in its function here */

static void say_ready(void)
{
    if (ready_fd >= 0 && write(ready_fd, "r", 1) != 1)
        _exit(4);
}

enum { SPIN_FIRST = __LINE__ };
__attribute__((noinline)) void spin_in_c(void)
{
    say_ready();
    /* Running, but behind everything else on the machine: 32 spinners of
     * test_64_workers took both CPUs from the capture and from the tests
     * beside this one (half of the program's CPU time). */
    (void)setpriority(PRIO_PROCESS, 0, 19);
    for (;;)
        counter++;
}
enum { SPIN_LAST = __LINE__ };

__attribute__((noinline)) void blocked_in_read(int fd, int ack)
{
    char c;
    ssize_t n;
    say_ready();
    do
        n = read(fd, &c, 1);
    while (n < 0 && errno == EINTR);
    /* Answer: the read went on after the capture. */
    if (n == 1 && write(ack, "k", 1) != 1)
        _exit(3);
    _exit(0);
}

/* ---- helpers ---- */

/* Fork a target that runs fn(arg...) (via run), and wait until it is in
 * its function: a capture before would find it in fork's return. */
static pid_t fork_target(void (*run)(int), int arg)
{
    int p[2];
    if (pipe(p) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        ready_fd = p[1];
        run(arg);
        _exit(0);
    }
    close(p[1]);
    char c;
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    if (pid < 0 || poll(&pf, 1, 60000) != 1 || read(p[0], &c, 1) != 1)
        TEST__FAIL("target %d never said it was ready", (int)pid);
    close(p[0]);
    return pid;
}

static void run_spin(int unused)
{
    (void)unused;
    spin_in_c();
}

static pid_t fork_spinner(void)
{
    return fork_target(run_spin, 0);
}

static void end_child(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

/* /proc/PID/stat past the command's name ("S ppid ..."), in a static
 * buffer; NULL when it is gone. */
static const char *stat_fields(pid_t pid)
{
    static char buf[512];
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p + 2 : NULL;
}

static char proc_state(pid_t pid)
{
    const char *p = stat_fields(pid);
    return p ? p[0] : 0;
}

/* Its user CPU time (state ppid pgrp session tty tpgid flags minflt
 * cminflt majflt cmajflt utime). */
static int utime_of(pid_t pid, unsigned long *utime)
{
    const char *p = stat_fields(pid);
    return p && sscanf(p, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu",
                       utime) == 1;
}

/* The state a stopped worker settles in: let go, it passes through
 * running on its way back into its group-stop. */
static char settled_state(pid_t pid)
{
    char st = proc_state(pid);
    for (int i = 0; i < 1000 && st != 'T'; i++) {
        usleep(2000);
        st = proc_state(pid);
    }
    return st;
}

/* Every thread of pid: no tracer and not in a ptrace stop ('t').  Read
 * here, not through `cat` in a shell: the cases poll it, some while 32
 * spinners hold the CPUs, and a process started per look cost seconds. */
static int untraced(pid_t pid)
{
    char path[300];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT; /* gone: no thread left to trace */
    int ok = 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%s/status", (int)pid,
                 e->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue; /* that thread has just ended */
        char line[256];
        while (fgets(line, sizeof line, f)) {
            int tracer;
            if (sscanf(line, "TracerPid: %d", &tracer) == 1 && tracer != 0)
                ok = 0;
            char state;
            if (sscanf(line, "State: %c", &state) == 1 && state == 't')
                ok = 0;
        }
        fclose(f);
    }
    closedir(d);
    return ok;
}

/* A spinning child gets CPU time: it runs (within a generous bound: a
 * loaded machine). */
static int runs(pid_t pid)
{
    unsigned long t1, t2;
    if (!utime_of(pid, &t1))
        return 0;
    for (int i = 0; i < 1000; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (!utime_of(pid, &t2))
            return 0;
        if (t2 > t1)
            return 1;
    }
    return 0;
}

static void set_free(struct stk_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        struct stk_rank *r = &s->ranks[i];
        for (size_t k = 0; k < r->nthreads; k++) {
            cap_frames_free(r->threads[k].python, r->threads[k].npython);
            cap_frames_free(r->threads[k].native, r->threads[k].nnative);
            free(r->threads[k].name);
        }
        free(r->threads);
        free(r->host);
        free(r->error);
    }
    free(s->ranks);
    memset(s, 0, sizeof *s);
}

static struct stk_target target(pid_t pid, int rank, int python_fd)
{
    struct stk_target t = {.rank = rank, .local_rank = rank, .node = 0,
                           .pid = pid, .last_progress_s = -1,
                           .python_fd = python_fd};
    return t;
}

static const struct stk_thread *main_of(const struct stk_rank *r)
{
    for (size_t i = 0; i < r->nthreads; i++)
        if (r->threads[i].tid == r->pid)
            return &r->threads[i];
    return NULL;
}

/* The first native frame whose function contains `fn`, or NULL. */
static const struct stk_frame *native_frame(const struct stk_thread *t,
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
    for (size_t i = 0; i < r->nthreads && i < 4; i++) {
        const struct stk_thread *t = &r->threads[i];
        fprintf(stderr, "#  thread %d (%s)\n", (int)t->tid,
                t->name ? t->name : "?");
        for (size_t k = 0; k < t->npython && k < 6; k++)
            fprintf(stderr, "#    py %s:%d %s\n", t->python[k].file,
                    t->python[k].line, t->python[k].function);
        for (size_t k = 0; k < t->nnative && k < 8; k++)
            fprintf(stderr, "#    %s:%d %s [%s]\n",
                    t->native[k].file ? t->native[k].file : "?",
                    t->native[k].line,
                    t->native[k].function ? t->native[k].function : "?",
                    t->native[k].module ? t->native[k].module : "?");
    }
}

/* ---- native ---- */

static void test_c_loop(void)
{
    pid_t pid = fork_spinner();
    CHECK(pid > 0);
    CHECK(runs(pid)); /* in its loop, not just forked */
    struct stk_target t = target(pid, 3, -1);
    struct stk_set s = {0};
    CHECK_INT_EQ(stk_capture(&t, 1, "hostA", TIMEOUT_MS, &s), 0);
    CHECK_INT_EQ(s.n, 1);
    const struct stk_rank *r = &s.ranks[0];
    CHECK_INT_EQ(r->rank, 3);
    CHECK_INT_EQ(r->pid, pid);
    CHECK_STR_EQ(r->host, "hostA");
    CHECK(r->error == NULL);
    CHECK(r->nthreads == 1);
    CHECK_INT_EQ(r->threads[0].tid, pid);
    const struct stk_frame *f = native_frame(main_of(r), "spin_in_c");
    CHECK(f != NULL);
    CHECK(f && f == &r->threads[0].native[0]); /* the innermost */
    CHECK(f && f->file && strstr(f->file, "test_stacks_capture.c"));
    CHECK(f && f->line >= SPIN_FIRST && f->line <= SPIN_LAST);
    CHECK(f && f->module && strstr(f->module, "test_stacks_capture"));
    if (r->error || !f || !f->file || f->line < SPIN_FIRST ||
        f->line > SPIN_LAST)
        dump_rank(r);
    /* It runs on, traced by nobody. */
    CHECK(untraced(pid));
    CHECK(runs(pid));
    set_free(&s);
    end_child(pid);
}

static int ack_fd = -1;

static void run_read(int fd)
{
    blocked_in_read(fd, ack_fd);
}

static void test_blocked_read(void)
{
    int in[2], ack[2];
    CHECK(pipe(in) == 0 && pipe(ack) == 0);
    ack_fd = ack[1];
    pid_t pid = fork_target(run_read, in[0]);
    /* Wait until it sleeps in the read. */
    for (int i = 0; i < 2000 && proc_state(pid) != 'S'; i++)
        usleep(5000);
    struct stk_target t = target(pid, 0, -1);
    struct stk_set s = {0};
    CHECK_INT_EQ(stk_capture(&t, 1, NULL, TIMEOUT_MS, &s), 0);
    const struct stk_rank *r = &s.ranks[0];
    CHECK(r->error == NULL);
    const struct stk_thread *m = main_of(r);
    const struct stk_frame *rd = native_frame(m, "read");
    const struct stk_frame *caller = native_frame(m, "blocked_in_read");
    CHECK(rd != NULL);
    CHECK(caller != NULL);
    CHECK(rd && caller && rd < caller); /* read inside its caller */
    CHECK(rd && rd->module && strstr(rd->module, "libc"));
    if (!rd || !caller)
        dump_rank(r);
    set_free(&s);
    CHECK(untraced(pid));
    /* The read goes on: it gets the byte and answers. */
    CHECK(write(in[1], "x", 1) == 1);
    char c = 0;
    CHECK(read(ack[0], &c, 1) == 1 && c == 'k');
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_stopped(void)
{
    pid_t pid = fork_spinner();
    CHECK(runs(pid)); /* in its loop, not just forked */
    kill(pid, SIGSTOP);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    /* As the supervisor does: the stop is seen and taken. */
    CHECK(waitid(P_PID, (id_t)pid, &si, WSTOPPED) == 0);
    CHECK_INT_EQ(si.si_code, CLD_STOPPED);
    struct stk_target t = target(pid, 1, -1);
    struct stk_set s = {0};
    CHECK_INT_EQ(stk_capture(&t, 1, NULL, TIMEOUT_MS, &s), 0);
    const struct stk_rank *r = &s.ranks[0];
    CHECK(native_frame(main_of(r), "spin_in_c") != NULL);
    if (!native_frame(main_of(r), "spin_in_c"))
        dump_rank(r);
    /* Still stopped, by its group-stop, not by ptrace. */
    CHECK_INT_EQ(settled_state(pid), 'T');
    CHECK(untraced(pid));
    /* No second stop report for the parent. */
    memset(&si, 0, sizeof si);
    CHECK(waitid(P_PID, (id_t)pid, &si, WSTOPPED | WNOHANG) == 0);
    CHECK_INT_EQ(si.si_pid, 0);
    set_free(&s);
    kill(pid, SIGCONT);
    CHECK(runs(pid));
    end_child(pid);
}

/* Exited before: a zombie, whose exit status stays the parent's. */
static void test_exited(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(7);
    for (int i = 0; i < 2000 && proc_state(pid) != 'Z'; i++)
        usleep(5000);
    struct stk_target t = target(pid, 2, -1);
    struct stk_set s = {0};
    CHECK_INT_EQ(stk_capture(&t, 1, NULL, TIMEOUT_MS, &s), 0);
    CHECK_STR_HAS(s.ranks[0].error, "exited");
    CHECK_INT_EQ(s.ranks[0].nthreads, 0);
    set_free(&s);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 7);
}

/* A worker whose threads come and go, and ones that end while the capture
 * runs: every capture ends, each rank has frames or says it exited, and
 * each worker is reaped by its parent with its own status. */
static void *short_thread(void *arg)
{
    return arg;
}

static void churn(int ms)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pthread_t th;
        if (pthread_create(&th, NULL, short_thread, NULL) == 0)
            pthread_detach(th);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) * 1000 +
                (now.tv_nsec - t0.tv_nsec) / 1000000 >= ms)
            _exit(5);
    }
}

static void test_exits_during_capture(void)
{
    enum { N = 16 };
    pid_t pid[N];
    struct stk_target t[N];
    for (int i = 0; i < N; i++) {
        pid[i] = fork();
        if (pid[i] == 0)
            churn(i * 3);
        t[i] = target(pid[i], i, -1);
    }
    struct stk_set s = {0};
    CHECK_INT_EQ(stk_capture(t, N, NULL, TIMEOUT_MS, &s), 0);
    CHECK_INT_EQ(s.n, N);
    for (int i = 0; i < N; i++) {
        const struct stk_rank *r = &s.ranks[i];
        CHECK(r->nthreads > 0 || (r->error && strstr(r->error, "exited")));
        if (r->error)
            CHECK(strchr(r->error, '\n') == NULL);
    }
    set_free(&s);
    for (int i = 0; i < N; i++) {
        int status = 0;
        CHECK(waitpid(pid[i], &status, 0) == pid[i]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 5);
    }
}

/* Run as an unprivileged user (nobody's uid), dumpable as amlrun started
 * by a user is (the change of user made this process non-dumpable, and its
 * children would inherit that).  0 after a failed check. */
static int become_user(void)
{
    if (getuid() == 0 && (setresgid(65534, 65534, 65534) < 0 ||
                          setresuid(65534, 65534, 65534) < 0)) {
        TEST__FAIL("cannot become uid 65534: %s", strerror(errno));
        return 0;
    }
    prctl(PR_SET_DUMPABLE, 1);
    return 1;
}

/* A worker whose thread never stops for ptrace (waiting for its vfork
 * child, in an uninterruptible sleep as on a dead NFS server): the capture
 * ends in its time and says so; once the thread wakes it goes on, traced
 * by nobody. */
static void test_never_stops(void)
{
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (write(p[1], "v", 1) != 1)
            _exit(4);
        pid_t kid = vfork();
        if (kid == 0) {
            pause(); /* the parent waits for it without end */
            _exit(0);
        }
        if (write(p[1], "w", 1) != 1) /* woken: it ran on */
            _exit(4);
        _exit(0);
    }
    char c;
    CHECK(read(p[0], &c, 1) == 1 && c == 'v');
    for (int i = 0; i < 2000 && proc_state(pid) != 'D'; i++)
        usleep(5000);
    CHECK_INT_EQ(proc_state(pid), 'D');
    struct stk_target t = target(pid, 0, -1);
    struct stk_set s = {0};
    /* Bounded, not hung: it returns, with the error its 1 s wait gives (a
     * hang is the case's alarm). */
    CHECK_INT_EQ(stk_capture(&t, 1, NULL, 1000, &s), 0);
    CHECK_STR_HAS(s.ranks[0].error, "did not stop");
    set_free(&s);
    /* Its tracer is gone (the kernel lets go when the capture's thread
     * ends, just after it returns). */
    int traced = 1;
    for (int i = 0; i < 1000 && traced; i++) {
        traced = !untraced(pid);
        if (traced)
            usleep(5000);
    }
    CHECK(!traced);
    /* Wake it: its vfork child ends; it goes on and says so. */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid,
             (int)pid);
    FILE *f = fopen(path, "r");
    int kid = 0;
    CHECK(f && fscanf(f, "%d", &kid) == 1);
    if (f)
        fclose(f);
    if (kid > 0)
        kill(kid, SIGKILL);
    CHECK(read(p[0], &c, 1) == 1 && c == 'w');
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0);
}

/* An unprivileged capturer (amlrun run by a user, no CAP_SYS_PTRACE) and a
 * worker that made itself non-dumpable: one line says why; its neighbour,
 * dumpable, is read. */
static void test_not_dumpable(void)
{
    if (!become_user())
        return;
    pid_t hidden = fork();
    if (hidden == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        prctl(PR_SET_DUMPABLE, 0);
        spin_in_c();
    }
    pid_t open_one = fork_spinner();
    /* Wait until the prctl took effect: its /proc files turn root's. */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)hidden);
    struct stat st;
    for (int i = 0; i < 2000; i++) {
        if (stat(path, &st) == 0 && st.st_uid == 0)
            break;
        usleep(5000);
    }
    struct stk_target t[2] = {target(hidden, 0, -1), target(open_one, 1, -1)};
    struct stk_set s = {0};
    CHECK_INT_EQ(stk_capture(t, 2, NULL, TIMEOUT_MS, &s), 0);
    CHECK_STR_HAS(s.ranks[0].error, "ptrace refused");
    CHECK_STR_HAS(s.ranks[0].error, "not dumpable");
    CHECK_INT_EQ(s.ranks[0].nthreads, 0);
    CHECK(s.ranks[1].error == NULL);
    CHECK(native_frame(main_of(&s.ranks[1]), "spin_in_c") != NULL);
    set_free(&s);
    CHECK(runs(hidden));
    CHECK(runs(open_one));
    end_child(hidden);
    end_child(open_one);
}

/* ---- Python ---- */

static char script_dir[64];

static const char *write_script(const char *name, const char *text)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", script_dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

/* Start python3 [opt] script as amlrun would: the channel in its
 * environment, its write end inherited; *out reads its stdout. */
static pid_t start_python_as(const char *opt, const char *script,
                             int channel, int *chan, int *out)
{
    int fds[2] = {-1, -1}, o[2];
    if ((channel && stk_channel_open(fds) < 0) || pipe2(o, O_CLOEXEC) < 0)
        return -1;
    char **env = NULL;
    extern char **environ;
    for (char **e = environ; *e; e++) {
        char *eq = strchr(*e, '=');
        if (!eq || !strncmp(*e, "LD_PRELOAD=", 11))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        amldist_envp_set(&env, name, eq + 1);
    }
    CHECK(stk_python_dir() != NULL);
    if (channel)
        CHECK_INT_EQ(stk_channel_env(&env, fds[1]), 0);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(o[1], 1);
        if (channel)
            fcntl(fds[1], F_SETFD, 0);
        char *argv[] = {"python3", (char *)(opt ? opt : script),
                        opt ? (char *)script : NULL, NULL};
        execve("/usr/bin/python3", argv, env);
        _exit(127);
    }
    amldist_envp_free(env);
    if (channel)
        close(fds[1]);
    close(o[1]);
    *chan = fds[0];
    *out = o[0];
    return pid;
}

static pid_t start_python(const char *opt, const char *script, int *chan,
                          int *out)
{
    return start_python_as(opt, script, 1, chan, out);
}

/* Wait for a line from the worker's stdout ("ready"). */
static int ready(int fd)
{
    char buf[64];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 60000) != 1)
        return 0;
    return read(fd, buf, sizeof buf) > 0;
}

static const char py_one[] =
    "import os\n"
    "def stuck_here():\n"
    "    os.write(1, b'ready\\n')\n"
    "    while True:\n"           /* line 4 */
    "        pass\n"              /* line 5 */
    "stuck_here()\n";

/* t's innermost Python frame is fn in file, at a line from l1 to l2 (the
 * worker said it is ready a line or two before it gets stuck). */
static int python_frame_is(const struct stk_thread *t, const char *file,
                           const char *fn, int l1, int l2)
{
    if (!t || t->npython == 0)
        return 0;
    const struct stk_frame *f = &t->python[0];
    return f->file && !strcmp(f->file, file) && f->function &&
           !strcmp(f->function, fn) && f->line >= l1 && f->line <= l2;
}

/* A Python worker under capture: started on a script (python3 [opt]),
 * ready, captured as often as asked, ended. */
struct py {
    const char *script;
    pid_t pid;
    int chan, out;
    struct stk_set s;
};

static void py_start(struct py *p, const char *script, const char *opt)
{
    memset(p, 0, sizeof *p);
    p->script = script;
    p->pid = start_python(opt, script, &p->chan, &p->out);
    CHECK(p->pid > 0 && ready(p->out));
}

/* Its stacks, read afresh (the last ones freed). */
static const struct stk_rank *py_capture(struct py *p)
{
    struct stk_target t = target(p->pid, 0, p->chan);
    set_free(&p->s);
    CHECK_INT_EQ(stk_capture(&t, 1, NULL, TIMEOUT_MS, &p->s), 0);
    CHECK_INT_EQ(p->s.n, 1);
    return &p->s.ranks[0];
}

/* Let go of it: it ran on, traced by nobody. */
static void py_end(struct py *p, int check_runs)
{
    CHECK(untraced(p->pid));
    if (check_runs)
        CHECK(runs(p->pid));
    set_free(&p->s);
    end_child(p->pid);
    close(p->chan);
    close(p->out);
}

static void test_python_one(void)
{
    struct py p;
    py_start(&p, write_script("one.py", py_one), NULL);
    const struct stk_rank *r = py_capture(&p);
    CHECK(r->error == NULL);
    const struct stk_thread *m = main_of(r);
    CHECK(python_frame_is(m, p.script, "stuck_here", 3, 5));
    CHECK(m && m->npython == 2 && !strcmp(m->python[1].function, "<module>"));
    CHECK(m && m->nnative > 0);
    if (r->error || !python_frame_is(m, p.script, "stuck_here", 3, 5))
        dump_rank(r);
    /* Again: a second capture reads a fresh dump. */
    r = py_capture(&p);
    CHECK(python_frame_is(main_of(r), p.script, "stuck_here", 3, 5));
    py_end(&p, 1);
}

static const char py_two[] =
    "import os, threading, time\n"
    "started = threading.Event()\n"
    "def worker_spins():\n"
    "    started.set()\n"            /* line 4 */
    "    while True:\n"
    "        pass\n"                 /* line 6 */
    "def main_waits():\n"
    "    threading.Thread(target=worker_spins, daemon=True).start()\n"
    "    started.wait()\n"
    "    os.write(1, b'ready\\n')\n" /* line 10 */
    "    time.sleep(3600)\n"          /* line 11 */
    "main_waits()\n";

static void test_python_two_threads(void)
{
    struct py p;
    py_start(&p, write_script("two.py", py_two), NULL);
    const struct stk_rank *r = py_capture(&p);
    CHECK(r->error == NULL);
    CHECK(python_frame_is(main_of(r), p.script, "main_waits", 10, 11));
    const struct stk_thread *other = NULL;
    for (size_t i = 0; i < r->nthreads; i++)
        if (r->threads[i].tid != p.pid && r->threads[i].npython)
            other = &r->threads[i];
    CHECK(python_frame_is(other, p.script, "worker_spins", 4, 6));
#if defined(__x86_64__)
    /* Mapped to its own native thread (thread pointers). */
    CHECK(other && other->tid > 0 && other->nnative > 0);
#endif
    if (!other || r->error)
        dump_rank(r);
    py_end(&p, 0);
}

/* python -S never reads sitecustomize: the capture says so in one line and
 * still has the native frames; the signal it does not handle is never
 * sent (it would end it). */
static void test_python_no_site(void)
{
    struct py p;
    py_start(&p, write_script("nosite.py", py_one), "-S");
    const struct stk_rank *r = py_capture(&p);
    CHECK_STR_HAS(r->error, "no Python frames");
    CHECK_STR_HAS(r->error, "-S");
    CHECK(main_of(r) && main_of(r)->nnative > 0);
    CHECK(main_of(r) && main_of(r)->npython == 0);
    py_end(&p, 1);
}

/* A stopped Python worker: native frames, no Python ones (said), and it
 * stays stopped, with no dump to come when it is continued. */
static void test_python_stopped(void)
{
    struct py p;
    py_start(&p, write_script("stopped.py", py_one), NULL);
    kill(p.pid, SIGSTOP);
    siginfo_t si;
    CHECK(waitid(P_PID, (id_t)p.pid, &si, WSTOPPED) == 0);
    const struct stk_rank *r = py_capture(&p);
    CHECK_STR_HAS(r->error, "stopped");
    CHECK(main_of(r) && main_of(r)->nnative > 0);
    CHECK_INT_EQ(settled_state(p.pid), 'T');
    kill(p.pid, SIGCONT);
    CHECK(runs(p.pid));
    /* Nothing was sent: nothing comes. */
    char c;
    CHECK(read(p.chan, &c, 1) < 0 && errno == EAGAIN);
    py_end(&p, 0);
}

/* A Python worker with 200 threads: faulthandler writes 100 of them (its
 * limit) into the pipe; the capture ends, the worker runs on. */
static void test_python_many_threads(void)
{
    struct py p;
    py_start(&p, write_script("many_threads.py",
                              "import os, threading, time\n"
                              "def parked():\n"
                              "    time.sleep(3600)\n"
                              "for _ in range(200):\n"
                              "    threading.Thread(target=parked, "
                              "daemon=True).start()\n"
                              "def stuck_here():\n"
                              "    os.write(1, b'ready\\n')\n"
                              "    while True:\n"
                              "        pass\n"
                              "stuck_here()\n"),
             NULL);
    const struct stk_rank *r = py_capture(&p);
    CHECK(r->nthreads >= 201);
    size_t with_python = 0;
    for (size_t i = 0; i < r->nthreads; i++)
        with_python += r->threads[i].npython > 0;
    CHECK(with_python >= 100);
    if (r->error || with_python < 100)
        dump_rank(r);
    py_end(&p, 1);
}

/* A non-dumpable Python worker under an unprivileged amlrun: no native
 * frames (one line says why), its Python frames all the same. */
static void test_python_not_dumpable(void)
{
    const char *script = write_script(
        "hidden.py", "import ctypes, os\n"
                     "ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n"
                     "def stuck_here():\n"
                     "    os.write(1, b'ready\\n')\n"
                     "    while True:\n"
                     "        pass\n"
                     "stuck_here()\n");
    if (!become_user())
        return;
    struct py p;
    py_start(&p, script, NULL);
    const struct stk_rank *r = py_capture(&p);
    CHECK_STR_HAS(r->error, "not dumpable");
    CHECK(r->error && !strchr(r->error, '\n'));
    CHECK(python_frame_is(main_of(r), script, "stuck_here", 4, 6));
    py_end(&p, 1);
}

/* A program that takes amlrun's signal for a handler of its own: the hook
 * lets go of the channel, and amlrun never signals it (its handler would
 * run: "unexpected signal"); its native frames are read all the same. */
static void test_python_own_handler(void)
{
    char text[512];
    snprintf(text, sizeof text,
             "import os, signal\n"
             "def mine(sig, frame):\n"
             "    os.write(1, b'unexpected signal\\n')\n"
             "signal.signal(%d, mine)\n"
             "os.write(1, b'ready\\n')\n"
             "while True:\n"
             "    pass\n", stk_signal());
    struct py p;
    py_start(&p, write_script("own_handler.py", text), NULL);
    const struct stk_rank *r = py_capture(&p);
    CHECK_STR_HAS(r->error, "handles signal");
    CHECK(main_of(r) && main_of(r)->nnative > 0);
    char buf[64];
    CHECK(fcntl(p.out, F_SETFL, O_NONBLOCK) == 0);
    CHECK(read(p.out, buf, sizeof buf) < 0 && errno == EAGAIN);
    py_end(&p, 1);
}

/* A worker whose program (libc opened as lib, then how) takes amlrun's
 * signal for a handler of its own, mine: amlrun says why (why, and also
 * why2 when not NULL), gives its native frames, and never signals it
 * (mine would write a line). */
static void own_handler_case(const char *lib, const char *how,
                             const char *why, const char *why2)
{
    char text[2048];
    snprintf(text, sizeof text,
             "import ctypes, os\n"
             "SIG = %d\n"
             "libc = ctypes.CDLL(%s)\n"
             "HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)\n"
             "@HANDLER\n"
             "def mine(sig):\n"
             "    os.write(1, b'unexpected signal\\n')\n"
             "%s"
             "os.write(1, b'ready\\n')\n"
             "while True:\n"
             "    pass\n", stk_signal(), lib, how);
    struct py p;
    py_start(&p, write_script("own_handler_c.py", text), NULL);
    const struct stk_rank *r = py_capture(&p);
    CHECK_STR_HAS(r->error, why);
    if (why2)
        CHECK_STR_HAS(r->error, why2);
    CHECK(main_of(r) && main_of(r)->nnative > 0);
    char buf[64];
    CHECK(fcntl(p.out, F_SETFL, O_NONBLOCK) == 0);
    CHECK(read(p.out, buf, sizeof buf) < 0 && errno == EAGAIN);
    py_end(&p, 1);
}

/* mine installed with libc's signal(), and with its sigaction(). */
static const char how_signal[] =
    "libc.signal.argtypes = [ctypes.c_int, HANDLER]\n"
    "libc.signal(SIG, mine)\n";
static const char how_sigaction[] =
    "class SA(ctypes.Structure):\n"
    "    _fields_ = [('h', HANDLER), ('mask', ctypes.c_ulong * 16),\n"
    "                ('flags', ctypes.c_int), ('r', ctypes.c_void_p)]\n"
    "assert libc.sigaction(SIG, ctypes.byref(SA(mine)), None) == 0\n";

/* The same handler set from C, which the hook cannot see (ctypes: signal
 * found in the process's scope, sigaction with a struct of its own; a
 * strict ISO C program's __sysv_signal): the guard amlrun preloads lets go
 * of the channel, and the signal never reaches the program. */
static void test_python_c_handler(void)
{
    static const char *const how[] = {
        how_signal, how_sigaction,
        "libc.__sysv_signal.argtypes = [ctypes.c_int, HANDLER]\n"
        "libc.__sysv_signal(SIG, mine)\n",
    };
    for (size_t k = 0; k < sizeof how / sizeof *how; k++)
        own_handler_case("None", how[k], "handles signal", NULL);
}

/* The same handler set where the guard does not see it: through libc's
 * own handle (ctypes.CDLL("libc.so.6"): dlsym searches libc, not the
 * preloaded guard), by the system call itself.  amlrun reads the kernel's
 * handler while the native pass holds the worker (capture_sigact.c), finds
 * it outside the guard's code, and never signals it; nor one that ignores
 * the signal (SIG_IGN by the system call: said as such). */
static void test_python_past_guard(void)
{
    static const char *const how[] = {
        how_signal, how_sigaction,
        "class KSA(ctypes.Structure):\n"
        "    _fields_ = [('h', HANDLER), ('flags', ctypes.c_ulong),\n"
        "                ('r', ctypes.c_void_p), ('mask', ctypes.c_ulong)]\n"
        "assert libc.syscall(13, SIG, ctypes.byref(KSA(mine)), None, 8) == 0\n",
        "class KSI(ctypes.Structure):\n"
        "    _fields_ = [('h', ctypes.c_void_p), ('flags', ctypes.c_ulong),\n"
        "                ('r', ctypes.c_void_p), ('mask', ctypes.c_ulong)]\n"
        "assert libc.syscall(13, SIG, ctypes.byref(KSI(1)), None, 8) == 0\n",
    };
    static const char *const why[] = {
        "handles signal", "handles signal", "handles signal", "ignores signal"};
    for (size_t k = 0; k < sizeof how / sizeof *how; k++)
        own_handler_case("'libc.so.6'", how[k], why[k],
                         k < 3 ? "past amlrun's guard" : NULL);
}

/* Reading the kernel's handler (done for any worker that catches the
 * stack signal) puts the thread back as it was: a system call it was in
 * goes on (read(2) restarted, nanosleep's rest slept), called through
 * ctypes, which does not retry on EINTR as Python does.  Native frames
 * only: faulthandler's signal itself ends a nanosleep (EINTR, as any
 * handled signal does). */
static void test_python_calls_go_on(void)
{
    char fifo[256];
    snprintf(fifo, sizeof fifo, "%.200s/fifo", script_dir);
    (void)unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    static const char *const call[] = {
        "    n = libc.read(fd, ctypes.create_string_buffer(8), 5)\n",
        "    ts = (ctypes.c_long * 2)(2, 0)\n"
        "    n = libc.nanosleep(ts, None)\n",
    };
    static const char *const want[] = {"done 5 0\n", "done 0 0\n"};
    for (size_t k = 0; k < sizeof call / sizeof *call; k++) {
        char text[4096];
        snprintf(text, sizeof text,
                 "import ctypes, os\n"
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 "fd = os.open('%s', os.O_RDWR)\n"
                 "def stuck_here():\n"
                 "    os.write(1, b'ready\\n')\n"
                 "%s"
                 "    os.write(1, b'done %%d %%d\\n' %% (n, ctypes.get_errno()))\n"
                 "stuck_here()\n"
                 "os.read(fd, 1)\n", fifo, call[k]);
        struct py p;
        py_start(&p, write_script("calls_go_on.py", text), NULL);
        struct stk_target t = target(p.pid, 0, -1);
        CHECK_INT_EQ(stk_capture(&t, 1, NULL, TIMEOUT_MS, &p.s), 0);
        CHECK(p.s.n == 1 && p.s.ranks[0].error == NULL);
        CHECK(p.s.n == 1 && main_of(&p.s.ranks[0]) &&
              main_of(&p.s.ranks[0])->nnative > 0);
        int w = open(fifo, O_WRONLY | O_NONBLOCK);
        CHECK(w >= 0 && write(w, "hello", 5) == 5);
        char buf[64] = {0};
        struct pollfd pf = {.fd = p.out, .events = POLLIN};
        CHECK(poll(&pf, 1, 60000) == 1);
        ssize_t got = read(p.out, buf, sizeof buf - 1);
        CHECK(got > 0);
        CHECK_STR_EQ(buf, want[k]);
        if (w >= 0) {
            CHECK(write(w, "x", 1) == 1);
            close(w);
        }
        py_end(&p, 0);
    }
    (void)unlink(fifo);
}

/* Python's own options that skip the hook (-I, -E, -S) get no channel:
 * nothing of amlrun's would be used, and all of it would leak. */
static void test_python_skips_hook(void)
{
    char *const isolated[] = {"python3", "-u", "-I", "t.py", NULL};
    char *const cluster[] = {"python3", "-uE", "t.py", NULL};
    char *const nosite[] = {"python3", "-X", "dev", "-S", "t.py", NULL};
    char *const plain[] = {"python3", "-u", "t.py", "-I", NULL};
    char *const module[] = {"python3", "-m", "pkg", "-E", NULL};
    char *const warn[] = {"python3", "-W", "-E", "t.py", NULL};
    CHECK(stk_python_skips_hook(isolated));
    CHECK(stk_python_skips_hook(cluster));
    CHECK(stk_python_skips_hook(nosite));
    CHECK(!stk_python_skips_hook(plain));   /* the script's own -I */
    CHECK(!stk_python_skips_hook(module));  /* the module's */
    CHECK(!stk_python_skips_hook(warn));    /* -W's value */
    CHECK(!stk_channel_wanted_argv("/usr/bin/python3", isolated, 0));
    CHECK(stk_channel_wanted_argv("/usr/bin/python3", plain, 0));
}

/* What a Python program sees of itself (the sitecustomize it loaded,
 * PYTHONPATH, the variables, sys.path) is the same with the hook as
 * without it. */
static char *python_sees(int channel)
{
    const char *script = write_script(
        "look.py",
        "import os, sys\n"
        "m = sys.modules.get('sitecustomize')\n"
        "print(getattr(m, '__file__', None))\n"
        "print(os.environ.get('PYTHONPATH', '<unset>'))\n"
        "print(sorted(k for k in os.environ if 'AMLDIST' in k))\n"
        "print(sys.path[1:])\n");
    int chan, out;
    pid_t pid = start_python_as(NULL, script, channel, &chan, &out);
    CHECK(pid > 0);
    char *buf = calloc(1, 8192);
    size_t len = 0;
    ssize_t n;
    while (buf && (n = read(out, buf + len, 8191 - len)) > 0)
        len += (size_t)n;
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0);
    if (channel)
        close(chan);
    close(out);
    return buf;
}

static void test_python_hook_invisible(void)
{
    char *plain = python_sees(0), *hooked = python_sees(1);
    CHECK_STR_EQ(hooked, plain);
    free(plain);
    free(hooked);
}

/* ---- many ---- */

static void test_64_workers(void)
{
    enum { N = 64 };
    pid_t pid[N];
    struct stk_target t[N];
    int in[2];
    CHECK(pipe(in) == 0);
    /* Half in a loop, half blocked (as ranks waiting in a collective). */
    for (int i = 0; i < N; i++) {
        pid[i] = i % 2 ? fork_spinner() : fork_target(run_read, in[0]);
        t[i] = target(pid[i], i, -1);
    }
    struct stk_set s = {0};
    double t0 = cap_now_ms();
    CHECK_INT_EQ(stk_capture(t, N, "h", 30000, &s), 0);
    double ms = cap_now_ms() - t0;
    CHECK_INT_EQ(s.n, N);
    for (int i = 0; i < N; i++) {
        const struct stk_thread *m = main_of(&s.ranks[i]);
        CHECK(native_frame(m, i % 2 ? "spin_in_c" : "blocked_in_read"));
        if (!native_frame(m, i % 2 ? "spin_in_c" : "blocked_in_read"))
            dump_rank(&s.ranks[i]);
        CHECK(untraced(pid[i]));
    }
    printf("# the native stacks of %d workers (C) in %.0f ms\n", N, ms);
    set_free(&s);
    for (int i = 0; i < N; i++)
        end_child(pid[i]);
}

static void test_64_python_workers(void)
{
    enum { N = 64 };
    const char *script = write_script(
        "many.py", "import os, time\n"
                   "def waits():\n"
                   "    os.write(1, b'ready\\n')\n"
                   "    time.sleep(3600)\n"
                   "waits()\n");
    pid_t pid[N];
    int chan[N], out[N];
    struct stk_target t[N];
    for (int i = 0; i < N; i++) {
        pid[i] = start_python(NULL, script, &chan[i], &out[i]);
        t[i] = target(pid[i], i, chan[i]);
    }
    for (int i = 0; i < N; i++)
        CHECK(ready(out[i]));
    struct stk_set s = {0};
    double t0 = cap_now_ms();
    CHECK_INT_EQ(stk_capture(t, N, "h", 30000, &s), 0);
    double ms = cap_now_ms() - t0;
    int good = 0;
    for (int i = 0; i < N; i++) {
        const struct stk_thread *m = main_of(&s.ranks[i]);
        good += python_frame_is(m, script, "waits", 3, 4) && m->nnative > 0;
        if (s.ranks[i].error)
            dump_rank(&s.ranks[i]);
    }
    CHECK_INT_EQ(good, N);
    printf("# the native and Python stacks of %d Python workers in %.0f ms\n",
           N, ms);
    set_free(&s);
    for (int i = 0; i < N; i++) {
        end_child(pid[i]);
        close(chan[i]);
        close(out[i]);
    }
}

/* ---- the dump's text ---- */

static void test_parse_dump(void)
{
    static const char text[] =
        "Thread 0x00007f0000000100 (most recent call first):\n"
        "  File \"/a/b.py\", line 12 in spin\n"
        "  File \"/a/x\", line 3.py\", line 7 in <module>\n"
        "\n"
        "Current thread 0x00007f0000000200 (most recent call first):\n"
        "  File \"/a/c.py\", line ??? in wait\n"
        "\n"
        "  <no Python frame>\n"
        "Thread 0x00007f00000003";  /* cut short */
    struct stk_thread *th;
    size_t n;
    unsigned long *ids;
    int cur;
    CHECK_INT_EQ(cap_parse_dump(text, sizeof text - 1, &th, &n, &ids, &cur),
                 0);
    CHECK_INT_EQ(n, 2);
    CHECK_INT_EQ(cur, 1);
    CHECK(ids[0] == 0x7f0000000100ul && ids[1] == 0x7f0000000200ul);
    CHECK_INT_EQ(th[0].npython, 2);
    CHECK_STR_EQ(th[0].python[0].file, "/a/b.py");
    CHECK_INT_EQ(th[0].python[0].line, 12);
    CHECK_STR_EQ(th[0].python[0].function, "spin");
    CHECK_STR_EQ(th[0].python[1].file, "/a/x\", line 3.py");
    CHECK_INT_EQ(th[0].python[1].line, 7);
    CHECK_INT_EQ(th[1].npython, 1);
    CHECK_INT_EQ(th[1].python[0].line, 0);
    CHECK_STR_EQ(th[1].python[0].function, "wait");
    for (size_t i = 0; i < n; i++)
        cap_frames_free(th[i].python, th[i].npython);
    free(th);
    free(ids);
}

static void test_channel(void)
{
    int fds[2];
    CHECK_INT_EQ(stk_channel_open(fds), 0);
    CHECK(fds[0] > 2 && fds[1] > 2);
    CHECK(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
    CHECK(fcntl(fds[1], F_GETFD) & FD_CLOEXEC);
    CHECK(fcntl(fds[1], F_GETFL) & O_NONBLOCK);
    char **env = NULL;
    amldist_envp_set(&env, "PYTHONPATH", "/x:/y");
    CHECK_INT_EQ(stk_channel_env(&env, fds[1]), 0);
    char want[64];
    snprintf(want, sizeof want, "%d", fds[1]);
    CHECK_STR_EQ(amldist_envp_get(env, STK_ENV_FD), want);
    snprintf(want, sizeof want, "%d", stk_signal());
    CHECK_STR_EQ(amldist_envp_get(env, STK_ENV_SIGNAL), want);
    const char *pp = amldist_envp_get(env, "PYTHONPATH");
    CHECK(pp && !strncmp(pp, stk_python_dir(), strlen(stk_python_dir())));
    CHECK(pp && strstr(pp, ":/x:/y"));
    /* The guard, found beside the build's programs, after the user's
     * preloads, and named for the hook that takes it out again. */
    const char *guard = stk_guard_path();
    CHECK(guard && strstr(guard, "/lib/amldist/stack-guard.so"));
    CHECK_STR_EQ(amldist_envp_get(env, "LD_PRELOAD"), guard);
    CHECK_STR_EQ(amldist_envp_get(env, STK_ENV_GUARD), guard);
    amldist_envp_free(env);
    env = NULL;
    amldist_envp_set(&env, "LD_PRELOAD", "/u/a.so /u/b.so");
    CHECK_INT_EQ(stk_channel_env(&env, fds[1]), 0);
    char both[4200];
    snprintf(both, sizeof both, "/u/a.so /u/b.so:%s", guard ? guard : "");
    CHECK_STR_EQ(amldist_envp_get(env, "LD_PRELOAD"), both);
    amldist_envp_free(env);
    /* Which commands get one. */
    CHECK(stk_channel_wanted("/usr/bin/python3", 0));
    CHECK(stk_channel_wanted("/usr/bin/python3.11", 0));
    CHECK(stk_channel_wanted("/bin/true", 1));
    CHECK(!stk_channel_wanted("/bin/true", 0));
    CHECK(!stk_channel_wanted("/usr/bin/python3-config-x", 0));
    close(fds[0]);
    close(fds[1]);
}

int main(void)
{
    snprintf(script_dir, sizeof script_dir, "/tmp/stkcap.XXXXXX");
    if (!mkdtemp(script_dir) || chmod(script_dir, 0755) < 0) {
        perror(script_dir);
        return 2;
    }
    RUN(test_parse_dump);
    RUN(test_channel);
    RUN(test_exited);
    RUN(test_exits_during_capture);
    RUN(test_python_hook_invisible);
    RUN(test_python_skips_hook);
    static const char *const native_cases[] = {
        "test_c_loop", "test_blocked_read", "test_stopped", "test_never_stops",
        "test_not_dumpable", "test_python_one", "test_python_two_threads",
        "test_python_no_site", "test_python_stopped",
        "test_python_many_threads", "test_python_not_dumpable",
        "test_python_own_handler", "test_python_c_handler",
        "test_python_past_guard", "test_python_calls_go_on",
        "test_64_workers",
        "test_64_python_workers"};
    if (test_under_valgrind()) {
        for (size_t i = 0; i < sizeof native_cases / sizeof *native_cases; i++)
            printf("ok - %s # SKIP the targets run on valgrind's machine "
                   "(--trace-children=yes): their stacks are valgrind's\n",
                   native_cases[i]);
    } else {
        RUN(test_c_loop);
        RUN(test_blocked_read);
        RUN(test_stopped);
        RUN(test_never_stops);
        RUN(test_not_dumpable);
        RUN(test_python_one);
        RUN(test_python_two_threads);
        RUN(test_python_no_site);
        RUN(test_python_stopped);
        RUN(test_python_many_threads);
        RUN(test_python_not_dumpable);
        RUN(test_python_own_handler);
        RUN(test_python_c_handler);
        RUN(test_python_past_guard);
        RUN(test_python_calls_go_on);
        RUN(test_64_workers);
        RUN(test_64_python_workers);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", script_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "# could not remove %s\n", script_dir);
    return test_summary();
}
