/*
 * Native frames of one worker (see capture.h): every thread is seized and
 * interrupted with ptrace (PTRACE_SEIZE, PTRACE_INTERRUPT: no signal is
 * sent, so the program sees nothing), unwound with libdwfl while it stands
 * (its CFI; names from the symbol tables, file:line from the DWARF where
 * the object or /usr/lib/debug has it), and let go.
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
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "output/msg.h"
#include "stacks/capture.h"
#include "stacks/dw.h"

#define MAX_THREADS 4096
#define MAX_FRAMES 256

struct task {
    pid_t tid;
    int seized, stopped, gone;
    int inject;      /* the signal its stop reported, handed back */
    int group_stop;  /* the stop signal of its group-stop, else 0 */
};

static int cmp_tid(const void *a, const void *b)
{
    pid_t x = ((const struct task *)a)->tid, y = ((const struct task *)b)->tid;
    return (x > y) - (x < y);
}

/* The threads of pid, the leader first.  0; 1 when the process is gone;
 * -1 when out of memory. */
static int list_tasks(pid_t pid, struct task **out, size_t *n)
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
            struct task *g = realloc(*out, cap * sizeof *g);
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
                struct task lead = (*out)[i];
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

/* Why ptrace said EPERM, in words. */
static void why_refused(pid_t pid, char *buf, size_t size)
{
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

static void seize(pid_t pid, struct task *k, size_t n, int *refused)
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
static void reap_thread(pid_t pid, struct task *k)
{
    if (k->tid == pid)
        return;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    while (waitid(P_PID, (id_t)k->tid, &si, WEXITED | __WALL | WNOHANG) < 0 &&
           errno == EINTR) {
    }
}

/* Take the stops of every seized thread of every target as they come,
 * until all have stopped or ended, or the deadline. */
struct seized {
    pid_t pid;
    struct task *k;
    size_t n;
};

static void wait_stops(struct seized *z, size_t nz, double deadline)
{
    for (unsigned round = 0;; round++) {
        size_t pending = 0;
        int moved = 0;
        for (size_t j = 0; j < nz; j++) {
            pid_t pid = z[j].pid;
            struct task *k = z[j].k;
            for (size_t i = 0; i < z[j].n; i++) {
                if (!k[i].seized || k[i].stopped || k[i].gone)
                    continue;
                siginfo_t si;
                memset(&si, 0, sizeof si);
                int rc = waitid(P_PID, (id_t)k[i].tid, &si,
                                WSTOPPED | __WALL | WNOHANG);
                if (rc == 0 && si.si_pid == k[i].tid) {
                    int sig = si.si_status & 0xff, event = si.si_status >> 8;
                    k[i].stopped = moved = 1;
                    if (event == PTRACE_EVENT_STOP) {
                        if (sig != SIGTRAP)
                            k[i].group_stop = sig;
                    } else if (event == 0) {
                        k[i].inject = sig; /* a signal-delivery-stop */
                    }
                    continue;
                }
                if (rc < 0 && errno == ECHILD) {
                    k[i].gone = 1;
                    continue;
                }
                /* Every few rounds: has it ended instead? */
                if (round % 16 == 15 &&
                    cap_gone_state(cap_task_state(pid, k[i].tid))) {
                    k[i].gone = 1;
                    reap_thread(pid, &k[i]);
                    continue;
                }
                pending++;
            }
        }
        if (!pending || cap_now_ms() >= deadline)
            return;
        if (!moved) {
            struct timespec ts = {0, 200 * 1000};
            nanosleep(&ts, NULL);
        }
    }
}

static void detach(pid_t pid, struct task *k, size_t n)
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

/* The thread pointer of a stopped thread: on x86-64 glibc's pthread_t,
 * which faulthandler prints for the thread. */
static unsigned long thread_pointer(pid_t tid)
{
#if defined(__x86_64__)
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) == 0)
        return (unsigned long)regs.fs_base;
