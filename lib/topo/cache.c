/*
 * The per-node topology cache.  Live hwloc discovery costs most of a
 * launch (in a VM each PCI device's config space is a trap to the
 * hypervisor, a millisecond apiece), and every process of a node used to
 * pay it again: each rank's amlrun under mpirun or srun, each c10d agent,
 * each program calling amldist_topo_load().  Here the first process of a
 * node discovers and stores hwloc's own XML export of what it found; the
 * others import that, which is what `--topology FILE` of the same machine
 * costs.
 *
 * A copy is used only where it is exactly what discovery would give now.
 * Its name carries the host, the boot id and hwloc's API version, and its
 * header the fingerprint of everything the discovered topology depends on
 * that can change while the machine is up (amldist__cache_fingerprint()):
 * the CPUs and NUMA nodes online, the cgroup's cpuset (what hwloc keeps of
 * the machine), the PCI devices (a GPU or NIC hidden, added, passed
 * through), the network and RDMA devices and port states, hwloc's own
 * variables, and the identity of the hwloc and libamldist libraries.  It
 * is compared whole.  The process's own affinity
 * (taskset, mpirun's binding) is not in it: the topology does not depend
 * on it, and the plan reads it live.  A copy whose fingerprint differs,
 * from another boot or machine, truncated, corrupt (length and hash of the
 * XML), not a regular file of ours, or reached through a symbolic link is
 * never imported; the process discovers and stores a fresh one.  After an
 * import the process's affinity must lie within the topology's CPUs, as it
 * always does within a discovered one.
 *
 * The directory is private to the user (created 0700, used only when owned
 * by the user and writable by nobody else, never through a symbolic link);
 * copies are written to a temporary name and renamed, so that a reader
 * sees a whole file or none.  Processes that miss together (the ranks of a
 * node starting at once) take a lock in turn: the first discovers, the
 * others read what it stored.
 *
 * The fingerprint is built in fingerprint.c, an entry's name, bytes and
 * check are in cache_entry.c, the directory is chosen and checked in
 * cache_dir.c; here are the lock, the reading, import, store and prune.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "topo/cache_internal.h"
#include "topo/dl.h"
#include "topo/topo_internal.h"
#include "util/clock.h"

#define CACHE_MAX_FILE (64u << 20) /* hwloc's export of a huge machine */
#define CACHE_MAX_ENTRIES 16       /* of one boot, in one directory */
#define CACHE_LOCK_WAIT_MS 5000    /* then discover without waiting */
#define CACHE_TMP_STALE_S 600      /* a writer's leftover after a crash */

/* ---- the test log ------------------------------------------------------ */

static void trace(const char *fmt, ...) AMLDIST__PRINTF(1, 2);
static void trace(const char *fmt, ...)
{
    const char *path = getenv("AMLDIST_TEST_TOPOLOGY_CACHE_LOG");
    if (path == NULL || path[0] == '\0')
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    ssize_t w = write(fd, line, (size_t)n);
    (void)w;
    close(fd);
}

/* ---- entries on disk --------------------------------------------------- */

/* The entry, read whole into a malloc'd buffer with a NUL after it: a
 * regular file of ours with one link, writable by nobody else. */
