/* The workers' log files (--log-dir, torchrun's layout): made safely,
 * and remembered so that a write error names the rank and the file (see
 * output.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output/msg.h"
#include "output/output.h"

/* The log files this run opened, so that a write error names the rank and
 * the file. */
struct log_file {
    int fd;
    int rank;
    char *path;
};
static struct log_file *logs;
static size_t nlogs;

static void log_remember(int fd, int rank, const char *dir, size_t dirlen,
                         const char *name)
{
    struct log_file *grown = realloc(logs, (nlogs + 1) * sizeof *logs);
    if (!grown)
        return; /* the error message will have less to say */
    logs = grown;
    if (dirlen == 1 && dir[0] == '/')
        dirlen = 0; /* "/rank0.stdout", not "//rank0.stdout" */
    char *path = malloc(dirlen + strlen(name) + 2);
    if (path)
        sprintf(path, "%.*s/%s", (int)dirlen, dir, name);
    logs[nlogs++] = (struct log_file){fd, rank, path};
}

void out_log_failed(int fd, int err)
{
    for (size_t i = nlogs; i-- > 0;) {
        if (logs[i].fd == fd && logs[i].path) {
            msg("rank %d: log file %s: %s (the rest of it is not logged; "
                "the console goes on)", logs[i].rank, logs[i].path,
                strerror(err));
            return;
        }
    }
    msg_errno(err, "writing a log file (the rest of it is not logged)");
}

/* The length of DIR without trailing slashes ("/" stays "/"). */
static size_t dir_len(const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    return n;
}

int out_log_dir(const char *dir)
{
    /* Without its trailing slashes, so that O_NOFOLLOW sees the last
     * component ("link/" would resolve the link).  A directory higher up
     * may be a link: that is the user's own path. */
    size_t len = dir_len(dir);
    char *path = strndup(dir, len);
    if (!path) {
        msg_errno(errno, "--log-dir %s", dir);
        return -1;
    }
    int fd = -1;
    struct stat st;
    if (mkdir(path, 0777) < 0 && errno != EEXIST) {
        msg_errno(errno, "--log-dir %s: cannot create it", dir);
    } else if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                    O_CLOEXEC)) < 0) {
        /* A link (even a dangling one: mkdir said EEXIST) is refused
         * rather than followed into someone else's directory. */
        if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
            msg("--log-dir %s: a symbolic link: not following it (give the "
                "directory it points to)", dir);
        else
            msg_errno(errno, "--log-dir %s", dir);
    }
    free(path);
    return fd;
}

static int log_open(int dirfd, const char *dir, int rank, const char *stream)
{
    char name[64];
    snprintf(name, sizeof name, "rank%d.%s", rank, stream);
    const int flags = O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
    int fd = openat(dirfd, name, flags | O_CREAT | O_EXCL, 0666);
    if (fd >= 0)
        return fd;
    if (errno != EEXIST) {
        msg_errno(errno, "--log-dir %s: cannot create %s", dir, name);
        return -1;
    }
    /* An old log: reuse it only if it is a plain file of ours with no
     * other name.  O_NOFOLLOW refuses a planted link, O_NONBLOCK keeps a
     * planted FIFO from hanging us; fstat decides on the opened file. */
    fd = openat(dirfd, name, flags | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ELOOP)
            msg("--log-dir %s: %s is a symbolic link: not following it", dir,
                name);
        else
            msg_errno(errno, "--log-dir %s: cannot open %s", dir, name);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
        st.st_uid != geteuid()) {
        msg("--log-dir %s: will not write %s: not a regular file of ours "
            "with a single link", dir, name);
        close(fd);
        return -1;
    }
    if (ftruncate(fd, 0) < 0 ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
        msg_errno(errno, "--log-dir %s: %s", dir, name);
        close(fd);
        return -1;
    }
    return fd;
}

void out_log_named(int fd, int rank, const char *dir, const char *name)
{
    log_remember(fd, rank, dir, dir_len(dir), name);
}

int out_log_file(int dirfd, const char *dir, int rank, const char *stream)
{
    int fd = log_open(dirfd, dir, rank, stream);
    if (fd >= 0) {
        char name[64];
        snprintf(name, sizeof name, "rank%d.%s", rank, stream);
        log_remember(fd, rank, dir, dir_len(dir), name);
    }
    return fd;
}
