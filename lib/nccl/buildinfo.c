/*
 * amldist_build_info(): what this libamldist was built with and finds at
 * run time, in the manner of ompi_info.  It sits at the top level because
 * it asks every part that loads something: hwloc (topo), libpmix
 * (sources, through layout.h), NCCL and the CUDA runtime (here).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "layout/layout.h"
#include "nccl/nccl_internal.h"
#include "topo/topo_internal.h"
#include "util/internal.h"

extern char **environ;

typedef int (*build_info_fn)(char *, size_t);

int amldist_build_info(char *buf, size_t size)
{
    amldist__clear_error();
    if (buf == NULL && size > 0)
        return amldist__fail(AMLDIST_EINVAL,
                             "amldist_build_info: NULL buffer of %zu bytes",
                             size);
    char self[600], hwloc[600], nccl[900], cuda[900], pmix[600];
    Dl_info info;
    void *addr;
    build_info_fn fn = amldist_build_info;
    memcpy(&addr, &fn, sizeof addr);
    snprintf(self, sizeof self, "libamldist: %s (%s)",
             amldist_version_string(),
             dladdr(addr, &info) && info.dli_fname ? info.dli_fname : "?");
    amldist__hwloc_describe(hwloc, sizeof hwloc);
    amldist__nccl_describe(nccl, sizeof nccl, cuda, sizeof cuda);
    amldist__pmix_describe(environ, pmix, sizeof pmix);
    int n = snprintf(buf, size, "%s\n%s\n%s\n%s\n%s\n", self, hwloc, nccl,
                     cuda, pmix);
    return n < 0 ? amldist__fail(AMLDIST_ENOMEM, "amldist_build_info: "
                                                 "snprintf failed")
                 : n;
}
