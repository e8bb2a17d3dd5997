/*
 * Native frames of one worker (see capture.h): every thread is seized and
 * interrupted with ptrace (PTRACE_SEIZE, PTRACE_INTERRUPT: no signal is
 * sent, so the program sees nothing), unwound while it stands
 * (capture_unwind.c: libdwfl), its handler of the stack signal read
 * (capture_sigact.c), and let go.
 *
 * The workers are amlrun's children: waiting for their ptrace stops must
 * never take an exit that the supervisor's reaping is owed.  So the waits
 * here ask for stops only (waitid without WEXITED), except for a thread
 * that is not the leader, whose end only its tracer can collect.  A
 * stopped worker (SIGSTOP) shows its group-stop instead of the interrupt,
 * and stays stopped when let go; a signal that arrived meanwhile is handed
 * back at the detach.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stacks/capture.h"
#include "output/msg.h"
#include "stacks/capture_sigact.h"
#include "stacks/capture_unwind.h"

#define MAX_THREADS 4096

static int cmp_tid(const void *a, const void *b)
{
    pid_t x = ((const struct cap_task *)a)->tid;
    pid_t y = ((const struct cap_task *)b)->tid;
    return (x > y) - (x < y);
}

/* The threads of pid, the leader first.  0; 1 when the process is gone;
 * -1 when out of memory. */
static int list_tasks(pid_t pid, struct cap_task **out, size_t *n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    *out = NULL;
    *n = 0;
    if (!d)
        return 1;
    size_t cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) && *n < MAX_THREADS) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            struct cap_task *g = realloc(*out, cap * sizeof *g);
            if (!g) {
                rc = -1;
                break;
            }
            *out = g;
        }
        memset(&(*out)[*n], 0, sizeof **out);
        (*out)[(*n)++].tid = (pid_t)atoi(e->d_name);
    }
    closedir(d);
    if (rc == 0 && *n > 1) {
        qsort(*out, *n, sizeof **out, cmp_tid);
        for (size_t i = 0; i < *n; i++)
            if ((*out)[i].tid == pid) {
                struct cap_task lead = (*out)[i];
                memmove(&(*out)[1], &(*out)[0], i * sizeof **out);
                (*out)[0] = lead;
                break;
            }
    }
    return rc < 0 ? -1 : *n == 0;
}

/* A capability of this process's effective set (CAP_SYS_PTRACE is 19). */
static int have_cap(int cap)
{
    char line[256];
    const char *v = cap_status_field(0, 0, "CapEff", line, sizeof line);
    return v ? (strtoull(v, NULL, 16) >> cap) & 1 : 0;
}

/* The worker's real user id (Uid:), or -1. */
static long task_uid(pid_t pid)
{
    char line[256];
    const char *v = cap_status_field(pid, 0, "Uid", line, sizeof line);
    return v ? strtol(v, NULL, 10) : -1;
}

/* The tracer of pid (another debugger: strace -f, gdb), 0 for none. */
static long tracer_of(pid_t pid, char *comm, size_t size)
{
    char line[256], path[64];
    const char *v = cap_status_field(pid, 0, "TracerPid", line, sizeof line);
    long tracer = v ? strtol(v, NULL, 10) : 0;
    snprintf(path, sizeof path, "/proc/%ld/comm", tracer);
    comm[0] = '\0';
    if (tracer > 0 && read_small(path, comm, size) > 0)
        comm[strcspn(comm, "\n")] = '\0';
    return tracer;
}

/* Why ptrace said EPERM, in words. */
static void why_refused(pid_t pid, char *buf, size_t size)
{
    char comm[64];
    long tracer = tracer_of(pid, comm, sizeof comm);
    if (tracer > 0) {
        /* A process has one tracer: strace's or gdb's, not amlrun's. */
        snprintf(buf, size, "it is already traced by pid %ld (%s)", tracer,
                 comm[0] ? comm : "?");
        return;
    }
    int scope = -1;
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    if (f) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = -1;
        fclose(f);
    }
    int cap = have_cap(19);
    long uid = task_uid(pid);
    char path[64];
    struct stat st;
    /* A non-dumpable process's files are root's (the directory is not). */
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int owner_root = stat(path, &st) == 0 && st.st_uid == 0 && uid != 0;
    if (scope == 3)
        snprintf(buf, size, "Yama's ptrace_scope is 3 (no ptrace at all)");
    else if (scope == 2 && !cap)
        snprintf(buf, size, "Yama's ptrace_scope is 2 and amlrun lacks "
                            "CAP_SYS_PTRACE");
    else if (uid >= 0 && uid != (long)getuid() && !cap)
        snprintf(buf, size, "the worker runs as another user (uid %ld)", uid);
    else if (owner_root && !cap)
        snprintf(buf, size, "the worker is not dumpable (prctl "
                            "PR_SET_DUMPABLE 0, or a set-user-ID program) and "
                            "amlrun lacks CAP_SYS_PTRACE");
    else if (!cap)
        snprintf(buf, size, "amlrun lacks CAP_SYS_PTRACE (a container?)");
    else
        snprintf(buf, size, "a security module or seccomp filter forbids it");
}

