/*
 * Python frames (see capture.h): the worker's sitecustomize.py (amlrun's,
 * launcher/stacks/python/) registered faulthandler on stk_signal() to
 * write every thread's Python stack into the channel's pipe.  The signal
 * goes to one thread that takes it (the main thread where it can; never
 * one that blocks it or waits for it in sigwait), and its dump is complete
 * when that thread has left the handler (the signal neither pending nor
 * blocked there any more: faulthandler's handler runs with it blocked) and
 * the pipe holds whole lines; a signal sent by an earlier capture and still
 * pending is not sent again, and its dump is taken as complete after a
 * quiet spell.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "output/msg.h"
#include "stacks/capture.h"
#include "stacks/capture_sigact.h"
#include "stacks/channel.h"

#define DUMP_MAX (4u << 20)
/* How long a dump sent process-wide may pause before it counts as done. */
#define QUIET_MS 50.0

/* One of /proc/PID[/task/TID]/status's signal masks ("SigCgt", "SigBlk",
 * "SigPnd", "ShdPnd"); 0 when unreadable. */
static unsigned long long sigmask_of(pid_t pid, pid_t tid, const char *name)
{
    char line[256];
    const char *v = cap_status_field(pid, tid, name, line, sizeof line);
    return v ? strtoull(v, NULL, 16) : 0;
}

/* Thread tid of pid waits for the signal (bit) in sigwait,
 * sigwaitinfo or sigtimedwait (which unblock it meanwhile: SigBlk does
 * not show it).  Where its call cannot be read (a worker not dumpable:
 * not known) it is taken not to, as before that was looked at. */
static int waits_for(pid_t pid, pid_t tid, unsigned long long bit)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int)pid,
             (int)tid);
    unsigned long nr, set;
    if (read_small(path, buf, sizeof buf) < 0)
        return 0;
    if (sscanf(buf, "%lu %lx", &nr, &set) != 2 || nr != SYS_rt_sigtimedwait)
        return 0; /* running, or in another call */
    unsigned long long mask = 0;
    struct iovec local = {&mask, sizeof mask}, remote = {(void *)set, 8};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) != 8 ||
           (mask & bit);
}

/* A thread of pid that the signal (bit) sent to it would reach
 * faulthandler in: the main thread where it can, else the first that
 * neither blocks it nor waits for it (a signalfd, sigwait); 0 when none. */
static pid_t taker(pid_t pid, unsigned long long bit)
{
    if (!(sigmask_of(pid, pid, "SigBlk") & bit) && !waits_for(pid, pid, bit))
        return pid;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    pid_t found = 0;
    struct dirent *e;
    while (d && !found && (e = readdir(d))) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid > 0 && tid != pid &&
            !(sigmask_of(pid, tid, "SigBlk") & bit) &&
            !waits_for(pid, tid, bit))
            found = tid;
    }
    if (d)
        closedir(d);
    return found;
}

int cap_python_hooked(pid_t pid, int fd)
{
    unsigned long long bit = 1ull << (stk_signal() - 1);
    return (sigmask_of(pid, 0, "SigCgt") & bit) && cap_holds_fd(pid, fd) != 0;
}

struct dump {
    size_t i;          /* the target */
    int fd;
    pid_t tid;         /* the thread it was sent to (tgkill), 0: one
                          sent before, still pending */
    int done;
    char *buf;
    size_t len, cap;
    double last;       /* when data last came */
};

/* Read what is there: 0; 1 at end of file (the worker and whatever
 * inherited the write end are gone); -1 when out of memory. */
