/* The job API: plugins, their hooks, topics and timers (see hooks.h). */
#include <stdlib.h>

#include "job/hooks.h"
#include "output/msg.h"

/* A plugin's subscription to a topic. */
struct subscription {
    struct subscription *next;
    enum job_topic topic;
    job_topic_fn *fn;
    void *self;
};

/* A timer of a plugin's: the signals that came are taken before fn. */
struct job_timer {
    struct job_timer *next;
    struct job *j;
    int id;
    job_timer_fn *fn;
    void *arg;
};

struct job_plugins {
    const struct job_plugin *const *list;
    void **self; /* per plugin: NULL, not active */
    int n;
    struct job_actions act;
    struct subscription *subs; /* in subscription order */
    struct job_timer *timers;
    job_gather_fn *gather;
    void *gather_self;
};

/* Every active plugin with callback `cb`, in order. */
#define EACH(j, cb)                                                        \
    for (int i_ = 0; (j)->plugins && i_ < (j)->plugins->n; i_++)           \
        if ((j)->plugins->self[i_] && (j)->plugins->list[i_]->cb)
#define PLUGIN(j) ((j)->plugins->list[i_])
#define SELF(j) ((j)->plugins->self[i_])

int job_plugins_attach(struct job *j, const struct job_plugin *const *list,
                       const struct job_actions *act)
{
    struct job_plugins *ps = calloc(1, sizeof *ps);
    if (!ps)
        return -1;
    while (list[ps->n])
        ps->n++;
    ps->self = calloc((size_t)(ps->n ? ps->n : 1), sizeof *ps->self);
    if (!ps->self) {
        free(ps);
        return -1;
    }
    ps->list = list;
    ps->act = *act;
    j->plugins = ps;
    for (int i = 0; i < ps->n; i++)
        if (list[i]->attach && list[i]->attach(j, &ps->self[i]) < 0)
            return -1;
    return 0;
}

void job_plugins_detach(struct job *j)
{
    struct job_plugins *ps = j->plugins;
    if (!ps)
        return;
    for (int i = ps->n - 1; i >= 0; i--)
        if (ps->self[i] && ps->list[i]->detach)
            ps->list[i]->detach(ps->self[i], j);
    while (ps->timers) {
        struct job_timer *t = ps->timers;
        ps->timers = t->next;
        if (j->loop)
            amldist__loop_cancel(j->loop, t->id);
        free(t);
    }
    while (ps->subs) {
        struct subscription *s = ps->subs;
        ps->subs = s->next;
        free(s);
    }
    free(ps->self);
    free(ps);
    j->plugins = NULL;
}

/* ---- the hooks ---- */

int job_hooks_worker_env(struct job *j, int index, char ***env)
{
    EACH(j, worker_env) if (PLUGIN(j)->worker_env(SELF(j), j, index, env) < 0)
        return -1;
    return 0;
}

void job_hooks_worker_start(struct job *j, const struct worker *w)
{
    EACH(j, worker_start) PLUGIN(j)->worker_start(SELF(j), j, w);
}

void job_hooks_start_failed(struct job *j, const struct worker *w,
                            const char *why)
{
    EACH(j, start_failed) PLUGIN(j)->start_failed(SELF(j), j, w, why);
}

void job_hooks_attempt_start(struct job *j, int started)
{
    EACH(j, attempt_start) PLUGIN(j)->attempt_start(SELF(j), j, started);
}

void job_hooks_worker_exit(struct job *j, const struct worker *w,
                           int first_failure)
{
    EACH(j, worker_exit) PLUGIN(j)->worker_exit(SELF(j), j, w, first_failure);
}

void job_hooks_stopping(struct job *j, enum stop_reason r, int sig)
{
    EACH(j, stopping) PLUGIN(j)->stopping(SELF(j), j, r, sig);
}

void job_hooks_attempt_end(struct job *j)
{
    EACH(j, attempt_end) PLUGIN(j)->attempt_end(SELF(j), j);
}

void job_hooks_round(struct job *j, int restarts, int rendezvous)
{
    EACH(j, round) PLUGIN(j)->round(SELF(j), j, restarts, rendezvous);
}

void job_hooks_status(struct job *j, const struct worker *w, FILE *record)
{
    EACH(j, status) PLUGIN(j)->status(SELF(j), j, w, record);
}

void job_hooks_job_finish(struct job *j, int status)
{
    EACH(j, job_finish) PLUGIN(j)->job_finish(SELF(j), j, status);
}

void job_hooks_job_end(struct job *j, int status)
{
    EACH(j, job_end) PLUGIN(j)->job_end(SELF(j), j, status);
}

/* ---- what a plugin may do ---- */

void job_stop(struct job *j, enum stop_reason r, const struct stop_detail *d)
{
    if (j->plugins && j->plugins->act.stop)
        j->plugins->act.stop(j, r, d);
}

int job_sync(struct job *j)
{
    if (j->plugins && j->plugins->act.take_signals)
        return j->plugins->act.take_signals(j);
    return 0;
}

void job_drain(struct job *j)
{
    if (j->plugins && j->plugins->act.drain)
        j->plugins->act.drain(j);
}

static void on_timer(void *arg)
{
    struct job_timer *t = arg, **pt;
    struct job *j = t->j;
    for (pt = &j->plugins->timers; *pt && *pt != t; pt = &(*pt)->next) {
    }
    if (*pt)
        *pt = t->next;
    job_timer_fn *fn = t->fn;
    void *fn_arg = t->arg;
    free(t);
    job_sync(j);
    fn(fn_arg);
}

int job_timer(struct job *j, long long at_ms, job_timer_fn *fn, void *arg)
{
    struct job_timer *t = j->plugins ? calloc(1, sizeof *t) : NULL;
    if (t) {
        *t = (struct job_timer){j->plugins->timers, j, 0, fn, arg};
        t->id = amldist__loop_timer(j->loop, at_ms, on_timer, t);
    }
    if (!t || t->id <= 0) {
        free(t);
        return 0;
    }
    j->plugins->timers = t;
    return t->id;
}

void job_timer_cancel(struct job *j, int id)
{
    if (id <= 0 || !j->plugins)
        return;
    for (struct job_timer **pt = &j->plugins->timers; *pt; pt = &(*pt)->next) {
        if ((*pt)->id != id)
            continue;
        struct job_timer *t = *pt;
        *pt = t->next;
        amldist__loop_cancel(j->loop, id);
        free(t);
        return;
    }
}

int job_subscribe(struct job *j, enum job_topic t, job_topic_fn *fn,
                  void *self)
{
    struct subscription *s = j->plugins ? calloc(1, sizeof *s) : NULL, **ps;
    if (!s)
        return -1;
    *s = (struct subscription){NULL, t, fn, self};
    for (ps = &j->plugins->subs; *ps; ps = &(*ps)->next) {
    }
    *ps = s;
    return 0;
}

void job_publish(struct job *j, enum job_topic t, const void *data)
{
    for (struct subscription *s = j->plugins ? j->plugins->subs : NULL; s;
         s = s->next)
        if (s->topic == t)
            s->fn(s->self, j, data);
}

void job_set_gatherer(struct job *j, job_gather_fn *fn, void *self)
{
    if (!j->plugins)
        return;
    j->plugins->gather = fn;
    j->plugins->gather_self = self;
}

int job_hooks_gather(struct job *j, enum part_kind k, struct part *mine,
                     gather_done_fn *done, void *arg)
{
    struct job_plugins *ps = j->plugins;
    if (!ps || !ps->gather)
        return -1;
    return ps->gather(ps->gather_self, j, k, mine, done, arg);
}