#else
    (void)tid;
#endif
    return 0;
}

/* ---- libdwfl ---------------------------------------------------------- */

/* libdw's functions (dw.h), set before the first target is seized: the
 * callbacks below run inside the unwinding, after it. */
static const struct stk_dw *dwl;

/* The ELF files of a live process: libdwfl's own, through the table. */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
                    Dwarf_Addr base, char **file_name, Elf **elfp)
{
    return dwl->dwfl_linux_proc_find_elf(mod, userdata, modname, base,
                                         file_name, elfp);
}

/* Debug information from the object itself or /usr/lib/debug/.build-id
 * (Debian's -dbgsym packages), never from a debuginfod server: a capture
 * must not wait on the network. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata,
                          const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    return dwl->dwfl_build_id_find_debuginfo(mod, userdata, modname, base,
                                             file_name, debuglink_file,
                                             debuglink_crc,
                                             debuginfo_file_name);
}

static const Dwfl_Callbacks callbacks = {
    .find_elf = find_elf,
    .find_debuginfo = find_debuginfo,
};

struct walk {
    Dwarf_Addr pc[MAX_FRAMES];
    size_t n;
};

static int on_frame(Dwfl_Frame *state, void *arg)
{
    struct walk *w = arg;
    Dwarf_Addr pc;
    bool activation;
    if (!dwl->dwfl_frame_pc(state, &pc, &activation))
        return DWARF_CB_ABORT;
    /* A return address points after the call: look up the call. */
    w->pc[w->n++] = activation || pc == 0 ? pc : pc - 1;
    return w->n == MAX_FRAMES ? DWARF_CB_ABORT : DWARF_CB_OK;
}

static char *dup_or_null(const char *s, int *nomem)
{
    char *d = s ? strdup(s) : NULL;
    if (s && !d)
        *nomem = 1;
    return d;
}

/* ---- file:line, shared by the targets ---- */

/* Reading a module's line table is most of an unwinding's cost (a tenth
 * of a second for libc with its debug information), and every worker of a
 * job maps the same files: each file's lines are read once per capture,
 * through a Dwfl of its own holding that one file at its own addresses. */
struct srcmod {
    char *path;
    Dwfl *dwfl;
    Dwfl_Module *mod; /* NULL: no lines to be had from this file */
    GElf_Addr bias;
};

struct srccache {
    struct srcmod *m;
    size_t n;
};

static void srccache_free(struct srccache *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->m[i].path);
        dwl->dwfl_end(c->m[i].dwfl);
    }
    free(c->m);
    memset(c, 0, sizeof *c);
}

static struct srcmod *srccache_get(struct srccache *c, const char *path)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->m[i].path, path))
            return &c->m[i];
    struct srcmod *g = realloc(c->m, (c->n + 1) * sizeof *g);
    if (!g)
        return NULL;
    c->m = g;
    struct srcmod *e = &g[c->n];
    memset(e, 0, sizeof *e);
    if (!(e->path = strdup(path)))
        return NULL;
    c->n++;
    e->dwfl = dwl->dwfl_begin(&callbacks);
    if (!e->dwfl)
        return e;
    dwl->dwfl_report_begin(e->dwfl);
    e->mod = dwl->dwfl_report_elf(e->dwfl, path, path, -1, 0, false);
    dwl->dwfl_report_end(e->dwfl, NULL, NULL);
    if (e->mod && !dwl->dwfl_module_getelf(e->mod, &e->bias))
        e->mod = NULL;
    return e;
}

/* The same file: the build-ids agree (or neither has one). */
static int same_build(Dwfl_Module *a, Dwfl_Module *b)
{
    const unsigned char *x, *y;
    GElf_Addr vx, vy;
    int nx = dwl->dwfl_module_build_id(a, &x, &vx);
    int ny = dwl->dwfl_module_build_id(b, &y, &vy);
    if (nx <= 0 || ny <= 0)
        return nx <= 0 && ny <= 0;
    return nx == ny && !memcmp(x, y, (size_t)nx);
}