static void seize(pid_t pid, struct cap_task *k, size_t n, int *refused)
{
    *refused = 0;
    for (size_t i = 0; i < n; i++) {
        if (ptrace(PTRACE_SEIZE, k[i].tid, NULL, NULL) == 0) {
            k[i].seized = 1;
            continue;
        }
        int err = errno;
        if (cap_gone_state(cap_task_state(pid, k[i].tid)))
            k[i].gone = 1;
        else if (err == EPERM || err == EACCES)
            *refused = 1;
        else
            k[i].gone = 1; /* ESRCH: it ended in between */
        if (*refused)
            return;
    }
    for (size_t i = 0; i < n; i++)
        if (k[i].seized && ptrace(PTRACE_INTERRUPT, k[i].tid, NULL, NULL) < 0)
            k[i].gone = 1;
}

/* Collect the end of a thread that is not the leader (only its tracer
 * can); the leader's is the supervisor's to reap. */
static void reap_thread(pid_t pid, struct cap_task *k)
{
    if (k->tid == pid)
        return;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    while (waitid(P_PID, (id_t)k->tid, &si,
                  WEXITED | __WALL | WNOHANG | __WNOTHREAD) < 0 &&
           errno == EINTR) {
    }
}

/* What the pass holds of one target: its threads, and until when it
 * waits for their stops. */
struct seized {
    pid_t pid;
    struct cap_task *k;
    size_t n;
    double by;       /* its stops' deadline */
    unsigned rounds; /* its looks so far */
    int state;       /* 0 not begun, 1 seized and interrupted, 2 done */
};

/* One look at the stops of z's threads: the count still to come, *moved
 * set when one came.  __WNOTHREAD: only this thread's tracees, never a
 * stop or an exit owed to amlrun's other threads (the supervisor). */
static size_t take_stops(struct seized *z, int *moved)
{
    size_t pending = 0;
    unsigned round = z->rounds++;
    for (size_t i = 0; i < z->n; i++) {
        struct cap_task *k = &z->k[i];
        if (!k->seized || k->stopped || k->gone)
            continue;
        siginfo_t si;
        memset(&si, 0, sizeof si);
        int rc = waitid(P_PID, (id_t)k->tid, &si,
                        WSTOPPED | __WALL | WNOHANG | __WNOTHREAD);
        if (rc == 0 && si.si_pid == k->tid) {
            int sig = si.si_status & 0xff, event = si.si_status >> 8;
            k->stopped = *moved = 1;
            if (event == PTRACE_EVENT_STOP) {
                if (sig != SIGTRAP)
                    k->group_stop = sig;
            } else if (event == 0) {
                k->inject = sig; /* a signal-delivery-stop */
            }
            continue;
        }
        if (rc < 0 && errno == ECHILD) {
            k->gone = 1;
            continue;
        }
        /* Every few rounds: has it ended instead? */
        if (round % 16 == 15 &&
            cap_gone_state(cap_task_state(z->pid, k->tid))) {
            k->gone = 1;
            reap_thread(z->pid, k);
            continue;
        }
        pending++;
    }
    return pending;
}

static void detach(pid_t pid, struct cap_task *k, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!k[i].seized)
            continue;
        if (k[i].stopped &&
            ptrace(PTRACE_DETACH, k[i].tid, NULL,
                   (void *)(long)k[i].inject) == 0)
            continue;
        /* Not stopped (yet): it cannot be detached now; the kernel does it
         * when the tracing thread ends (capture.c).  Ended: collect it. */
        if (cap_gone_state(cap_task_state(pid, k[i].tid)))
            reap_thread(pid, &k[i]);
    }
}

/* Seize and interrupt every thread of t: 0 with z filled (its threads
 * may be none: r->error says why); -1 when out of memory. */
