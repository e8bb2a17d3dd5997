/* The one clock of the library and of amlrun's loop: milliseconds on
 * CLOCK_MONOTONIC, which no step of the wall clock moves.  Deadlines,
 * heartbeats, timers and waits all read it. */
#ifndef AMLDIST_UTIL_CLOCK_H
#define AMLDIST_UTIL_CLOCK_H

#include <stdint.h>

long long amldist__now_ms(void);
/* The same clock in nanoseconds. */
int64_t amldist__now_ns(void);

#endif
