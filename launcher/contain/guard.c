/* The orphan guard and the job's containment (see guard.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
    int cg_dir;      /* the job's cgroup, open; -1 */
    int clone3;      /* CLONE_INTO_CGROUP: 1 works, 0 not here, -1 untried */
    char cg_path[PATH_MAX];
    char no_cg[2 * PATH_MAX + 128], no_ns[128];
    char desc[3 * PATH_MAX];
} g = {.fd = -1, .ack_fd = -1, .cg_dir = -1, .clone3 = -1};

/* ---- the cgroup ---------------------------------------------------- */

/* amlrun's cgroup v2 path, from the "0::" line. */
static int own_cgroup(char *path, size_t n)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int rc = -1;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "0::", 3) != 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        if (strlen(line + 3) < n) {
            strcpy(path, line + 3);
            rc = 0;
        }
        break;
    }
    free(line);
    fclose(f);
    return rc;
}

/* The cgroup2 mount: the hierarchy path it shows and where it is. */
static int cgroup2_mount(char *root, size_t rn, char *mnt, size_t mn)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int rc = -1;
    while (rc < 0 && getline(&line, &cap, f) > 0) {
        /* id parent dev root mountpoint options ... - fstype source ... */
        char *sep = strstr(line, " - ");
        if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0)
            continue;
        *sep = '\0';
        char *save = NULL, *r = NULL, *m = NULL;
        int i = 0;
        for (char *t = strtok_r(line, " ", &save); t && i < 5;
             t = strtok_r(NULL, " ", &save), i++) {
            if (i == 3)
                r = t;
            else if (i == 4)
                m = t;
        }
        /* Octal escapes (a space in the path): not worth decoding. */
        if (!r || !m || strchr(r, '\\') || strchr(m, '\\') ||
            strlen(r) >= rn || strlen(m) >= mn)
            continue;
        strcpy(root, r);
        strcpy(mnt, m);
        rc = 0;
    }
    free(line);
    fclose(f);
    return rc;
}

/* Remove the cgroup `name` under `parent` and any cgroup a worker made
 * inside it (they must be empty). */
static int rmdir_tree(int parent, const char *name)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (e->d_type == DT_DIR && strcmp(e->d_name, ".") != 0 &&
                strcmp(e->d_name, "..") != 0)
                (void)rmdir_tree(dirfd(d), e->d_name);
        closedir(d);
    } else if (fd >= 0) {
        close(fd);
    }
    return unlinkat(parent, name, AT_REMOVEDIR);
}

/* Job cgroups that an amlrun left behind when its guard was killed with
 * it: their amlrun gone, older than a minute (not one being set up in
 * another PID namespace), empty (rmdir fails otherwise). */
static void cg_sweep(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "amlrun-", 7) != 0)
            continue;
        char *end;
        long pid = strtol(e->d_name + 7, &end, 10);
        struct stat st;
        if (end == e->d_name + 7 || *end || pid <= 0 || pid > INT_MAX ||
            kill((pid_t)pid, 0) == 0 || errno != ESRCH ||
            fstatat(dirfd(d), e->d_name, &st, 0) < 0 || now - st.st_mtime < 60)
            continue;
        (void)rmdir_tree(dirfd(d), e->d_name);
    }
    closedir(d);
}

/* A cgroup for the job beside amlrun's own, that amlrun may fill and kill;
 * 0, or -1 with g.no_cg saying why not. */
