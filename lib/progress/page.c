/* The per-node progress page (see page.h): its layout, the supervisor's
 * side (create, reset, read) and the worker's (open a slot, write it). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "progress/page.h"

/* The fields as the layout places them; every one is read and written as
 * an atomic (the reader's loads race with the writer's stores by design). */
struct hdr {
    _Atomic uint64_t magic;
    _Atomic uint32_t nslots, slot_size, ring, header;
};

struct mark {
    _Atomic uint64_t step;
    _Atomic int64_t t_ns;
};

struct slot {
    _Atomic uint64_t lock, calls;
    _Atomic int32_t owner;
    int32_t pad0;
    _Atomic uint64_t expect;
    _Atomic int64_t until;
    char pad[AMLDIST__PROGRESS_SLOT_HEAD - 40];
    struct mark ring[AMLDIST__PROGRESS_RING];
};

_Static_assert(sizeof(struct hdr) <= AMLDIST__PROGRESS_HEADER, "header");
_Static_assert(sizeof(struct slot) == AMLDIST__PROGRESS_SLOT_SIZE, "slot");
_Static_assert(offsetof(struct slot, calls) == 8, "calls at 8");
_Static_assert(offsetof(struct slot, owner) == 16, "owner at 16");
_Static_assert(offsetof(struct slot, expect) == 24, "expect at 24");
_Static_assert(offsetof(struct slot, until) == 32, "until at 32");
_Static_assert(offsetof(struct slot, ring) == AMLDIST__PROGRESS_SLOT_HEAD,
               "ring");

struct amldist__progress_page {
    int fd;
    unsigned nslots;
    size_t size;
    unsigned char *base;
};

static size_t page_size(unsigned nslots)
{
    return AMLDIST__PROGRESS_HEADER +
           (size_t)nslots * AMLDIST__PROGRESS_SLOT_SIZE;
}

static struct slot *slot_at(unsigned char *base, unsigned i)
{
    return (struct slot *)(void *)(base + AMLDIST__PROGRESS_HEADER +
                                   (size_t)i * AMLDIST__PROGRESS_SLOT_SIZE);
}

/* ---- the supervisor's side ------------------------------------------------ */

