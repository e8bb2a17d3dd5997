/* The map of 64-bit keys (see u64map.h). */
#include <stdlib.h>
#include <string.h>

#include "util/u64map.h"

/* splitmix64's finaliser: pointers and sequential ids spread over the
 * slots. */
static size_t slot_of(const amldist__u64map_t *m, uint64_t k)
{
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ull;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebull;
    k ^= k >> 31;
    return (size_t)k & m->mask;
}

int amldist__u64map_init(amldist__u64map_t *m, size_t max)
{
    size_t slots = 16;
    while (slots < 2 * max)
        slots *= 2;
    m->keys = malloc(slots * sizeof *m->keys);
    m->vals = malloc(slots * sizeof *m->vals);
    m->mask = slots - 1;
    m->n = 0;
    m->max = max;
    if (!m->keys || !m->vals) {
        amldist__u64map_free(m);
        return -1;
    }
    amldist__u64map_clear(m);
    return 0;
}

void amldist__u64map_free(amldist__u64map_t *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->mask = 0;
    m->n = 0;
    m->max = 0;
}

void amldist__u64map_clear(amldist__u64map_t *m)
{
    if (m->vals)
        memset(m->vals, 0xff, (m->mask + 1) * sizeof *m->vals);
    m->n = 0;
}

/* key's slot, or the empty one where it would go. */
static size_t find(const amldist__u64map_t *m, uint64_t key)
{
    size_t i = slot_of(m, key);
    while (m->vals[i] >= 0 && m->keys[i] != key)
        i = (i + 1) & m->mask;
    return i;
}

int amldist__u64map_get(const amldist__u64map_t *m, uint64_t key)
{
    return m->vals ? m->vals[find(m, key)] : -1;
}

int amldist__u64map_put(amldist__u64map_t *m, uint64_t key, int val)
{
    if (!m->vals || val < 0)
        return -1;
    size_t i = find(m, key);
    if (m->vals[i] < 0) {
        if (m->n == m->max)
            return -1;
        m->n++;
        m->keys[i] = key;
    }
    m->vals[i] = val;
    return 0;
}

void amldist__u64map_del(amldist__u64map_t *m, uint64_t key)
{
    if (!m->vals)
        return;
    size_t i = find(m, key);
    if (m->vals[i] < 0)
        return;
    m->n--;
    /* Knuth's algorithm R: each entry after the hole that could live in it
     * (its home is not cyclically within (hole, here]) moves back. */
    for (size_t j = i;;) {
        m->vals[i] = -1;
        size_t home;
        do {
            j = (j + 1) & m->mask;
            if (m->vals[j] < 0)
                return;
            home = slot_of(m, m->keys[j]);
        } while (i <= j ? (i < home && home <= j) : (i < home || home <= j));
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        i = j;
    }
}