static int cg_setup(void)
{
    char own[PATH_MAX], root[PATH_MAX], mnt[PATH_MAX], dir[PATH_MAX];
    if (own_cgroup(own, sizeof own) < 0) {
        snprintf(g.no_cg, sizeof g.no_cg, "amlrun is in no cgroup v2");
        return -1;
    }
    if (cgroup2_mount(root, sizeof root, mnt, sizeof mnt) < 0) {
        snprintf(g.no_cg, sizeof g.no_cg, "no cgroup2 file system mounted");
        return -1;
    }
    size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
    if (strncmp(own, "/..", 3) == 0 || strncmp(own, root, rl) != 0 ||
        (own[rl] != '/' && own[rl] != '\0')) {
        snprintf(g.no_cg, sizeof g.no_cg,
                 "amlrun's cgroup %s is not under %s", own, mnt);
        return -1;
    }
    const char *rel = strcmp(own + rl, "/") == 0 ? "" : own + rl;
    if ((size_t)snprintf(dir, sizeof dir, "%s%s", mnt, rel) >= sizeof dir ||
        (size_t)snprintf(g.cg_path, sizeof g.cg_path, "%s/amlrun-%d", dir,
                         (int)getpid()) >= sizeof g.cg_path) {
        snprintf(g.no_cg, sizeof g.no_cg, "path too long");
        return -1;
    }
    cg_sweep(dir);
    int made = mkdir(g.cg_path, 0755);
    if (made < 0 && errno == EEXIST && rmdir_tree(AT_FDCWD, g.cg_path) == 0)
        made = mkdir(g.cg_path, 0755); /* an earlier amlrun of our pid's */
    if (made < 0) {
        snprintf(g.no_cg, sizeof g.no_cg, "mkdir %s: %s", g.cg_path,
                 strerror(errno));
        return -1;
    }
    /* Moving a process needs write access to cgroup.procs of the common
     * ancestor, amlrun's own cgroup; killing needs cgroup.kill. */
    char procs[PATH_MAX + 16];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
    g.cg_dir = open(g.cg_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (g.cg_dir < 0)
        snprintf(g.no_cg, sizeof g.no_cg, "%s: %s", g.cg_path, strerror(errno));
    else if (faccessat(g.cg_dir, "cgroup.kill", W_OK, 0) < 0)
        snprintf(g.no_cg, sizeof g.no_cg, "%s", errno == ENOENT
                 ? "no cgroup.kill (Linux 5.14 or later)"
                 : "cgroup.kill is not writable");
    else if (access(procs, W_OK) < 0)
        snprintf(g.no_cg, sizeof g.no_cg, "%s: %s", procs, strerror(errno));
    else
        return 0;
    if (g.cg_dir >= 0)
        close(g.cg_dir);
    g.cg_dir = -1;
    rmdir(g.cg_path);
    return -1;
}

/* Linux 6.x (seen on 6.18) kills a child cloned into a cgroup whose
 * cgroup.kill count differs from its parent's cgroup's: after one kill of
 * the job's cgroup, or when amlrun's own cgroup was once killed (systemd
 * does that).  Moving the child after fork() is not affected. */
static void cg_kill(void)
{
    int fd = openat(g.cg_dir, "cgroup.kill", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t w = write(fd, "1", 1);
    (void)w;
    close(fd);
    g.clone3 = 0;
}

/* In the guard: kill everything in the job's cgroup, wait until it is
 * empty (a process in uninterruptible sleep takes its time) and remove
 * it; up to five minutes. */
static void cg_end(void)
{
    int ev = openat(g.cg_dir, "cgroup.events", O_RDONLY | O_CLOEXEC);
    for (int round = 0; round < 300; round++) {
        cg_kill();
        char buf[256];
        ssize_t n = ev >= 0 ? pread(ev, buf, sizeof buf - 1, 0) : -1;
        buf[n > 0 ? n : 0] = '\0';
        /* The read also re-arms the notification that poll waits for. */
        if ((n < 0 || strstr(buf, "populated 0")) &&
            (rmdir_tree(AT_FDCWD, g.cg_path) == 0 || errno != EBUSY))
            break;
        struct pollfd p = {ev, POLLPRI, 0};
        poll(&p, ev >= 0, 1000);
    }
    if (ev >= 0)
        close(ev);
}

static pid_t clone_into_cgroup(int dir)
{
#ifdef SYS_clone3
    /* struct clone_args of <linux/sched.h>, spelled out: that header's
     * CLONE_* macros clash with <sched.h>'s. */
    struct {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack,
            stack_size, tls, set_tid, set_tid_size, cgroup;
    } a;
    memset(&a, 0, sizeof a);
    a.flags = 0x200000000ULL; /* CLONE_INTO_CGROUP */
    a.exit_signal = SIGCHLD;
    a.cgroup = (uint64_t)dir;
    return (pid_t)syscall(SYS_clone3, &a, sizeof a);
#else
    (void)dir;
    errno = ENOSYS;
    return -1;
#endif
}

/* Whether a child cloned into the job's cgroup lives (see cg_kill). */
static void clone3_probe(void)
{
    pid_t pid = clone_into_cgroup(g.cg_dir);
    if (pid == 0)
        _exit(0);
    if (pid < 0) {
        g.clone3 = errno == ENOSYS || errno == E2BIG || errno == EINVAL ? 0 : -1;
        return;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    g.clone3 = WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

pid_t guard_fork(void)
{
    if (g.mode != MODE_CGROUP)
        return fork();
    /* Born in the cgroup: no migration, which costs a 10 ms RCU grace
     * period the first time. */
    if (g.clone3 != 0) {
        pid_t pid = clone_into_cgroup(g.cg_dir);
        if (pid >= 0) {
            g.clone3 = 1;
            return pid;
        }
        if (g.clone3 == 1 ||
            (errno != ENOSYS && errno != E2BIG && errno != EINVAL))
            return -1;
        g.clone3 = 0; /* Linux < 5.7, valgrind */
    }
    pid_t pid = fork();
    if (pid <= 0)
        return pid;
    /* Moved before guard_fork returns, so before the child may exec. */
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%d", (int)pid);
    int fd = openat(g.cg_dir, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, buf, (size_t)n) != n) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        errno = e;
        return -1;
    }
    close(fd);
    return pid;
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
        cg_end();
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
        if (cg_setup() == 0) {
            g.mode = MODE_CGROUP;
            clone3_probe();
        }
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
        if (g.mode == MODE_CGROUP) {
            close(g.cg_dir);
            g.cg_dir = -1;
            rmdir(g.cg_path);
        }
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
                 g.cg_path);
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

/* In a PID namespace the groups need no list: the guard's exit ends them. */
void guard_add(pid_t pgid)
{
    if (g.mode != MODE_PIDNS)
        guard_send('A', pgid);
}

void guard_del(pid_t pgid)
{
    if (g.mode != MODE_PIDNS)
        guard_send('D', pgid);
}

void guard_kill_strays(void)
{
    if (g.mode == MODE_CGROUP) {
        cg_kill();
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
    if (g.cg_dir >= 0)
        close(g.cg_dir);
    g.fd = g.ack_fd = g.cg_dir = -1;
}

pid_t guard_pid(void) { return g.pid; }
