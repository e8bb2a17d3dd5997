/* The monotonic clock (see clock.h). */
#include <time.h>

#include "util/clock.h"

int64_t amldist__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

long long amldist__now_ms(void)
{
    return amldist__now_ns() / 1000000;
}
