/*
 * Internals of the stand-in libnccl (fake_nccl.c: communicators, errors,
 * faults; fake_nccl_coll.c: collectives, send/recv, datatypes).  NOT NCCL:
 * see standin.h.
 *
 * A communicator is a directory (made by ncclGetUniqueId, named in the id).
 * In it, each rank leaves:
 *   join.r<R>        "rank=R nranks=N busid=B pid=P" (ncclCommInitRank)
 *   ready.r<R>       has seen every join record, and found them consistent
 *   op<C>.r<R>       its input to its C-th collective on the communicator
 *   p2p.<S>.<D>.<N>  the N-th message from rank S to rank D (the receiver
 *                    deletes it)
 *   done.r<R>        destroyed cleanly        abort.r<R>  aborted or failed
 * Files appear whole (written aside, then renamed or linked), so a reader
 * never sees half of one.  The last rank to leave removes the directory.
 */
#ifndef FAKE_NCCL_H
#define FAKE_NCCL_H

#include <stddef.h>
#include <sys/types.h>

#include "standin.h"

#define FNCCL_HIDDEN __attribute__((visibility("hidden")))
#define FNCCL_MAGIC 0x4e43434cu /* "NCCL" */

struct ncclComm {
    unsigned magic;
    char dir[NCCL_UNIQUE_ID_BYTES];
    int rank, nranks, device;
    pid_t *pids;                  /* by rank, from the join records */
    unsigned long long nops;      /* operations queued: the next one's number */
    unsigned long long ncoll;     /* collectives queued: names op<C> files */
    unsigned long long *sent, *received; /* messages queued, by peer */
    int pending;                  /* queued operations not yet done */
    int user_ref;                 /* not yet destroyed or aborted */
    int aborted;                  /* queued operations end at once */
    ncclResult_t async;           /* sticky, see ncclCommGetAsyncError */
    /* Fault injection (FAKE_NCCL_*), for this rank; -1 when off. */
    int corrupt;
    long long die_at, hang_at, async_at;
};

/* nccl.h declares these with (): prototypes, for -Wmissing-prototypes. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

/* The last error, for ncclGetLastError; returns code. */
FNCCL_HIDDEN ncclResult_t fnccl_fail(ncclResult_t code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
FNCCL_HIDDEN ncclResult_t fnccl_check_comm(const struct ncclComm *comm);

/* dir/name whole: written to a temporary name, then renamed (or linked,
 * when exclusive, so an existing file is never replaced).  0 or -errno. */
FNCCL_HIDDEN int fnccl_write(const char *dir, const char *name,
                             const void *head, size_t hlen, const void *data,
                             size_t dlen, int exclusive);
/* The whole of dir/name in a malloc'ed buffer.  0, -ENOENT or -errno. */
FNCCL_HIDDEN int fnccl_read(const char *dir, const char *name, void **buf,
                            size_t *len);
FNCCL_HIDDEN void fnccl_unlink(const char *dir, const char *name);

/* The stream has reached operation k, not yet posted: 1 to go on, 0 when a
 * fault says it never will (and may never return: FAKE_NCCL_DIE). */
FNCCL_HIDDEN int fnccl_reach(struct ncclComm *comm, unsigned long long k);
/* A queued operation is done or dropped; under the runtime's lock. */
FNCCL_HIDDEN void fnccl_op_done(struct ncclComm *comm);

#endif
