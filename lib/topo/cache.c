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
 */
#include <dirent.h>
#include <dlfcn.h>
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
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "amldist.h"
#include "topo/topo_internal.h"

extern char **environ;

#define CACHE_MAGIC "amldist topology cache 1\n"
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

/* ---- the fingerprint ---------------------------------------------------- */

struct buf {
    char *s;
    size_t len, cap;
    int oom;
};

static void buf_add(struct buf *b, const char *p, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->s, cap);
        if (grown == NULL) {
            b->oom = 1;
            return;
        }
        b->s = grown;
        b->cap = cap;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void buf_str(struct buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

static void buf_printf(struct buf *b, const char *fmt, ...)
    AMLDIST__PRINTF(2, 3);
static void buf_printf(struct buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        buf_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A small file's contents (sysfs, procfs), at most size-1 bytes, without
 * its trailing newlines; -1 when it cannot be read. */
static ssize_t read_small(const char *path, char *out, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -1;
    size_t len = 0;
    while (len + 1 < size) {
        ssize_t n = read(fd, out + len, size - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n < 0)
                len = (size_t)-1;
            break;
        }
        len += (size_t)n;
    }
    close(fd);
    if (len == (size_t)-1)
        return -1;
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' '))
        len--;
    out[len] = '\0';
    return (ssize_t)len;
}

/* "key contents" of a file, newlines as spaces, or "key -" when it cannot
 * be read (which is itself part of the state). */
static void fp_file(struct buf *b, const char *key, const char *path)
{
    char v[8192];
    ssize_t n = read_small(path, v, sizeof v);
    buf_str(b, key);
    if (n < 0) {
        buf_str(b, " -\n");
        return;
    }
    for (ssize_t i = 0; i < n; i++)
        if (v[i] == '\n')
            v[i] = ' ';
    buf_str(b, " ");
    buf_add(b, v, (size_t)n);
    buf_str(b, "\n");
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of d's entries from where it stands ("." and ".." left out),
 * each malloc'd, in *names (NULL when none); the count.  Closes d. */
static int read_names(DIR *d, char ***names)
{
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' &&
            (e->d_name[1] == '\0' ||
             (e->d_name[1] == '.' && e->d_name[2] == '\0')))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            char **grown = realloc(*names, (size_t)cap * sizeof *grown);
            if (grown == NULL)
                break;
            *names = grown;
        }
        if (((*names)[n] = strdup(e->d_name)) == NULL)
            break;
        n++;
    }
    closedir(d);
    return n;
}

/* The sorted entry names of a directory, each malloc'd, in *names; the
 * count, or -1 when it cannot be read. */
