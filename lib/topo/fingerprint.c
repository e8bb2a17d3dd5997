/*
 * The fingerprint of the per-node topology cache (cache.c): what hwloc's
 * discovery of this machine depends on and may change while it is up, one
 * "key value" line each, read from sysfs and procfs as hwloc reads them.
 * An entry is used only where its fingerprint is this one, whole.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amldist.h"
#include "topo/cache_internal.h"
#include "topo/topo_internal.h"

extern char **environ;

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
static void fp_file(struct amldist__buf *b, const char *key, const char *path)
{
    char v[8192];
    ssize_t n = read_small(path, v, sizeof v);
    amldist__buf_str(b, key);
    if (n < 0) {
        amldist__buf_str(b, " -\n");
        return;
    }
    for (ssize_t i = 0; i < n; i++)
        if (v[i] == '\n')
            v[i] = ' ';
    amldist__buf_str(b, " ");
    amldist__buf_add(b, v, (size_t)n);
    amldist__buf_str(b, "\n");
}

static int in_sorted(char **names, int n, const char *name)
{
    return n > 0 && bsearch(&name, names, (size_t)n, sizeof *names,
                            amldist__cmp_names) != NULL;
}

/* "key name name ...": a directory's entries, leaving out those that are
 * also in `minus` (NULL: none); "key -" when it cannot be read. */
static void fp_dir(struct amldist__buf *b, const char *key, const char *path,
                   const char *minus)
{
    char **names, **skip = NULL;
    int n = amldist__list_dir(path, &names), nskip = 0;
    amldist__buf_str(b, key);
    if (n < 0) {
        amldist__buf_str(b, " -\n");
        return;
    }
    if (minus != NULL)
        nskip = amldist__list_dir(minus, &skip);
    for (int i = 0; i < n; i++) {
        if (in_sorted(skip, nskip, names[i]))
            continue;
        amldist__buf_str(b, " ");
        amldist__buf_str(b, names[i]);
    }
    amldist__buf_str(b, "\n");
    amldist__free_names(names, n);
    amldist__free_names(skip, nskip > 0 ? nskip : 0);
}

/* RDMA devices and the state of each port: hwloc reports it and NIC
 * choice prefers active ports, so a link going down or up is a change. */
static void fp_rdma(struct amldist__buf *b)
{
    const char *base = "/sys/class/infiniband";
    char **devs;
    int n = amldist__list_dir(base, &devs);
    amldist__buf_str(b, "rdma");
    for (int i = 0; i < n; i++) {
        char path[512], **ports;
        snprintf(path, sizeof path, "%s/%s/ports", base, devs[i]);
        int np = amldist__list_dir(path, &ports);
        amldist__buf_printf(b, " %s", devs[i]);
        for (int k = 0; k < np; k++) {
            char state[64];
            snprintf(path, sizeof path, "%s/%s/ports/%s/state", base, devs[i],
                     ports[k]);
            if (read_small(path, state, sizeof state) < 0)
                strcpy(state, "-");
            amldist__buf_printf(b, ":%s=%s", ports[k], state);
        }
        amldist__free_names(ports, np > 0 ? np : 0);
    }
    amldist__buf_str(b, "\n");
    amldist__free_names(devs, n > 0 ? n : 0);
}

/* The cgroup cpuset whose CPUs and memory nodes hwloc keeps, found as
 * hwloc finds it: /proc/self/cpuset names it, under the cgroup v2 mount
 * (cpuset.cpus.effective), the v1 cpuset mount (cpuset.cpus) or the old
 * cpuset file system (cpus).  The contents matter, not the name: the
 * ranks of one Slurm step sit in cgroups of their own with the same
 * cpuset.  Mounts elsewhere are looked up in /proc/self/mounts. */
static void fp_cpuset(struct amldist__buf *b)
{
    char name[4096];
    if (read_small("/proc/self/cpuset", name, sizeof name) <= 0 ||
        name[0] != '/') {
        amldist__buf_str(b, "cpuset -\n");
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
        amldist__buf_str(b, "cpuset none\n");
        return;
    }
    amldist__buf_printf(b, "cpuset %s\n", cpus);
    snprintf(path, sizeof path, "%s%s/%s", mnt, name, cpus);
    fp_file(b, "cpuset-cpus", path);
    snprintf(path, sizeof path, "%s%s/%s", mnt, name, mems);
    fp_file(b, "cpuset-mems", path);
}

/* The kernel's own word on this process's cpuset memory nodes. */
static void fp_mems_allowed(struct amldist__buf *b)
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
    amldist__buf_printf(b, "mems-allowed %.400s\n", v != NULL ? v : "-");
}

/* The file a function was loaded from, by device, inode, size and time:
 * another build or version of hwloc or of this library may discover
 * differently. */
static void fp_object(struct amldist__buf *b, const char *key, const void *fn)
{
    Dl_info info;
    struct stat st;
    if (dladdr(fn, &info) == 0 || info.dli_fname == NULL ||
        stat(info.dli_fname, &st) < 0) {
        amldist__buf_printf(b, "%s -\n", key);
        return;
    }
    amldist__buf_printf(b, "%s %llx:%llx:%lld:%lld.%09ld\n", key,
                        (unsigned long long)st.st_dev,
                        (unsigned long long)st.st_ino, (long long)st.st_size,
                        (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

/* hwloc reads many variables of its own (HWLOC_ALLOW, HWLOC_PCI_LOCALITY,
 * HWLOC_THISSYSTEM_ALLOWED_RESOURCES ...): each copy is for one setting. */
static void fp_hwloc_env(struct amldist__buf *b)
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
    qsort(vars, (size_t)k, sizeof *vars, amldist__cmp_names);
    for (int i = 0; i < k; i++) {
        amldist__buf_str(b, "env ");
        /* one line each, whatever the value holds */
        for (const char *p = vars[i]; *p != '\0'; p++)
            amldist__buf_add(b, *p == '\n' ? " " : p, 1);
        amldist__buf_str(b, "\n");
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
    struct amldist__buf b = {0};
    char boot[64];
    amldist__buf_str(&b, "format 1\n");
    amldist__buf_printf(&b, "amldist %d.%d.%d\n", AMLDIST_VERSION_MAJOR,
                        AMLDIST_VERSION_MINOR, AMLDIST_VERSION_PATCH);
    fp_object(&b, "amldist-lib", (const void *)amldist__cache_fingerprint);
    amldist__buf_printf(&b, "hwloc-api %#x\n", hwloc_get_api_version());
    fp_object(&b, "hwloc-lib", (const void *)hwloc_topology_init);
    amldist__buf_printf(&b, "boot %s\n",
                        boot_id(boot, sizeof boot) ? boot : "-");
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
