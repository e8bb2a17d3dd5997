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

/*
 * The layout (little-endian, as the machine writes it; every offset below is
 * also in python/amldist/progress.py):
 *
 *   header, 64 bytes:  u64 magic, u32 nslots, u32 slot_size, u32 ring,
 *                      u32 header size (the first slot's offset)
 *   slot i at 64 + i * slot_size (1088 bytes):
 *     0  u64 lock    taken (odd) by a C writer while it stores, so that two
 *                    threads of one worker never store at once; readers
 *                    ignore it
 *     8  u64 calls   calls since the reset, published last
 *     16 i32 owner   the pid that writes this slot, 0: none yet
 *     24 u64 expect  a long step announced (amldist_progress_expect):
 *                    the count of calls then, plus 1; 0: none.  It holds
 *                    only while no call came since (calls + 1 == expect)
 *     32 i64 until   CLOCK_MONOTONIC ns by which that step ends
 *     64 ring[64] of {u64 step, i64 t_ns}: call number k (1, 2, ...)
 *        stores its mark at ring[(k - 1) % 64], then calls = k
 *
 * A call stores its mark, then publishes the count (a release store); the
 * last call's step and time are the mark of the count.  A reader loads the
 * count (c1, acquire), copies the marks, loads it again (c2): marks k with
 * c2 - 62 <= k <= c1 are intact (mark k is overwritten only by call k + 64,
 * which starts after the count reached k + 63).  No writer ever waits for
 * a reader, and a reader never waits for a writer that died mid-store.
 * An announcement stores `until`, then publishes `expect` (a release
 * store); a reader loads `expect` before and after `until` and takes the
 * pair when both loads agree.  Fields 24 and 32 were padding before: an
 * older writer leaves them 0 (no step announced), an older reader ignores
 * them.  The owner is claimed once, at a worker's first call: a process that
 * merely inherited the descriptor (a program the worker ran) finds it taken
 * and records nothing.  amlrun seals the memfd's size, so that no worker
 * can shrink it under amlrun's reads.
 */
#define AMLDIST__PROGRESS_MAGIC 0x31474f5250444d41ull /* "AMDPROG1" */
#define AMLDIST__PROGRESS_HEADER 64u
#define AMLDIST__PROGRESS_RING 64u
#define AMLDIST__PROGRESS_SLOT_HEAD 64u
#define AMLDIST__PROGRESS_SLOT_SIZE                                            \
    (AMLDIST__PROGRESS_SLOT_HEAD + 16u * AMLDIST__PROGRESS_RING)
/* The most slots a page has (local ranks of one node). */
#define AMLDIST__PROGRESS_MAX_SLOTS 4096u

/* What the supervisor reads of one slot. */
typedef struct {
    uint64_t calls;       /* amldist_progress() calls since the slot was
                             reset; 0: none yet */
    uint64_t step;        /* the last call's step */
    int64_t t_ns;         /* CLOCK_MONOTONIC of the last call, ns */
    int64_t until_ns;     /* the end of a long step announced since the
                             last call (CLOCK_MONOTONIC ns); 0: none */
    int expected;         /* a step was announced (before any call too) */
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
/* The number of slots. */
unsigned amldist__progress_page_slots(const amldist__progress_page_t *pg);

/* ---- the worker's side (the library's amldist_progress()) ---- */

/* The slot this process writes: the page named by the two variables of
 * envp-style lookups (`fd_text`, `slot_text`, either may be NULL), mapped
 * and claimed for `pid`; NULL when there is none or a value is bad (no
 * message: the call then does nothing). */
void *amldist__progress_slot_open(const char *fd_text, const char *slot_text,
                                  int pid);
/* Record one call: no system call but the vDSO's clock. */
void amldist__progress_slot_write(void *slot, uint64_t step, int64_t t_ns);
/* Announce that the next call comes by until_ns (CLOCK_MONOTONIC). */
void amldist__progress_slot_expect(void *slot, int64_t until_ns);

#endif /* AMLDIST_PROGRESS_PAGE_H */
