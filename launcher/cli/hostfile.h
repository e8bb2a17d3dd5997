/*
 * Host lists for head-node mode: a hostfile in Open MPI's or DeepSpeed's
 * format ("host slots=N", '#' comments, blank lines), or the --hosts value
 * ("a,b" or "a:2,b:2").
 */
#ifndef AMLRUN_HOSTFILE_H
#define AMLRUN_HOSTFILE_H

#include <stddef.h>

struct host {
    char *name;
    int slots; /* -1 when the line or item gives none */
    int line;  /* hostfile line, or position in --hosts (from 1) */
};

struct hostlist {
    struct host *h;
    int n;
    int from_file; /* line numbers are file lines, not --hosts items */
    /* The names hashed (open addressing; host index + 1, 0 empty), so that
     * finding a repeat stays O(1) per host. */
    int *index;
    size_t index_size; /* a power of two, at least 2 n */
};

/* Largest slots= accepted: far above any node, small enough to multiply. */
#define HOSTFILE_MAX_SLOTS 65536
/* Bounds on what is read, so that --hostfile /dev/zero or an endless pipe
 * fails at once instead of growing without end: as many hosts as --nnodes
 * takes, a line far longer than any real one (a long comment), and a file
 * far larger than any real cluster's (64 MiB; a variable, which the unit
 * test lowers to reach it quickly under valgrind). */
#define HOSTFILE_MAX_HOSTS (1 << 20)
#define HOSTFILE_MAX_LINE (1 << 20)
extern long hostfile_max_bytes;

/* Read FILE into *out.  0, or -1 with a one-line reason in err that starts
 * with "FILE:LINE: " for a malformed line. */
int hostfile_read(const char *path, struct hostlist *out, char *err,
                  size_t errsz);

/* Parse "a,b" or "a:2,b:2".  0, or -1 with a reason in err. */
int hosts_parse(const char *spec, struct hostlist *out, char *err,
                size_t errsz);

/* The slots every host has, 0 when no host names any, -1 (and a reason
 * naming the two that differ) when they disagree or only some give one. */
int hostlist_common_slots(const struct hostlist *l, const char *where,
                          char *err, size_t errsz);

void hostlist_free(struct hostlist *l);

#endif /* AMLRUN_HOSTFILE_H */