static int drain(struct dump *d)
{
    for (;;) {
        if (d->cap - d->len < 4096) {
            if (d->cap >= DUMP_MAX) {
                char sink[4096]; /* beyond any real dump: dropped */
                ssize_t k = read(d->fd, sink, sizeof sink);
                if (k > 0)
                    continue;
                return k == 0;
            }
            size_t cap = d->cap ? d->cap * 2 : 16384;
            char *g = realloc(d->buf, cap);
            if (!g)
                return -1;
            d->buf = g;
            d->cap = cap;
        }
        ssize_t n = read(d->fd, d->buf + d->len, d->cap - d->len);
        if (n > 0) {
            d->len += (size_t)n;
            d->last = cap_now_ms();
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n == 0; /* EAGAIN: all there is for now */
    }
}

static void discard(int fd)
{
    char sink[4096];
    while (read(fd, sink, sizeof sink) > 0) {
    }
}

static int whole_lines(const struct dump *d)
{
    return d->len > 0 && d->buf[d->len - 1] == '\n';
}

static int finished(const struct stk_target *t, const struct dump *d,
                    int sig, double now)
{
    if (!whole_lines(d))
        return 0;
    unsigned long long bit = 1ull << (sig - 1);
    if (!d->tid)
        return now - d->last >= QUIET_MS;
    return !(sigmask_of(t->pid, d->tid, "SigPnd") & bit) &&
           !(sigmask_of(t->pid, d->tid, "SigBlk") & bit);
}

/* ---- the dump's text ---------------------------------------------------- */

static int add_thread(struct stk_thread **th, size_t *n, unsigned long **ids,
                      unsigned long id)
{
    struct stk_thread *g = realloc(*th, (*n + 1) * sizeof *g);
    if (!g)
        return -1;
    *th = g;
    unsigned long *gi = realloc(*ids, (*n + 1) * sizeof *gi);
    if (!gi)
        return -1;
    *ids = gi;
    memset(&g[*n], 0, sizeof *g);
    gi[*n] = id;
    (*n)++;
    return 0;
}

/* `  File "x.py", line 12 in spin` (line "???" when unknown). */
static int add_frame(struct stk_thread *t, const char *line, size_t len)
{
    static const char pre[] = "  File \"", mid[] = "\", line ",
                      in[] = " in ";
    if (len < sizeof pre - 1 || memcmp(line, pre, sizeof pre - 1) != 0)
        return 0;
    const char *file = line + sizeof pre - 1, *end = line + len, *m = NULL;
    for (const char *p = file; p + sizeof mid - 1 <= end; p++)
        if (!memcmp(p, mid, sizeof mid - 1))
            m = p; /* the last: a file name may hold anything */
    if (!m)
        return 0;
    const char *num = m + sizeof mid - 1, *fn = NULL;
    for (const char *p = num; p + sizeof in - 1 <= end; p++)
        if (!memcmp(p, in, sizeof in - 1)) {
            fn = p + sizeof in - 1;
            break;
        }
    if (!fn)
        return 0;
    struct stk_frame *g = realloc(t->python, (t->npython + 1) * sizeof *g);
    if (!g)
        return -1;
    t->python = g;
    struct stk_frame *f = &g[t->npython];
    memset(f, 0, sizeof *f);
    f->file = strndup(file, (size_t)(m - file));
    f->function = strndup(fn, (size_t)(end - fn));
    f->line = atoi(num); /* "???": 0, unknown */
    if (!f->file || !f->function) {
        free(f->file);
        free(f->function);
        return -1;
    }
    t->npython++;
    return 0;
}

int cap_parse_dump(const char *text, size_t len, struct stk_thread **th,
                   size_t *n, unsigned long **ids, int *current)
{
    *th = NULL;
    *n = 0;
    *ids = NULL;
    *current = -1;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        size_t ll = (size_t)(eol - p);
        /* "Thread 0x...", or "Current thread 0x..." for the handler's */
        int cur = ll > 15 && !memcmp(p, "Current thread ", 15);
        const char *h = cur ? p + 15 : p + 7;
        unsigned long id;
        if (!nl) {
            /* a line cut short: nothing to take from it */
        } else if ((cur || (ll > 7 && !memcmp(p, "Thread ", 7))) &&
                   sscanf(h, "%lx", &id) == 1) {
            if (add_thread(th, n, ids, id) < 0)
                return -1;
            if (cur)
                *current = (int)*n - 1;
        } else if (*n > 0 && add_frame(&(*th)[*n - 1], p, ll) < 0) {
            return -1;
        }
        p = nl ? nl + 1 : end;
    }
    return 0;
}

/* ---- onto the rank's threads -------------------------------------------- */

static struct stk_thread *main_thread(struct stk_rank *r)
{
    for (size_t i = 0; i < r->nthreads; i++)
        if (r->threads[i].tid == r->pid)
            return &r->threads[i];
    return NULL;
}

