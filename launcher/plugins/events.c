/* The job's events: the event log and torchrun's console (see events.h). */
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "job/hooks.h"
#include "output/exitstatus.h"
#include "output/msg.h"
#include "plugins/events.h"


static void begin(struct event *v, const char *name, const char *host,
                  int node, const char *run_id)
{
    struct timespec t;
    struct tm tm;
    char iso[40];
    clock_gettime(CLOCK_REALTIME, &t);
    gmtime_r(&t.tv_sec, &tm);
    size_t n = strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(iso + n, sizeof iso - n, ".%03ldZ", t.tv_nsec / 1000000);
    ev_begin(v, name);
    ev_str(v, "time", iso);
    /* The same millisecond as "time" (truncated, not rounded). */
    ev_num(v, "ts", (double)t.tv_sec + (double)(t.tv_nsec / 1000000) / 1e3, 3);
    ev_str(v, "host", host);
    ev_id(v, "node", node);
    ev_str(v, "run_id", run_id);
}

static void job_begin(const struct job *j, struct event *v, const char *name)
{
    begin(v, name, j->s->host, job_node(j), j->s->o->run_id);
}

/* Write, and have the loop tell us when the rest may go. */
static void emit(const struct job *j, struct event *v)
{
    struct eventlog *e = j->s->events;
    eventlog_write(e, v);
    amldist__loop_events(j->loop, eventlog_fd(e),
                         eventlog_pending(e) ? POLLOUT : 0);
}

static void on_writable(void *arg, int fd, short revents)
{
    struct job *j = arg;
    (void)revents;
    eventlog_flush(j->s->events);
    amldist__loop_events(j->loop, fd,
                         eventlog_pending(j->s->events) ? POLLOUT : 0);
}

void events_job_start(struct eventlog *e, const struct amlrun_opts *o,
                      const char *host, int node, int nproc,
                      const char *entry)
{
    if (!e)
        return;
    struct event v;
    begin(&v, "start", host, node, o->run_id);
    ev_int(&v, "pid", getpid());
    ev_int(&v, "nproc", nproc);
    ev_int(&v, "nnodes", o->nnodes > 0 ? o->nnodes : 1);
    ev_str(&v, "rdzv_backend", options_c10d(o) ? o->rdzv_backend : "static");
    ev_int(&v, "max_restarts", o->max_restarts);
    ev_str(&v, "role", o->role);
    ev_str(&v, "entry_point", entry);
    /* No loop yet: a reader that is behind gets it with the next write. */
    eventlog_write(e, &v);
}

static int events_watch(struct job *j)
{
    if (!j->s->events)
        return 0;
    return amldist__loop_watch(j->loop, eventlog_fd(j->s->events), 0,
                               on_writable, j);
}

static void events_rendezvous(const struct job *j)
{
    if (!j->s->events || !j->s->rz)
        return;
    struct event v;
    job_begin(j, &v, "rendezvous");
    ev_int(&v, "round", job_plane_round(j));
    ev_int(&v, "nnodes", job_plane_nodes(j));
    ev_int(&v, "restarts", job_plane_restarts(j));
    emit(j, &v);
}

static void worker_fields(struct event *v, const struct worker *w)
{
    ev_id(v, "rank", w->id.rank);
    ev_id(v, "local_rank", w->id.local);
    ev_int(v, "pid", w->pid);
}

static void events_worker_start(const struct job *j, const struct worker *w)
{
    if (!j->s->events)
        return;
    struct event v;
    job_begin(j, &v, "worker_start");
    worker_fields(&v, w);
    ev_int(&v, "restarts", j->p.restarts);
    emit(j, &v);
}

/* "exit_code": N or null, "signal": "SIGKILL" or null. */
static void status_fields(struct event *v, int status)
{
    char name[32];
    if (WIFSIGNALED(status)) {
        signal_name(WTERMSIG(status), name, sizeof name);
        ev_str(v, "exit_code", NULL);
        ev_str(v, "signal", name);
    } else {
        ev_int(v, "exit_code", status_exit_code(status));
        ev_str(v, "signal", NULL);
    }
}

