/* The straggler readings of the progress page (see straggler.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/hooks.h"
#include "output/msg.h"
#include "plugins/straggler.h"
#include "progress/page.h"
#include "progress/straggler.h"
#include "query/qtext.h"
#include "util/clock.h"

/* Each worker's recorded steps, the newest AMLDIST__STRAGGLER_MAX_STEPS. */
#define HIST AMLDIST__STRAGGLER_MAX_STEPS

struct history {
    uint64_t cursor;                 /* the slot's calls read so far */
    amldist__progress_mark_t *marks; /* a ring of HIST */
    size_t head, len;                /* the oldest, and how many */
};

struct progress_watch {
    struct job *j;   /* the job of the attempt (its timer's) */
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

/* Every local worker's progress now. */
struct progress_lag {
    uint64_t calls;  /* amldist_progress() calls in this attempt; 0: none */
    uint64_t step;   /* the last call's step */
    int64_t t_ns;    /* its CLOCK_MONOTONIC time */
    int64_t lag_ns;  /* its lag behind the median of the workers' times for
                        the steps they all reached (straggler.h) */
    unsigned steps;  /* those common steps, 0: no lag known */
    int last;        /* it is the consistently last one */
};

static int attach(struct job *j, void **self)
{
    *self = NULL;
    if (!j->page)
        return 0; /* no page: nothing to read */
    struct progress_watch *pw = calloc(1, sizeof *pw);
    if (pw)
        pw->h = calloc((size_t)(j->n > 0 ? j->n : 1), sizeof *pw->h);
    if (!pw || !pw->h) {
        free(pw);
        return -1;
    }
    pw->pg = j->page;
    pw->n = j->n;
    *self = pw;
    return 0;
}

static void detach(void *self, struct job *j)
{
    struct progress_watch *pw = self;
    if (pw->timer)
        job_timer_cancel(j, pw->timer);
    for (int i = 0; i < pw->n; i++)
        free(pw->h[i].marks);
    free(pw->h);
    free(pw);
}

/* Worker `index` starts: its history is forgotten (job.h empties its
 * slot). */
static int slot_reset(void *self, struct job *j, int index, char ***env)
{
    struct progress_watch *pw = self;
    struct history *h = &pw->h[index];
    (void)j;
    (void)env;
    h->cursor = 0;
    h->head = h->len = 0;
    return 0;
}

/* Read worker i's new marks into its history (and to the topic's
 * subscribers: across nodes, the plane, for the control plane's host);
 * how many came. */
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
    if (n) {
        struct job_marks jm = {j->w[i].id.rank, got, n};
        job_publish(j, TOPIC_MARKS, &jm);
    }
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
    pw->timer = job_timer(j, amldist__now_ms() + pw->period_ms, on_tick, pw);
}

static void on_tick(void *arg)
{
    struct progress_watch *pw = arg;
    struct job *j = pw->j;
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

static void attempt_start(void *self, struct job *j, int started)
{
    struct progress_watch *pw = self;
    (void)started;
    pw->j = j;
    pw->used = 0;
    pw->period_ms = IDLE_FIRST_MS;
    arm(j, pw);
}

static void attempt_end(void *self, struct job *j)
{
    struct progress_watch *pw = self;
    job_timer_cancel(j, pw->timer);
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

/* Every worker's progress now: out[pw->n]; -1 when out of memory. */
static int progress_lags(struct job *j, struct progress_watch *pw,
                         struct progress_lag *out)
{
    collect(j, pw);
    amldist__straggler_lag_t *lags = calloc((size_t)pw->n, sizeof *lags);
    amldist__straggler_t v;
    if (!lags || compute(pw, lags, &v) < 0) {
        free(lags);
        return -1;
    }
    for (int i = 0; i < pw->n; i++) {
        amldist__progress_sample_t s = {0};
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

/* At the end of the job on one node: "amlrun: slowest rank R: node N
 * (host H), M ms behind the median over K steps", when one was (not
 * under -q, nor with a control plane, whose host compares every node). */
static void job_finish(void *self, struct job *j, int status)
{
    struct progress_watch *pw = self;
    (void)status;
    if (!pw->used || j->s->o->quiet || j->s->rz)
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

/* The rank's last progress step, its age and its lag: "-" while it has
 * not called amldist_progress() in this attempt. */
static void progress_fields(FILE *f, const struct progress_lag *pl)
{
    if (!pl || pl->calls == 0) {
        qt_str(f, "step", NULL);
        qt_str(f, "step_age", NULL);
        qt_str(f, "lag", NULL);
        return;
    }
    qt_int(f, "step", (long long)pl->step);
    double age = (double)(amldist__now_ns() - pl->t_ns) / 1e9;
    qt_num(f, "step_age", age < 0 ? 0 : age, 3);
    if (pl->steps > 0)
        fprintf(f, " lag=%.3f", (double)pl->lag_ns / 1e9);
    else
        qt_str(f, "lag", NULL);
    qt_int(f, "lag_steps", pl->steps);
    qt_int(f, "last", pl->last);
}

/* A --status record: worker w's step, its age and its lag. */
static void status(void *self, struct job *j, const struct worker *w,
                   FILE *record)
{
    struct progress_watch *pw = self;
    struct progress_lag *pl = calloc((size_t)pw->n, sizeof *pl);
    int i = (int)(w - j->w);
    int ok = pl && i >= 0 && i < pw->n && progress_lags(j, pw, pl) == 0;
    progress_fields(record, ok ? &pl[i] : NULL);
    free(pl);
}

const struct job_plugin straggler_plugin = {
    .name = "straggler",
    .attach = attach,
    .worker_env = slot_reset,
    .attempt_start = attempt_start,
    .attempt_end = attempt_end,
    .status = status,
    .job_finish = job_finish,
    .detach = detach,
};