static char *read_entry(int dirfd, const char *name, size_t *n,
                        const char **why)
{
    int fd = openat(dirfd, name,
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        *why = errno == ENOENT  ? "none yet"
               : errno == ELOOP ? "a symbolic link"
                                : "cannot open it";
        return NULL;
    }
    struct stat st;
    char *data = NULL;
    *why = NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        *why = "not a regular file";
    else if (st.st_uid != geteuid())
        *why = "not owned by this user";
    else if (st.st_mode & 022)
        *why = "writable by group or others";
    else if (st.st_nlink != 1)
        *why = "has other links";
    else if (st.st_size <= 0 || (unsigned long long)st.st_size > CACHE_MAX_FILE)
        *why = "empty or too large";
    else if ((data = malloc((size_t)st.st_size + 1)) == NULL)
        *why = "out of memory";
    size_t len = 0;
    while (*why == NULL && len < (size_t)st.st_size) {
        ssize_t r = read(fd, data + len, (size_t)st.st_size - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            *why = "short read";
        else
            len += (size_t)r;
    }
    close(fd);
    if (*why != NULL) {
        free(data);
        return NULL;
    }
    data[len] = '\0';
    *n = len;
    return data;
}

/* This process's affinity lies within the topology's CPUs: it always does
 * in a discovered topology (the kernel keeps it inside the cpuset), so a
 * copy where it does not is not this machine's now. */
static int affinity_inside(hwloc_topology_t h)
{
    size_t ncpus = 8192, size = CPU_ALLOC_SIZE(ncpus);
    cpu_set_t *mask = CPU_ALLOC(ncpus);
    if (mask == NULL)
        return 0;
    CPU_ZERO_S(size, mask);
    int ok = sched_getaffinity(0, size, mask) == 0;
    hwloc_const_bitmap_t allowed = hwloc_topology_get_allowed_cpuset(h);
    for (size_t c = 0; ok && c < ncpus; c++)
        if (CPU_ISSET_S(c, size, mask) &&
            !hwloc_bitmap_isset(allowed, (unsigned)c))
            ok = 0;
    CPU_FREE(mask);
    return ok;
}

/* Import a valid entry: 0 with *h loaded, else -1 with *why. */
static int import(char *data, size_t n, const char *fp, hwloc_topology_t *h,
                  const char **why)
{
    size_t off, len;
    if ((*why = amldist__cache_check(data, n, fp, &off, &len)) != NULL)
        return -1;
    if (len + 1 > (size_t)INT32_MAX) {
        *why = "too large";
        return -1;
    }
    data[off + len] = '\0'; /* hwloc wants the NUL, counted */
    if (amldist__hwloc_new(h) < 0) {
        *why = "hwloc_topology_init failed";
        return -1;
    }
    /* The copy is this system: binding calls through hwloc work as on a
     * discovered topology. */
    hwloc_topology_set_flags(*h, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM);
    if (hwloc_topology_set_xmlbuffer(*h, data + off, (int)len + 1) < 0 ||
        hwloc_topology_load(*h) < 0)
        *why = "hwloc cannot import it";
    else if (!affinity_inside(*h))
        *why = "this process may run on CPUs it does not have";
    if (*why != NULL) {
        hwloc_topology_destroy(*h);
        *h = NULL;
        return -1;
    }
    return 0;
}

/* Wait for the directory's lock (the first of a node's processes to miss
 * discovers, the others then read its copy); -1 when it cannot be had in
 * time (a stopped holder): discover without it. */
static int take_lock(int dirfd)
{
    int fd = openat(dirfd, "lock",
                    O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                    0600);
    struct stat st;
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid()) {
        close(fd);
        return -1;
    }
    /* Polled, so that a holder that never lets go costs a bounded wait:
     * every 0.25 ms at first (discovery takes milliseconds), then less
     * often. */
    struct timespec pause = {0, 250000};
    long long start = amldist__now_ms();
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        if (errno != EWOULDBLOCK && errno != EINTR)
            break;
        if (amldist__now_ms() - start > CACHE_LOCK_WAIT_MS)
            break;
        nanosleep(&pause, NULL);
        if (pause.tv_nsec < 4000000)
            pause.tv_nsec *= 2;
    }
    close(fd);
    return -1;
}

struct aged {
    struct timespec mtime;
    const char *name;
};

static int cmp_aged(const void *a, const void *b)
{
    const struct aged *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    return (x->mtime.tv_nsec > y->mtime.tv_nsec) -
           (x->mtime.tv_nsec < y->mtime.tv_nsec);
}

/* Keep the directory small: this host's copies of its other boots go,
 * writers' leftovers go, and of this boot's copies (one per cpuset or
 * device set seen) the CACHE_MAX_ENTRIES most recently written stay.
 * Other hosts' copies (a shared directory) are theirs to keep. */
