/*
 * amlrun --version -v: what was built in and what is found at run time, in
 * the manner of ompi_info.  The library says what it loads (hwloc, NCCL,
 * the CUDA runtime, libpmix: amldist_build_info()); amlrun adds what it
 * starts itself: srun, and the Python that runs .py commands, asked
 * whether it can import the amldist module.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "amldist.h"
#include "cli/usage.h"

extern char **environ;

/* "name: value" lines, the names right-aligned as ompi_info aligns them. */
static void aligned(FILE *f, const char *text)
{
    while (*text) {
        size_t n = strcspn(text, "\n");
        const char *colon = memchr(text, ':', n);
        if (colon)
            fprintf(f, "%16.*s:%.*s\n", (int)(colon - text), text,
                    (int)(n - (size_t)(colon + 1 - text)), colon + 1);
        else
            fprintf(f, "%.*s\n", (int)n, text);
        text += n + (text[n] == '\n');
    }
}

/* `name` as execvp would find it in PATH, into out; 0, or -1. */
static int in_path(const char *name, char *out, size_t size)
{
    if (strchr(name, '/'))
        return snprintf(out, size, "%s", name) < (int)size &&
                       access(out, X_OK) == 0 ? 0 : -1;
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; p && *p;) {
        size_t n = strcspn(p, ":");
        if (n > 0 && snprintf(out, size, "%.*s/%s", (int)n, p, name) <
                         (int)size && access(out, X_OK) == 0)
            return 0;
        p += n + (p[n] == ':');
    }
    return -1;
}

/* What argv prints (stdout and stderr, up to size - 1 bytes), and its exit
 * status; -1 when it cannot be started. */
static int run_capture(char *const argv[], char *out, size_t size)
{
    int fds[2];
    out[0] = '\0';
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return -1;
    }
    size_t used = 0;
    ssize_t n;
    char sink[256];
    /* Read to the end, so that the child never blocks on a full pipe. */
    while ((n = read(fds[0], used + 1 < size ? out + used : sink,
                     used + 1 < size ? size - 1 - used : sizeof sink)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        if (used + 1 < size)
            used += (size_t)n;
    }
    close(fds[0]);
    out[used] = '\0';
    while (used > 0 && out[used - 1] == '\n')
        out[--used] = '\0';
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Its first line, or (a failure's reason) its last. */
static const char *first_line(char *text)
{
    text[strcspn(text, "\n")] = '\0';
    return text;
}
static const char *last_line(const char *text)
{
    const char *nl = strrchr(text, '\n');
    return nl ? nl + 1 : text;
}

static void slurm_line(FILE *f)
{
    char srun[PATH_MAX], line[2048];
    if (in_path("srun", srun, sizeof srun) < 0) {
        aligned(f, "Slurm: no (srun not in PATH)");
        return;
    }
    char *argv[] = {srun, "--version", NULL};
    /* srun needs its configuration even for --version. */
    if (run_capture(argv, line, sizeof line) == 0)
        fprintf(f, "%16s: yes, %s (%s)\n", "Slurm", first_line(line), srun);
    else
        fprintf(f, "%16s: yes, version unknown (%s --version: %s)\n",
                "Slurm", srun, last_line(line));
}

/* Imports amldist and prints where from; the module's version if it has
 * one.  Cheap: no torch, no init. */
static const char python_probe[] =
    "import amldist; "
    "print(getattr(amldist, '__version__', '?'), amldist.__file__)";

static void python_line(FILE *f, const char *python)
{
    char exe[PATH_MAX], line[4096];
    if (in_path(python, exe, sizeof exe) < 0) {
        fprintf(f, "%16s: no (%s not found)\n", "Python module", python);
        return;
    }
    char *argv[] = {exe, "-c", (char *)python_probe, NULL};
    int rc = run_capture(argv, line, sizeof line);
    if (rc == 0)
        fprintf(f, "%16s: yes, amldist %s with %s\n", "Python module",
                first_line(line), exe);
    else
        fprintf(f, "%16s: no (%s: %s)\n", "Python module", exe,
                *line ? last_line(line) : "cannot import amldist");
}

void version_details(FILE *f, const char *python)
{
    char buf[4096];
    int n = amldist_build_info(buf, sizeof buf);
    if (n < 0)
        fprintf(f, "%16s: %s\n", "libamldist", amldist_last_error());
    else
        aligned(f, buf);
    fflush(f);
    slurm_line(f);
    python_line(f, python);
}
