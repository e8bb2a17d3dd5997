/* The job's result as JSON (see result.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "amldist.h"
#include "output/exitstatus.h"
#include "output/json.h"
#include "output/msg.h"
#include "job/job.h"
#include "run/result.h"

/* A monotonic now_s() time as seconds since the epoch: the workers' times
 * are kept on the monotonic clock, so that start <= end always holds. */
static double wall(double mono)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 - (now_s() - mono);
}

static const char *state(const struct worker *w)
{
    if (w->attempt < 0 || w->pid <= 0)
        return "not_started";
    if (w->running)
        return "running";
    if (!status_failed(w->status))
        return "succeeded";
    return w->terminated ? "terminated" : "failed";
}

/* "exit_code", "signal", "description" of an ended worker. */
static void put_status(struct json *js, int wstatus)
{
    char what[96], sig[32];
    status_describe(wstatus, what, sizeof what);
    json_int(js, "exit_code", status_exit_code(wstatus));
    if (WIFSIGNALED(wstatus)) {
        signal_name(WTERMSIG(wstatus), sig, sizeof sig);
        json_str(js, "signal", sig);
    } else {
        json_null(js, "signal");
    }
    json_str(js, "description", what);
}

static void put_worker(struct json *js, const struct worker *w)
{
    int ended = w->pid > 0 && w->attempt >= 0 && !w->running;
    json_id(js, "rank", w->id.rank);
    json_id(js, "local_rank", w->id.local);
    json_str(js, "status", state(w));
    if (w->pid > 0)
        json_int(js, "pid", (long long)w->pid);
    else
        json_null(js, "pid");
    if (ended) {
        put_status(js, w->status);
    } else {
        json_null(js, "exit_code");
        json_null(js, "signal");
        json_null(js, "description");
    }
    if (w->pid > 0 && w->attempt >= 0)
        json_num(js, "start_time", wall(w->t_start), 3);
    else
        json_null(js, "start_time");
    if (ended) {
        json_num(js, "end_time", wall(w->t_done), 3);
        json_num(js, "duration_s", w->t_done - w->t_start, 3);
    } else {
        json_null(js, "end_time");
        json_null(js, "duration_s");
    }
}

static void put_failure(struct json *js, const struct job *j, int status)
{
    if (j->p.fail >= 0) {
        const struct worker *w = &j->w[j->p.fail];
        json_object(js, "first_failure");
        put_worker(js, w);
        json_str(js, "host", j->s->host);
        json_close(js);
    } else if (j->s->rz && status != 0) {
        /* Another node's: its root cause block, as the text says it. */
        const char *f = amldist_rdzv_failure(j->s->rz);
        json_object(js, "first_failure");
        json_str(js, "summary", f && *f ? f : NULL);
        json_close(js);
    } else {
        json_null(js, "first_failure");
    }
}

int result_check(const char *opt, const char *path)
{
    /* access(2), not an open: a check must not create or truncate the
     * file of an earlier job before this one has a result. */
    int rc = access(path, W_OK);
    if (rc < 0 && errno == ENOENT) {
        const char *slash = strrchr(path, '/');
        char dir[4096];
        if (slash == NULL)
            rc = access(".", W_OK | X_OK);
        else if ((size_t)(slash - path) < sizeof dir) {
            size_t n = slash == path ? 1 : (size_t)(slash - path);
            memcpy(dir, path, n);
            dir[n] = '\0';
            rc = access(dir, W_OK | X_OK);
        }
    }
    if (rc < 0) {
        msg_errno(errno, "%s %s: cannot write it", opt, path);
        return -1;
    }
    return 0;
}

void result_write(const struct job *j, int status)
{
    const char *path = j->s->o->result_json;
    if (!path)
        return;
    FILE *f = fopen(path, "we");
    if (!f) {
        msg_errno(errno, "--result-json %s: cannot write it", path);
        return;
    }
    struct json js;
    json_begin(&js, f);
    json_object(&js, NULL);
    json_int(&js, "exit_status", status);
    json_str(&js, "host", j->s->host);
    json_int(&js, "restarts", j->p.restarts);
    json_num(&js, "start_time", wall(j->t_begin), 3);
    json_num(&js, "end_time", wall(now_s()), 3);
    if (j->p.stop_signal) {
        char sig[32];
        signal_name(j->p.stop_signal, sig, sizeof sig);
        json_str(&js, "stop_signal", sig);
    } else {
        json_null(&js, "stop_signal");
    }
    put_failure(&js, j, status);
    json_array(&js, "ranks");
    for (int i = 0; i < j->n; i++) {
        json_object(&js, NULL);
        put_worker(&js, &j->w[i]);
        json_close(&js);
    }
    if (json_end(&js) < 0 || fclose(f) != 0)
        msg_errno(errno, "--result-json %s: cannot write it", path);
}