static void prune(int dirfd, const char *fp)
{
    char prefix[160], host[160];
    amldist__cache_prefix(fp, prefix, sizeof prefix);
    /* "topo-HOST-" */
    amldist__strlcpy(host, prefix, sizeof host);
    char *dash = strchr(host + 5, '-');
    if (dash == NULL)
        return;
    dash[1] = '\0';
    char **names;
    int n = amldist__list_dirfd(dirfd, &names);
    if (n <= 0) {
        free(names);
        return;
    }
    struct aged *mine = calloc((size_t)n, sizeof *mine);
    int k = 0;
    time_t now = time(NULL);
    for (int i = 0; i < n; i++) {
        const char *e = names[i];
        struct stat st;
        if (fstatat(dirfd, e, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (strncmp(e, ".tmp-", 5) == 0) {
            if (now - st.st_mtim.tv_sec > CACHE_TMP_STALE_S)
                unlinkat(dirfd, e, 0);
            continue;
        }
        size_t len = strlen(e);
        if (strncmp(e, host, strlen(host)) != 0 || len < 4 ||
            strcmp(e + len - 4, ".xml") != 0)
            continue;
        if (strncmp(e, prefix, strlen(prefix)) != 0) {
            unlinkat(dirfd, e, 0); /* this host, another boot */
            continue;
        }
        if (mine != NULL)
            mine[k++] = (struct aged){st.st_mtim, e};
    }
    if (k > CACHE_MAX_ENTRIES) {
        qsort(mine, (size_t)k, sizeof *mine, cmp_aged);
        for (int i = 0; i < k - CACHE_MAX_ENTRIES; i++)
            unlinkat(dirfd, mine[i].name, 0);
    }
    free(mine);
    amldist__free_names(names, n);
}

static int write_all_fd(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Store the discovered topology under `name`: a temporary file, renamed
 * over the old copy. */
static void store(int dirfd, const char *name, const char *fp,
                  hwloc_topology_t h)
{
    char *xml = NULL;
    int xmllen = 0;
    if (hwloc_topology_export_xmlbuffer(h, &xml, &xmllen, 0) < 0 ||
        xmllen <= 0) {
        trace("nostore %s: hwloc cannot export it", name);
        return;
    }
    size_t len = (size_t)xmllen;
    if (xml[len - 1] == '\0')
        len--; /* the NUL hwloc counts; readers add their own */
    size_t n = 0;
    char *entry = amldist__cache_entry(fp, xml, len, &n);
    hwloc_free_xmlbuffer(h, xml);
    if (entry == NULL)
        return;
    char tmp[320];
    snprintf(tmp, sizeof tmp, ".tmp-%ld-%s", (long)getpid(), name);
    int fd = openat(dirfd, tmp,
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    0600);
    int ok = fd >= 0 && fchmod(fd, 0600) == 0 &&
             write_all_fd(fd, entry, n) == 0;
    if (fd >= 0 && close(fd) < 0)
        ok = 0;
    free(entry);
    if (ok && renameat(dirfd, tmp, dirfd, name) == 0) {
        trace("store %s", name);
    } else {
        if (fd >= 0)
            unlinkat(dirfd, tmp, 0);
        trace("nostore %s: %s", name, strerror(errno));
        return;
    }
    prune(dirfd, fp);
}

/* Read and import the entry: 0 on a hit. */
static int try_entry(int dirfd, const char *name, const char *fp,
                     hwloc_topology_t *h, const char **why)
{
    size_t n;
    char *data = read_entry(dirfd, name, &n, why);
    if (data == NULL)
        return -1;
    int rc = import(data, n, fp, h, why);
    free(data);
    return rc;
}

int amldist__topo_live(hwloc_topology_t *h)
{
    *h = NULL;
    /* The fingerprint and the entries' names ask hwloc its version before
     * any handle is made: it is loaded here (topo/dl.h). */
    if (amldist__dl_hwloc() < 0)
        return -1;
    char dir[4096];
    const char *why = NULL;
    /* These make hwloc choose its components itself, the XML import
     * included: discovery is then not what the copy would stand for. */
    if (getenv("HWLOC_COMPONENTS") ||
        getenv("HWLOC_ANNOTATE_GLOBAL_COMPONENTS")) {
        trace("off: HWLOC_COMPONENTS");
        return amldist__hwloc_discover(h);
    }
    int dirfd = amldist__cache_dir(dir, sizeof dir, &why);
    if (dirfd < 0) {
        trace("off: %s (%s)", why, dir[0] != '\0' ? dir : "no directory");
        return amldist__hwloc_discover(h);
    }
    char *fp = amldist__cache_fingerprint();
    if (fp == NULL) {
        close(dirfd);
        return amldist__hwloc_discover(h);
    }
    char name[256];
    amldist__cache_name(fp, name, sizeof name);
    if (try_entry(dirfd, name, fp, h, &why) == 0) {
        trace("hit %s", name);
        goto out;
    }
    trace("miss %s: %s", name, why);
    int lock = take_lock(dirfd);
    /* Another process may have stored it while this one waited. */
    if (lock >= 0 && try_entry(dirfd, name, fp, h, &why) == 0) {
        trace("hit %s (after waiting)", name);
        close(lock);
        goto out;
    }
    int rc = amldist__hwloc_discover(h);
    if (rc == 0)
        store(dirfd, name, fp, *h);
    if (lock >= 0)
        close(lock);
    free(fp);
    close(dirfd);
    return rc;
out:
    free(fp);
    close(dirfd);
    return 0;
}
