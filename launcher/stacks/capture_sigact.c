/*
 * Whose handler the kernel runs for amlrun's stack signal in a worker
 * (see capture_sigact.h).  The kernel shows no handler's address (SigCgt
 * says only that there is one), and a handler can be installed where
 * nothing in the worker sees it (the system call made directly, libc's own
 * handle: ctypes.CDLL("libc.so.6"), a library loaded with RTLD_DEEPBIND).
 * So amlrun asks the kernel from inside the worker, as a debugger calls a
 * function in its inferior: while the native pass holds the worker's
 * threads, one of them is made to run rt_sigaction(sig, NULL, &old, 8) (a
 * query: it changes nothing) on a `syscall` instruction found in the
 * worker's own code, with orig_rax -1 so that no interrupted system call
 * of its own is restarted meanwhile, and is single-stepped over it; its
 * registers are then put back as they were (an interrupted call is
 * restarted as it would have been).  old lands below the thread's red
 * zone, where a signal frame could land at any time.  It costs the held
 * thread a few microseconds.  The guard (python/guard.c) installed
 * faulthandler's handler as a trampoline of its own code, so a handler
 * within the guard's mapping is amlrun's and any other the program's.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stacks/capture_sigact.h"
#include "stacks/channel.h"

#if defined(__x86_64__)

#define USER_CS 0x33 /* a 64-bit process's code segment */
/* How much of the worker's code is searched for a `syscall`. */
#define SCAN_MAX (1u << 20)
/* How long the single step may take to be reported. */
#define STEP_MS 200.0

/* The kernel's struct sigaction (x86-64), as rt_sigaction writes it. */
struct ksigaction {
    unsigned long handler, flags, restorer, mask;
};

static int peek_pair(pid_t tid, unsigned long addr)
{
    errno = 0;
    long w = ptrace(PTRACE_PEEKTEXT, tid, (void *)addr, NULL);
    return errno == 0 && (w & 0xffff) == 0x050f; /* 0f 05: syscall */
}

/* The address of a `syscall` instruction in [lo, hi) of pid's memory, or
 * 0.  Any pair of bytes 0f 05 will do: the thread is put there and makes
 * the one call, never runs on. */
static unsigned long scan(pid_t pid, unsigned long lo, unsigned long hi,
                          size_t *budget)
{
    enum { CHUNK = 65536 };
    unsigned char *buf = malloc(CHUNK);
    unsigned long found = 0;
    for (unsigned long at = lo; buf && !found && at < hi && *budget > 0;) {
        size_t want = hi - at < CHUNK ? hi - at : CHUNK;
        struct iovec local = {buf, want}, remote = {(void *)at, want};
        ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (got < 2)
            break;
        for (ssize_t i = 0; !found && i + 1 < got; i++)
            if (buf[i] == 0x0f && buf[i + 1] == 0x05)
                found = at + (unsigned long)i;
        *budget = *budget > (size_t)got ? *budget - (size_t)got : 0;
        at += (unsigned long)got - 1; /* a pair across two reads */
    }
    free(buf);
    return found;
}

/* A `syscall` of the worker's: where a stopped thread in a system call
 * made it (just before its pc), else in the vdso or libc's code. */
static unsigned long find_syscall(pid_t pid, struct cap_task *k, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct user_regs_struct r;
        if (k[i].stopped && !k[i].gone &&
            ptrace(PTRACE_GETREGS, k[i].tid, NULL, &r) == 0 &&
            (long)r.orig_rax >= 0 && peek_pair(k[i].tid, r.rip - 2))
            return r.rip - 2;
    }
    char path[64], line[PATH_MAX + 128];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    unsigned long found = 0;
    size_t budget = SCAN_MAX;
    for (int pass = 0; f && !found && pass < 2; pass++) {
        rewind(f);
        while (!found && fgets(line, sizeof line, f)) {
            unsigned long lo, hi;
            char perm[8];
            if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) != 3 ||
                perm[2] != 'x')
                continue;
            if (pass == 0 ? strstr(line, "[vdso]") != NULL
                          : strstr(line, "/libc.so") != NULL)
                found = scan(pid, lo, hi, &budget);
        }
    }
    if (f)
        fclose(f);
    return found;
}

/* Wait for tid's next stop: its status (si_status of a CLD_TRAPPED), or
 * -1 when it ended or did not stop in time. */
