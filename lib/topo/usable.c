/*
 * Which of the machine's GPUs this process can use.  Inside a container
 * given some GPUs (Kubernetes, `docker --gpus device=...`) sysfs, and so
 * hwloc, still lists every GPU of the host, but the NVIDIA container runtime
 * exposes only the allowed GPUs' /proc/driver/nvidia/gpus/<busid>
 * directories and /dev/nvidia<minor> nodes.  CUDA enumerates only the GPUs
 * it can open and CUDA_VISIBLE_DEVICES indexes into that list, so the others
 * are dropped here, before topo_visible.c applies it.
 */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "topo/topo_internal.h"

#define PROC_GPUS "/proc/driver/nvidia/gpus"

/* What the driver's proc directory says about one GPU of t->all. */
struct proc_gpu {
    int listed;
    int minor; /* "Device Minor:", -1 when not given */
    int excluded;
    int no_node; /* /dev/nvidia<minor> is missing */
    int ok;      /* usable */
};

static void append(char *buf, size_t size, const char *fmt, ...)
    AMLDIST__PRINTF(3, 4);
static void append(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

static int find_busid(const amldist_topo_t *t, const char *name)
{
    unsigned dom, bus, dev, fn;
    char extra;
    if (sscanf(name, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &extra) != 4)
        return -1;
    for (int i = 0; i < t->nall; i++) {
        const struct hwloc_pcidev_attr_s *a = &t->all[i].pci->attr->pcidev;
        if (a->domain == dom && a->bus == bus && a->dev == dev &&
            a->func == fn)
            return i;
    }
    return -1;
}

/* The information file: UUID (no NVML, no GPU wake-up), minor, exclusion. */
static void read_information(const char *dir, const char *name,
                             struct amldist__gpu *g, struct proc_gpu *p)
{
    char path[4096], line[256];
    snprintf(path, sizeof path, "%s/%s/information", dir, name);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f) != NULL) {
        char word[AMLDIST__UUID_MAX];
        int minor;
        if (sscanf(line, "GPU UUID: %63s", word) == 1 && g->uuid[0] == '\0')
            amldist__strlcpy(g->uuid, word, sizeof g->uuid);
        else if (sscanf(line, "Device Minor: %d", &minor) == 1 && minor >= 0)
            p->minor = minor;
        else if (sscanf(line, "GPU Excluded: %63s", word) == 1)
            p->excluded = strcmp(word, "Yes") == 0;
    }
    fclose(f);
}

