/* The job's cgroup (see cgroup.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "contain/cgroup.h"
#include "contain/clonevm.h"
#include "output/msg.h"

static struct {
    int dir;         /* the job's cgroup, open; -1 */
    int clone3;      /* CLONE_INTO_CGROUP: 1 works, 0 not here, -1 untried */
    char path[PATH_MAX];
} cg = {.dir = -1, .clone3 = -1};

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

/* Whether the cgroup `name` under `parent` (or one below it) holds a
 * process: cgroup.events says "populated 1". */
static int populated(int parent, const char *name)
{
    char path[NAME_MAX + 32], buf[256];
    snprintf(path, sizeof path, "%s/cgroup.events", name);
    int fd = openat(parent, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return strstr(buf, "populated 1") != NULL;
}

/* Job cgroups that an amlrun left behind when its guard was killed with
 * it (BUGS in amlrun.1): their amlrun gone, older than a minute (not one
 * being set up in another PID namespace).  An empty one is removed; one
 * that still holds the processes that escaped is named with the way to
 * end them, since nothing else would tell (never killed from here: its
 * amlrun may live in a PID namespace that cannot be seen from this one). */
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
        if (rmdir_tree(dirfd(d), e->d_name) < 0 &&
            populated(dirfd(d), e->d_name))
            msg("warning: %s/%s, the cgroup of an amlrun (pid %ld) that is "
                "gone, still holds processes (what left its workers' groups "
                "when amlrun and its guard were SIGKILLed together): "
                "'echo 1 > %s/%s/cgroup.kill' ends them", dir, e->d_name,
                pid, dir, e->d_name);
    }
    closedir(d);
}

/* The directory, beside amlrun's own cgroup, that amlrun may fill and
 * kill; 0, or -1 with why[] saying why not. */
static int cg_make(char *why, size_t whysz)
{
    char own[PATH_MAX], root[PATH_MAX], mnt[PATH_MAX], dir[PATH_MAX];
    if (own_cgroup(own, sizeof own) < 0) {
        snprintf(why, whysz, "amlrun is in no cgroup v2");
        return -1;
    }
    if (cgroup2_mount(root, sizeof root, mnt, sizeof mnt) < 0) {
        snprintf(why, whysz, "no cgroup2 file system mounted");
        return -1;
    }
    size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
    if (strncmp(own, "/..", 3) == 0 || strncmp(own, root, rl) != 0 ||
        (own[rl] != '/' && own[rl] != '\0')) {
        snprintf(why, whysz,
                 "amlrun's cgroup %s is not under %s", own, mnt);
        return -1;
    }
    const char *rel = strcmp(own + rl, "/") == 0 ? "" : own + rl;
    if ((size_t)snprintf(dir, sizeof dir, "%s%s", mnt, rel) >= sizeof dir ||
        (size_t)snprintf(cg.path, sizeof cg.path, "%s/amlrun-%d", dir,
                         (int)getpid()) >= sizeof cg.path) {
        snprintf(why, whysz, "path too long");
        return -1;
    }
    cg_sweep(dir);
    int made = mkdir(cg.path, 0755);
    if (made < 0 && errno == EEXIST && rmdir_tree(AT_FDCWD, cg.path) == 0)
        made = mkdir(cg.path, 0755); /* an earlier amlrun of our pid's */
    if (made < 0) {
        snprintf(why, whysz, "mkdir %s: %s", cg.path,
                 strerror(errno));
        return -1;
    }
    /* Moving a process needs write access to cgroup.procs of the common
     * ancestor, amlrun's own cgroup; killing needs cgroup.kill. */
    char procs[PATH_MAX + 16];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
    cg.dir = open(cg.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cg.dir < 0)
        snprintf(why, whysz, "%s: %s", cg.path, strerror(errno));
    else if (faccessat(cg.dir, "cgroup.kill", W_OK, 0) < 0)
        snprintf(why, whysz, "%s", errno == ENOENT
                 ? "no cgroup.kill (Linux 5.14 or later)"
                 : "cgroup.kill is not writable");
    else if (access(procs, W_OK) < 0)
        snprintf(why, whysz, "%s: %s", procs, strerror(errno));
    else
        return 0;
    if (cg.dir >= 0)
        close(cg.dir);
    cg.dir = -1;
    rmdir(cg.path);
    return -1;
}

/* Linux 6.x (seen on 6.18) kills a child cloned into a cgroup whose
 * cgroup.kill count differs from its parent's cgroup's: after one kill of
 * the job's cgroup, or when amlrun's own cgroup was once killed (systemd
 * does that).  Moving the child after fork() is not affected. */
