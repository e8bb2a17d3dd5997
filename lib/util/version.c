/* Runtime version, so a program can check the library it actually loaded. */
#include "util/internal.h"

#define AMLDIST__STR2(x) #x
#define AMLDIST__STR(x) AMLDIST__STR2(x)

unsigned amldist_version(void)
{
    return AMLDIST_VERSION_HEX;
}

const char *amldist_version_string(void)
{
    return AMLDIST__STR(AMLDIST_VERSION_MAJOR) "." AMLDIST__STR(
        AMLDIST_VERSION_MINOR) "." AMLDIST__STR(AMLDIST_VERSION_PATCH);
}
