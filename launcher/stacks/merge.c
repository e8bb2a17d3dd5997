/*
 * Groups and culprits (see stacks.h).  Each rank gets a key: the frame
 * lists that decide where it is, or, for a rank whose stack could not be
 * read, its error; the ranks are sorted by key and equal neighbours make a
 * group.  The keys:
 *   - a Python worker: the Python frames of its main thread, then those of
 *     its other threads that have any, in a canonical order (the order in
 *     which faulthandler lists threads is not the same in every rank);
 *   - a native worker: its main thread's native frames.  Its other threads
 *     are the runtime's (NCCL, gloo, OpenMP, CUDA), where the same rank
 *     is caught a little earlier or later: they would split every group;
 *   - no threads: the error, its digits aside ("pid 4242"), so that one
 *     cause makes one group.
 * Frames compare as stk_frames_cmp() says: function and file, and the
 * callers' lines.
 */
#include <stdlib.h>
#include <string.h>

#include "stacks/frames.h"
#include "stacks/stacks.h"

/* A list of frames. */
struct flist {
    const struct stk_frame *f;
    size_t n;
};

struct rkey {
    size_t idx;        /* in the set */
    int kind;          /* 0: no stack, 1: native, 2: Python */
    char *err;         /* kind 0: the error, digits as '#' */
    struct flist *l;   /* kinds 1 and 2: main thread first */
    size_t nl;
};

static int flist_cmp(const void *a, const void *b)
{
    const struct flist *x = a, *y = b;
    return stk_frames_cmp(x->f, x->n, y->f, y->n);
}

/* "ptrace: pid 4242: Operation not permitted" -> "ptrace: pid #: ...". */
static char *error_kind(const char *e)
{
    if (!e)
        e = "";
    char *k = malloc(strlen(e) + 1), *d = k;
    if (!k)
        return NULL;
    for (const char *p = e; *p;) {
        if (*p >= '0' && *p <= '9') {
            *d++ = '#';
            while (*p >= '0' && *p <= '9')
                p++;
        } else {
            *d++ = *p++;
        }
    }
    *d = '\0';
    return k;
}

static int make_key(const struct stk_rank *r, size_t idx, struct rkey *k)
{
    memset(k, 0, sizeof *k);
    k->idx = idx;
    if (r->nthreads == 0) {
        k->err = error_kind(r->error);
        return k->err ? 0 : -1;
    }
    int py = stk_rank_python(r);
    k->kind = py ? 2 : 1;
    size_t want = py ? r->nthreads : 1;
    k->l = malloc(want * sizeof *k->l);
    if (!k->l)
        return -1;
    k->l[0].f = stk_thread_frames(&r->threads[0], py, &k->l[0].n);
    k->nl = 1;
    /* A descendant's threads (a data loader's workers) do not decide: they
     * are caught a little earlier or later in each rank. */
    for (size_t t = 1; t < want; t++)
        if (r->threads[t].npython && stk_thread_own(r, &r->threads[t]))
            k->l[k->nl++] = (struct flist){r->threads[t].python, r->threads[t].npython};
    qsort(k->l + 1, k->nl - 1, sizeof *k->l, flist_cmp);
    return 0;
}

static int rkey_cmp(const void *a, const void *b)
{
    const struct rkey *x = *(const struct rkey *const *)a, *y = *(const struct rkey *const *)b;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->kind == 0)
        return strcmp(x->err, y->err);
    if (x->nl != y->nl)
        return x->nl < y->nl ? -1 : 1;
    for (size_t i = 0; i < x->nl; i++) {
        int c = flist_cmp(&x->l[i], &y->l[i]);
        if (c)
            return c;
    }
    return 0;
}

/* Sort and drop repeats; the new count. */
static size_t sort_unique(int *v, size_t n)
{
    qsort(v, n, sizeof *v, stk_int_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || v[m - 1] != v[i])
            v[m++] = v[i];
    return m;
}

/* A group, with what its place among the others depends on. */
struct gsort {
    struct stk_group g;
    int culprit, readable, collective;
};

static int gsort_cmp(const void *a, const void *b)
{
    const struct gsort *x = a, *y = b;
    if (x->culprit != y->culprit)
        return y->culprit - x->culprit;
    if (x->readable != y->readable)
        return y->readable - x->readable;
    if (x->g.n != y->g.n)
        return x->g.n > y->g.n ? -1 : 1;
    return stk_int_cmp(x->g.ranks, y->g.ranks);
}

static int in_outliers(const struct stk_report *r, int rank)
{
    return r->noutliers && bsearch(&rank, r->outliers, r->noutliers, sizeof rank, stk_int_cmp);
}

/* The outliers when no rank is known to have stopped: the ranks whose
 * stack differs from the largest group's.  When two groups or more share
 * the largest size (two ranks, each in its own place; two against two),
 * there is no majority: then the groups that are not in a collective are
 * the outliers when some groups are (the others wait for them there), and
 * there are none when that does not tell them apart either.  Ranks
 * without a stack are never outliers: where they are is not known. */
