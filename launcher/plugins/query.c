/*
 * The supervisor's query socket (see query.h and query/proto.h).  Every
 * descriptor is non-blocking and close-on-exec; a client is read and
 * written from the loop's callbacks, with a bounded request, one answer
 * made once, and a deadline for the whole exchange.  A client of another
 * user (root aside) is closed at once, before a byte is read or written.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "output/msg.h"
#include "query/early.h"
#include "query/proto.h"
#include "query/qlisten.h"
#include "query/qtext.h"
#include "query/sockdir.h"
#include "job/gather.h"
#include "job/hooks.h"
#include "plugins/query.h"

/* Clients held at once.  One more takes the place of the oldest that has
 * not asked yet (or whose answer waits for it to read), so that idle
 * connections never lock --status out; only when every one is being
 * answered is the new one closed. */
#define QMAX_CLIENTS 16

struct qclient {
    struct jobquery *q;
    int fd;           /* -1 once closed */
    int deadline;     /* the loop's timer, 0 none */
    long long since;  /* accepted, amldist__now_ms() */
    int busy;         /* waiting for the parts of an answer */
    void *pending;    /* node_part()'s handle while it makes ours */
    enum part_kind kind;
    char req[QP_REQ_MAX + 1];
    size_t reqlen;
    char *out;        /* the answer, once made */
    size_t outlen, off;
};

struct jobquery {
    struct job *j;
    int fd;
    char path[QDIR_PATH_MAX + 1];
    struct qclient *c[QMAX_CLIENTS];
};

static void client_free(struct qclient *c)
{
    free(c->out);
    free(c);
}

/* Close the connection; the client itself stays until its answer, if one
 * is being gathered, comes back (gather.h gives no way to call it off). */
static void client_close(struct qclient *c)
{
    struct jobquery *q = c->q;
    struct job *j = q->j;
    if (c->fd >= 0) {
        amldist__loop_unwatch(j->loop, c->fd);
        close(c->fd);
        c->fd = -1;
    }
    if (c->deadline)
        amldist__loop_cancel(j->loop, c->deadline);
    c->deadline = 0;
    if (c->pending) {
        node_part_cancel(j, c->pending);
        c->pending = NULL;
        c->busy = 0;
    }
    for (int i = 0; i < QMAX_CLIENTS; i++)
        if (q->c[i] == c)
            q->c[i] = NULL;
    if (!c->busy)
        client_free(c);
}

static void on_deadline(void *arg)
{
    struct qclient *c = arg;
    c->deadline = 0;
    client_close(c);
}

static void on_client(void *arg, int fd, short revents);

/* Send what is left of the answer; close when all is sent. */
static void client_write(struct qclient *c)
{
    while (c->off < c->outlen) {
        ssize_t n = send(c->fd, c->out + c->off, c->outlen - c->off,
                         MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            amldist__loop_events(c->q->j->loop, c->fd, POLLOUT);
            return;
        }
        if (n <= 0)
            break;
        c->off += (size_t)n;
    }
    client_close(c);
}

/* The answer is made: send it (or, for a client gone meanwhile, free). */
static void answer(struct qclient *c, char *text, size_t len)
{
    c->busy = 0;
    if (c->fd < 0) {
        free(text);
        client_free(c);
        return;
    }
    if (!text) {
        client_close(c);
        return;
    }
    c->out = text;
    c->outlen = len;
    c->off = 0;
    client_write(c);
}

/* The "job" record: what the asker's amlrun knows of the whole job. */
static void job_record(FILE *f, const struct job *j)
{
    const struct amlrun_opts *o = j->s->o;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double started = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 -
                     (now_s() - j->t_begin);
    fputs("job", f);
    qt_str(f, "run_id", o->run_id);
    qt_int(f, "pid", getpid());
    qt_num(f, "started", started, 3);
    qt_int(f, "nodes", j->s->rz ? job_plane_nodes(j)
                                : amldist_world_size(j->s->env->layout));
    qt_int(f, "world", j->n > 0 ? j->w[0].id.world : 0);
    /* The command as given to amlrun: its words, one space apart. */
    char *cmd = NULL;
    size_t len = 0;
    FILE *c = open_memstream(&cmd, &len);
    if (c) {
        for (int i = 0; i < o->ncmd; i++)
            fprintf(c, "%s%s", i ? " " : "", o->cmd[i]);
        if (fclose(c) != 0) {
            free(cmd);
            cmd = NULL;
        }
    }
    qt_str(f, "cmd", cmd);
    free(cmd);
    fputc('\n', f);
}

