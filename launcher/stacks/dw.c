/*
 * libdw through dlopen (see dw.h).  The soname is the one the build found
 * (the Makefile reads it from the development library), so a libdw of
 * another ABI is never taken for it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "stacks/dw.h"

#ifndef STK_DW_SONAME
#error "STK_DW_SONAME: libdw's soname, from the Makefile"
#endif

static struct stk_dw table;
static const struct stk_dw *loaded;
static char reason[320];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
    /* RTLD_LOCAL: its symbols serve this table only, never the workers'
     * lookups or another library's. */
    void *h = dlopen(STK_DW_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(reason, sizeof reason, "cannot load %s (elfutils): %s",
                 STK_DW_SONAME, dlerror());
        return;
    }
#define RESOLVE(name)                                                          \
    if (!(*(void **)&table.name = dlsym(h, #name))) {                         \
        snprintf(reason, sizeof reason, "%s has no %s: too old an elfutils",  \
                 STK_DW_SONAME, #name);                                        \
        dlclose(h);                                                            \
        return;                                                                \
    }
    STK_DW_FUNCTIONS(RESOLVE)
#undef RESOLVE
    loaded = &table;
}

const struct stk_dw *stk_dw_load(const char **why)
{
    pthread_once(&once, load);
    *why = loaded ? NULL : reason;
    return loaded;
}
