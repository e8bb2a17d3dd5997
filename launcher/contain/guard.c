/* The orphan guard and the job's containment (see guard.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "contain/cgroup.h"
#include "contain/clonevm.h"
#include "contain/guard.h"
#include "output/msg.h"

enum mode { MODE_PGROUPS, MODE_CGROUP, MODE_PIDNS };

struct guard_msg {
    char op; /* 'A' add, 'D' delete, 'K' kill strays, 'Q' quit */
    int32_t pgid;
};

static struct {
    int fd;          /* to the guard */
    int ack_fd;      /* from the guard: 'K' done (pidns) */
    pid_t pid;
    enum mode mode;
    char no_cg[2 * PATH_MAX + 128], no_ns[128];
    char desc[3 * PATH_MAX];
} g = {.fd = -1, .ack_fd = -1};

pid_t guard_fork(void)
{
    return g.mode == MODE_CGROUP ? cgroup_fork() : fork();
}

pid_t guard_clonevm(uint64_t flags, void (*fn)(void *), void *arg,
                    void *stack, size_t size)
{
    if (g.mode != MODE_CGROUP) {
        errno = ENOSYS;
        return -1;
    }
    return cgroup_clonevm(flags, fn, arg, stack, size);
}

int guard_clones_vm(void)
{
    return CLONEVM_ARCH && g.mode == MODE_CGROUP && cgroup_may_clone_into();
}

int guard_born_contained(void)
{
    /* In a PID namespace every child is born in it. */
    return g.mode == MODE_PIDNS ||
           (g.mode == MODE_CGROUP && cgroup_clones_into());
}

void guard_child_setup(void)
{
    if (g.mode != MODE_PIDNS)
        return;
    /* Without this the worker's getpid() would name another process in
     * the host's /proc (ps -p $$, psutil).  Mounts must not propagate back
     * to the host: no /proc unless / is made a slave first. */
    if (unshare(CLONE_NEWNS) == 0 &&
        mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) == 0)
        (void)mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                    NULL);
}

/* ---- the guard ----------------------------------------------------- */

static _Noreturn void guard_main(int fd, int ack)
{
    /* Out of amlrun's group: a Ctrl-C or a kill of amlrun's group must not
     * take the guard away before it has done its job.  The signals amlrun
     * blocked stay blocked here; only SIGKILL ends the guard early. */
    setpgid(0, 0);
    prctl(PR_SET_NAME, "amlrun-guard");
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
    }
    if (g.mode == MODE_PIDNS) {
        /* The namespace's init: orphans come here, and an ignored SIGCHLD
         * reaps them. */
        struct sigaction sa = {0};
        sa.sa_handler = SIG_IGN;
        sigaction(SIGCHLD, &sa, NULL);
    }
    pid_t *groups = NULL;
    size_t n = 0, cap = 0;
    int quit = 0;
    struct guard_msg m;
    for (;;) {
        ssize_t r = read(fd, &m, sizeof m);
        if (r < 0 && errno == EINTR)
            continue;
        if (r != (ssize_t)sizeof m)
            break; /* amlrun is gone */
        if (m.op == 'Q') {
            quit = 1;
            break;
        }
        if (m.op == 'K') {
            kill(-1, SIGKILL); /* as init: all of the namespace but us */
            ssize_t w = write(ack, "k", 1);
            (void)w;
        } else if (m.op == 'A') {
            if (n == cap) {
                size_t c = cap ? cap * 2 : 16;
                pid_t *p = realloc(groups, c * sizeof *p);
                if (!p)
                    continue;
                groups = p;
                cap = c;
            }
            groups[n++] = m.pgid;
        } else if (m.op == 'D') {
            for (size_t i = 0; i < n; i++)
                if (groups[i] == m.pgid) {
                    groups[i] = groups[--n];
                    break;
                }
        }
    }
    for (size_t i = 0; !quit && i < n; i++)
        kill(-groups[i], SIGKILL);
    free(groups);
    if (g.mode == MODE_CGROUP)
        cgroup_end();
    /* pidns: our exit makes the kernel kill the rest of the namespace. */
    _exit(0);
}