/* Give r the parsed threads: each to the native thread whose thread
 * pointer faulthandler printed; the interpreter's first thread (listed
 * last) to the main thread when that is unknown; any other on a thread of
 * its own (tid 0). */
static int attach(struct stk_rank *r, const struct cap_native *c,
                  struct stk_thread *py, size_t n, const unsigned long *ids)
{
    size_t native = r->nthreads; /* c->tp's length; more may be added */
    if (!native) {
        /* No native threads (ptrace refused): the main thread first all
         * the same. */
        free(r->threads);
        if (!(r->threads = calloc(1, sizeof *r->threads)))
            return -1;
        r->threads[0].tid = r->pid;
        r->nthreads = 1;
    }
    for (size_t k = 0; k < n; k++) {
        struct stk_thread *to = NULL;
        for (size_t j = 0; ids[k] && c->tp && j < native; j++)
            if (c->tp[j] == ids[k] && !r->threads[j].npython)
                to = &r->threads[j];
        if (!to && k == n - 1) {
            to = main_thread(r);
            if (to && to->npython)
                to = NULL;
        }
        if (!to) {
            struct stk_thread *g =
                realloc(r->threads, (r->nthreads + 1) * sizeof *g);
            if (!g)
                return -1;
            r->threads = g;
            to = &g[r->nthreads++];
            memset(to, 0, sizeof *to);
        }
        to->python = py[k].python;
        to->npython = py[k].npython;
        py[k].python = NULL;
        py[k].npython = 0;
    }
    return 0;
}

static int take(const struct stk_target *t, struct stk_rank *r,
                const struct cap_native *c, struct dump *d)
{
    struct stk_thread *py;
    size_t n;
    unsigned long *ids;
    int current, rc = -1;
    if (cap_parse_dump(d->buf, d->len, &py, &n, &ids, &current) == 0)
        rc = n ? attach(r, c, py, n, ids)
               : cap_error(r, "no Python frames: its faulthandler wrote "
                              "nothing readable");
    for (size_t k = 0; k < n; k++)
        cap_frames_free(py[k].python, py[k].npython);
    free(py);
    free(ids);
    (void)t;
    return rc;
}

/* Signal target i for its dump into x: 1 when sent; 0 when it has no
 * dump to give (r says why); -1 when out of memory. */
static int ask(const struct stk_target *t, struct stk_rank *r,
               const struct cap_native *c, int sig, struct dump *x)
{
    unsigned long long bit = 1ull << (sig - 1);
    pid_t pid = t->pid;
    if (c->stopped)
        return cap_error(r, "no Python frames: the worker is stopped "
                            "(SIGSTOP), and amlrun leaves it so");
    if (sigmask_of(pid, 0, "SigIgn") & bit)
        return cap_error(r, "no Python frames: the program ignores signal "
                            "%d (amlrun's)", sig);
    if (!(sigmask_of(pid, 0, "SigCgt") & bit))
        return cap_error(r, "no Python frames: its Python did not take "
                            "amlrun's faulthandler hook (site disabled: "
                            "python -S, -I or -E?)");
    /* The hook (signal.signal) and its guard (a handler set from C:
     * python/guard.c) let go of the channel when the program takes
     * amlrun's signal for a handler of its own: then the signal would
     * reach the program's handler, not faulthandler's. */
    if (cap_holds_fd(pid, t->python_fd) == 0)
        return cap_error(r, "no Python frames: the program handles signal "
                            "%d (amlrun's) itself, or closed amlrun's "
                            "stack channel", sig);
    /* One installed where neither sees it (the system call, libc's own
     * handle, RTLD_DEEPBIND): the kernel's handler, read in the native
     * pass, is not the guard's. */
    if (c->act_known && cap_sigact_ours(pid, c->act_handler) == 0)
        return cap_error(r, "no Python frames: the program handles signal "
                            "%d (amlrun's) itself, set past amlrun's guard "
                            "(by the system call, libc's own handle)", sig);
    /* Blocked, or waited for, in every thread, it would wait there for
     * the program (a signalfd, sigwait) and never reach faulthandler. */
    pid_t tid = taker(pid, bit);
    if (!tid)
        return cap_error(r, "no Python frames: every thread of the program "
                            "blocks signal %d (amlrun's) or waits for it: "
                            "the program would take it (a signalfd, "
                            "sigwait), not faulthandler", sig);
    discard(t->python_fd); /* what an earlier capture left */
    x->fd = t->python_fd;
    x->last = cap_now_ms();
    /* One sent before and still pending (a thread that did not take it
     * then: an uninterruptible sleep) answers this capture: a second
     * would queue a second dump behind it. */
    if ((sigmask_of(pid, pid, "SigPnd") | sigmask_of(pid, tid, "SigPnd") |
         sigmask_of(pid, 0, "ShdPnd")) & bit)
        return 1;
    x->tid = tid;
    int sent = (int)syscall(SYS_tgkill, pid, tid, sig);
    if (sent < 0)
        return cap_error(r, "it exited before its Python stack could be "
                            "read");
    return 1;
}

