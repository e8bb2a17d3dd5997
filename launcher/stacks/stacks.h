/*
 * The stacks of a job's workers when it hangs (--hang-timeout, --timeout,
 * amlrun --stacks): read from every worker of this node (capture.c), carried
 * between nodes as text (wire.c), then grouped by identical stacks, the
 * likely culprits named, and reported on stderr and as JSON (merge.c,
 * report.c).  The capture costs nothing until it is asked for.
 *
 * Ownership: every char * and array below is malloc'd and owned by the set
 * it is in; stk_set_free() frees all of it.
 */
#ifndef AMLRUN_STACKS_H
#define AMLRUN_STACKS_H

#include "output/stopreason.h"
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* One frame: function and file may be NULL (unknown); line 0 unknown.
 * file is the source file (a Python frame's, or a native frame's from its
 * debug information); module is a native frame's ELF object (its path),
 * NULL for a Python frame: it tells user code from system libraries. */
struct stk_frame {
    char *function;
    char *file;
    int line;
    char *module;
};

/* One thread: frames innermost first. */
struct stk_thread {
    pid_t tid;
    pid_t pid;                   /* its process: the rank's own, or one of
                                    the rank's descendants (a data loader's
                                    worker, a shell's child); 0 unknown */
    char *name;                  /* /proc/PID/task/TID/comm, or NULL */
    struct stk_frame *python;    /* a Python worker's frames, else none */
    size_t npython;
    struct stk_frame *native;
    size_t nnative;
};

/* One rank: its threads, main thread first, then its descendants'
 * threads, each process's main thread first. */
struct stk_rank {
    int rank, local_rank, node;
    char *host;
    pid_t pid;
    double last_progress_s;      /* seconds since its last progress; < 0:
                                    never showed progress */
    struct stk_thread *threads;
    size_t nthreads;
    char *error;                 /* one line: why its stack (or its Python
                                    part) could not be read, else NULL */
};

/* Every rank the report covers, of one node or, merged, of the job. */
struct stk_set {
    struct stk_rank *ranks;
    size_t n;
};

/* What capture needs of one worker of this node. */
struct stk_target {
    int rank, local_rank, node;
    pid_t pid;
    double last_progress_s;      /* as in stk_rank */
    int python_fd;               /* amlrun's read end of the worker's
                                    Python stack channel, -1: none */
};

/* ---- capture.c: this node's workers ---- */

/* Read the stacks of every thread of each target, native frames through
 * ptrace and libdwfl, Python frames through the worker's faulthandler
 * channel, waiting at most timeout_ms for all of it; the targets keep
 * running afterwards (a stopped one stays stopped).  A target whose stack
 * cannot be read gets its one-line error and no threads; one read in part
 * (no Python frames, ptrace refused but Python frames read, a thread that
 * never stopped) gets its error and the threads that were read.  Appends
 * one stk_rank per target to out (host is copied into each); 0, or -1
 * when out of memory. */
int stk_capture(const struct stk_target *t, size_t n, const char *host,
                int timeout_ms, struct stk_set *out);

/* The same without waiting for it, for a loop that goes on meanwhile: the
 * capture runs on a thread of its own (the tracer) and stk_capture_fd()
 * turns readable when it is over (poll it; read nothing from it), by
 * timeout_ms; then stk_capture_collect() appends the ranks to out as
 * stk_capture() would, and frees the capture.  Each rank's own descendants
 * (data loaders' workers, a shell's child) are read too, their threads
 * after the rank's (stk_thread.pid says whose).  The targets are copied,
 * their python_fd duplicated: the caller may close its own.  While a
 * capture runs, the caller's waits must not take ptrace stops that are
 * the tracer's: wait with __WNOTHREAD (waitid(P_ALL, ...,
 * WEXITED | WSTOPPED | __WNOTHREAD)), so that only the calling thread's
 * children are seen.  NULL when out of memory. */
struct stk_capture;
struct stk_capture *stk_capture_start(const struct stk_target *t, size_t n,
                                      const char *host, int timeout_ms);
int stk_capture_fd(const struct stk_capture *k);
/* Wait for its end if it has not come (at most the timeout), append its
 * ranks to out and free it: 0, or -1 when out of memory (out unchanged). */
int stk_capture_collect(struct stk_capture *k, struct stk_set *out);
/* The same, its ranks dropped (the job ended meanwhile). */
void stk_capture_cancel(struct stk_capture *k);

/* The Python channel of one worker, made before it starts: a pipe whose
 * write end the worker inherits (its number in AMLDIST_STACK_FD), and the
 * environment (a PYTHONPATH entry whose sitecustomize.py chains to any
 * other and registers faulthandler on the signal in AMLDIST_STACK_SIGNAL,
 * all threads, into that descriptor).  Made by the spawner (run/start.c,
 * run/workerenv.c); capture reads the other end.  0, or -1 with errno. */
int stk_channel_open(int fds[2]);

/* ---- wire.c: a set as text, to carry between nodes ---- */

/* A malloc'd text that stk_decode() turns back into the same set. */
char *stk_encode(const struct stk_set *s, size_t *len);
/* Append the ranks that text encodes to out; 0, or -1 when malformed. */
int stk_decode(const char *text, size_t len, struct stk_set *out);
/* The bounds of one text, which comes from another node: stk_decode()
 * refuses more, and stk_encode() keeps within them (the innermost frames,
 * the first threads, a string's first bytes), so that it decodes whatever
 * the capture found. */
#define STK_MAX_RANKS (1 << 20)
#define STK_MAX_THREADS 1024     /* of one rank */
#define STK_MAX_FRAMES 1024      /* of one thread, Python and native each */
#define STK_MAX_STR 4096         /* bytes of one name */

/* ---- merge.c: groups and culprits ---- */

/* Ranks with the same stack (by function and file of each frame, not by
 * address; a Python worker's Python frames decide, main thread first). */
struct stk_group {
    int *ranks;                  /* ascending */
    size_t n;
    size_t example;              /* index in the set of one of its ranks */
};

struct stk_report {
    enum stop_reason reason;     /* STOP_HANG, STOP_TIMEOUT or STOP_REQUEST */
    double timeout_s;            /* 0 for a request */
    struct stk_group *groups;    /* culprits' groups first, then largest */
    size_t ngroups;
    int *outliers;               /* ascending */
    size_t noutliers;
};

/* Group s's ranks.  stalled (n_stalled ranks) names the ranks that stopped
 * progressing where progress is per rank (the progress API); then they are
 * the outliers.  With none (stalled NULL), the outliers are the ranks whose
 * stack differs from the majority's.  0, or -1 when out of memory. */
int stk_merge(const struct stk_set *s, const int *stalled, size_t n_stalled,
              enum stop_reason reason, double timeout_s, struct stk_report *r);

/* ---- report.c: what the user reads ---- */

/* The compact report: one line per group, its ranks as "0-6,8-15" and the
 * innermost frames of user code as "file:line function"; outliers first
 * with host and pid. */
void stk_print(FILE *f, const struct stk_set *s, const struct stk_report *r);
/* The same as JSON (--hang-report): reason, timeout_s, ranks, groups,
 * outliers.  0, or -1 with errno. */
int stk_write_json(const char *path, const struct stk_set *s,
                   const struct stk_report *r);

void stk_report_free(struct stk_report *r);
void stk_set_free(struct stk_set *s);

#endif /* AMLRUN_STACKS_H */