static int list_dir(const char *path, char ***names)
{
    *names = NULL;
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    int n = read_names(d, names);
    if (n > 1)
        qsort(*names, (size_t)n, sizeof **names, cmp_str);
    return n;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static int in_sorted(char **names, int n, const char *name)
{
    return n > 0 && bsearch(&name, names, (size_t)n, sizeof *names,
                            cmp_str) != NULL;
}

/* "key name name ...": a directory's entries, leaving out those that are
 * also in `minus` (NULL: none); "key -" when it cannot be read. */
static void fp_dir(struct buf *b, const char *key, const char *path,
                   const char *minus)
{
    char **names, **skip = NULL;
    int n = list_dir(path, &names), nskip = 0;
    buf_str(b, key);
    if (n < 0) {
        buf_str(b, " -\n");
        return;
    }
    if (minus != NULL)
        nskip = list_dir(minus, &skip);
    for (int i = 0; i < n; i++) {
        if (in_sorted(skip, nskip, names[i]))
            continue;
        buf_str(b, " ");
        buf_str(b, names[i]);
    }
    buf_str(b, "\n");
    free_names(names, n);
    free_names(skip, nskip > 0 ? nskip : 0);
}

/* RDMA devices and the state of each port: hwloc reports it and NIC
 * choice prefers active ports, so a link going down or up is a change. */
static void fp_rdma(struct buf *b)
{
    const char *base = "/sys/class/infiniband";
    char **devs;
    int n = list_dir(base, &devs);
    buf_str(b, "rdma");
    for (int i = 0; i < n; i++) {
        char path[512], **ports;
        snprintf(path, sizeof path, "%s/%s/ports", base, devs[i]);
        int np = list_dir(path, &ports);
        buf_printf(b, " %s", devs[i]);
        for (int k = 0; k < np; k++) {
            char state[64];
            snprintf(path, sizeof path, "%s/%s/ports/%s/state", base, devs[i],
                     ports[k]);
            if (read_small(path, state, sizeof state) < 0)
                strcpy(state, "-");
            buf_printf(b, ":%s=%s", ports[k], state);
        }
        free_names(ports, np > 0 ? np : 0);
    }
    buf_str(b, "\n");
    free_names(devs, n > 0 ? n : 0);
}

/* The cgroup cpuset whose CPUs and memory nodes hwloc keeps, found as
 * hwloc finds it: /proc/self/cpuset names it, under the cgroup v2 mount
 * (cpuset.cpus.effective), the v1 cpuset mount (cpuset.cpus) or the old
 * cpuset file system (cpus).  The contents matter, not the name: the
 * ranks of one Slurm step sit in cgroups of their own with the same
 * cpuset.  Mounts elsewhere are looked up in /proc/self/mounts. */
static void fp_cpuset(struct buf *b)
{
    char name[4096];
    if (read_small("/proc/self/cpuset", name, sizeof name) <= 0 ||
        name[0] != '/') {
        buf_str(b, "cpuset -\n");
        return;
    }
    if (strcmp(name, "/") == 0)
        name[0] = '\0';
    static const struct {
        const char *mnt, *cpus, *mems;
    } std[] = {
        {"/sys/fs/cgroup", "cpuset.cpus.effective", "cpuset.mems.effective"},
        {"/sys/fs/cgroup/cpuset", "cpuset.cpus", "cpuset.mems"},
        {"/dev/cpuset", "cpus", "mems"},
    };
    char path[8400], mnt[4096];
    const char *cpus = NULL, *mems = NULL;
    for (size_t i = 0; i < sizeof std / sizeof *std && cpus == NULL; i++) {
        snprintf(path, sizeof path, "%s%s/%s", std[i].mnt, name, std[i].cpus);
        if (access(path, R_OK) == 0) {
            amldist__strlcpy(mnt, std[i].mnt, sizeof mnt);
            cpus = std[i].cpus;
            mems = std[i].mems;
        }
    }
    FILE *f = cpus == NULL ? fopen("/proc/self/mounts", "re") : NULL;
    char line[4096];
    while (f != NULL && cpus == NULL && fgets(line, sizeof line, f) != NULL) {
        char dev[256], dir[4096], type[64], opts[1024];
        if (sscanf(line, "%255s %4095s %63s %1023s", dev, dir, type, opts) !=
            4)
            continue;
        const char *c = NULL, *m = NULL;
        if (strcmp(type, "cgroup2") == 0)
            c = "cpuset.cpus.effective", m = "cpuset.mems.effective";
        else if (strcmp(type, "cgroup") == 0 &&
                 (strstr(opts, ",cpuset") || strncmp(opts, "cpuset", 6) == 0))
            c = "cpuset.cpus", m = "cpuset.mems";
        else if (strcmp(type, "cpuset") == 0)
            c = "cpus", m = "mems";
        if (c == NULL)
            continue;
        snprintf(path, sizeof path, "%s%s/%s", dir, name, c);
        if (access(path, R_OK) == 0) {
            amldist__strlcpy(mnt, dir, sizeof mnt);
            cpus = c;
            mems = m;
        }
    }
    if (f != NULL)
        fclose(f);
    if (cpus == NULL) {
        buf_str(b, "cpuset none\n");
        return;
    }
    buf_printf(b, "cpuset %s\n", cpus);
    snprintf(path, sizeof path, "%s%s/%s", mnt, name, cpus);
    fp_file(b, "cpuset-cpus", path);
    snprintf(path, sizeof path, "%s%s/%s", mnt, name, mems);
    fp_file(b, "cpuset-mems", path);
}

/* The kernel's own word on this process's cpuset memory nodes. */
static void fp_mems_allowed(struct buf *b)
{
    char status[16384];
    const char *v = NULL;
    if (read_small("/proc/self/status", status, sizeof status) > 0) {
        char *p = strstr(status, "\nMems_allowed_list:");
        if (p != NULL) {
            p += strlen("\nMems_allowed_list:");
            p += strspn(p, " \t");
            p[strcspn(p, "\n")] = '\0';
            v = p;
        }
    }
    buf_printf(b, "mems-allowed %.400s\n", v != NULL ? v : "-");
}

/* The file a function was loaded from, by device, inode, size and time:
 * another build or version of hwloc or of this library may discover
 * differently. */
static void fp_object(struct buf *b, const char *key, const void *fn)
{
    Dl_info info;
    struct stat st;
    if (dladdr(fn, &info) == 0 || info.dli_fname == NULL ||
        stat(info.dli_fname, &st) < 0) {
        buf_printf(b, "%s -\n", key);
        return;
    }
    buf_printf(b, "%s %llx:%llx:%lld:%lld.%09ld\n", key,
               (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
               (long long)st.st_size, (long long)st.st_mtim.tv_sec,
               st.st_mtim.tv_nsec);
}

/* hwloc reads many variables of its own (HWLOC_ALLOW, HWLOC_PCI_LOCALITY,
 * HWLOC_THISSYSTEM_ALLOWED_RESOURCES ...): each copy is for one setting. */
static void fp_hwloc_env(struct buf *b)
{
    int n = 0;
    for (char **e = environ; e != NULL && *e != NULL; e++)
        n += strncmp(*e, "HWLOC_", 6) == 0;
    if (n == 0)
        return;
    const char **vars = malloc((size_t)n * sizeof *vars);
    if (vars == NULL) {
        b->oom = 1;
        return;
    }
    int k = 0;
    for (char **e = environ; *e != NULL && k < n; e++)
        if (strncmp(*e, "HWLOC_", 6) == 0)
            vars[k++] = *e;
    qsort(vars, (size_t)k, sizeof *vars, cmp_str);
    for (int i = 0; i < k; i++) {
        buf_str(b, "env ");
        /* one line each, whatever the value holds */
        for (const char *p = vars[i]; *p != '\0'; p++)
            buf_add(b, *p == '\n' ? " " : p, 1);
        buf_str(b, "\n");
    }
    free(vars);
}

static const char *boot_id(char *out, size_t size)
{
    if (read_small("/proc/sys/kernel/random/boot_id", out, size) <= 0)
        return NULL;
    for (char *p = out; *p != '\0'; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
              *p == '-'))
            return NULL;
    return out;
}

char *amldist__cache_fingerprint(void)
{
    struct buf b = {0};
    char boot[64];
    buf_str(&b, "format 1\n");
    buf_printf(&b, "amldist %d.%d.%d\n", AMLDIST_VERSION_MAJOR,
               AMLDIST_VERSION_MINOR, AMLDIST_VERSION_PATCH);
    fp_object(&b, "amldist-lib", (const void *)amldist__cache_fingerprint);
    buf_printf(&b, "hwloc-api %#x\n", hwloc_get_api_version());
    fp_object(&b, "hwloc-lib", (const void *)hwloc_topology_init);
    buf_printf(&b, "boot %s\n", boot_id(boot, sizeof boot) ? boot : "-");
    fp_file(&b, "cpu-possible", "/sys/devices/system/cpu/possible");
    fp_file(&b, "cpu-online", "/sys/devices/system/cpu/online");
    fp_file(&b, "node-online", "/sys/devices/system/node/online");
    fp_cpuset(&b);
    fp_mems_allowed(&b);
    fp_dir(&b, "pci", "/sys/bus/pci/devices", NULL);
    /* Virtual interfaces (containers' veth pairs, bridges) come and go all
     * the time and hwloc reports only those on PCI. */
    fp_dir(&b, "net", "/sys/class/net", "/sys/devices/virtual/net");
    fp_rdma(&b);
    fp_hwloc_env(&b);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* ---- entries ------------------------------------------------------------ */

/* A 64-bit hash (FNV-1a over 8-byte words): it finds a truncated or
 * damaged copy, not a forged one (nobody else can write the directory). */
static uint64_t hash64(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    h ^= (uint64_t)n;
    return h * 0x9e3779b97f4a7c15ull;
}

/* "topo-HOST-BOOT-": the start of every name this host gives its copies
 * during this boot.  The host name keeps machines sharing a directory
 * (a home on NFS) apart; '-' in it becomes '_', so that the parts stay
 * apart too. */
static void entry_prefix(const char *fp, char *out, size_t size)
{
    char host[65] = "";
    if (gethostname(host, sizeof host - 1) < 0 || host[0] == '\0')
        strcpy(host, "localhost");
    host[64] = '\0';
    for (char *p = host; *p != '\0'; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '.' || *p == '_'))
            *p = '_';
    const char *b = strstr(fp, "\nboot ");
    size_t blen = 0;
    if (b != NULL) {
        b += 6;
        blen = strcspn(b, "\n");
    }
    snprintf(out, size, "topo-%s-%.*s-", host, (int)(blen < 48 ? blen : 48),
             b != NULL ? b : "-");
}

void amldist__cache_name(const char *fp, char *name, size_t size)
{
    char prefix[160];
    entry_prefix(fp, prefix, sizeof prefix);
    snprintf(name, size, "%s%x-%016llx.xml", prefix, hwloc_get_api_version(),
             (unsigned long long)hash64(fp, strlen(fp)));
}

char *amldist__cache_entry(const char *fp, const char *xml, size_t xmllen,
                           size_t *n)
{
    struct buf b = {0};
    buf_str(&b, CACHE_MAGIC);
    buf_printf(&b, "xml %zu %016llx\n", xmllen,
               (unsigned long long)hash64(xml, xmllen));
    buf_str(&b, fp);
    buf_str(&b, "\n");
    buf_add(&b, xml, xmllen);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    *n = b.len;
    return b.s;
}

const char *amldist__cache_check(const char *data, size_t n, const char *fp,
                                 size_t *xml_off, size_t *xmllen)
{
    size_t magic = strlen(CACHE_MAGIC);
    if (n < magic || memcmp(data, CACHE_MAGIC, magic) != 0)
        return "not a topology cache entry";
    const char *p = data + magic, *end = data + n;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (nl == NULL)
        return "truncated header";
    char line[128];
    size_t ll = (size_t)(nl - p);
    if (ll >= sizeof line)
        return "damaged header";
    memcpy(line, p, ll);
    line[ll] = '\0';
    unsigned long long len, hash;
    char extra;
    char canon[128];
    if (sscanf(line, "xml %llu %llx%c", &len, &hash, &extra) != 2 ||
        (size_t)snprintf(canon, sizeof canon, "xml %llu %016llx", len, hash) !=
            ll ||
        memcmp(canon, line, ll) != 0)
        return "damaged header";
    p = nl + 1;
    size_t fplen = strlen(fp);
    /* the fingerprint, then an empty line */
    if ((size_t)(end - p) < fplen + 1)
        return "truncated header";
    if (memcmp(p, fp, fplen) != 0 || p[fplen] != '\n')
        return "fingerprint differs (another boot, machine, cpuset, device "
               "set or hwloc)";
    p += fplen + 1;
    if ((unsigned long long)(end - p) != len)
        return "truncated or extended XML";
    if (hash64(p, (size_t)len) != hash)
        return "XML does not match its hash";
    *xml_off = (size_t)(p - data);
    *xmllen = (size_t)len;
    return NULL;
}

/* ---- the directory ------------------------------------------------------ */

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
    struct timespec start, now, pause = {0, 250000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        if (errno != EWOULDBLOCK && errno != EINTR)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) * 1000 +
                (now.tv_nsec - start.tv_nsec) / 1000000 >
            CACHE_LOCK_WAIT_MS)
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

/* The entry names of an open directory, as list_dir() but in the
 * directory's order; dirfd stays open. */
static int list_dirfd(int dirfd, char ***names)
{
    *names = NULL;
    /* A stream of its own, from the start: fdopendir() takes the
     * descriptor it is given and its offset. */
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    rewinddir(d);
    return read_names(d, names);
}

/* Keep the directory small: this host's copies of its other boots go,
 * writers' leftovers go, and of this boot's copies (one per cpuset or
 * device set seen) the CACHE_MAX_ENTRIES most recently written stay.
 * Other hosts' copies (a shared directory) are theirs to keep. */
static void prune(int dirfd, const char *fp)
{
    char prefix[160], host[160];
    entry_prefix(fp, prefix, sizeof prefix);
    /* "topo-HOST-" */
    amldist__strlcpy(host, prefix, sizeof host);
    char *dash = strchr(host + 5, '-');
    if (dash == NULL)
        return;
    dash[1] = '\0';
    char **names;
    int n = list_dirfd(dirfd, &names);
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
    free_names(names, n);
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