amldist__progress_page_t *amldist__progress_page_create(unsigned nslots)
{
    if (nslots == 0 || nslots > AMLDIST__PROGRESS_MAX_SLOTS) {
        errno = EINVAL;
        return NULL;
    }
    amldist__progress_page_t *pg = calloc(1, sizeof *pg);
    if (!pg)
        return NULL;
    pg->nslots = nslots;
    pg->size = page_size(nslots);
    /* Inherited on purpose (no MFD_CLOEXEC): the workers find it by its
     * number.  Sealed at its size, so that no worker can shrink it under
     * amlrun's reads (a SIGBUS) or grow it. */
    pg->fd = memfd_create("amldist-progress", MFD_ALLOW_SEALING);
    if (pg->fd < 0)
        goto fail;
    if (ftruncate(pg->fd, (off_t)pg->size) < 0 ||
        fcntl(pg->fd, F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        goto fail;
    void *m = mmap(NULL, pg->size, PROT_READ | PROT_WRITE, MAP_SHARED,
                   pg->fd, 0);
    if (m == MAP_FAILED)
        goto fail;
    pg->base = m;
    struct hdr *h = (struct hdr *)(void *)pg->base;
    atomic_store(&h->nslots, nslots);
    atomic_store(&h->slot_size, AMLDIST__PROGRESS_SLOT_SIZE);
    atomic_store(&h->ring, AMLDIST__PROGRESS_RING);
    atomic_store(&h->header, AMLDIST__PROGRESS_HEADER);
    atomic_store(&h->magic, AMLDIST__PROGRESS_MAGIC);
    return pg;
fail:;
    int err = errno;
    if (pg->fd >= 0)
        close(pg->fd);
    free(pg);
    errno = err;
    return NULL;
}

int amldist__progress_page_fd(const amldist__progress_page_t *pg)
{
    return pg ? pg->fd : -1;
}

unsigned amldist__progress_page_slots(const amldist__progress_page_t *pg)
{
    return pg ? pg->nslots : 0;
}

void amldist__progress_page_reset(amldist__progress_page_t *pg, unsigned slot)
{
    if (!pg || slot >= pg->nslots)
        return;
    /* The slot's worker is gone (or not started): nobody writes it now. */
    struct slot *s = slot_at(pg->base, slot);
    atomic_store(&s->calls, 0);
    atomic_store(&s->lock, 0);
    atomic_store(&s->owner, 0);
    atomic_store(&s->expect, 0);
    atomic_store(&s->until, 0);
    for (unsigned i = 0; i < AMLDIST__PROGRESS_RING; i++) {
        atomic_store_explicit(&s->ring[i].step, 0, memory_order_relaxed);
        atomic_store_explicit(&s->ring[i].t_ns, 0, memory_order_relaxed);
    }
}

/* The marks a copy holds intact (page.h): mark k for c2 - 62 <= k <= c1. */
#define INTACT (AMLDIST__PROGRESS_RING - 2)
/* A writer faster than the copy: a few more tries, then nothing this time. */
#define READ_TRIES 16

static void copy_mark(const struct mark *m, amldist__progress_mark_t *out)
{
    out->step = atomic_load_explicit(&m->step, memory_order_relaxed);
    out->t_ns = atomic_load_explicit(&m->t_ns, memory_order_relaxed);
}

/* The announced step of a slot whose count is `calls` (page.h): the pair
 * when two loads of `expect` agree, -1 to try again. */
static int read_expect(const struct slot *s, uint64_t calls,
                       amldist__progress_sample_t *out)
{
    uint64_t e1 = atomic_load_explicit(&s->expect, memory_order_acquire);
    int64_t until = atomic_load_explicit(&s->until, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&s->expect, memory_order_relaxed) != e1)
        return -1;
    out->expected = e1 != 0;
    /* It holds only while no call came since. */
    out->until_ns = e1 != 0 && e1 == calls + 1 ? until : 0;
    return 0;
}

int amldist__progress_page_read(const amldist__progress_page_t *pg,
                                unsigned slot,
                                amldist__progress_sample_t *out)
{
    if (!pg || slot >= pg->nslots || !out) {
        errno = EINVAL;
        return -1;
    }
    const struct slot *s = slot_at(pg->base, slot);
    for (int tries = 0; tries < READ_TRIES; tries++) {
        uint64_t c1 = atomic_load_explicit(&s->calls, memory_order_acquire);
        amldist__progress_mark_t m = {0, 0};
        if (c1)
            copy_mark(&s->ring[(c1 - 1) % AMLDIST__PROGRESS_RING], &m);
        atomic_thread_fence(memory_order_acquire);
        uint64_t c2 = atomic_load_explicit(&s->calls, memory_order_relaxed);
        if (c2 < c1 || c2 - c1 > INTACT || read_expect(s, c2, out) < 0)
            continue;
        out->calls = c1;
        out->step = m.step;
        out->t_ns = m.t_ns;
        return 0;
    }
    errno = EAGAIN;
    return -1;
}

size_t amldist__progress_page_marks(const amldist__progress_page_t *pg,
                                    unsigned slot, uint64_t *cursor,
                                    amldist__progress_mark_t *out, size_t max)
{
    if (!pg || slot >= pg->nslots || !cursor || (!out && max))
        return 0;
    const struct slot *s = slot_at(pg->base, slot);
    amldist__progress_mark_t ring[AMLDIST__PROGRESS_RING];
    for (int tries = 0; tries < READ_TRIES; tries++) {
        uint64_t c1 = atomic_load_explicit(&s->calls, memory_order_acquire);
        for (unsigned i = 0; i < AMLDIST__PROGRESS_RING; i++)
            copy_mark(&s->ring[i], &ring[i]);
        atomic_thread_fence(memory_order_acquire);
        uint64_t c2 = atomic_load_explicit(&s->calls, memory_order_relaxed);
        if (c2 < c1) /* reset under the copy */
            continue;
        /* A slot reset (or scribbled on) behind the cursor starts again. */
        if (c1 < *cursor)
            *cursor = 0;
        uint64_t from = *cursor + 1; /* the first mark wanted */
        if (c2 > INTACT && from < c2 - INTACT)
            from = c2 - INTACT; /* the older ones are gone */
        if (from > c1 + 1)
            continue; /* the writer lapped the copy */
        size_t n = 0;
        for (uint64_t k = from; k <= c1 && n < max; k++)
            out[n++] = ring[(k - 1) % AMLDIST__PROGRESS_RING];
        *cursor = from - 1 + n;
        return n;
    }
    return 0;
}

void amldist__progress_page_destroy(amldist__progress_page_t *pg)
{
    if (!pg)
        return;
    if (pg->base)
        munmap(pg->base, pg->size);
    if (pg->fd >= 0)
        close(pg->fd);
    free(pg);
}

/* ---- the worker's side ---------------------------------------------------- */

/* A decimal in [0, max], the whole text, else -1. */
static long small_number(const char *text, long max)
{
    if (!text || *text < '0' || *text > '9')
        return -1;
    long v = 0;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
        if (v > max)
            return -1;
    }
    return v;
}