static void parts_done(void *arg, struct part *parts, size_t n)
{
    struct qclient *c = arg;
    struct job *j = c->q->j;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f && n == 0) {
        fputs(QP_ERROR "out of memory\n", f);
    } else if (f) {
        fprintf(f, QP_ANSWER "%s\n", c->kind == PART_STATUS ? "status"
                                                             : "stacks");
        if (c->kind == PART_STATUS)
            job_record(f, j);
        for (size_t i = 0; i < n; i++) {
            if (parts[i].error) {
                fprintf(f, "error");
                qt_int(f, "node", parts[i].node);
                qt_str(f, "message", parts[i].error);
                fputc('\n', f);
                continue;
            }
            fprintf(f, "part %d %zu\n", parts[i].node, parts[i].len);
            fwrite(parts[i].data, 1, parts[i].len, f);
        }
    }
    for (size_t i = 0; i < n; i++)
        part_free(&parts[i]);
    free(parts);
    if (f && fclose(f) != 0) {
        free(text);
        text = NULL;
    }
    answer(c, f ? text : NULL, len);
}

static void part_ready(void *arg, struct part *p)
{
    struct qclient *c = arg;
    c->pending = NULL;
    job_gather(c->q->j, c->kind, p, parts_done, c);
}

static void info(struct qclient *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        fputs(QP_ANSWER "info\n", f);
        job_record(f, c->q->j);
        if (fclose(f) != 0) {
            free(text);
            text = NULL;
        }
    }
    answer(c, text, len);
}

static void request(struct qclient *c)
{
    struct job *j = c->q->j;
    /* Nothing more is read from it; the answer has the rest of the
     * exchange's time. */
    amldist__loop_events(j->loop, c->fd, 0);
    if (c->deadline)
        amldist__loop_cancel(j->loop, c->deadline);
    c->deadline = amldist__loop_timer(j->loop, c->since + QP_DEADLINE_MS,
                                      on_deadline, c);
    if (c->deadline < 0)
        c->deadline = 0;
    c->busy = 1;
    if (strcmp(c->req, "info") == 0) {
        info(c);
        return;
    }
    if (strcmp(c->req, "status") != 0 && strcmp(c->req, "stacks") != 0) {
        static const char bad[] = QP_ERROR "unknown request\n";
        answer(c, strdup(bad), sizeof bad - 1);
        return;
    }
    c->kind = strcmp(c->req, "status") == 0 ? PART_STATUS : PART_STACKS;
    c->pending = node_part(c->q->j, c->kind, part_ready, c);
    if (!c->pending) {
        static const char oom[] = QP_ERROR "out of memory\n";
        answer(c, strdup(oom), sizeof oom - 1);
    }
}

static void client_read(struct qclient *c)
{
    int got = qsock_read_request(c->fd, c->req, &c->reqlen);
    if (got > 0)
        request(c);
    else if (got < 0)
        client_close(c);
}

static void on_client(void *arg, int fd, short revents)
{
    struct qclient *c = arg;
    (void)fd;
    if (c->out && (revents & (POLLOUT | POLLERR | POLLHUP)))
        client_write(c);
    else if (!c->busy && !c->out && (revents & (POLLIN | POLLERR | POLLHUP)))
        client_read(c);
}

/* The slot of a new client: a free one, else the oldest idle one's (no
 * request yet), else the oldest whose answer waits to be read; -1 when
 * every client is being answered. */