static int next_stop(pid_t pid, pid_t tid)
{
    double until = cap_now_ms() + STEP_MS;
    for (unsigned round = 0;; round++) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        int rc = waitid(P_PID, (id_t)tid, &si,
                        WSTOPPED | __WALL | WNOHANG | __WNOTHREAD);
        if (rc == 0 && si.si_pid == tid)
            return si.si_status;
        if (rc < 0 && errno == ECHILD)
            return -1;
        if (cap_now_ms() >= until ||
            (round % 64 == 63 && cap_gone_state(cap_task_state(pid, tid))))
            return -1;
        struct timespec ts = {0, 20 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* The call made by k (stopped, its registers saved): its result (0, or
 * -errno), with *old filled on 0; -ESRCH when it did not come back. */
static long run_call(pid_t pid, struct cap_task *k, unsigned long insn,
                     const struct user_regs_struct *saved, int sig,
                     struct ksigaction *old)
{
    struct user_regs_struct r = *saved;
    unsigned long at = ((saved->rsp - 128 - sizeof *old) & ~15ul);
    r.rax = SYS_rt_sigaction;
    r.orig_rax = (unsigned long)-1; /* no restart of what it was in */
    r.rdi = (unsigned long)sig;
    r.rsi = 0;
    r.rdx = at;
    r.r10 = 8;
    r.rip = insn;
    if (ptrace(PTRACE_SETREGS, k->tid, NULL, &r) < 0)
        return -ESRCH;
    for (int tries = 0; tries < 8; tries++) {
        if (ptrace(PTRACE_SINGLESTEP, k->tid, NULL, NULL) < 0)
            return -ESRCH;
        int st = next_stop(pid, k->tid);
        if (st < 0) {
            k->stopped = 0; /* ended, or running: not ours to detach */
            k->gone = cap_gone_state(cap_task_state(pid, k->tid));
            return -ESRCH;
        }
        int got = st & 0xff, event = st >> 8;
        if (event) { /* a group-stop (SIGSTOP came): left as it is */
            if (event == PTRACE_EVENT_STOP && got != SIGTRAP)
                k->group_stop = got;
            return -EAGAIN;
        }
        struct user_regs_struct now;
        if (ptrace(PTRACE_GETREGS, k->tid, NULL, &now) < 0)
            return -ESRCH;
        if (got == SIGTRAP && now.rip == insn + 2) {
            long rc = (long)now.rax;
            struct iovec local = {old, sizeof *old},
                         remote = {(void *)at, sizeof *old};
            if (rc == 0 && process_vm_readv(pid, &local, 1, &remote, 1, 0) !=
                               (ssize_t)sizeof *old)
                rc = -EFAULT;
            return rc;
        }
        /* Another signal came first: handed back at the detach (a second
         * one queued again). */
        if (!k->inject)
            k->inject = got;
        else
            (void)syscall(SYS_tgkill, pid, k->tid, got);
    }
    return -EAGAIN;
}

/* A field of /proc/PID/status (pid 0: amlrun's) as a number, or -1. */
static long status_num(pid_t pid, const char *name)
{
    char line[256];
    const char *v = cap_status_field(pid, 0, name, line, sizeof line);
    return v ? strtol(v, NULL, 10) : -1;
}

/* pid's seccomp filters let the query through.  None, or only those it
 * inherited from amlrun (a container's, Docker's): its count of filters
 * is amlrun's (a process's filters are inherited and never taken off, and
 * amlrun adds none), and amlrun's own query of the signal went through
 * them.  A filter the worker added itself could refuse it, trap it
 * (SIGSYS, which the program would see) or kill the worker: not asked. */
static int filters_allow(pid_t pid, int sig)
{
    long mode = status_num(pid, "Seccomp");
    if (mode == 0)
        return 1;
    static int own = -1; /* amlrun's query through its filters: 1 passed */
    if (__atomic_load_n(&own, __ATOMIC_RELAXED) < 0) {
        struct sigaction sa;
        __atomic_store_n(&own, sigaction(sig, NULL, &sa) == 0,
                         __ATOMIC_RELAXED);
    }
    long mine = status_num(0, "Seccomp_filters");
    return mode == 2 && __atomic_load_n(&own, __ATOMIC_RELAXED) == 1 &&
           mine > 0 &&
           status_num(pid, "Seccomp_filters") == mine;
}

void cap_sigact_read(pid_t pid, struct cap_task *k, size_t n,
                     struct cap_native *c)
{
    int sig = stk_signal();
    char line[256];
    const char *v = cap_status_field(pid, 0, "SigCgt", line, sizeof line);
    if (c->stopped || !v || !((strtoull(v, NULL, 16) >> (sig - 1)) & 1))
        return;
    if (!filters_allow(pid, sig))
        return; /* a filter might refuse the call, or kill the worker */
    /* The leader where it can, else any thread stopped on its own. */
    struct cap_task *t = NULL;
    for (size_t i = 0; i < n && !t; i++)
        if (k[i].seized && k[i].stopped && !k[i].gone && !k[i].group_stop &&
            !k[i].inject)
            t = &k[i];
    unsigned long insn = t ? find_syscall(pid, k, n) : 0;
    struct user_regs_struct saved;
    if (!insn || ptrace(PTRACE_GETREGS, t->tid, NULL, &saved) < 0 ||
        saved.cs != USER_CS)
        return;
    struct ksigaction old;
    long rc = run_call(pid, t, insn, &saved, sig, &old);

    if (t->stopped && ptrace(PTRACE_SETREGS, t->tid, NULL, &saved) < 0)
        rc = -ESRCH; /* gone meanwhile */
    if (rc == 0) {
        c->act_known = 1;
        c->act_handler = old.handler;
    }
}

#else

void cap_sigact_read(pid_t pid, struct cap_task *k, size_t n,
                     struct cap_native *c)
{
    (void)pid;
    (void)k;
    (void)n;
    (void)c;
}

#endif

int cap_sigact_ours(pid_t pid, unsigned long handler)
{
    const char *guard = stk_guard_path();
    if (!guard)
        return -1;
    char path[64], line[PATH_MAX + 128];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    int mapped = 0, ours = 0;
    size_t len = strlen(guard);
    while (f && !ours && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perm[8];
        int at = 0;
        line[strcspn(line, "\n")] = '\0';
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perm,
                   &at) != 3 || !at)
            continue;
        size_t ll = strlen(line + at);
        if (ll != len || memcmp(line + at, guard, len) != 0)
            continue;
        mapped = 1;
        ours = perm[2] == 'x' && handler >= lo && handler < hi;
    }
    if (f)
        fclose(f);
    return ours ? 1 : mapped ? 0 : -1;
}