void *amldist__progress_slot_open(const char *fd_text, const char *slot_text,
                                  int pid)
{
    long fd = small_number(fd_text, INT_MAX);
    long slot = small_number(slot_text, AMLDIST__PROGRESS_MAX_SLOTS - 1);
    if (fd < 0 || slot < 0 || pid <= 0)
        return NULL;
    /* A memfd is a regular file; anything else under that number (a
     * terminal, a socket, a closed descriptor) is no page. */
    struct stat st;
    if (fstat((int)fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        st.st_size < (off_t)page_size((unsigned)slot + 1))
        return NULL;
    size_t size = (size_t)st.st_size;
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
    if (m == MAP_FAILED)
        return NULL;
    const struct hdr *h = m;
    uint32_t nslots = atomic_load(&h->nslots);
    if (atomic_load(&h->magic) != AMLDIST__PROGRESS_MAGIC ||
        atomic_load(&h->slot_size) != AMLDIST__PROGRESS_SLOT_SIZE ||
        atomic_load(&h->ring) != AMLDIST__PROGRESS_RING ||
        atomic_load(&h->header) != AMLDIST__PROGRESS_HEADER ||
        (unsigned long)slot >= nslots || page_size(nslots) > size) {
        munmap(m, size);
        return NULL;
    }
    /* Claim the slot: the first process to call is its writer. */
    struct slot *s = slot_at(m, (unsigned)slot);
    int32_t none = 0;
    if (!atomic_compare_exchange_strong(&s->owner, &none, (int32_t)pid) &&
        none != (int32_t)pid) {
        munmap(m, size);
        return NULL;
    }
    return s;
}

/* Take the slot's writers' lock: its value before (even).  Only threads
 * of this process contend for it, and only when they call at the same
 * instant. */
static uint64_t slot_lock(struct slot *s)
{
    uint64_t lock = atomic_load_explicit(&s->lock, memory_order_relaxed);
    for (;;) {
        if (lock & 1) {
            lock = atomic_load_explicit(&s->lock, memory_order_relaxed);
            continue;
        }
        if (atomic_compare_exchange_weak_explicit(&s->lock, &lock, lock + 1,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
            break;
    }
    return lock;
}

void amldist__progress_slot_write(void *slot, uint64_t step, int64_t t_ns)
{
    struct slot *s = slot;
    uint64_t lock = slot_lock(s);
    /* The mark's stores stay after the last call's count (a reader that
     * sees them sees that count: page.h). */
    atomic_thread_fence(memory_order_release);
    uint64_t calls = atomic_load_explicit(&s->calls, memory_order_relaxed);
    struct mark *m = &s->ring[calls % AMLDIST__PROGRESS_RING];
    atomic_store_explicit(&m->step, step, memory_order_relaxed);
    atomic_store_explicit(&m->t_ns, t_ns, memory_order_relaxed);
    atomic_store_explicit(&s->calls, calls + 1, memory_order_release);
    atomic_store_explicit(&s->lock, lock + 2, memory_order_release);
}

void amldist__progress_slot_expect(void *slot, int64_t until_ns)
{
    struct slot *s = slot;
    /* The writers' lock, as a call takes it, so that the count read here
     * is the one the announcement follows. */
    uint64_t lock = slot_lock(s);
    uint64_t calls = atomic_load_explicit(&s->calls, memory_order_relaxed);
    atomic_store_explicit(&s->until, until_ns, memory_order_relaxed);
    atomic_store_explicit(&s->expect, calls + 1, memory_order_release);
    atomic_store_explicit(&s->lock, lock + 2, memory_order_release);
}
