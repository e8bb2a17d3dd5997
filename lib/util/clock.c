/* The monotonic clock (see clock.h). */
#include <time.h>

#include "util/clock.h"

long long amldist__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
