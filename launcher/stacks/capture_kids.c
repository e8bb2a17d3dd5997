/*
 * A worker's descendants (see capture.h): the processes it started (a
 * data loader's workers, multiprocessing's, a shell's child), found
 * through /proc/PID/task/TID/children, read as targets of their own
 * beside the workers, and their threads then put under their rank, as
 * py-spy's `dump --subprocesses` shows them.  A descendant that holds the
 * rank's Python channel (a forked Python: it inherited the hook's
 * faulthandler and the pipe) gives its Python frames through it, one
 * process of a channel at a time, so that two dumps never mix.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stacks/capture.h"

/* Append pid's children (of every thread of it) to *out. */
static int add_children(pid_t pid, pid_t **out, size_t *n, size_t max)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && *n < max && (e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        char file[300];
        snprintf(file, sizeof file, "/proc/%d/task/%s/children", (int)pid,
                 e->d_name);
        FILE *f = fopen(file, "re");
        int kid;
        while (rc == 0 && f && *n < max && fscanf(f, "%d", &kid) == 1) {
            pid_t *g = realloc(*out, (*n + 1) * sizeof *g);
            if (!g)
                rc = -1;
            else
                (*out = g)[(*n)++] = (pid_t)kid;
        }
        if (f)
            fclose(f);
    }
    closedir(d);
    return rc;
}

int cap_descendants(pid_t pid, pid_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (add_children(pid, out, n, CAP_MAX_KIDS) < 0)
        return -1;
    /* Breadth first: children, then theirs. */
    for (size_t i = 0; i < *n; i++)
        if (add_children((*out)[i], out, n, CAP_MAX_KIDS) < 0)
            return -1;
    return 0;
}

static char *comm_of(pid_t pid)
{
    char path[64], buf[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f || !fgets(buf, sizeof buf, f))
        buf[0] = '\0';
    if (f)
        fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return strdup(buf[0] ? buf : "?");
}

/* Move kid's threads (and its error, said as the child's) to the end of
 * r's; kid is left empty. */
int cap_adopt(struct stk_rank *r, struct stk_rank *kid)
{
    if (kid->nthreads) {
        struct stk_thread *g = realloc(
            r->threads, (r->nthreads + kid->nthreads) * sizeof *g);
        if (!g)
            return -1;
        r->threads = g;
        for (size_t i = 0; i < kid->nthreads; i++) {
            g[r->nthreads + i] = kid->threads[i];
            g[r->nthreads + i].pid = kid->pid;
        }
        r->nthreads += kid->nthreads;
        free(kid->threads);
        kid->threads = NULL;
        kid->nthreads = 0;
    }
    int rc = 0;
    if (kid->error) {
        char *comm = comm_of(kid->pid);
        rc = comm ? cap_error(r, "child %d (%s): %s", (int)kid->pid, comm,
                              kid->error) : -1;
        free(comm);
    }
    return rc;
}
