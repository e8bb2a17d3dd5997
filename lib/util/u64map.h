/*
 * A map of 64-bit keys to small non-negative ints, of a size fixed when it
 * is made: open addressing with linear probing, deletion by moving the
 * entries after it back (no tombstones), so that a lookup, an insertion and
 * a removal cost O(1) however long the map is used.  The rendezvous host's
 * index of its members by connection, agent id and node rank (issue 40:
 * each JOIN had scanned every member several times).
 */
#ifndef AMLDIST_UTIL_U64MAP_H
#define AMLDIST_UTIL_U64MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t *keys;
    int *vals;   /* -1: an empty slot */
    size_t mask; /* slots - 1, a power of two at least twice `max` */
    size_t n, max;
} amldist__u64map_t;

/* Room for `max` entries: 0, or -1 when out of memory. */
int amldist__u64map_init(amldist__u64map_t *m, size_t max);
void amldist__u64map_free(amldist__u64map_t *m);
void amldist__u64map_clear(amldist__u64map_t *m);
/* key's value, or -1. */
int amldist__u64map_get(const amldist__u64map_t *m, uint64_t key);
/* key set to val (>= 0), replacing its value: 0, or -1 when the map holds
 * `max` other keys already. */
int amldist__u64map_put(amldist__u64map_t *m, uint64_t key, int val);
/* key forgotten (unknown keys are ignored). */
void amldist__u64map_del(amldist__u64map_t *m, uint64_t key);

#endif /* AMLDIST_UTIL_U64MAP_H */
