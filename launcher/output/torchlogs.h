/*
 * torchrun's per-run directory: every worker's error file and, with
 * -r/--redirects or -t/--tee in torchrun's layout, its stdout and stderr:
 *
 *   <base>/<run_id>_<random>/attempt_<n>/<local_rank>/error.json
 *                                                    /stdout.log
 *                                                    /stderr.log
 *
 * <base> is --log-dir in torchrun's layout, else a private directory
 * made where Python's tempfile would make one (tmpdir.h: $TMPDIR, else
 * /dev/shm, /tmp, ...).  A restart gets attempt_<n+1>.  A private
 * base is removed at the end of the job unless it holds redirected
 * output, which would be lost.  Every directory is made with mkdirat and
 * every file with openat(O_EXCL | O_NOFOLLOW) in a directory of ours, so
 * nothing is written through a planted link.
 */
#ifndef AMLRUN_TORCHLOGS_H
#define AMLRUN_TORCHLOGS_H

/* torchrun's Std: which streams, as a bit mask. */
enum { STD_NONE = 0, STD_OUT = 1, STD_ERR = 2, STD_ALL = 3 };

/* A -r/--redirects or -t/--tee value: "N" for every local rank, or
 * "L:N,L:N" per local rank (the others: 0), as torchrun parses it. */
struct std_map {
    int all;      /* the value for every local rank when n == 0 */
    int n;
    struct { int local, v; } *m;
};

/* Parse S into *out (freeing what it held); 0 or -1. */
int std_map_parse(const char *s, struct std_map *out);
/* The streams for LOCAL. */
int std_map_get(const struct std_map *m, int local);
/* Whether any local rank has any stream. */
int std_map_any(const struct std_map *m);
void std_map_free(struct std_map *m);

struct rundir;

/* Make <base>/<run_id>_<random>: base_fd/base_path are --log-dir's (kept
 * at the end), or -1/NULL for a private base under $TMPDIR (tmpdir.h;
 * verbose: a note when it is not usable).  keep: keep a private base too
 * (it will hold redirected output).  NULL after a message. */
struct rundir *rundir_open(int base_fd, const char *base_path,
                           const char *run_id, int keep, int verbose);
/* The run's directory, absolute. */
const char *rundir_path(const struct rundir *r);
/* Make attempt_<n> (the current attempt from now on); 0 or -1 after a
 * message. */
int rundir_attempt(struct rundir *r, int n);
/* Make <local>/ in the current attempt and the files asked for in STREAMS
 * (STD_OUT: stdout.log into *out, STD_ERR: stderr.log into *err; -1
 * otherwise), named for RANK in write errors.  *error_file: the path of
 * its error.json (malloc'd).  0, or -1 after a message. */
int rundir_worker(struct rundir *r, int local, int rank, int streams,
                  char **error_file, int *out, int *err);
/* Close it; a private base not kept is removed with everything in it. */
/* Keep a private run directory when it is closed (it holds the root
 * cause's error file, which the job summary names). */
void rundir_keep(struct rundir *r);
void rundir_close(struct rundir *r);

#endif /* AMLRUN_TORCHLOGS_H */
