/* The workers' progress page and its readings (see progresspage.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/msg.h"
#include "progress/page.h"
#include "progress/straggler.h"
#include "run/job.h"
#include "run/plane.h"
#include "run/progresspage.h"

/* Each worker's recorded steps, the newest AMLDIST__STRAGGLER_MAX_STEPS. */
#define HIST AMLDIST__STRAGGLER_MAX_STEPS

struct history {
    uint64_t cursor;                 /* the slot's calls read so far */
    amldist__progress_mark_t *marks; /* a ring of HIST */
    size_t head, len;                /* the oldest, and how many */
};

struct progress_watch {
    amldist__progress_page_t *pg;
    struct history *h;
    int n;
    int timer;       /* the loop's timer id, 0: none */
    long long period_ms;
    int used;        /* some worker has called in this attempt */
};

#define IDLE_FIRST_MS 1000
#define IDLE_MAX_MS 16000
#define BUSY_MIN_MS 10
#define BUSY_MAX_MS 1000

void progress_job_init(struct job *j)
{
    struct progress_watch *pw = calloc(1, sizeof *pw);
    if (pw)
        pw->h = calloc((size_t)j->n, sizeof *pw->h);
    if (pw && pw->h)
        pw->pg = amldist__progress_page_create((unsigned)j->n);
    if (!pw || !pw->h || !pw->pg) {
        if (j->s->o->verbose)
            msg_errno(errno, "no progress page for the workers");
        if (pw)
            free(pw->h);
        free(pw);
        return;
    }
    pw->n = j->n;
    j->progress = pw;
}

void progress_job_free(struct job *j)
{
    struct progress_watch *pw = j->progress;
    if (!pw)
        return;
    for (int i = 0; i < pw->n; i++)
        free(pw->h[i].marks);
    free(pw->h);
    amldist__progress_page_destroy(pw->pg);
    free(pw);
    j->progress = NULL;
}

const struct amldist__progress_page *progress_page(const struct job *j)
{
    return j->progress ? j->progress->pg : NULL;
}

int progress_fd(const struct job *j)
{
    return j->progress ? amldist__progress_page_fd(j->progress->pg) : -1;
}

int progress_worker_env(struct job *j, int index, char ***env)
{
    struct progress_watch *pw = j->progress;
    if (!pw)
        return 0;
    amldist__progress_page_reset(pw->pg, (unsigned)index);
    struct history *h = &pw->h[index];
    h->cursor = 0;
    h->head = h->len = 0;
    char fd[16], slot[16];
    snprintf(fd, sizeof fd, "%d", amldist__progress_page_fd(pw->pg));
    snprintf(slot, sizeof slot, "%d", index);
    if (amldist_envp_set(env, AMLDIST__PROGRESS_FD_ENV, fd) < 0 ||
        amldist_envp_set(env, AMLDIST__PROGRESS_SLOT_ENV, slot) < 0)
        return -1;
    return 0;
}

/* Read worker i's new marks into its history (and, across nodes, to the
 * control plane's host: plane.c); how many came. */
static size_t collect_one(struct job *j, struct progress_watch *pw, int i)
{
    struct history *h = &pw->h[i];
    if (!h->marks && !(h->marks = malloc(HIST * sizeof *h->marks)))
        return 0;
    amldist__progress_mark_t got[AMLDIST__PROGRESS_RING];
    uint64_t before = h->cursor;
    size_t n = amldist__progress_page_marks(pw->pg, (unsigned)i, &h->cursor,
                                            got, AMLDIST__PROGRESS_RING);
    if (h->cursor < before) /* the slot started again */
        h->head = h->len = 0;
    for (size_t k = 0; k < n; k++) {
        h->marks[(h->head + h->len) % HIST] = got[k];
        if (h->len < HIST)
            h->len++;
        else
            h->head = (h->head + 1) % HIST;
    }
    if (n)
        pw->used = 1;
    if (n && j->s->rz)
        plane_marks(j, j->w[i].id.rank, got, n);
    return n;
}

/* Every worker's new marks; the most one worker had. */
static size_t collect(struct job *j, struct progress_watch *pw)
{
    size_t most = 0;
    for (int i = 0; i < pw->n; i++) {
        size_t n = collect_one(j, pw, i);
        if (n > most)
            most = n;
    }
    return most;
}

static void on_tick(void *arg);

