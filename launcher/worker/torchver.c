/* The workers' torch version (see torchver.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker/torchver.h"

/* The probe: find_spec() locates the package without running its
 * __init__ (importing torch takes seconds and may touch the GPUs); any
 * error means "unknown".  version.py holds `__version__ = '2.8.0+cu128'`
 * (some releases annotate it: `__version__: str = ...`).  It prints
 * "MAJOR MINOR", "torch" (found, version unread) or "none". */
static const char probe[] =
    "import importlib.util as u, os, re\n"
    "v = 'none'\n"
    "try:\n"
    "    s = u.find_spec('torch')\n"
    "    if s is not None:\n"
    "        v = 'torch'\n"
    "        f = os.path.join(os.path.dirname(s.origin), 'version.py')\n"
    "        m = re.search(r'^__version__\\s*(?::[^=]*)?=\\s*[\\'\"](\\d+)\\.(\\d+)',\n"
    "                      open(f).read(), re.M)\n"
    "        v = m.group(1) + ' ' + m.group(2)\n"
    "except Exception:\n"
    "    pass\n"
    "print(v)\n";

/* Python starts in tens of milliseconds; a Python that hangs (a broken
 * site hook, a stalled network file system) must not hold the job. */
#define PROBE_TIMEOUT_MS 10000

static int runs_under_python(const struct command *c)
{
    if (c->runs_python)
        return 1;
    const char *base = strrchr(c->path, '/');
    return strncmp(base ? base + 1 : c->path, "python", 6) == 0;
}

/* The probe's one line of output into buf ("" on any failure). */
static void run_probe(const char *python, char *const *env, char *buf,
                      size_t size)
{
    buf[0] = '\0';
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {(char *)python, (char *)"-c", (char *)probe, NULL};
    pid_t pid;
    int err = posix_spawn(&pid, python, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (err) {
        close(p[0]);
        return;
    }
    size_t len = 0;
    for (;;) {
        struct pollfd pf = {p[0], POLLIN, 0};
        int n = poll(&pf, 1, PROBE_TIMEOUT_MS);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            len = 0;
            kill(pid, SIGKILL);
            break;
        }
        ssize_t r = read(p[0], buf + len, size - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len == size - 1)
            break;
    }
    buf[len] = '\0';
    close(p[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        buf[0] = '\0';
}

int torch_probe(const char *python, char *const *env)
{
    char out[64];
    run_probe(python, env, out, sizeof out);
    int major, minor;
    if (strcmp(out, "none\n") == 0)
        return TORCH_NONE;
    if (sscanf(out, "%d %d", &major, &minor) != 2 || major < 0 ||
        major > 1000 || minor < 0 || minor > 999)
        return strcmp(out, "torch\n") == 0 ? 0 : TORCH_NO_ANSWER;
    return major * 1000 + minor;
}

int torch_version(const struct command *c, char *const *env)
{
    if (!c->path || !runs_under_python(c))
        return 0;
    /* The Python was chosen for its torch (pychoose.c): asked once. */
    int v = c->torch_probed ? c->torch : torch_probe(c->path, env);
    return v > 0 ? v : 0;
}