static void events_worker_exit(const struct job *j, const struct worker *w)
{
    if (!j->s->events)
        return;
    struct event v;
    job_begin(j, &v, "worker_exit");
    worker_fields(&v, w);
    status_fields(&v, w->status);
    ev_str(&v, "state", w->terminated ? "TERMINATED"
                         : status_failed(w->status) ? "FAILED" : "SUCCEEDED");
    ev_num(&v, "run_s", now_s() - w->t_start, 3);
    emit(j, &v);
}

static void events_failure(const struct job *j, const struct worker *w, const char *why)
{
    if (!j->s->events)
        return;
    struct event v;
    job_begin(j, &v, "failure");
    ev_id(&v, "rank", w->id.rank);
    ev_id(&v, "local_rank", w->id.local);
    if (why) {
        ev_str(&v, "reason", why);
    } else {
        ev_int(&v, "pid", w->pid);
        status_fields(&v, w->status);
    }
    emit(j, &v);
}

static void events_restart(const struct job *j, int restarts)
{
    if (!j->s->events)
        return;
    struct event v;
    job_begin(j, &v, "restart");
    ev_int(&v, "restarts", restarts);
    ev_int(&v, "max_restarts", j->s->o->max_restarts);
    emit(j, &v);
}

static void events_stop(const struct job *j, const char *reason, int sig)
{
    if (!j->s->events)
        return;
    char name[32];
    signal_name(sig, name, sizeof name);
    struct event v;
    job_begin(j, &v, "stop");
    ev_str(&v, "reason", reason);
    ev_str(&v, "signal", name);
    ev_int(&v, "running", j->live);
    emit(j, &v);
}

/* "hang": a hang (`idle` s without progress, the stalled ranks where
 * progress is per rank) or --timeout (the job's time): its reason's
 * fields (output/stopreason.h). */
static void events_hang(void *self, struct job *j, const void *data)
{
    const struct job_hang *h = data;
    const struct stop_row *row = stop_row(h->reason);
    const int *stalled = h->stalled;
    size_t nstalled = h->nstalled;
    (void)self;
    if (!j->s->events || !row->time_field)
        return;
    struct event v;
    job_begin(j, &v, "hang");
    ev_str(&v, "reason", row->name);
    ev_num(&v, "timeout_s", h->limit_s, 3);
    ev_num(&v, row->time_field, h->time_s, 3);
    char list[1024] = "[";
    size_t o = 1;
    for (size_t i = 0; i < nstalled && o + 16 < sizeof list; i++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", i ? "," : "",
                              stalled[i]);
    snprintf(list + o, sizeof list - o, "]");
    ev_raw(&v, "stalled", list);
    ev_int(&v, "running", j->live);
    if (j->s->o->hang_report)
        ev_str(&v, "report", j->s->o->hang_report);
    emit(j, &v);
}

/* ---- torchrun's --event-log-handler console ------------------------------
 * What torchrun 2.x's agent records (torch/distributed/elastic/agent/
 * server/api.py), as its console handler writes it: json.dumps of each
 * event (", " and ": " between items) on stderr.  Each attempt: RENDEZVOUS
 * and ASSIGN_WORKER_RANKS (AGENT, with duration_ms; the worker group not
 * known yet on the first), then START for each worker (WORKER); at the
 * end, the last attempt's workers (SUCCEEDED, FAILED with exit code, pid
 * and error file, or TERMINATED when the agent stopped it), then the
 * agent's SUCCEEDED (agent.run() returned, whatever the workers did) or
 * FAILED (a stop signal, a worker that could not start).  "metadata" in
 * the metadata is JSON in a string.  The host is gethostname()'s (torchrun
 * looks up the FQDN, a DNS query amlrun does not make), and amlrun's
 * static rendezvous takes no time. */

struct torch_ev {
    const char *state, *source;
    const struct worker *w; /* a worker's event, or NULL */
    int group;              /* the worker group is known */
    double duration_ms;     /* < 0: null */
    long long total_run_time;
    const char *raw_error;
};

