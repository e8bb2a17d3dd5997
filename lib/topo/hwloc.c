/* A new hwloc handle with the filters every discovery here uses, and the
 * live discovery of this machine: below both the loader (load.c) and its
 * per-node cache (cache.c), which each start from it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/dl.h"
#include "topo/topo_internal.h"

/* hwloc components that would open a GPU driver or runtime in the launcher:
 * loading them costs seconds and can create contexts on every GPU.  "pci"
 * (libpciaccess) too: Linux's own sysfs discovery finds the same devices
 * faster, and libpciaccess leaks what it allocates. */
static const char *const skipped_components[] = {
    "cuda", "nvml", "opencl", "gl", "rsmi", "levelzero", "pci"};

/* hwloc plugins that are never used here (their components are skipped
 * above, or the XML import without libxml2 is enough): dlopen'ing them
 * drags in X11, OpenCL, ICU, libpciaccess or a GPU library, megabytes of
 * RSS and a millisecond of every start. */
static const char blacklisted_plugins[] =
    "hwloc_gl,hwloc_opencl,hwloc_xml_libxml,hwloc_pci,hwloc_cuda,hwloc_nvml,"
    "hwloc_rsmi,hwloc_levelzero";

int amldist__hwloc_new(hwloc_topology_t *h)
{
    /* hwloc is loaded here, at the first topology (topo/dl.h). */
    if (amldist__dl_hwloc() < 0) {
        *h = NULL;
        return -1;
    }
    /* hwloc dlopens its plugins at the first init of the process and reads
     * the blacklist only then, so it is set for that call alone and never
     * reaches the workers. */
    int blacklisted = getenv("HWLOC_PLUGINS_BLACKLIST") == NULL &&
                      setenv("HWLOC_PLUGINS_BLACKLIST", blacklisted_plugins,
                             0) == 0;
    int rc_init = hwloc_topology_init(h);
    if (blacklisted)
        unsetenv("HWLOC_PLUGINS_BLACKLIST");
    if (rc_init < 0) {
        *h = NULL;
        return amldist__fail(AMLDIST_ETOPO, "hwloc_topology_init failed");
    }
    /* The default filter drops PCI devices, even those an XML file has. */
    hwloc_topology_set_io_types_filter(*h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    for (size_t i = 0;
         i < sizeof skipped_components / sizeof *skipped_components; i++)
        hwloc_topology_set_components(*h,
                                      HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                      skipped_components[i]);
    return 0;
}

int amldist__hwloc_discover(hwloc_topology_t *h)
{
    int rc = amldist__hwloc_new(h);
    if (rc < 0)
        return rc;
    if (hwloc_topology_load(*h) < 0) {
        hwloc_topology_destroy(*h);
        *h = NULL;
        return amldist__fail(AMLDIST_ETOPO, "topology of this machine: "
                             "hwloc_topology_load failed");
    }
    return 0;
}

/* "hwloc: 2.9.0, API 2.8.0 (/usr/lib/.../libhwloc.so.15); built with API
 * 2.8.0": the release in use, which only a loaded topology tells (its root's
 * hwlocVersion: a synthetic one-PU one, no discovery), its API version and
 * file, and the API of the header the build saw, which may be older
 * (hwloc keeps its ABI within a major version). */
void amldist__hwloc_describe(char *line, size_t size)
{
    const char *where = amldist__dl_hwloc_file();
    if (where == NULL) {
        snprintf(line, size, "hwloc: %s", amldist_last_error());
        return;
    }
    unsigned run = hwloc_get_api_version();
    char release[32] = "?";
    hwloc_topology_t h;
    if (amldist__hwloc_new(&h) == 0) {
        const char *v = NULL;
        /* Its NUMA node named: one hwloc adds itself is copied with an
         * overlapping memcpy (hwloc 2.9), which valgrind reports. */
        if (hwloc_topology_set_synthetic(h, "numa:1 pu:1") == 0 &&
            hwloc_topology_load(h) == 0)
            v = hwloc_obj_get_info_by_name(hwloc_get_root_obj(h),
                                           "hwlocVersion");
        if (v != NULL)
            snprintf(release, sizeof release, "%s", v);
        hwloc_topology_destroy(h);
    }
    snprintf(line, size,
             "hwloc: %s, API %u.%u.%u (%s); built with API %u.%u.%u", release,
             run >> 16, (run >> 8) & 0xff, run & 0xff, where,
             HWLOC_API_VERSION >> 16, (HWLOC_API_VERSION >> 8) & 0xff,
             HWLOC_API_VERSION & 0xff);
}
