/* One library and its table of functions through dlopen (see dltable.h). */
#include <dlfcn.h>
#include <stdio.h>

#include "util/dltable.h"

void *amldist__dl_table(const char *soname, const char *what, int scope,
                        const char *const *names, void **const *slots,
                        size_t n, char *why, size_t whylen)
{
    void *h = dlopen(soname, RTLD_NOW | scope);
    if (!h) {
        snprintf(why, whylen, "cannot load %s (%s): %s", soname, what,
                 dlerror());
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if ((*slots[i] = dlsym(h, names[i])) == NULL) {
            snprintf(why, whylen, "%s (%s) has no %s: too old a release",
                     soname, what, names[i]);
            dlclose(h);
            return NULL;
        }
    }
    return h;
}