/* One pass over the dumps not done: read what came, see which are done,
 * and put the descriptors still to wait on in pf.  Their count, or -1 when
 * out of memory. */
static long read_pass(const struct stk_target *t, struct dump *d, size_t nd,
                      struct pollfd *pf, int sig, double now)
{
    long open = 0;
    for (size_t k = 0; k < nd; k++) {
        if (d[k].done)
            continue;
        int eof = drain(&d[k]);
        if (eof < 0)
            return -1;
        if (eof) { /* nothing more can come */
            d[k].done = 1;
            continue;
        }
        if (finished(&t[d[k].i], &d[k], sig, now)) {
            d[k].done = 1;
            if (drain(&d[k]) < 0) /* written before it left the handler */
                return -1;
            continue;
        }
        pf[open].fd = d[k].fd;
        pf[open].events = POLLIN;
        open++;
    }
    return open;
}

/* Read the dumps as they come, until each is done or the deadline. */
static int read_all(const struct stk_target *t, struct dump *d, size_t nd,
                    struct pollfd *pf, int sig, double deadline)
{
    for (;;) {
        double now = cap_now_ms();
        long open = read_pass(t, d, nd, pf, sig, now);
        if (open <= 0 || now >= deadline)
            return open < 0 ? -1 : 0;
        double left = deadline - now;
        (void)poll(pf, (nfds_t)open, left < 2 ? (int)left + 1 : 2);
    }
}

/* Each dump onto its rank's threads, or the reason it has none. */
static int take_all(const struct stk_target *t, struct stk_rank *r,
                    const struct cap_native *c, struct dump *d, size_t nd)
{
    int rc = 0;
    for (size_t k = 0; k < nd && rc == 0; k++) {
        struct stk_rank *rk = &r[d[k].i];
        if (!d[k].len && cap_gone_state(cap_task_state(rk->pid, rk->pid)))
            rc = cap_error(rk, "it exited before its Python stack could be "
                               "read");
        else if (!d[k].len)
            rc = cap_error(rk, "no Python frames: no answer from its "
                               "faulthandler in time");
        else if ((!d[k].done || !whole_lines(&d[k])) &&
                 cap_error(rk, "Python frames cut short: %s",
                           d[k].done ? "it exited" : "out of time") < 0)
            rc = -1;
        else
            rc = take(&t[d[k].i], rk, &c[d[k].i], &d[k]);
    }
    return rc;
}

int cap_python(const struct stk_target *t, size_t n, struct stk_rank *r,
               struct cap_native *c, double deadline)
{
    int sig = stk_signal();
    struct dump *d = calloc(n, sizeof *d);
    struct pollfd *pf = calloc(n, sizeof *pf);
    size_t nd = 0;
    int rc = d && pf ? 0 : -1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (t[i].python_fd < 0 || c[i].exited)
            continue;
        d[nd].i = i;
        rc = ask(&t[i], &r[i], &c[i], sig, &d[nd]);
        if (rc > 0) {
            nd++;
            rc = 0;
        }
    }
    if (rc == 0)
        rc = read_all(t, d, nd, pf, sig, deadline);
    if (rc == 0)
        rc = take_all(t, r, c, d, nd);
    for (size_t k = 0; k < nd; k++)
        free(d[k].buf);
    free(d);
    free(pf);
    return rc;
}
