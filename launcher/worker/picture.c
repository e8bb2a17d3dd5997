/*
 * --output: the library writes the plan as an annotated hwloc XML into a
 * temporary file, and lstopo (Debian package hwloc) draws it.  Nothing is
 * drawn here.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "output/msg.h"
#include "output/tmpdir.h"
#include "worker/picture.h"

extern char **environ;

static const char *format_of(const char *path)
{
    static const char *const formats[] = {"svg", "png", "pdf"};
    const char *dot = strrchr(path, '.');
    if (dot != NULL && strchr(dot, '/') == NULL)
        for (size_t k = 0; k < sizeof formats / sizeof formats[0]; k++)
            if (strcasecmp(dot + 1, formats[k]) == 0)
                return formats[k];
    return NULL;
}

/* lstopo's path from PATH, looked up before the fork: the child only
 * calls execve. */
static int find_lstopo(char *out, size_t size)
{
    const char *path = getenv("PATH");
    if (path == NULL || *path == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path != '\0') {
        size_t len = strcspn(path, ":");
        int n = snprintf(out, size, "%.*s/lstopo", (int)len,
                         len ? path : ".");
        if (n > 0 && (size_t)n < size && access(out, X_OK) == 0)
            return 0;
        path += len + (path[len] == ':');
    }
    return -1;
}

/* Run lstopo; its errno from execve comes back over a close-on-exec pipe. */
static int run_lstopo(char *const argv[], const char *path)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        msg_errno(errno, "--output %s: pipe", path);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        msg_errno(errno, "--output %s: fork", path);
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        execve(argv[0], argv, environ);
        int e = errno;
        ssize_t w = write(p[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(p[1]);
    int err = 0, status;
    ssize_t n;
    while ((n = read(p[0], &err, sizeof err)) < 0 && errno == EINTR)
        ;
    close(p[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (n == (ssize_t)sizeof err) {
        msg_errno(err, "--output %s: %s", path, argv[0]);
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        msg("--output %s: %s failed (%s %d)", path, argv[0],
            WIFEXITED(status) ? "exit status" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return -1;
    }
    return 0;
}

int picture_draw(const amldist_plan_t *p, const amldist_topo_t *t,
                 const char *path)
{
    const char *fmt = format_of(path);
    if (fmt == NULL) {
        msg("--output %s: unknown format: give a file name ending in .svg, "
            ".png or .pdf", path);
        return -1;
    }
    char lstopo[PATH_MAX];
    if (find_lstopo(lstopo, sizeof lstopo) < 0) {
        msg("--output %s: lstopo not found in PATH: install the package "
            "hwloc (Debian, Ubuntu: apt-get install hwloc)", path);
        return -1;
    }
    /* A path we cannot write is said in our words, not lstopo's. */
    int existed = access(path, F_OK) == 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        msg_errno(errno, "--output %s", path);
        return -1;
    }
    close(fd);
    char tmp[PATH_MAX], what[PATH_MAX + 32];
    snprintf(what, sizeof what, "--output %s: a temporary file", path);
    int rc = -1;
    if (tmpdir_make(tmp, sizeof tmp, "amlrun-picture-XXXXXX", 0, &fd, 0,
                    what) < 0) {
        tmp[0] = '\0';
        goto out;
    }
    close(fd);
    if (amldist_plan_export_xml(p, t, tmp) < 0) {
        msg("--output %s: %s", path, amldist_last_error());
    } else {
        /* lstopo's own SVG writer keeps the text as text (cairo's draws
         * glyphs), so that a reader or a test can find "rank N". */
        if (strcmp(fmt, "svg") == 0)
            fmt = "nativesvg";
        /* Every core drawn, none folded into "N x total". */
        char *argv[] = {lstopo, "-f",         "--no-factorize", "--if",
                        "xml",  "-i",         tmp,              "--of",
                        (char *)fmt, (char *)path, NULL};
        rc = run_lstopo(argv, path);
    }
    unlink(tmp);
out:
    if (rc < 0 && !existed)
        unlink(path);
    return rc;
}