static int slot_for_new(struct jobquery *q)
{
    int idle = -1, stuck = -1;
    for (int i = 0; i < QMAX_CLIENTS; i++) {
        struct qclient *c = q->c[i];
        if (!c)
            return i;
        if (!c->busy && !c->out && (idle < 0 || c->since < q->c[idle]->since))
            idle = i;
        if (c->out && (stuck < 0 || c->since < q->c[stuck]->since))
            stuck = i;
    }
    int at = idle >= 0 ? idle : stuck;
    if (at >= 0)
        client_close(q->c[at]);
    return at;
}

static void take(struct jobquery *q, int fd)
{
    struct job *j = q->j;
    if (!qsock_peer_allowed(fd)) {
        close(fd);
        return;
    }
    int slot = slot_for_new(q);
    struct qclient *c = slot >= 0 ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        close(fd);
        return;
    }
    c->q = q;
    c->fd = fd;
    c->since = amldist__now_ms();
    q->c[slot] = c;
    /* Until its request: a short while (early.h); then the exchange's. */
    c->deadline = amldist__loop_timer(j->loop, c->since + QE_REQUEST_MS,
                                      on_deadline, c);
    if (c->deadline < 0 ||
        amldist__loop_watch(j->loop, fd, POLLIN, on_client, c) < 0) {
        if (c->deadline < 0)
            c->deadline = 0;
        client_close(c);
    }
}

static void on_accept(void *arg, int fd, short revents)
{
    struct jobquery *q = arg;
    (void)revents;
    /* A few at a time: the loop's other descriptors come first. */
    for (int k = 0; k < QMAX_CLIENTS; k++) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
            return;
        take(q, cfd);
    }
}

/* Make the socket and watch it.  A socket that cannot be made (its
 * directory refused, no room) is said with -v and the job runs without
 * one; -1 only when out of memory. */
static int attach(struct job *j, void **self)
{
    struct jobquery *q = calloc(1, sizeof *q);
    if (!(*self = q))
        return -1;
    q->j = j;
    const struct amlrun_opts *o = j->s->o;
    /* The socket made at amlrun's start (early.h), else one now. */
    struct qearly_job ej = {o->run_id, o->cmd, o->ncmd, 1};
    qearly_start(&ej, o->verbose, o->quiet, 0);
    q->fd = qearly_take(q->path, sizeof q->path);
    if (q->fd >= 0 &&
        amldist__loop_watch(j->loop, q->fd, POLLIN, on_accept, q) < 0) {
        if (o->verbose)
            msg_errno(errno, "no --status socket (amlrun --status and "
                      "--stacks cannot reach this job)");
        close(q->fd);
        qsock_remove(q->path);
        q->fd = -1;
    }
    /* Those that connected during the rendezvous and asked nothing yet
     * (a request on its way at the handover) are answered here. */
    int waiting[QE_CLIENTS];
    int n = qearly_take_waiting(waiting, QE_CLIENTS);
    for (int i = 0; i < n; i++) {
        if (q->fd >= 0)
            take(q, waiting[i]);
        else
            close(waiting[i]);
    }
    return 0;
}

/* Close the socket and every client, and remove the socket's file: at the
 * job's end, before its summary (nobody may ask a job that is over). */
static void close_socket(struct jobquery *q)
{
    struct job *j = q->j;
    for (int i = 0; i < QMAX_CLIENTS; i++)
        if (q->c[i]) {
            struct qclient *c = q->c[i];
            c->busy = 0; /* nothing comes back after the loop's end */
            client_close(c);
        }
    if (q->fd >= 0) {
        amldist__loop_unwatch(j->loop, q->fd);
        close(q->fd);
        qsock_remove(q->path);
    }
    q->fd = -1;
}

static void job_finish(void *self, struct job *j, int status)
{
    (void)j;
    (void)status;
    close_socket(self);
}

static void detach(void *self, struct job *j)
{
    (void)j;
    close_socket(self);
    free(self);
}

const struct job_plugin query_plugin = {
    .name = "query",
    .attach = attach,
    .job_finish = job_finish,
    .detach = detach,
};
