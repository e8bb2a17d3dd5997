/*
 * Where the topology cache (cache.c) keeps its entries: the directory
 * AMLDIST_TOPOLOGY_CACHE names, else amldist in the user's runtime
 * directory, else /tmp/amldist-UID; and the checks that keep it the
 * user's alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topo/topo_internal.h"

/* A directory we may keep the cache in: ours, writable by nobody else. */
static const char *check_dir_fd(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
        return "not a directory";
    if (st.st_uid != geteuid())
        return "not owned by this user";
    if (st.st_mode & 022)
        return "writable by group or others";
    return NULL;
}

/* Open `path` (creating it 0700 when `create`), never through a symbolic
 * link as its last component. */
static int open_dir(const char *path, int create, const char **why)
{
    if (create && mkdir(path, 0700) == 0) {
        /* the umask may have taken bits we need */
        if (chmod(path, 0700) < 0) {
            *why = "cannot set its mode";
            return -1;
        }
    } else if (create && errno != EEXIST) {
        *why = "cannot create it";
        return -1;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        struct stat st;
        *why = lstat(path, &st) == 0 && S_ISLNK(st.st_mode)
                   ? "a symbolic link"
                   : "cannot open it";
        return -1;
    }
    if ((*why = check_dir_fd(fd)) != NULL) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A base directory of the user's own (XDG_RUNTIME_DIR, /run/user/UID):
 * ours and 0700, as the XDG base directory specification has it. */
static int private_base(const char *path)
{
    struct stat st;
    return path != NULL && path[0] == '/' && stat(path, &st) == 0 &&
           S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
           (st.st_mode & 077) == 0;
}

int amldist__cache_dir(char *path, size_t size, const char **why)
{
    const char *v = getenv("AMLDIST_TOPOLOGY_CACHE");
    *why = NULL;
    if (size > 0)
        path[0] = '\0';
    if (v != NULL && strcmp(v, "0") == 0) {
        *why = "AMLDIST_TOPOLOGY_CACHE=0";
        return -1;
    }
    if (v != NULL && v[0] == '/') {
        if (strlen(v) >= size) {
            *why = "AMLDIST_TOPOLOGY_CACHE: path too long";
            return -1;
        }
        amldist__strlcpy(path, v, size);
        size_t len = strlen(path);
        while (len > 1 && path[len - 1] == '/')
            path[--len] = '\0';
        return open_dir(path, 1, why);
    }
    if (v != NULL && v[0] != '\0' && strcmp(v, "1") != 0) {
        *why = "AMLDIST_TOPOLOGY_CACHE is not 0, 1 or an absolute directory";
        return -1;
    }
    const char *base = getenv("XDG_RUNTIME_DIR");
    char run[64];
    snprintf(run, sizeof run, "/run/user/%u", (unsigned)geteuid());
    if (!private_base(base))
        base = private_base(run) ? run : NULL;
    if (base != NULL &&
        (size_t)snprintf(path, size, "%s/amldist", base) < size) {
        int fd = open_dir(path, 1, why);
        if (fd >= 0)
            return fd;
    }
    snprintf(path, size, "/tmp/amldist-%u", (unsigned)geteuid());
    return open_dir(path, 1, why);
}
