/* Counting GPUs from sysfs and CUDA_VISIBLE_DEVICES. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpucount.h"

/* The hex number in a one-line sysfs file, or -1. */
static long read_hex(int dirfd, const char *dev, const char *file)
{
    char path[512], buf[32];
    snprintf(path, sizeof path, "%s/%s", dev, file);
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *end;
    long v = strtol(buf, &end, 16);
    return end == buf ? -1 : v;
}

int gpu_count_pci(const char *sysfs_pci)
{
    DIR *d = opendir(sysfs_pci);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (read_hex(dirfd(d), e->d_name, "vendor") != 0x10de)
            continue;
        /* class is 0xCCSSPP: 0x0300 VGA, 0x0302 3D controller; NVSwitch
         * (0x0680) and the GPUs' audio functions (0x0403) are not GPUs. */
        long cls = read_hex(dirfd(d), e->d_name, "class") >> 8;
        if (cls == 0x0300 || cls == 0x0302)
            n++;
    }
    closedir(d);
    return n;
}

int gpu_count_visible(int pci_count, const char *cuda_visible)
{
    if (!cuda_visible)
        return pci_count;
    int n = 0;
    const char *p = cuda_visible;
    while (*p) {
        size_t len = strcspn(p, ",");
        /* UUIDs (GPU-..., MIG-...) cannot be checked without the driver;
         * count them.  An index must name an existing, unused GPU. */
        if (len >= 4 && (strncmp(p, "GPU-", 4) == 0 || strncmp(p, "MIG-", 4) == 0)) {
            n++;
        } else {
            char num[16];
            if (len == 0 || len >= sizeof num)
                break;
            memcpy(num, p, len);
            num[len] = '\0';
            char *end;
            long idx = strtol(num, &end, 10);
            if (*end || idx < 0 || idx >= pci_count)
                break;
            int dup = 0;
            for (const char *q = cuda_visible; q < p;) {
                size_t ql = strcspn(q, ",");
                if (ql == len && strncmp(q, p, len) == 0)
                    dup = 1;
                q += ql + (q[ql] == ',');
            }
            if (dup)
                break;
            n++;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return n;
}