/* The next look, period_ms from now. */
static void arm(struct job *j, struct progress_watch *pw)
{
    int id = amldist__loop_timer(j->loop, amldist__now_ms() + pw->period_ms,
                                 on_tick, j);
    pw->timer = id > 0 ? id : 0;
}

static void on_tick(void *arg)
{
    struct job *j = arg;
    struct progress_watch *pw = j->progress;
    pw->timer = 0;
    size_t most = collect(j, pw);
    if (!pw->used) {
        if (pw->period_ms < IDLE_MAX_MS)
            pw->period_ms *= 2;
    } else if (most > AMLDIST__PROGRESS_RING / 2) {
        pw->period_ms = pw->period_ms / 2 > BUSY_MIN_MS ? pw->period_ms / 2
                                                         : BUSY_MIN_MS;
    } else if (most < AMLDIST__PROGRESS_RING / 8) {
        pw->period_ms = pw->period_ms * 2 < BUSY_MAX_MS ? pw->period_ms * 2
                                                         : BUSY_MAX_MS;
    }
    if (pw->used && pw->period_ms > BUSY_MAX_MS)
        pw->period_ms = BUSY_MAX_MS;
    arm(j, pw);
}

void progress_attempt_start(struct job *j)
{
    struct progress_watch *pw = j->progress;
    if (!pw)
        return;
    pw->used = 0;
    pw->period_ms = IDLE_FIRST_MS;
    arm(j, pw);
}

void progress_attempt_end(struct job *j)
{
    struct progress_watch *pw = j->progress;
    if (!pw)
        return;
    if (pw->timer)
        amldist__loop_cancel(j->loop, pw->timer);
    pw->timer = 0;
    collect(j, pw);
}

/* The statistics over every worker's history: lags[pw->n], *v. */
static int compute(struct progress_watch *pw, amldist__straggler_lag_t *lags,
                   amldist__straggler_t *v)
{
    amldist__straggler_rank_t *ranks = calloc((size_t)pw->n, sizeof *ranks);
    amldist__progress_mark_t *flat =
        malloc((size_t)pw->n * HIST * sizeof *flat);
    int rc = -1;
    if (ranks && flat) {
        for (int i = 0; i < pw->n; i++) {
            const struct history *h = &pw->h[i];
            amldist__progress_mark_t *m = flat + (size_t)i * HIST;
            for (size_t k = 0; k < h->len; k++)
                m[k] = h->marks[(h->head + k) % HIST];
            ranks[i].marks = m;
            ranks[i].n = h->len;
        }
        rc = amldist__straggler_compute(ranks, (size_t)pw->n, lags, v);
    }
    free(ranks);
    free(flat);
    return rc;
}

int progress_lags(struct job *j, struct progress_lag *out)
{
    struct progress_watch *pw = j->progress;
    if (!pw)
        return -1;
    collect(j, pw);
    amldist__straggler_lag_t *lags = calloc((size_t)pw->n, sizeof *lags);
    amldist__straggler_t v;
    if (!lags || compute(pw, lags, &v) < 0) {
        free(lags);
        return -1;
    }
    for (int i = 0; i < pw->n; i++) {
        amldist__progress_sample_t s = {0, 0, 0};
        (void)amldist__progress_page_read(pw->pg, (unsigned)i, &s);
        out[i] = (struct progress_lag){
            .calls = s.calls, .step = s.step, .t_ns = s.t_ns,
            .lag_ns = lags[i].lag_ns, .steps = v.steps,
            .last = v.slowest == i,
        };
    }
    free(lags);
    return 0;
}

void progress_report_slowest(struct job *j)
{
    struct progress_watch *pw = j->progress;
    if (!pw || !pw->used || j->s->o->quiet || j->s->rz)
        return;
    amldist__straggler_lag_t *lags = calloc((size_t)pw->n, sizeof *lags);
    amldist__straggler_t v;
    if (lags && compute(pw, lags, &v) == 0 && v.slowest >= 0) {
        const struct worker *w = &j->w[v.slowest];
        char rank[12], node[12];
        double ms = (double)lags[v.slowest].lag_ns / 1e6;
        msg("slowest rank %s: node %s (host %s), %.*f ms behind the median "
            "over %u steps", worker_id_str(w->id.rank, rank),
            worker_id_str(w->id.node, node), j->s->host, ms < 10 ? 1 : 0, ms,
            v.steps);
    }
    free(lags);
}
