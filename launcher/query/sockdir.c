/* The directory of amlrun's query sockets (see sockdir.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "query/sockdir.h"

/* XDG_RUNTIME_DIR only when it is a directory of this user's (the base
 * directory specification's rule: owned by the user, mode 0700). */
static int xdg_usable(const char *xdg, uid_t uid)
{
    struct stat st;
    return xdg && xdg[0] == '/' && lstat(xdg, &st) == 0 &&
           S_ISDIR(st.st_mode) && st.st_uid == uid;
}

int qdir_path(uid_t uid, const char *xdg, char *buf, size_t size)
{
    int n = xdg_usable(xdg, uid)
                ? snprintf(buf, size, "%s/amlrun", xdg)
                : snprintf(buf, size, "/tmp/amlrun-%lu", (unsigned long)uid);
    /* Room for "/" and a name of at least a pid. */
    return n < 0 || (size_t)n + 24 > size || n + 24 > QDIR_PATH_MAX ? -1 : 0;
}

int qdir_check(const char *dir, int create, uid_t owner, char *why,
               size_t whysize)
{
    if (create && mkdir(dir, 0700) < 0 && errno != EEXIST) {
        snprintf(why, whysize, "%s: %s", dir, strerror(errno));
        return -1;
    }
    /* O_NOFOLLOW: a symbolic link is refused, not followed. */
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        struct stat st;
        if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
            snprintf(why, whysize, "%s is a symbolic link", dir);
        else
            snprintf(why, whysize, "%s: %s", dir, strerror(e));
        errno = e;
        return -1;
    }
    struct stat st;
    int rc = fstat(fd, &st);
    close(fd);
    if (rc < 0) {
        snprintf(why, whysize, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (st.st_uid != owner) {
        snprintf(why, whysize, "%s belongs to uid %lu, not to uid %lu", dir,
                 (unsigned long)st.st_uid, (unsigned long)owner);
        errno = EPERM;
        return -1;
    }
    if (st.st_mode & 077) {
        snprintf(why, whysize, "%s has mode %04o: only its user may open it "
                 "(0700)", dir, (unsigned)(st.st_mode & 07777));
        errno = EPERM;
        return -1;
    }
    return 0;
}

static int safe_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int qsock_path(const char *dir, const char *run_id, pid_t pid, char *buf,
               size_t size)
{
    char tail[32];
    int nt = snprintf(tail, sizeof tail, ".%ld.sock", (long)pid);
    size_t max = size - 1 < QDIR_PATH_MAX ? size - 1 : QDIR_PATH_MAX;
    int nd = snprintf(buf, size, "%s/", dir);
    if (nd < 0 || (size_t)nd + (size_t)nt + 1 > max)
        return -1;
    size_t len = (size_t)nd, room = max - (size_t)nt;
    /* The run id, escaped, as much as fits; "-" when none fits at all. */
    for (const char *p = run_id; *p; p++) {
        char e[4];
        int ne = safe_char(*p) ? snprintf(e, sizeof e, "%c", *p)
                               : snprintf(e, sizeof e, "%%%02X",
                                          (unsigned char)*p);
        if (len + (size_t)ne > room)
            break;
        memcpy(buf + len, e, (size_t)ne);
        len += (size_t)ne;
    }
    if (len == (size_t)nd)
        buf[len++] = '-';
    memcpy(buf + len, tail, (size_t)nt + 1);
    return 0;
}

pid_t qsock_pid(const char *name)
{
    size_t n = strlen(name);
    if (n < 8 || strcmp(name + n - 5, ".sock") != 0)
        return 0;
    const char *end = name + n - 5, *p = end;
    while (p > name && p[-1] >= '0' && p[-1] <= '9')
        p--;
    if (p == end || p - 1 <= name || p[-1] != '.' || end - p > 9)
        return 0;
    long pid = strtol(p, NULL, 10);
    return pid > 0 ? (pid_t)pid : 0;
}