static int group_size(const struct job *j)
{
    const struct amlrun_opts *o = j->s->o;
    return j->s->rz ? job_plane_nodes(j) : (o->nnodes > 0 ? o->nnodes : 1);
}

static void torch_event(const struct job *j, const struct torch_ev *t)
{
    const struct amlrun_opts *o = j->s->o;
    const struct worker *w = t->w;
    const char *entry = strrchr(j->s->cmd->path, '/');
    entry = entry ? entry + 1 : j->s->cmd->path;
    int failed = w && strcmp(t->state, "FAILED") == 0;
    struct event md, v;
    ev_open(&md);
    ev_id(&md, "group_world_size", t->group ? group_size(j) : -1);
    ev_str(&md, "entry_point", entry);
    if (w) {
        char list[4][24];
        snprintf(list[0], sizeof list[0], "[%d]", w->id.local);
        snprintf(list[1], sizeof list[1], "[%d]", w->id.rank);
        snprintf(list[2], sizeof list[2], "[%d]", w->id.world);
        ev_raw(&md, "local_rank", list[0]);
        ev_raw(&md, "role_rank", list[1]);
        ev_raw(&md, "role_world_size", list[2]);
        snprintf(list[3], sizeof list[3], "[%d]", status_exit_code(w->status));
        ev_raw(&md, "exit_code", failed ? list[3] : "[null]");
        snprintf(list[3], sizeof list[3], "[%d]", (int)w->pid);
        ev_raw(&md, "worker_pid", failed ? list[3] : "[null]");
    }
    if (!ev_finish(&md))
        return;
    md.buf[md.len - 1] = '\0'; /* the newline */
    char name[64], pid[16];
    snprintf(name, sizeof name, "torchelastic.worker.status.%s", t->state);
    ev_open(&v);
    ev_str(&v, "name", name);
    ev_str(&v, "source", t->source);
    ev_int(&v, "timestamp", 0);
    ev_object(&v, "metadata");
    ev_str(&v, "run_id", o->run_id);
    ev_id(&v, "global_rank", w ? w->id.rank : -1);
    ev_id(&v, "group_rank", t->group ? job_node(j) : -1);
    snprintf(pid, sizeof pid, "%d", w ? (int)w->pid : 0);
    ev_str(&v, "worker_id", w ? pid : NULL);
    ev_str(&v, "role", o->role);
    ev_str(&v, "hostname", j->s->host);
    ev_str(&v, "state", t->state);
    ev_int(&v, "total_run_time", t->total_run_time);
    ev_str(&v, "rdzv_backend", options_c10d(o) ? o->rdzv_backend : "static");
    ev_str(&v, "raw_error", t->raw_error);
    ev_str(&v, "metadata", md.buf);
    ev_int(&v, "agent_restarts", j->p.restarts);
    if (t->duration_ms >= 0)
        ev_num(&v, "duration_ms", t->duration_ms, 3);
    else
        ev_str(&v, "duration_ms", NULL);
    ev_close(&v);
    size_t n = ev_finish(&v);
    if (n)
        (void)msg_write(v.buf, n);
}

static void events_attempt_started(const struct job *j)
{
    if (!j->s->o->event_console)
        return;
    /* Before the first rendezvous torchrun's worker group has no rank or
     * size yet; a restart's rendezvous reports the previous ones. */
    int group = j->p.restarts > 0;
    struct torch_ev t = {"RENDEZVOUS", "AGENT", NULL, group, 0.0, 0, NULL};
    torch_event(j, &t);
    t.state = "ASSIGN_WORKER_RANKS";
    torch_event(j, &t);
    for (int i = 0; i < j->n; i++) {
        struct torch_ev s = {"START", "WORKER", &j->w[i], 1, -1, 0, NULL};
        torch_event(j, &s);
    }
}

/* A failed worker's error file as torchrun's raw_error: its JSON text,
 * or {"message": "<NONE>"} when it wrote none. */