static int majority_outliers(const struct gsort *gs, size_t ng, struct stk_report *r)
{
    size_t max = 0, nmax = 0, nread = 0, ncoll = 0, skip = ng;
    for (size_t i = 0; i < ng; i++) {
        if (!gs[i].readable)
            continue;
        nread++;
        ncoll += gs[i].collective != 0;
        if (gs[i].g.n > max) {
            max = gs[i].g.n;
            nmax = 1;
            skip = i;
        } else if (gs[i].g.n == max) {
            nmax++;
        }
    }
    if (nread < 2)
        return 0;
    int by_collective = nmax > 1;
    if (by_collective && (ncoll == 0 || ncoll == nread))
        return 0;
    size_t total = 0;
    for (size_t i = 0; i < ng; i++)
        total += gs[i].g.n;
    r->outliers = malloc(total * sizeof *r->outliers);
    if (!r->outliers)
        return -1;
    for (size_t i = 0; i < ng; i++) {
        int out = gs[i].readable && (by_collective ? !gs[i].collective : i != skip);
        for (size_t j = 0; out && j < gs[i].g.n; j++)
            r->outliers[r->noutliers++] = gs[i].g.ranks[j];
    }
    r->noutliers = sort_unique(r->outliers, r->noutliers);
    return 0;
}

static int collective(const struct rkey *k)
{
    for (size_t i = 0; k->kind && i < k->l[0].n; i++)
        if (stk_frame_collective(&k->l[0].f[i]))
            return 1;
    return 0;
}

/* The groups of the sorted keys, into gs (one per run of equal keys). */
static int make_groups(const struct stk_set *s, struct rkey **order, struct gsort *gs,
                       size_t *ng)
{
    *ng = 0;
    for (size_t i = 0; i < s->n;) {
        size_t j = i + 1;
        while (j < s->n && rkey_cmp(&order[i], &order[j]) == 0)
            j++;
        struct gsort *g = &gs[(*ng)++];
        memset(g, 0, sizeof *g);
        g->g.ranks = malloc((j - i) * sizeof *g->g.ranks);
        if (!g->g.ranks)
            return -1;
        g->g.example = order[i]->idx;
        for (size_t k = i; k < j; k++) {
            size_t idx = order[k]->idx;
            g->g.ranks[g->g.n++] = s->ranks[idx].rank;
            if (s->ranks[idx].rank < s->ranks[g->g.example].rank)
                g->g.example = idx;
        }
        qsort(g->g.ranks, g->g.n, sizeof *g->g.ranks, stk_int_cmp);
        g->readable = order[i]->kind != 0;
        g->collective = collective(order[i]);
        i = j;
    }
    return 0;
}

int stk_merge(const struct stk_set *s, const int *stalled, size_t n_stalled,
              enum stop_reason reason, double timeout_s, struct stk_report *r)
{
    memset(r, 0, sizeof *r);
    r->reason = reason;
    r->timeout_s = timeout_s;
    size_t n = s->n, ng = 0;
    struct rkey *keys = calloc(n ? n : 1, sizeof *keys);
    struct rkey **order = calloc(n ? n : 1, sizeof *order);
    struct gsort *gs = calloc(n ? n : 1, sizeof *gs);
    int rc = keys && order && gs ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = make_key(&s->ranks[i], i, &keys[i]);
        order[i] = &keys[i];
    }
    if (rc == 0) {
        qsort(order, n, sizeof *order, rkey_cmp);
        rc = make_groups(s, order, gs, &ng);
    }
    if (rc == 0 && stalled && n_stalled) {
        r->outliers = malloc(n_stalled * sizeof *r->outliers);
        rc = r->outliers ? 0 : -1;
        if (rc == 0) {
            memcpy(r->outliers, stalled, n_stalled * sizeof *stalled);
            r->noutliers = sort_unique(r->outliers, n_stalled);
        }
    } else if (rc == 0) {
        rc = majority_outliers(gs, ng, r);
    }
    if (rc == 0) {
        for (size_t i = 0; i < ng; i++)
            for (size_t j = 0; j < gs[i].g.n && !gs[i].culprit; j++)
                gs[i].culprit = in_outliers(r, gs[i].g.ranks[j]);
        qsort(gs, ng, sizeof *gs, gsort_cmp);
        r->groups = malloc((ng ? ng : 1) * sizeof *r->groups);
        rc = r->groups ? 0 : -1;
    }
    if (rc == 0) {
        for (size_t i = 0; i < ng; i++)
            r->groups[i] = gs[i].g;
        r->ngroups = ng;
    } else {
        for (size_t i = 0; i < ng; i++)
            free(gs[i].g.ranks);
        stk_report_free(r);
    }
    for (size_t i = 0; keys && i < n; i++) {
        free(keys[i].err);
        free(keys[i].l);
    }
    free(keys);
    free(order);
    free(gs);
    return rc;
}

void stk_report_free(struct stk_report *r)
{
    for (size_t i = 0; r->groups && i < r->ngroups; i++)
        free(r->groups[i].ranks);
    free(r->groups);
    free(r->outliers);
    r->groups = NULL;
    r->outliers = NULL;
    r->ngroups = r->noutliers = 0;
}

static void frames_free(struct stk_frame *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(f[i].function);
        free(f[i].file);
        free(f[i].module);
    }
    free(f);
}

void stk_set_free(struct stk_set *s)
{
    for (size_t i = 0; s->ranks && i < s->n; i++) {
        struct stk_rank *r = &s->ranks[i];
        for (size_t t = 0; r->threads && t < r->nthreads; t++) {
            free(r->threads[t].name);
            frames_free(r->threads[t].python, r->threads[t].npython);
            frames_free(r->threads[t].native, r->threads[t].nnative);
        }
        free(r->threads);
        free(r->host);
        free(r->error);
    }
    free(s->ranks);
    s->ranks = NULL;
    s->n = 0;
}
