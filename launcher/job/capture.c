/*
 * The ranks' stacks, read beside the loop (see job.h): the capture runs on
 * a thread of its own (stacks.h's stk_capture_start) and its descriptor is
 * one more watch of the loop, so that signals, exits and output are served
 * while a rank with a thread in uninterruptible sleep holds the capture.
 */
#include <poll.h>
#include <stdlib.h>

#include "job/hooks.h"
#include "job/job.h"
#include "stacks/stacks.h"

/* How long the capture of every rank's stack may take. */
#define CAPTURE_MS 10000

struct job_capture {
    struct job_capture *next;
    struct job *j;
    struct stk_capture *k;
    int fd;
    job_stacks_fn *done;
    void *arg;
};

/* Take c off the job's list and the loop. */
static void unlink_capture(struct job *j, struct job_capture *c)
{
    struct job_capture **pc = &j->captures;
    while (*pc && *pc != c)
        pc = &(*pc)->next;
    if (*pc)
        *pc = c->next;
    amldist__loop_unwatch(j->loop, c->fd);
}

static void on_read(void *arg, int fd, short revents)
{
    struct job_capture *c = arg;
    struct job *j = c->j;
    struct stk_set set = {NULL, 0};
    (void)fd;
    (void)revents;
    unlink_capture(j, c);
    int rc = stk_capture_collect(c->k, &set);
    c->done(c->arg, &set, rc);
    stk_set_free(&set);
    free(c);
    /* Then the signals, and the workers' ends the capture held back
     * (the supervisor's reap waits while one runs). */
    job_sync(j);
}

struct job_capture *job_stacks_start(struct job *j, job_stacks_fn *done,
                                     void *arg)
{
    struct stk_target *t = NULL;
    long n = job_stack_targets(j, &t);
    struct job_capture *c = n >= 0 ? calloc(1, sizeof *c) : NULL;
    if (c)
        c->k = stk_capture_start(t, (size_t)n, j->s->host, CAPTURE_MS);
    free(t); /* the capture keeps copies */
    if (!c || !c->k) {
        free(c);
        return NULL;
    }
    *c = (struct job_capture){j->captures, j, c->k, stk_capture_fd(c->k),
                              done, arg};
    if (amldist__loop_watch(j->loop, c->fd, POLLIN, on_read, c) < 0) {
        stk_capture_cancel(c->k);
        free(c);
        return NULL;
    }
    j->captures = c;
    return c;
}

void job_stacks_cancel(struct job *j, struct job_capture *c)
{
    if (!c)
        return;
    unlink_capture(j, c);
    stk_capture_cancel(c->k);
    free(c);
}

void job_stacks_cancel_all(struct job *j, int quiet)
{
    while (j->captures) {
        struct job_capture *c = j->captures;
        job_stacks_fn *done = c->done;
        void *arg = c->arg;
        job_stacks_cancel(j, c);
        struct stk_set none = {NULL, 0};
        if (!quiet)
            done(arg, &none, JOB_STACKS_CUT);
    }
}
