/*
 * The progress page: one shared memory page per node (a memfd that amlrun
 * makes and its workers inherit), one slot per local rank, where
 * amldist_progress(step) records the step and the time of the call with
 * plain stores and no system call, and the supervisor reads them.  The
 * Python module (python/amldist/progress.py) writes the same layout with
 * mmap and struct, so the layout below is a contract: change it only with
 * AMLDIST__PROGRESS_MAGIC.
 *
 * A worker finds its slot in the environment: AMLDIST_PROGRESS_FD (the
 * inherited descriptor) and AMLDIST_PROGRESS_SLOT (its index).  Without
 * them amldist_progress() does nothing and returns 0.
 *
 * amlrun links this file as an object of its own (as net/loop.c).
 */
#ifndef AMLDIST_PROGRESS_PAGE_H
#define AMLDIST_PROGRESS_PAGE_H

#include <stddef.h>
#include <stdint.h>

#define AMLDIST__PROGRESS_FD_ENV "AMLDIST_PROGRESS_FD"
#define AMLDIST__PROGRESS_SLOT_ENV "AMLDIST_PROGRESS_SLOT"

/* What the supervisor reads of one slot. */
typedef struct {
    uint64_t calls;       /* amldist_progress() calls since the slot was
                             reset; 0: none yet */
    uint64_t step;        /* the last call's step */
    int64_t t_ns;         /* CLOCK_MONOTONIC of the last call, ns */
} amldist__progress_sample_t;

/* One past step of a slot, for the straggler statistics. */
typedef struct {
    uint64_t step;
    int64_t t_ns;
} amldist__progress_mark_t;

typedef struct amldist__progress_page amldist__progress_page_t;

/* A page of nslots slots (a memfd, not close-on-exec: the spawner passes
 * it on), or NULL with errno. */
amldist__progress_page_t *amldist__progress_page_create(unsigned nslots);
int amldist__progress_page_fd(const amldist__progress_page_t *pg);
/* Empty a slot (a worker starts, or starts again). */
void amldist__progress_page_reset(amldist__progress_page_t *pg, unsigned slot);
/* A consistent snapshot of a slot (retried while a writer is mid-store). */
int amldist__progress_page_read(const amldist__progress_page_t *pg,
                                unsigned slot,
                                amldist__progress_sample_t *out);
/* The slot's recorded steps newer than *cursor (at most max, oldest
 * first), advancing *cursor; the count.  A slot keeps its latest steps in a
 * ring: a reader slower than the ring loses the oldest. */
size_t amldist__progress_page_marks(const amldist__progress_page_t *pg,
                                    unsigned slot, uint64_t *cursor,
                                    amldist__progress_mark_t *out,
                                    size_t max);
void amldist__progress_page_destroy(amldist__progress_page_t *pg);

#endif /* AMLDIST_PROGRESS_PAGE_H */
