/* The query socket's answers during the rendezvous (see early.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "output/msg.h"
#include "query/early.h"
#include "query/proto.h"
#include "query/qlisten.h"
#include "query/qtext.h"
#include "query/sockdir.h"
#include "util/clock.h"

struct qe_client {
    int fd; /* -1: a free slot */
    long long since;
    size_t len;
    char req[QP_REQ_MAX + 1];
};

static struct {
    int fd;        /* the listening socket, -1 none */
    int stop[2];   /* written to stop the thread */
    int running;
    int tried;     /* qearly_start() was called */
    pthread_t thread;
    pthread_mutex_t lock; /* guards waiting */
    char path[QDIR_PATH_MAX + 1];
    char *run_id, *cmd;
    int nodes;
    double started; /* epoch seconds */
    long long t0;   /* amldist__now_ms() at the start */
    char waiting[512];
    struct qe_client c[QE_CLIENTS];
} qe = {.fd = -1, .stop = {-1, -1}, .lock = PTHREAD_MUTEX_INITIALIZER};

static void drop(struct qe_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->len = 0;
}

/* The job record as the supervisor's (plugins/query.c), and the phase. */
static void job_record(FILE *f)
{
    char waiting[sizeof qe.waiting];
    pthread_mutex_lock(&qe.lock);
    memcpy(waiting, qe.waiting, sizeof waiting);
    pthread_mutex_unlock(&qe.lock);
    fputs("job", f);
    qt_str(f, "run_id", qe.run_id);
    qt_int(f, "pid", getpid());
    qt_num(f, "started", qe.started, 3);
    qt_int(f, "nodes", qe.nodes);
    qt_int(f, "world", 0);
    qt_str(f, "cmd", qe.cmd);
    qt_str(f, "phase", "rendezvous");
    qt_str(f, "waiting", waiting[0] ? waiting : NULL);
    qt_num(f, "waited", (double)(amldist__now_ms() - qe.t0) / 1000.0, 1);
    fputc('\n', f);
}

/* Answer a request at once: the answer is a few hundred bytes, which a
 * fresh socket's buffer takes whole; a peer that does not read loses it. */
static void answer(struct qe_client *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        drop(c);
        return;
    }
    if (strcmp(c->req, "info") == 0 || strcmp(c->req, "status") == 0) {
        fprintf(f, QP_ANSWER "%s\n", c->req);
        job_record(f);
    } else if (strcmp(c->req, "stacks") == 0) {
        fputs(QP_ERROR "the job is in its rendezvous: no worker runs yet, "
              "no stacks to read\n", f);
    } else {
        fputs(QP_ERROR "unknown request\n", f);
    }
    if (fclose(f) == 0)
        (void)!send(c->fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    free(text);
    drop(c);
}

static void readable(struct qe_client *c)
{
    int got = qsock_read_request(c->fd, c->req, &c->len);
    if (got > 0)
        answer(c);
    else if (got < 0)
        drop(c);
}

/* A new connection: a free slot, else the oldest one's (every one here
 * waits for its request: nobody is being answered). */
static void take(int fd)
{
    if (!qsock_peer_allowed(fd)) {
        close(fd);
        return;
    }
    struct qe_client *slot = &qe.c[0];
    for (int i = 0; i < QE_CLIENTS; i++) {
        if (qe.c[i].fd < 0) {
            slot = &qe.c[i];
            break;
        }
        if (qe.c[i].since < slot->since)
            slot = &qe.c[i];
    }
    drop(slot);
    slot->fd = fd;
    slot->since = amldist__now_ms();
}

static void *serve(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd p[2 + QE_CLIENTS];
        int idx[QE_CLIENTS], n = 2;
        long long now = amldist__now_ms(), next = now + 60000;
        p[0] = (struct pollfd){qe.stop[0], POLLIN, 0};
        p[1] = (struct pollfd){qe.fd, POLLIN, 0};
        for (int i = 0; i < QE_CLIENTS; i++) {
            if (qe.c[i].fd < 0)
                continue;
            if (now - qe.c[i].since >= QE_REQUEST_MS) {
                drop(&qe.c[i]); /* idle: its slot is for the next one */
                continue;
            }
            if (qe.c[i].since + QE_REQUEST_MS < next)
                next = qe.c[i].since + QE_REQUEST_MS;
            idx[n - 2] = i;
            p[n++] = (struct pollfd){qe.c[i].fd, POLLIN, 0};
        }
        int r = poll(p, (nfds_t)n, (int)(next - now) + 1);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        if (p[0].revents)
            break;
        for (int k = 2; k < n; k++)
            if (p[k].revents)
                readable(&qe.c[idx[k - 2]]);
        for (int k = 0; (p[1].revents & POLLIN) && k < QE_CLIENTS; k++) {
            int cfd = accept4(qe.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (cfd < 0)
                break;
            take(cfd);
        }
    }
    return NULL;
}