int guard_start(void)
{
    /* Test hook: force a weaker containment (cgroup, pidns, pgroups). */
    const char *force = getenv("AMLDIST_TEST_CONTAIN");
    if (force && !*force)
        force = NULL;
    int own_ns = -1;
    if (!force || strcmp(force, "cgroup") == 0) {
        if (cgroup_setup(g.no_cg, sizeof g.no_cg) == 0)
            g.mode = MODE_CGROUP;
    } else {
        snprintf(g.no_cg, sizeof g.no_cg, "not tried (AMLDIST_TEST_CONTAIN=%s)",
                 force);
    }
    if (g.mode == MODE_PGROUPS && (!force || strcmp(force, "pidns") == 0)) {
        /* Our next child, the guard, becomes the namespace's init, and
         * every worker is born in it. */
        own_ns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
        if (unshare(CLONE_NEWPID) == 0)
            g.mode = MODE_PIDNS;
        else
            snprintf(g.no_ns, sizeof g.no_ns, "unshare(CLONE_NEWPID): %s",
                     strerror(errno));
    } else if (g.mode == MODE_PGROUPS) {
        snprintf(g.no_ns, sizeof g.no_ns, "not tried (AMLDIST_TEST_CONTAIN=%s)",
                 force);
    }
    int p[2] = {-1, -1}, a[2] = {-1, -1};
    pid_t pid = -1;
    if (pipe2(p, O_CLOEXEC) == 0 &&
        (g.mode != MODE_PIDNS || pipe2(a, O_CLOEXEC) == 0))
        pid = fork();
    if (pid == 0) {
        close(p[1]);
        if (a[0] >= 0)
            close(a[0]);
        guard_main(p[0], a[1]);
    }
    int e = errno;
    if (p[0] >= 0)
        close(p[0]);
    if (a[1] >= 0)
        close(a[1]);
    if (pid < 0) {
        /* No guard, no containment: undo it. */
        if (p[1] >= 0)
            close(p[1]);
        if (a[0] >= 0)
            close(a[0]);
        if (g.mode == MODE_PIDNS && own_ns >= 0)
            setns(own_ns, CLONE_NEWPID);
        if (g.mode == MODE_CGROUP)
            cgroup_remove();
        g.mode = MODE_PGROUPS;
        if (own_ns >= 0)
            close(own_ns);
        errno = e;
        return -1;
    }
    if (own_ns >= 0)
        close(own_ns);
    g.fd = p[1];
    g.ack_fd = a[0];
    g.pid = pid;
    return 0;
}

const char *guard_describe(void)
{
    switch (g.mode) {
    case MODE_CGROUP:
        snprintf(g.desc, sizeof g.desc,
                 "the job's cgroup %s (cgroup.kill ends every descendant, "
                 "setsid or not, with the job or with amlrun)",
                 cgroup_path());
        break;
    case MODE_PIDNS:
        snprintf(g.desc, sizeof g.desc,
                 "a PID namespace whose init is amlrun's guard (every "
                 "descendant, setsid or not, ends with it; no cgroup: %s)",
                 g.no_cg);
        break;
    default:
        snprintf(g.desc, sizeof g.desc,
                 "process groups only (a descendant that leaves its group "
                 "with setsid survives a SIGKILL of amlrun; no cgroup: %s; "
                 "no PID namespace: %s)",
                 g.no_cg, g.no_ns);
        break;
    }
    return g.desc;
}

static void guard_send(char op, pid_t pgid)
{
    if (g.fd < 0)
        return;
    struct guard_msg m;
    memset(&m, 0, sizeof m); /* no uninitialised padding on the wire */
    m.op = op;
    m.pgid = (int32_t)pgid;
    /* Small writes to a pipe are atomic; a failure means the guard died,
     * and then there is nothing better to do than go on. */
    (void)write_all(g.fd, &m, sizeof m);
}

/* Only process groups alone need the list: the guard ends a cgroup or a
 * PID namespace as a whole, whatever groups are in it. */
void guard_add(pid_t pgid)
{
    if (g.mode == MODE_PGROUPS)
        guard_send('A', pgid);
}

void guard_del(pid_t pgid)
{
    if (g.mode == MODE_PGROUPS)
        guard_send('D', pgid);
}

void guard_kill_strays(void)
{
    if (g.mode == MODE_CGROUP) {
        cgroup_kill();
    } else if (g.mode == MODE_PIDNS && g.fd >= 0) {
        /* Wait for the guard's answer: a restart must not start workers
         * that a late kill(-1) would take. */
        guard_send('K', 0);
        char c;
        while (read(g.ack_fd, &c, 1) < 0 && errno == EINTR) {
        }
    }
}

void guard_stop(void)
{
    guard_send('Q', 0);
    if (g.fd >= 0)
        close(g.fd);
    if (g.ack_fd >= 0)
        close(g.ack_fd);
    cgroup_close();
    g.fd = g.ack_fd = -1;
}

pid_t guard_pid(void) { return g.pid; }