static int begin(const struct stk_target *t, struct stk_rank *r,
                 struct cap_native *c, struct seized *z)
{
    pid_t pid = t->pid;
    z->pid = pid;
    int rc = list_tasks(pid, &z->k, &z->n);
    if (rc < 0)
        return -1;
    if (rc > 0 || cap_gone_state(cap_task_state(pid, pid))) {
        c->exited = 1;
        z->n = 0;
        return cap_error(r, "it exited before its stack could be read");
    }
    c->stopped = cap_task_state(pid, pid) == 'T';
    int refused;
    seize(pid, z->k, z->n, &refused);
    if (refused) {
        char why[160];
        why_refused(pid, why, sizeof why);
        detach(pid, z->k, z->n);
        z->n = 0;
        return cap_error(r, "no native frames: ptrace refused: %s", why);
    }
    return 0;
}

/* Unwind the stopped threads of one target. */
static int unwind_target(struct stk_rank *r, struct cap_native *c,
                         struct seized *z, struct cap_srccache *cache)
{
    struct cap_task *k = z->k;
    if (z->n == 0)
        return 0;
    if (k[0].group_stop)
        c->stopped = 1;
    if (k[0].tid == z->pid && k[0].gone && !k[0].stopped) {
        /* The leader went: so does the rest. */
        c->exited = 1;
        return cap_error(r, "it exited while its stack was being read");
    }
    return cap_unwind(z->pid, k, z->n, r, c, cache);
}

/* How many targets stand stopped at once, and how long a target's threads
 * get to stop: each target is let go as soon as its threads are read, and
 * the next interrupted, so that a healthy rank stands still for its own
 * stop and unwinding and the few before it, and a thread that does not
 * stop (an uninterruptible sleep) holds up its own rank only. */
#define WINDOW 8
#define STOP_MS 250.0

/* z's threads still to stop get no more time: its own deadline has passed
 * and none of them runs (a running thread stops as soon as it is given a
 * CPU, which takes long on a loaded machine; a sleeping one is woken by
 * the interrupt; an uninterruptible sleep may last for ever), or the
 * pass's has. */
static int out_of_time(const struct seized *z, double deadline)
{
    double now = cap_now_ms();
    if (now >= deadline)
        return 1;
    if (now < z->by)
        return 0;
    for (size_t i = 0; i < z->n; i++) {
        const struct cap_task *k = &z->k[i];
        if (k->seized && !k->stopped && !k->gone &&
            cap_task_state(z->pid, k->tid) == 'R')
            return 0;
    }
    return 1;
}

/* Begin targets until WINDOW stand seized: 0, or -1 when out of memory. */
static int fill(const struct stk_target *t, size_t n, struct stk_rank *r,
                struct cap_native *c, struct seized *z, size_t *next,
                size_t *active, double deadline)
{
    while (*active < WINDOW && *next < n) {
        size_t i = (*next)++;
        if (begin(&t[i], &r[i], &c[i], &z[i]) < 0)
            return -1;
        double now = cap_now_ms();
        z[i].by = now + STOP_MS < deadline ? now + STOP_MS : deadline;
        z[i].state = 1;
        (*active)++;
    }
    return 0;
}

/* Unwind and let go of z (stopped, or out of time). */
static int finish(struct stk_rank *r, struct cap_native *c, struct seized *z,
                  struct cap_srccache *cache)
{
    int rc = unwind_target(r, c, z, cache);
    /* Whose handler the stack signal has, while the threads stand. */
    if (z->n && !c->exited)
        cap_sigact_read(z->pid, z->k, z->n, c);
    detach(z->pid, z->k, z->n);
    z->state = 2;
    return rc;
}

int cap_native_all(const struct stk_target *t, size_t n, struct stk_rank *r,
                   struct cap_native *c, double deadline)
{
    /* Without libdw no worker is seized: each says why, in one line. */
    const char *why;
    if (cap_unwind_load(&why) < 0) {
        int rc = 0;
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = cap_error(&r[i], "no native frames: %s", why);
        return rc;
    }
    struct seized *z = calloc(n ? n : 1, sizeof *z);
    if (!z)
        return -1;
    int rc = 0;
    size_t next = 0, active = 0;
    struct cap_srccache cache = {0};
    while (rc == 0 && (active || next < n)) {
        rc = fill(t, n, r, c, z, &next, &active, deadline);
        int moved = 0;
        for (size_t i = 0; rc == 0 && i < next; i++) {
            if (z[i].state != 1)
                continue;
            if (take_stops(&z[i], &moved) && !out_of_time(&z[i], deadline))
                continue;
            rc = finish(&r[i], &c[i], &z[i], &cache);
            active--;
            moved = 1;
        }
        if (!moved) {
            struct timespec ts = {0, 200 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (z[i].state == 1)
            detach(z[i].pid, z[i].k, z[i].n);
        free(z[i].k);
    }
    cap_srccache_free(&cache);
    free(z);
    return rc;
}
