/*
 * The native frames of a target's stopped threads (see capture_unwind.h):
 * libdwfl unwinds each thread with its CFI while ptrace holds it
 * (capture_native.c); names come from the symbol tables, file:line from
 * the DWARF where the object or /usr/lib/debug has it, each file's lines
 * read once for every target of a capture.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "output/msg.h"
#include "stacks/capture_unwind.h"
#include "stacks/dw.h"

#define MAX_FRAMES 256

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

int cap_unwind_load(const char **why)
{
    return (dwl = stk_dw_load(why)) ? 0 : -1;
}

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
struct cap_srcmod {
    char *path;
    Dwfl *dwfl;
    Dwfl_Module *mod; /* NULL: no lines to be had from this file */
    GElf_Addr bias;
};

void cap_srccache_free(struct cap_srccache *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->m[i].path);
        dwl->dwfl_end(c->m[i].dwfl);
    }
    free(c->m);
    memset(c, 0, sizeof *c);
}

static struct cap_srcmod *srccache_get(struct cap_srccache *c,
                                       const char *path)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->m[i].path, path))
            return &c->m[i];
    struct cap_srcmod *g = realloc(c->m, (c->n + 1) * sizeof *g);
    if (!g)
        return NULL;
    c->m = g;
    struct cap_srcmod *e = &g[c->n];
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
static const char *source_line(struct cap_srccache *c, Dwfl_Module *m,
                               Dwarf_Addr pc, int *lineno)
{
    GElf_Addr bias;
    Dwarf_Addr addr = pc;
    const char *path =
        dwl->dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    if (path && path[0] == '/' && !strstr(path, " (deleted)") &&
        dwl->dwfl_module_getelf(m, &bias)) {
        struct cap_srcmod *e = srccache_get(c, path);
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

static int resolve(Dwfl *dwfl, struct cap_srccache *cache,
                   const struct walk *w, struct stk_thread *th)
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

/* A thread that did not stop, said while it still waits: its state and
 * wait channel. */
static void unstopped_line(pid_t pid, const struct stk_thread *th, char *buf,
                           size_t size)
{
    char wait[160];
    cap_thread_wait(pid, th->tid, wait, sizeof wait);
    snprintf(buf, size, "thread %d (%s) did not stop in time: %s",
             (int)th->tid, th->name ? th->name : "?", wait);
}

/* Unwind every stopped thread into r->threads (one per seized thread, in
 * k's order), c->tp beside them. */
int cap_unwind(pid_t pid, const struct cap_task *k, size_t n,
               struct stk_rank *r, struct cap_native *c,
               struct cap_srccache *cache)
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
    char first[256] = "";
    const char *unreadable = NULL; /* why a thread had no frame at all */
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!k[i].seized || k[i].gone)
            continue;
        struct stk_thread *th = &r->threads[r->nthreads];
        th->tid = k[i].tid;
        th->pid = pid;
        th->name = thread_name(pid, k[i].tid);
        c->tp[r->nthreads] = k[i].stopped ? thread_pointer(k[i].tid) : 0;
        r->nthreads++;
        if (!k[i].stopped) {
            if (unstopped++ == 0)
                unstopped_line(pid, th, first, sizeof first);
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
    if (rc == 0 && unstopped == 1)
        rc = cap_error(r, "%s; no frames for it", first);
    else if (rc == 0 && unstopped)
        rc = cap_error(r, "%s, and %zu more of its %zu threads; no frames "
                          "for them", first, unstopped - 1, r->nthreads);
    return rc;
}