/* The line of a module-relative address through its compile units, for
 * objects without .debug_aranges (clang leaves them out), which this
 * libdw's lookup needs. */
static const char *unit_line(Dwfl_Module *m, Dwarf_Addr addr, int *lineno)
{
    Dwarf_Addr bias;
    Dwarf *dw = dwl->dwfl_module_getdwarf(m, &bias);
    Dwarf_Aranges *ar;
    size_t nar;
    if (dw && dwl->dwarf_getaranges(dw, &ar, &nar) == 0 && nar > 0)
        return NULL; /* it has them: the lookup said no */
    Dwarf_CU *cu = NULL;
    Dwarf_Die die;
    uint8_t type;
    while (dw &&
           dwl->dwarf_get_units(dw, cu, &cu, NULL, &type, &die, NULL) == 0) {
        if (type != DW_UT_compile || dwl->dwarf_haspc(&die, addr - bias) <= 0)
            continue;
        Dwarf_Line *l = dwl->dwarf_getsrc_die(&die, addr - bias);
        const char *file = l ? dwl->dwarf_linesrc(l, NULL, NULL) : NULL;
        if (file && dwl->dwarf_lineno(l, lineno) == 0)
            return file;
        return NULL;
    }
    return NULL;
}

/* file:line of pc in module m, or NULL. */
static const char *source_line(struct srccache *c, Dwfl_Module *m,
                               Dwarf_Addr pc, int *lineno)
{
    GElf_Addr bias;
    Dwarf_Addr addr = pc;
    const char *path =
        dwl->dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    if (path && path[0] == '/' && !strstr(path, " (deleted)") &&
        dwl->dwfl_module_getelf(m, &bias)) {
        struct srcmod *e = srccache_get(c, path);
        if (e && e->mod && same_build(m, e->mod)) {
            m = e->mod;
            addr = pc - bias + e->bias;
        }
    } /* else [vdso], a file gone: through the worker's own module */
    Dwfl_Line *line = dwl->dwfl_module_getsrc(m, addr);
    const char *file =
        line ? dwl->dwfl_lineinfo(line, NULL, lineno, NULL, NULL, NULL) : NULL;
    return file ? file : unit_line(m, addr, lineno);
}

static int resolve(Dwfl *dwfl, struct srccache *cache, const struct walk *w,
                   struct stk_thread *th)
{
    th->native = calloc(w->n ? w->n : 1, sizeof *th->native);
    if (!th->native)
        return -1;
    int nomem = 0;
    for (size_t i = 0; i < w->n; i++) {
        struct stk_frame *f = &th->native[th->nnative++];
        Dwfl_Module *m = dwl->dwfl_addrmodule(dwfl, w->pc[i]);
        if (!m)
            continue;
        const char *name =
            dwl->dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
        f->module = dup_or_null(name, &nomem);
        f->function =
            dup_or_null(dwl->dwfl_module_addrname(m, w->pc[i]), &nomem);
        int lineno = 0;
        const char *src = source_line(cache, m, w->pc[i], &lineno);
        if (src) {
            f->file = dup_or_null(src, &nomem);
            f->line = lineno > 0 ? lineno : 0;
        }
    }
    return nomem ? -1 : 0;
}

static char *thread_name(pid_t pid, pid_t tid)
{
    char path[64], buf[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)pid, (int)tid);
    if (read_small(path, buf, sizeof buf) < 0)
        return NULL;
    buf[strcspn(buf, "\n")] = '\0';
    return strdup(buf);
}

/* Unwind every stopped thread into r->threads (one per seized thread, in
 * k's order), c->tp beside them. */