void cgroup_kill(void)
{
    int fd = openat(cg.dir, "cgroup.kill", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t w = write(fd, "1", 1);
    (void)w;
    close(fd);
    cg.clone3 = 0;
}

/* Up to five minutes: a process in uninterruptible sleep takes its time. */
void cgroup_end(void)
{
    int ev = openat(cg.dir, "cgroup.events", O_RDONLY | O_CLOEXEC);
    for (int round = 0; round < 300; round++) {
        cgroup_kill();
        char buf[256];
        ssize_t n = ev >= 0 ? pread(ev, buf, sizeof buf - 1, 0) : -1;
        buf[n > 0 ? n : 0] = '\0';
        /* The read also re-arms the notification that poll waits for. */
        if ((n < 0 || strstr(buf, "populated 0")) &&
            (rmdir_tree(AT_FDCWD, cg.path) == 0 || errno != EBUSY))
            break;
        struct pollfd p = {ev, POLLPRI, 0};
        poll(&p, ev >= 0, 1000);
    }
    if (ev >= 0)
        close(ev);
}

/* Whether the child PID, just cloned, was killed at birth: SIGKILL
 * pending, or dead already (see clone_outcome).  Unknown (no /proc) counts
 * as alive, which is what amlrun assumed before it looked. */
static int born_dead(pid_t pid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (read_small(path, buf, sizeof buf) < 0)
        return 0;
    const char *state = strstr(buf, "\nState:\t");
    if (state && (state[8] == 'Z' || state[8] == 'X'))
        return 1;
    /* The kernel's kill is for the whole process: shared pending. */
    static const char *const pending[] = {"\nShdPnd:\t", "\nSigPnd:\t"};
    for (int i = 0; i < 2; i++) {
        const char *p = strstr(buf, pending[i]);
        if (p && (strtoull(p + 9, NULL, 16) >> (SIGKILL - 1) & 1))
            return 1;
    }
    return 0;
}

/* SIGKILL the child PID and reap it. */
static void kill_and_reap(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

/* What a clone into the cgroup gave (PID, or -1 with errno), as the first
 * of them learns it: whether clone3 can clone into the cgroup here, and
 * whether a child born there lives (the kernel kills one at birth where the
 * cgroup's kill count differs from that of amlrun's cgroup, see
 * cgroup_kill; a cgroup of amlrun's that was once killed has that from the
 * start).  The kill is queued before clone3 returns, so the first child,
 * which waits for its go-ahead byte, is looked at at once, without waiting
 * for it to run.  -1 with ENOSYS: fork then, from now on. */
static pid_t clone_outcome(pid_t pid)
{
    if (cg.clone3 == 1)
        return pid;
    if (pid > 0 && born_dead(pid)) {
        /* (killed, in case /proc named another: it waits for a go-ahead) */
        kill_and_reap(pid);
        pid = -1;
        errno = ECANCELED;
    }
    if (pid >= 0) {
        cg.clone3 = 1;
        return pid;
    }
    if (errno == ENOSYS || errno == E2BIG || errno == EINVAL ||
        errno == ECANCELED) {
        cg.clone3 = 0; /* Linux < 5.7, valgrind; a child killed at birth */
        errno = ENOSYS;
    }
    return -1;
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

pid_t cgroup_fork(void)
{
    /* Born in the cgroup: no migration, which costs a 10 ms RCU grace
     * period the first time.  The first worker learns whether clone3 can
     * do it here: no probe child of its own (issue 23; clone_outcome). */
    if (cg.clone3 != 0) {
        pid_t pid = clone_outcome(clone_into_cgroup(cg.dir));
        if (pid >= 0 || errno != ENOSYS)
            return pid;
    }
    pid_t pid = fork();
    if (pid <= 0)
        return pid;
    /* Moved before guard_fork returns, so before the child may exec. */
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%d", (int)pid);
    int fd = openat(cg.dir, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, buf, (size_t)n) != n) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        kill_and_reap(pid);
        errno = e;
        return -1;
    }
    close(fd);
    return pid;
}

pid_t cgroup_clonevm(uint64_t flags, void (*fn)(void *), void *arg,
                     void *stack, size_t size)
{
    /* Where a child born here is known to live, or not known yet: then the
     * first worker learns it (clone_outcome), which waits for its go-ahead
     * byte, so never held until its exec. */
    if (cg.clone3 == 0 || (cg.clone3 < 0 && (flags & CLONEVM_WAIT))) {
        errno = ENOSYS;
        return -1;
    }
    return clone_outcome(clonevm(flags | 0x200000000ULL /* CLONE_INTO_CGROUP */,
                                 cg.dir, fn, arg, stack, size));
}

int cgroup_may_clone_into(void)
{
    return cg.clone3 != 0;
}

int cgroup_setup(char *why, size_t whysz)
{
    return cg_make(why, whysz);
}

int cgroup_clones_into(void)
{
    return cg.clone3 == 1;
}

const char *cgroup_path(void)
{
    return cg.path;
}

void cgroup_close(void)
{
    if (cg.dir >= 0)
        close(cg.dir);
    cg.dir = -1;
}

void cgroup_remove(void)
{
    cgroup_close();
    rmdir(cg.path);
}
