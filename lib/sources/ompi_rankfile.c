/*
 * Reading Open MPI's rankfile.  Under one, Open MPI 4's daemons away from
 * mpirun export OMPI_MCA_orte_num_nodes at twice the job's node count, and
 * the nodes are ordered as the rankfile names them, not by daemon, so the
 * file itself is the one description every rank can read alike: the node
 * count is its number of hosts, a node's index the order of its first rank
 * (rank 0's host is node 0, as PMIx's node list has it), the master rank
 * 0's host.  Where the path is not readable (no shared file system) the
 * caller leaves all three unknown.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/ompi_rankfile.h"
#include "util/internal.h"

/* A rankfile longer than this (some 100000 ranks) is not read. */
#define RANKFILE_MAX_WORLD (1L << 20)

struct hosts {
    char **name;
    long n, cap;
};

/* The index of `h` in the table, added when new; -1 without memory. */
static long host_index(struct hosts *t, const char *h)
{
    for (long i = 0; i < t->n; i++)
        if (strcmp(t->name[i], h) == 0)
            return i;
    if (t->n == t->cap) {
        long cap = t->cap ? t->cap * 2 : 16;
        char **p = realloc(t->name, (size_t)cap * sizeof *p);
        if (p == NULL)
            return -1;
        t->name = p;
        t->cap = cap;
    }
    if ((t->name[t->n] = strdup(h)) == NULL)
        return -1;
    return t->n++;
}

/* "rank N=HOST ..." into *rank and host: 1; a blank or comment line: 0;
 * anything else: -1. */
static int parse_line(char *s, long *rank, char *host, size_t hostsz)
{
    while (isspace((unsigned char)*s))
        s++;
    if (*s == '\0' || *s == '#')
        return 0;
    if (strncmp(s, "rank", 4) != 0)
        return -1;
    s += 4;
    char *end;
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return -1;
    *rank = strtol(s, &end, 10);
    s = end;
    while (isspace((unsigned char)*s))
        s++;
    if (*s++ != '=')
        return -1;
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strcspn(s, " \t\r\n");
    if (n == 0 || n >= hostsz)
        return -1;
    memcpy(host, s, n);
    host[n] = '\0';
    return 1;
}

int amldist__ompi_rankfile(const char *path, long rank, long world,
                           amldist__rankfile_t *out, char *why, size_t whysz)
{
    if (world < 1 || world > RANKFILE_MAX_WORLD || rank < 0 || rank >= world) {
        snprintf(why, whysz, "world size %ld is not read from a rankfile",
                 world);
        return -1;
    }
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        snprintf(why, whysz, "cannot read it here");
        return -1;
    }
    struct hosts t = {NULL, 0, 0};
    long *hid = malloc((size_t)world * sizeof *hid);
    char *line = NULL, host[AMLDIST__HOST_MAX];
    size_t cap = 0;
    long lineno = 0, r;
    int rc = -1;
    why[0] = '\0';
    if (hid == NULL)
        goto out;
    for (long i = 0; i < world; i++)
        hid[i] = -1;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        int got = parse_line(line, &r, host, sizeof host);
        if (got == 0)
            continue;
        if (got < 0 || r < 0 || r >= world || host[0] == '+') {
            snprintf(why, whysz, "line %ld is not \"rank N=HOST\" for a "
                     "rank below %ld with a host name", lineno, world);
            goto out;
        }
        if ((hid[r] = host_index(&t, host)) < 0)
            goto out;
    }
    long *order = calloc((size_t)(t.n > 0 ? t.n : 1), sizeof *order);
    if (order == NULL)
        goto out;
    long next = 0;
    for (long i = 0; i < world && rc < 0; i++) {
        if (hid[i] < 0) {
            snprintf(why, whysz, "it places no rank %ld", i);
            break;
        }
        if (order[hid[i]] == 0)
            order[hid[i]] = ++next;
        if (i == world - 1) {
            out->nodes = t.n;
            out->node = order[hid[rank]] - 1;
            rc = amldist__strlcpy(out->rank0_host, t.name[hid[0]],
                                  sizeof out->rank0_host) == 0 ? 0 : -1;
        }
    }
    free(order);
out:
    if (rc < 0 && why[0] == '\0')
        snprintf(why, whysz, "out of memory");
    for (long i = 0; i < t.n; i++)
        free(t.name[i]);
    free(t.name);
    free(hid);
    free(line);
    fclose(f);
    return rc;
}