static int exists(const char *dir, const char *name, int minor)
{
    char path[4096];
    struct stat st;
    if (minor >= 0)
        snprintf(path, sizeof path, "%s/%s%d", dir, name, minor);
    else
        snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

static void explain(amldist_topo_t *t, const struct proc_gpu *p, int usable,
                    const char *dir, const char *devdir, const char *nvd,
                    int none)
{
    char *n = t->usable_note;
    size_t size = sizeof t->usable_note;
    int listed = 0, excluded = 0, no_node = 0;
    for (int i = 0; i < t->nall; i++) {
        listed += p[i].listed;
        excluded += p[i].listed && p[i].excluded;
        no_node += p[i].listed && !p[i].excluded && p[i].no_node;
    }
    snprintf(n, size, "%d NVIDIA GPU%s on the PCI bus, ", t->nall,
             t->nall == 1 ? "" : "s");
    if (none) {
        append(n, size, "none usable by this process "
               "(NVIDIA_VISIBLE_DEVICES=%s)", nvd);
        return;
    }
    if (usable == t->nall) {
        append(n, size, "all usable (%s lists %s)", dir,
               t->nall == 1 ? "it" : "each");
        return;
    }
    if (usable == 0)
        append(n, size, "none usable by this process (");
    else
        append(n, size, "%d usable by this process (", usable);
    const char *sep = "";
    if (listed == 0) {
        append(n, size, "%s lists none of them", dir);
        sep = "; ";
    } else if (listed < t->nall) {
        append(n, size, "%s lists only ", dir);
        for (int i = 0, k = 0; i < t->nall; i++)
            if (p[i].listed)
                append(n, size, "%s%s", k++ ? ", " : "", t->all[i].busid);
        sep = "; ";
    }
    if (excluded > 0) {
        append(n, size, "%sthe driver excludes ", sep);
        for (int i = 0, k = 0; i < t->nall; i++)
            if (p[i].listed && p[i].excluded)
                append(n, size, "%s%s", k++ ? ", " : "", t->all[i].busid);
        sep = "; ";
    }
    if (no_node > 0) {
        append(n, size, "%s%s has no device node for ", sep, devdir);
        for (int i = 0, k = 0; i < t->nall; i++)
            if (p[i].listed && !p[i].excluded && p[i].no_node)
                append(n, size, "%s%s (nvidia%d)", k++ ? ", " : "",
                       t->all[i].busid, p[i].minor);
        sep = "; ";
    }
    if (nvd != NULL)
        append(n, size, "%sNVIDIA_VISIBLE_DEVICES=%.100s", sep, nvd);
    append(n, size, "%s)", listed < t->nall || no_node > 0
                               ? ", as in a container given some GPUs"
                               : "");
}

int amldist__usable_gpus(amldist_topo_t *t)
{
    const char *test_dir = getenv("AMLDIST_TEST_NVIDIA_GPUS_DIR");
    const char *test_dev = getenv("AMLDIST_TEST_DEV_DIR");
    int test = test_dir != NULL && test_dir[0] != '\0';
    const char *dir = test ? test_dir : PROC_GPUS;
    const char *devdir =
        test_dev != NULL && test_dev[0] != '\0' ? test_dev : "/dev";
    t->npci = t->nall;
    t->usable_note[0] = '\0';
    if (t->nall == 0) {
        snprintf(t->usable_note, sizeof t->usable_note,
                 "no NVIDIA GPU %s%s", t->from_xml ? "in " : "on the PCI bus",
                 t->from_xml ? t->source : "");
        return 0;
    }
    /* An XML file describes another machine (or this one at another time):
     * this process's driver and container say nothing about it. */
    if (t->from_xml && !test) {
        snprintf(t->usable_note, sizeof t->usable_note,
                 "%d NVIDIA GPU%s in %s", t->nall, t->nall == 1 ? "" : "s",
                 t->source);
        return 0;
    }
    DIR *d = opendir(dir);
    if (d == NULL) {
        snprintf(t->usable_note, sizeof t->usable_note,
                 "%d NVIDIA GPU%s on the PCI bus, all counted (no %s: the "
                 "NVIDIA driver is not loaded)",
                 t->nall, t->nall == 1 ? "" : "s", dir);
        return 0;
    }
    struct proc_gpu *p = calloc((size_t)t->nall, sizeof *p);
    if (p == NULL) {
        closedir(d);
        return amldist__fail(AMLDIST_ENOMEM, "topology: out of memory");
    }
    for (int i = 0; i < t->nall; i++)
        p[i].minor = -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int i = e->d_name[0] != '.' ? find_busid(t, e->d_name) : -1;
        if (i < 0)
            continue;
        p[i].listed = 1;
        read_information(dir, e->d_name, &t->all[i], &p[i]);
    }
    closedir(d);
    const char *nvd = getenv("NVIDIA_VISIBLE_DEVICES");
    int none = nvd != NULL &&
               (strcmp(nvd, "none") == 0 || strcmp(nvd, "void") == 0);
    /* Device nodes tell only where the control node exists: on a host
     * without nvidia-persistenced they appear at the first CUDA call
     * (nvidia-modprobe), while a container has exactly its GPUs' nodes. */
    int check_nodes = exists(devdir, "nvidiactl", -1);
    int usable = 0;
    for (int i = 0; i < t->nall; i++) {
        p[i].no_node = check_nodes && p[i].minor >= 0 &&
                       !exists(devdir, "nvidia", p[i].minor);
        p[i].ok = !none && p[i].listed && !p[i].excluded && !p[i].no_node;
        usable += p[i].ok;
    }
    explain(t, p, usable, dir, devdir, nvd, none);
    if (usable < t->nall)
        amldist__warn(t->warnings, sizeof t->warnings, "%s", t->usable_note);
    int k = 0;
    for (int i = 0; i < t->nall; i++)
        if (p[i].ok)
            t->all[k++] = t->all[i];
    t->nall = k;
    free(p);
    return 0;
}

int amldist_topo_num_pci_gpus(const amldist_topo_t *t)
{
    return t != NULL ? t->npci : AMLDIST_EINVAL;
}

const char *amldist_topo_gpu_note(const amldist_topo_t *t)
{
    return t != NULL ? t->gpu_note : "";
}
