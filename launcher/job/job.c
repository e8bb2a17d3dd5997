/*
 * What every part may ask of the job (see job.h): this node's rank, its
 * ranks still running, their view for the hang decision, and their
 * stacks.
 */
#include <stdlib.h>

#include "amldist.h"
#include "job/job.h"
#include "output/ranklist.h"
#include "progress/page.h"
#include "stacks/frames.h"
#include "stacks/stacks.h"
#include "util/clock.h"

int job_node(const struct job *j)
{
    if (j->s->rz)
        return amldist_rdzv_node_rank(j->s->rz);
    if (j->n > 0 && j->w[0].id.node >= 0)
        return j->w[0].id.node;
    return amldist_node_rank(j->s->env->layout);
}

int job_plane_nodes(const struct job *j)
{
    return j->s->rz ? amldist_rdzv_num_nodes(j->s->rz) : -1;
}

int job_plane_round(const struct job *j)
{
    return j->s->rz ? amldist_rdzv_round(j->s->rz) : -1;
}

int job_plane_restarts(const struct job *j)
{
    return j->s->rz ? amldist_rdzv_restart_count(j->s->rz) : j->p.restarts;
}

int job_plane_is_host(const struct job *j)
{
    return j->s->rz && amldist_rdzv_is_host(j->s->rz) == 1;
}

/* This node's workers still running: their ranks in `ranks` (room for
 * j->n); the count. */
static size_t running(const struct job *j, int *ranks)
{
    size_t n = 0;
    for (int i = 0; i < j->n; i++)
        if (j->w[i].running)
            ranks[n++] = j->w[i].id.rank;
    return n;
}

void running_ranks(const struct job *j, char *buf, size_t size)
{
    int *ranks = malloc((size_t)(j->n > 0 ? j->n : 1) * sizeof *ranks);
    buf[0] = '\0';
    if (ranks) {
        size_t n = running(j, ranks);
        qsort(ranks, n, sizeof *ranks, stk_int_cmp);
        (void)ranklist_format(ranks, n, buf, size);
    }
    free(ranks);
}

static int64_t later(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* This node's ranks of the attempt, as the decision sees them: their
 * output (the last byte, a bar's redraw too), and their calls of the
 * progress API (the page's slots, emptied at each start), all on
 * CLOCK_MONOTONIC.  Time a worker spent stopped does not count: stopped,
 * it is not a live rank (never stalled itself, no sign of life for the
 * others either: ranks that wait for it still stall); continued, it is
 * seen as starting then.  For each, its worker's index in idx[] (may be
 * NULL). */
size_t hang_view(const struct job *j, amldist__hang_rank_t *v, int *idx)
{
    const amldist__progress_page_t *pg = j->page;
    size_t n = 0;
    for (int i = 0; i < j->n; i++) {
        const struct worker *w = &j->w[i];
        if (w->attempt != j->p.restarts)
            continue; /* not started in this attempt */
        amldist__progress_sample_t call = {0, 0, 0, 0, 0};
        if (pg)
            (void)amldist__progress_page_read(pg, (unsigned)i, &call);
        if (idx)
            idx[n] = i;
        v[n++] = (amldist__hang_rank_t){
            .rank = w->id.rank, .alive = w->running && !w->stopped,
            .uses_api = call.calls > 0 || call.expected,
            .start_ns = w->running ? later(w->start_ns, w->cont_ns)
                                   : w->start_ns,
            .progress_ns = call.t_ns,
            .line_ns = later(w->out.out_ns, w->err.out_ns),
            .end_ns = w->end_ns, .until_ns = call.until_ns,
        };
    }
    return n;
}

long job_stack_targets(const struct job *j, struct stk_target **out)
{
    amldist__hang_rank_t *view = malloc((size_t)(j->n ? j->n : 1) * sizeof *view);
    int *idx = malloc((size_t)(j->n ? j->n : 1) * sizeof *idx);
    struct stk_target *t = calloc((size_t)(j->n ? j->n : 1), sizeof *t);
    int64_t now = amldist__now_ns();
    long n = 0;
    size_t nv = view && idx && t ? hang_view(j, view, idx) : 0;
    for (size_t k = 0; k < nv; k++) {
        const struct worker *w = &j->w[idx[k]];
        if (!w->running)
            continue;
        /* Per rank, its last call (its start before any); else its last
         * output (its start before any). */
        int64_t last = view[k].uses_api ? view[k].progress_ns
                                        : view[k].line_ns;
        if (last < view[k].start_ns)
            last = view[k].start_ns;
        t[n++] = (struct stk_target){
            .rank = w->id.rank, .local_rank = w->id.local, .node = w->id.node,
            .pid = w->pid, .last_progress_s = (double)(now - last) / 1e9,
            .python_fd = w->stack_fd,
        };
    }
    if (!view || !idx || !t) {
        free(t);
        t = NULL;
        n = -1;
    }
    free(idx);
    free(view);
    *out = t;
    return n;
}
