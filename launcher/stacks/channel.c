/* A worker's Python stack channel, the spawner's side (see channel.h and
 * stacks.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amldist.h"
#include "stacks/channel.h"
#include "stacks/stacks.h"

/* Big enough for the dump of a worker with many threads even before amlrun
 * reads any of it (faulthandler writes at most 100 threads of 100 frames);
 * the system's pipe-max-size may refuse it, and 64 KiB read as it comes
 * does too. */
#define CHANNEL_PIPE_SIZE (1 << 20)

int stk_channel_open(int fds[2])
{
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -1;
    /* Neither end ever waits: amlrun drains what comes, and a worker's
     * signal handler must not block on a full pipe that nobody reads (a
     * capture that gave up): the rest of that dump is lost instead. */
    if (fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0 ||
        fcntl(fds[1], F_SETFL, O_NONBLOCK) < 0) {
        int err = errno;
        close(fds[0]);
        close(fds[1]);
        errno = err;
        return -1;
    }
    (void)fcntl(fds[1], F_SETPIPE_SZ, CHANNEL_PIPE_SIZE);
    return 0;
}

int stk_signal(void)
{
    return SIGRTMAX - 6;
}

/* The real path of the directory BINDIR/../SUB, then /NAME, into buf
 * (PATH_MAX): "" when NAME is not a regular file there. */
static void beside_amlrun(const char *sub, const char *name, char *buf)
{
    buf[0] = '\0';
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0'; /* BINDIR */
    char path[PATH_MAX], dir[PATH_MAX];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/../%s", exe, sub) >= (int)sizeof path ||
        !realpath(path, dir) ||
        snprintf(buf, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX ||
        stat(buf, &st) < 0 || !S_ISREG(st.st_mode))
        buf[0] = '\0';
}

const char *stk_python_dir(void)
{
    static int looked;
    static char dir[PATH_MAX];
    if (!looked) {
        looked = 1;
        /* The hook strips exactly this entry from PYTHONPATH again: give it
         * the path it computes (os.path.abspath of its own directory; the
         * directory made real, the file's link, if any, not followed). */
        beside_amlrun(STK_PYTHON_SUBDIR, "sitecustomize.py", dir);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
    }
    return dir[0] ? dir : NULL;
}

const char *stk_guard_path(void)
{
    static int looked;
    static char path[PATH_MAX];
    if (!looked) {
        looked = 1;
        beside_amlrun(STK_GUARD_SUBDIR, STK_GUARD_NAME, path);
        /* LD_PRELOAD's separators: a path holding one cannot be named. */
        if (strpbrk(path, " :\t"))
            path[0] = '\0';
    }
    return path[0] ? path : NULL;
}

/* python, python3, python3.11, python3.11d, python3-dbg: an interpreter. */
static int is_python_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, "python", 6) != 0)
        return 0;
    for (const char *p = base + 6; *p; p++)
        if (!strchr("0123456789.-dbgmu", *p))
            return 0;
    return 1;
}

int stk_is_python(const char *path, int runs_python)
{
    return runs_python || (path && is_python_name(path));
}

int stk_channel_wanted(const char *path, int runs_python)
{
    return stk_is_python(path, runs_python) && stk_python_dir() != NULL;
}

int stk_python_skips_hook(char *const *argv)
{
    for (size_t i = 1; argv && argv[i]; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1] || !strcmp(a, "--"))
            return 0; /* the script, "-" (stdin): options end */
        if (a[1] == '-') {
            if (!strcmp(a, "--check-hash-based-pycs") && argv[i + 1])
                i++;
            continue;
        }
        for (const char *p = a + 1; *p; p++) {
            if (strchr("ISE", *p))
                return 1;
            if (*p == 'c' || *p == 'm')
                return 0; /* what follows is the program's */
            if (*p == 'W' || *p == 'X') {
                if (!p[1] && argv[i + 1])
                    i++; /* its value, the next word */
                break;
            }
        }
    }
    return 0;
}

int stk_channel_wanted_argv(const char *path, char *const *argv,
                            int runs_python)
{
    return stk_channel_wanted(path, runs_python) &&
           !stk_python_skips_hook(argv);
}

/* LD_PRELOAD with the guard last: the user's objects keep their order
 * (a sanitizer's runtime must come first), and the hook strips exactly
 * ":guard" (or the whole value, when it was the only one) again, the path
 * named in STK_ENV_GUARD. */
static int add_guard(char ***env)
{
    const char *guard = stk_guard_path();
    const char *old = amldist_envp_get(*env, "LD_PRELOAD");
    char *v;
    if (!guard)
        return 0; /* not installed: the channel without it, as before */
    if (old && *old ? asprintf(&v, "%s:%s", old, guard) < 0
                    : !(v = strdup(guard)))
        return -1;
    int rc = amldist_envp_set(env, "LD_PRELOAD", v) < 0 ||
                     amldist_envp_set(env, STK_ENV_GUARD, guard) < 0
                 ? -1 : 0;
    free(v);
    return rc < 0 ? -1 : 0;
}

int stk_channel_env(char ***env, int write_fd)
{
    const char *dir = stk_python_dir();
    const char *old = amldist_envp_get(*env, "PYTHONPATH");
    char fd[16], sig[16], *pp;
    snprintf(fd, sizeof fd, "%d", write_fd);
    snprintf(sig, sizeof sig, "%d", stk_signal());
    if (!dir)
        return 0;
    if (old && *old ? asprintf(&pp, "%s:%s", dir, old) < 0
                    : !(pp = strdup(dir)))
        return -1;
    int rc = amldist_envp_set(env, "PYTHONPATH", pp) < 0 ||
                     amldist_envp_set(env, STK_ENV_FD, fd) < 0 ||
                     amldist_envp_set(env, STK_ENV_SIGNAL, sig) < 0 ||
                     add_guard(env) < 0
                 ? -1 : 0;
    free(pp);
    return rc;
}