static char *joined(char *const *words, int n)
{
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    if (!f)
        return NULL;
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%s", i ? " " : "", words[i]);
    if (fclose(f) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

int qearly_start(const struct qearly_job *job, int verbose, int quiet,
                 int answer)
{
    char note[3 * (QDIR_PATH_MAX + 128)], why[QDIR_PATH_MAX + 128];
    if (qe.tried)
        return qe.fd >= 0 ? 0 : -1;
    qe.tried = 1;
    for (int i = 0; i < QE_CLIENTS; i++)
        qe.c[i].fd = -1;
    qe.fd = qsock_listen(job->run_id, qe.path, sizeof qe.path, note,
                         sizeof note, why, sizeof why);
    if (qe.fd >= 0 && note[0] && !quiet)
        msg("warning: %s: this job's --status socket is in %s instead", note,
            qe.path);
    if (qe.fd < 0) {
        if (verbose)
            msg("no --status socket (amlrun --status and --stacks cannot "
                "reach this job): %s", why);
        return -1;
    }
    if (verbose)
        msg("--status socket: %s", qe.path);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    qe.started = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    qe.t0 = amldist__now_ms();
    qe.run_id = strdup(job->run_id ? job->run_id : "none");
    qe.cmd = joined(job->cmd, job->ncmd);
    qe.nodes = job->nodes;
    /* The thread takes no signal: amlrun's handling of them stays the
     * main thread's, as without it. */
    sigset_t all, old;
    sigfillset(&all);
    if (answer && qe.run_id && pipe2(qe.stop, O_CLOEXEC) == 0) {
        pthread_sigmask(SIG_BLOCK, &all, &old);
        qe.running = pthread_create(&qe.thread, NULL, serve, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    if (answer && !qe.running && verbose)
        msg("--status: no thread to answer during the rendezvous; the "
            "socket answers once the job runs");
    return 0;
}

void qearly_waiting(const char *what)
{
    pthread_mutex_lock(&qe.lock);
    snprintf(qe.waiting, sizeof qe.waiting, "%s", what ? what : "");
    pthread_mutex_unlock(&qe.lock);
}

void qearly_pause(void)
{
    if (!qe.running)
        return;
    (void)!write(qe.stop[1], "x", 1);
    pthread_join(qe.thread, NULL);
    qe.running = 0;
    close(qe.stop[0]);
    close(qe.stop[1]);
    qe.stop[0] = qe.stop[1] = -1;
    /* Those that asked nothing yet wait for the supervisor, which takes
     * them with the socket (qearly_take_waiting): closed here, each would
     * read as a socket that is not the job's.  One whose request came in
     * part (a few bytes of one write: next to never) cannot be handed
     * over with its bytes, and is closed. */
    for (int i = 0; i < QE_CLIENTS; i++)
        if (qe.c[i].len > 0)
            drop(&qe.c[i]);
}

int qearly_take(char *path, size_t size)
{
    qearly_pause();
    int fd = qe.fd;
    if (fd >= 0)
        snprintf(path, size, "%s", qe.path);
    qe.fd = -1;
    return fd;
}

int qearly_take_waiting(int *fds, int max)
{
    qearly_pause();
    int n = 0;
    /* (the slots are -1 from qearly_start on, 0 before: no slot at all) */
    for (int i = 0; qe.tried && i < QE_CLIENTS; i++) {
        if (qe.c[i].fd < 0)
            continue;
        if (n < max) {
            fds[n++] = qe.c[i].fd;
            qe.c[i].fd = -1;
        } else {
            drop(&qe.c[i]);
        }
    }
    return n;
}

void qearly_close(void)
{
    qearly_pause();
    for (int i = 0; qe.tried && i < QE_CLIENTS; i++)
        drop(&qe.c[i]);
    if (qe.fd >= 0) {
        close(qe.fd);
        qsock_remove(qe.path);
    }
    qe.fd = -1;
    free(qe.run_id);
    free(qe.cmd);
    qe.run_id = qe.cmd = NULL;
}
