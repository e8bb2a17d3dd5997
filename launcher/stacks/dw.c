/*
 * libdw through dlopen (see dw.h).  The soname is the one the build found
 * (the Makefile reads it from the development library), so a libdw of
 * another ABI is never taken for it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "stacks/dw.h"
#include "util/dltable.h"

#ifndef STK_DW_SONAME
#error "STK_DW_SONAME: libdw's soname, from the Makefile"
#endif

static struct stk_dw table;
static const struct stk_dw *loaded;
static char reason[320];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* RTLD_LOCAL: its symbols serve this table only, never the workers'
 * lookups or another library's. */
static void load(void)
{
#define NAME(name) #name,
#define SLOT(name) (void **)&table.name,
    static const char *const names[] = {STK_DW_FUNCTIONS(NAME)};
    void **const slots[] = {STK_DW_FUNCTIONS(SLOT)};
#undef NAME
#undef SLOT
    if (amldist__dl_table(STK_DW_SONAME, "elfutils", RTLD_LOCAL, names, slots,
                          sizeof names / sizeof *names, reason,
                          sizeof reason))
        loaded = &table;
}

const struct stk_dw *stk_dw_load(const char **why)
{
    pthread_once(&once, load);
    *why = loaded ? NULL : reason;
    return loaded;
}
