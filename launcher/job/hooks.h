/*
 * The job API: how the optional parts of the supervisor (the plugins of
 * launcher/plugins: the hang watch, the straggler readings, the query
 * socket, the plane client, the event log) hang off the job, in the
 * manner of flux-core's shell builtins.  A plugin is a table of
 * callbacks, every one optional, called at fixed moments of the job's
 * life; its state is its own (`self`, made by attach).  It never acts on
 * the workers: it reports a verdict with job_stop(), and the supervisor,
 * which installed the handler at job_plugins_attach(), decides and acts.
 * Plugins speak to each other only through topics, and the plane offers
 * the job its cross-node gathers as a provider.
 *
 * The supervisor calls the job_hooks_*() functions; nothing here names a
 * plugin (launcher/run/plugins.c is the one list).
 */
#ifndef AMLRUN_HOOKS_H
#define AMLRUN_HOOKS_H

#include <stddef.h>
#include <stdio.h>

#include "job/gather.h"
#include "job/job.h"
#include "progress/page.h"
#include "output/stopreason.h"

struct job_plugin {
    const char *name;
    /* The job begins: 0 with *self set (NULL: not active in this job, no
     * other callback is made), or -1 when out of memory. */
    int (*attach)(struct job *j, void **self);
    /* Worker `index` is about to start: its environment (*env) may grow.
     * -1 when out of memory (the worker does not start). */
    int (*worker_env)(void *self, struct job *j, int index, char ***env);
    /* A worker runs (its exec succeeded). */
    void (*worker_start)(void *self, struct job *j, const struct worker *w);
    /* A worker could not start: `why` in a few words. */
    void (*start_failed)(void *self, struct job *j, const struct worker *w,
                         const char *why);
    /* The attempt's workers were started (`started`: all of them; 0: one
     * could not, and the others are being stopped). */
    void (*attempt_start)(void *self, struct job *j, int started);
    /* A worker ended (reaped, its output drained); `first_failure`: it is
     * the attempt's first failure, which stops the others. */
    void (*worker_exit)(void *self, struct job *j, const struct worker *w,
                        int first_failure);
    /* The supervisor stops the running workers for `r`, with `sig`. */
    void (*stopping)(void *self, struct job *j, enum stop_reason r, int sig);
    /* Every worker of the attempt has ended and its output is drained. */
    void (*attempt_end)(void *self, struct job *j);
    /* Another attempt begins: `restarts` its count when it is a restart
     * (else -1), `rendezvous` when the control plane formed a round. */
    void (*round)(void *self, struct job *j, int restarts, int rendezvous);
    /* A --status record of worker `w` is being written: the plugin's
     * fields, each " key=value" (query/qtext.h), into `record`. */
    void (*status)(void *self, struct job *j, const struct worker *w,
                   FILE *record);
    /* The job's work is over, before its summary (status: amlrun's exit
     * status), and then after it, the last words. */
    void (*job_finish)(void *self, struct job *j, int status);
    void (*job_end)(void *self, struct job *j, int status);
    /* Free self (the loop still exists; its watches are the plugin's to
     * remove). */
    void (*detach)(void *self, struct job *j);
};

/* ---- the supervisor's side ---- */

/* What a plugin's verdict carries to the supervisor (job_stop). */
struct stop_detail {
    /* The reason in words, for the end-of-job line ("" or NULL: none). */
    const char *why;
    /* For the other nodes (a restartable reason: the text of this node's
     * failure of the round; else the reason the job ends), NULL: say
     * nothing to them. */
    const char *peer_text;
};

/* What the supervisor does for the job API (installed at attach). */
struct job_actions {
    /* The verdict of a plugin: the supervisor decides and acts. */
    void (*stop)(struct job *j, enum stop_reason r,
                 const struct stop_detail *d);
    /* Take the signals that came before an action on the job: 1 if any. */
    int (*take_signals)(struct job *j);
    /* Read what the running workers wrote and amlrun has not read yet,
     * now, without waiting for more. */
    void (*drain)(struct job *j);
};

/* Attach every plugin of `list` (NULL-terminated) to j, in order (the
 * order of every callback after).  0, or -1 when out of memory. */
int job_plugins_attach(struct job *j, const struct job_plugin *const *list,
                       const struct job_actions *act);
/* Detach them all, in reverse order, and cancel their timers. */
void job_plugins_detach(struct job *j);

int job_hooks_worker_env(struct job *j, int index, char ***env);
void job_hooks_worker_start(struct job *j, const struct worker *w);
void job_hooks_start_failed(struct job *j, const struct worker *w,
                            const char *why);
void job_hooks_attempt_start(struct job *j, int started);
void job_hooks_worker_exit(struct job *j, const struct worker *w,
                           int first_failure);
void job_hooks_stopping(struct job *j, enum stop_reason r, int sig);
void job_hooks_attempt_end(struct job *j);
void job_hooks_round(struct job *j, int restarts, int rendezvous);
void job_hooks_status(struct job *j, const struct worker *w, FILE *record);
void job_hooks_job_finish(struct job *j, int status);
void job_hooks_job_end(struct job *j, int status);

/* ---- the plugins' side: the only ways a plugin acts ---- */

/* The verdict: the attempt (or the job) stops for `r`. */
void job_stop(struct job *j, enum stop_reason r, const struct stop_detail *d);
/* Take the signals that came (a worker's exit told of is no rank
 * running), before a decision; whether any came. */
int job_sync(struct job *j);
/* Read every running worker's pending output now (none is waited for),
 * so that a decision sees what they wrote while amlrun could not read. */
void job_drain(struct job *j);
/* fn(arg) at at_ms (amldist__now_ms()'s clock), the signals that came
 * taken first; the timer's id (> 0), or 0 when out of memory. */
typedef void job_timer_fn(void *arg);
int job_timer(struct job *j, long long at_ms, job_timer_fn *fn, void *arg);
/* Forget a timer that has not fired (0: none). */
void job_timer_cancel(struct job *j, int id);

/* Topics between plugins: a publisher's data reaches every subscriber,
 * at once, in subscription order. */
enum job_topic {
    TOPIC_MARKS, /* a worker's new progress marks: struct job_marks */
    TOPIC_HANG,  /* a hang or --timeout was found: struct job_hang */
    TOPIC_NTOPICS
};
struct job_marks {
    int rank;
    const amldist__progress_mark_t *m;
    size_t n;
};
struct job_hang {
    enum stop_reason reason; /* STOP_HANG or STOP_TIMEOUT */
    double limit_s;          /* the option's limit */
    double time_s;           /* the time without progress, or run */
    const int *stalled;      /* the stalled ranks, where progress is per rank */
    size_t nstalled;
};
typedef void job_topic_fn(void *self, struct job *j, const void *data);
int job_subscribe(struct job *j, enum job_topic t, job_topic_fn *fn,
                  void *self);
void job_publish(struct job *j, enum job_topic t, const void *data);

/* The provider of job_gather()'s answers across nodes (the plane): as
 * gather.h's job_gather(); 0, or -1 when it cannot ask (then this node's
 * part is the whole answer). */
typedef int job_gather_fn(void *self, struct job *j, enum part_kind k,
                          struct part *mine, gather_done_fn *done, void *arg);
void job_set_gatherer(struct job *j, job_gather_fn *fn, void *self);
/* job_gather()'s use of it: -1 without a provider, or when it cannot ask. */
int job_hooks_gather(struct job *j, enum part_kind k, struct part *mine,
                     gather_done_fn *done, void *arg);

#endif /* AMLRUN_HOOKS_H */