static int unwind(pid_t pid, struct task *k, size_t n, struct stk_rank *r,
                  struct cap_native *c, struct srccache *cache)
{
    r->threads = calloc(n, sizeof *r->threads);
    c->tp = calloc(n, sizeof *c->tp);
    if (!r->threads || !c->tp)
        return -1;
    Dwfl *dwfl = dwl->dwfl_begin(&callbacks);
    const char *why = NULL;
    if (!dwfl)
        why = dwl->dwfl_errmsg(-1);
    else if (dwl->dwfl_linux_proc_report(dwfl, pid) != 0 ||
             dwl->dwfl_report_end(dwfl, NULL, NULL) != 0 ||
             dwl->dwfl_linux_proc_attach(dwfl, pid, true) != 0)
        why = dwl->dwfl_errmsg(-1);
    if (why && cap_error(r, "no native frames: libdwfl: %s", why) < 0) {
        dwl->dwfl_end(dwfl);
        return -1;
    }
    int rc = 0;
    struct walk *w = malloc(sizeof *w);
    if (!w)
        rc = -1;
    size_t unstopped = 0;
    const char *unreadable = NULL; /* why a thread had no frame at all */
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!k[i].seized || k[i].gone)
            continue;
        struct stk_thread *th = &r->threads[r->nthreads];
        th->tid = k[i].tid;
        th->name = thread_name(pid, k[i].tid);
        c->tp[r->nthreads] = k[i].stopped ? thread_pointer(k[i].tid) : 0;
        r->nthreads++;
        if (!k[i].stopped) {
            unstopped++;
            continue;
        }
        w->n = 0;
        if (!why &&
            dwl->dwfl_getthread_frames(dwfl, k[i].tid, on_frame, w) != 0 &&
            w->n == 0 && !unreadable)
            unreadable = dwl->dwfl_errmsg(-1);
        if (resolve(dwfl, cache, w, th) < 0)
            rc = -1;
    }
    free(w);
    if (rc == 0 && unreadable)
        rc = cap_error(r, "no native frames for a thread: libdwfl: %s",
                       unreadable);
    dwl->dwfl_end(dwfl);
    if (rc == 0 && unstopped)
        rc = cap_error(r, "%zu of %zu threads did not stop in time "
                          "(uninterruptible sleep?): no frames for them",
                       unstopped, r->nthreads);
    return rc;
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
                         struct seized *z, struct srccache *cache)
{
    struct task *k = z->k;
    if (z->n == 0)
        return 0;
    if (k[0].group_stop)
        c->stopped = 1;
    if (k[0].tid == z->pid && k[0].gone && !k[0].stopped) {
        /* The leader went: so does the rest. */
        c->exited = 1;
        return cap_error(r, "it exited while its stack was being read");
    }
    return unwind(z->pid, k, z->n, r, c, cache);
}

int cap_native_all(const struct stk_target *t, size_t n, struct stk_rank *r,
                   struct cap_native *c, double deadline)
{
    /* Without libdw no worker is seized: each says why, in one line. */
    const char *why;
    if (!(dwl = stk_dw_load(&why))) {
        int rc = 0;
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = cap_error(&r[i], "no native frames: %s", why);
        return rc;
    }
    struct seized *z = calloc(n ? n : 1, sizeof *z);
    if (!z)
        return -1;
    int rc = 0;
    struct srccache cache = {0};
    /* Every worker's threads are interrupted first and their stops waited
     * for together: a loaded machine (ranks spinning in a collective)
     * takes long to schedule each, but not one after the other.  The
     * stops get half the time left.  All stay stopped until the last is
     * unwound: the unwinding does not compete with ranks spinning again. */
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = begin(&t[i], &r[i], &c[i], &z[i]);
    double now = cap_now_ms();
    if (rc == 0)
        wait_stops(z, n, now + (deadline - now) / 2);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = unwind_target(&r[i], &c[i], &z[i], &cache);
    for (size_t i = 0; i < n; i++) {
        detach(z[i].pid, z[i].k, z[i].n);
        free(z[i].k);
    }
    srccache_free(&cache);
    free(z);
    return rc;
}