static void raw_error_of(const struct worker *w, char *buf, size_t size)
{
    snprintf(buf, size, "{\"message\": \"<NONE>\"}");
    FILE *f = w->error_file ? fopen(w->error_file, "re") : NULL;
    if (!f)
        return;
    size_t n = fread(buf, 1, size - 1, f);
    int whole = feof(f);
    fclose(f);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        n--;
    buf[n] = '\0';
    if (!whole || n == 0)
        snprintf(buf, size, "{\"message\": \"<NONE>\"}");
}

static void console_end(const struct job *j, int status)
{
    long long total = (long long)(now_s() - j->t_begin);
    for (int i = 0; i < j->n; i++) {
        const struct worker *w = &j->w[i];
        if (w->attempt != j->p.restarts || w->running)
            continue;
        char raw[640];
        struct torch_ev t = {"SUCCEEDED", "WORKER", w, 1, -1, total, NULL};
        if (w->terminated) {
            t.state = "TERMINATED";
        } else if (status_failed(w->status)) {
            t.state = "FAILED";
            raw_error_of(w, raw, sizeof raw);
            t.raw_error = raw;
        }
        torch_event(j, &t);
    }
    char why[96] = "";
    int failed = j->p.stop_signal != 0 || j->p.start_status >= 0;
    if (j->p.stop_signal)
        snprintf(why, sizeof why, "SignalException: Process %d got signal: %d",
                 (int)getpid(), j->p.stop_signal);
    else if (failed)
        snprintf(why, sizeof why, "a worker could not start (amlrun exits %d)",
                 status);
    struct torch_ev t = {failed ? "FAILED" : "SUCCEEDED", "AGENT", NULL, 1, -1,
                         total, failed ? why : NULL};
    torch_event(j, &t);
}

static void events_end(const struct job *j, int status)
{
    if (j->s->o->event_console)
        console_end(j, status);
    if (!j->s->events)
        return;
    struct event v;
    job_begin(j, &v, "end");
    ev_int(&v, "exit_code", status);
    ev_int(&v, "restarts", j->p.restarts);
    if (j->p.stop_signal) {
        char name[32];
        signal_name(j->p.stop_signal, name, sizeof name);
        ev_str(&v, "stop_signal", name);
    }
    emit(j, &v);
}

/* ---- the plugin ------------------------------------------------------------ */

static int attach(struct job *j, void **self)
{
    *self = NULL;
    if (!j->s->events && !j->s->o->event_console)
        return 0;
    *self = j; /* no state of its own but the job's log */
    if (events_watch(j) < 0 || job_subscribe(j, TOPIC_HANG, events_hang,
                                             j) < 0)
        return -1;
    events_rendezvous(j);
    return 0;
}

static void worker_start(void *self, struct job *j, const struct worker *w)
{
    (void)self;
    events_worker_start(j, w);
}

static void start_failed(void *self, struct job *j, const struct worker *w,
                         const char *why)
{
    (void)self;
    events_failure(j, w, why);
}

static void attempt_start(void *self, struct job *j, int started)
{
    (void)self;
    if (started)
        events_attempt_started(j);
}

static void worker_exit(void *self, struct job *j, const struct worker *w,
                        int first_failure)
{
    (void)self;
    events_worker_exit(j, w);
    if (first_failure)
        events_failure(j, w, NULL);
}

static void stopping(void *self, struct job *j, enum stop_reason r, int sig)
{
    (void)self;
    events_stop(j, stop_row(r)->name, sig);
}

static void round_begins(void *self, struct job *j, int restarts,
                         int rendezvous)
{
    (void)self;
    if (restarts >= 0)
        events_restart(j, restarts);
    if (rendezvous)
        events_rendezvous(j);
}

static void job_end(void *self, struct job *j, int status)
{
    (void)self;
    events_end(j, status);
}

static void detach(void *self, struct job *j)
{
    (void)self;
    if (j->s->events)
        amldist__loop_unwatch(j->loop, eventlog_fd(j->s->events));
}

const struct job_plugin events_plugin = {
    .name = "events",
    .attach = attach,
    .worker_start = worker_start,
    .start_failed = start_failed,
    .attempt_start = attempt_start,
    .worker_exit = worker_exit,
    .stopping = stopping,
    .round = round_begins,
    .job_end = job_end,
    .detach = detach,
};
