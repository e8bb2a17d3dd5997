/* The directory of amlrun's query sockets (see sockdir.h). */
#include <dirent.h>
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
           S_ISDIR(st.st_mode) && st.st_uid == uid && !(st.st_mode & 077);
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
    int fd = qdir_open(dir, create, owner, why, whysize);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

int qdir_open(const char *dir, int create, uid_t owner, char *why,
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
    if (fstat(fd, &st) < 0) {
        snprintf(why, whysize, "%s: %s", dir, strerror(errno));
        close(fd);
        return -1;
    }
    int e = 0;
    if (st.st_uid != owner) {
        snprintf(why, whysize, "%s belongs to uid %lu, not to uid %lu", dir,
                 (unsigned long)st.st_uid, (unsigned long)owner);
        e = EPERM;
    } else if (st.st_mode & 077) {
        snprintf(why, whysize, "%s has mode %04o: only its user may open it "
                 "(0700)", dir, (unsigned)(st.st_mode & 07777));
        e = EPERM;
    }
    if (e) {
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

void qdir_candidates(uid_t uid, const char *xdg, struct qdirs *out)
{
    out->n = 0;
    if (xdg_usable(xdg, uid) &&
        qdir_path(uid, xdg, out->dir[out->n], sizeof out->dir[0]) == 0)
        out->n++;
    snprintf(out->dir[out->n++], sizeof out->dir[0], "/tmp/amlrun-%lu",
             (unsigned long)uid);
    /* The fallbacks of 3: by a pattern, each a directory of the user's
     * (the checks proper come when it is opened). */
    char prefix[40];
    int np = snprintf(prefix, sizeof prefix, "amlrun-%lu.", (unsigned long)uid);
    DIR *d = opendir("/tmp");
    struct dirent *e;
    int first = out->nfixed = out->n;
    while (d && (e = readdir(d)) != NULL && out->n < QDIRS_MAX) {
        struct stat st;
        if (strncmp(e->d_name, prefix, (size_t)np) != 0 ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISDIR(st.st_mode) || st.st_uid != uid ||
            strlen(e->d_name) + 6 > sizeof out->dir[0] - 24)
            continue;
        /* (its length was checked above) */
        if (snprintf(out->dir[out->n], sizeof out->dir[0], "/tmp/%s",
                     e->d_name) > 0)
            out->n++;
    }
    if (d)
        closedir(d);
    qsort(out->dir[first], (size_t)(out->n - first), sizeof out->dir[0],
          by_name);
}

int qdir_choose(uid_t uid, const char *xdg, char *dir, size_t size,
                char *note, size_t notesize, char *why, size_t whysize)
{
    struct qdirs c;
    qdir_candidates(uid, xdg, &c);
    size_t nn = 0;
    note[0] = '\0';
    for (int i = 0; i < c.n; i++) {
        char w[QDIR_PATH_MAX + 128];
        /* Only 1 and 2 are made; a fallback is one of ours or none. */
        int fd = qdir_open(c.dir[i], i < c.nfixed, uid, w, sizeof w);
        if (fd >= 0) {
            close(fd);
            snprintf(dir, size, "%s", c.dir[i]);
            return 0;
        }
        if (nn < notesize)
            nn += (size_t)snprintf(note + nn, notesize - nn, "%s%s",
                                   nn ? "; " : "", w);
        snprintf(why, whysize, "%s", w);
    }
    char tmpl[48];
    snprintf(tmpl, sizeof tmpl, "/tmp/amlrun-%lu.XXXXXX", (unsigned long)uid);
    if (!mkdtemp(tmpl)) {
        snprintf(why, whysize, "%s: %s", tmpl, strerror(errno));
        return -1;
    }
    snprintf(dir, size, "%s", tmpl);
    return 0;
}

int qdir_is_fallback(uid_t uid, const char *dir)
{
    char prefix[40];
    int n = snprintf(prefix, sizeof prefix, "/tmp/amlrun-%lu.",
                     (unsigned long)uid);
    return n > 0 && strncmp(dir, prefix, (size_t)n) == 0 &&
           dir[n] != '\0' && strchr(dir + n, '/') == NULL;
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
