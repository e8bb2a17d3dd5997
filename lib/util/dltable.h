#ifndef AMLDIST_UTIL_DLTABLE_H
#define AMLDIST_UTIL_DLTABLE_H
/*
 * A library opened with dlopen and a table of its functions resolved with
 * dlsym, or the reason why not: the one loader behind the libraries that
 * are loaded when first needed (hwloc and libxml2 in lib/topo/dl.c,
 * libcrypto in lib/net/chan.c, libdw in amlrun's stack capture).  amlrun
 * links it as an object of its own.
 */
#include <stddef.h>

/* dlopen SONAME (RTLD_NOW | SCOPE), then each of the N NAMES into *SLOTS[i].
 * Returns the handle, or NULL with WHY (WHYLEN bytes) naming the library
 * (SONAME and WHAT, e.g. "elfutils") and dlerror's reason or the missing
 * function; nothing stays open then. */
void *amldist__dl_table(const char *soname, const char *what, int scope,
                        const char *const *names, void **const *slots,
                        size_t n, char *why, size_t whylen);

#endif
