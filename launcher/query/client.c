/*
 * amlrun --status and --stacks (see client.h): the jobs of this user on
 * this machine are the live sockets in its directory (sockdir.h); each one
 * says its run id, pid, start and command ("info", proto.h).  A socket
 * whose amlrun is gone (its pid dead) is removed here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "output/msg.h"
#include "query/client.h"
#include "query/proto.h"
#include "query/qtext.h"
#include "query/sockdir.h"
#include "util/clock.h"
#include "stacks/stacks.h"

/* How long each question may take, from connect to the last byte. */
#define INFO_TIMEOUT_MS 5000
#define STATUS_TIMEOUT_MS 30000
#define STACKS_TIMEOUT_MS 60000
/* The most an answer may be. */
#define ANSWER_MAX (64u << 20)

/* Wait for `events` on fd until `deadline`; 1 ready, 0 timed out, -1. */
static int wait_fd(int fd, short events, long long deadline)
{
    for (;;) {
        long long left = deadline - amldist__now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 ? -1 : n > 0;
    }
}

/* Ask the amlrun at `path` one question; its whole answer (NUL-ended), or
 * NULL with errno (ETIMEDOUT when it did not answer in time). */
static char *ask(const char *path, const char *req, int timeout_ms,
                 size_t *len)
{
    long long deadline = amldist__now_ms() + timeout_ms;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int err = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        /* A full backlog (the amlrun is busy): wait for room. */
        if (errno != EAGAIN && errno != EINPROGRESS) {
            err = errno;
            goto out;
        }
        int w = wait_fd(fd, POLLOUT, deadline);
        socklen_t sl = sizeof err;
        if (w <= 0) {
            err = w == 0 ? ETIMEDOUT : errno;
            goto out;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
            err = errno;
        if (err && err != EISCONN)
            goto out;
        err = 0;
        /* Still not connected: try once more (a Unix socket's connect
         * has no asynchronous completion). */
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 &&
            errno != EISCONN) {
            err = errno == EAGAIN ? ETIMEDOUT : errno;
            goto out;
        }
    }
    size_t rl = strlen(req);
    if (send(fd, req, rl, MSG_NOSIGNAL) != (ssize_t)rl) {
        err = errno ? errno : EIO;
        goto out;
    }
    for (;;) {
        if (cap - n < 4096) {
            if (cap >= ANSWER_MAX) {
                err = EMSGSIZE;
                goto out;
            }
            size_t nc = cap ? cap * 2 : 16384;
            char *nb = realloc(buf, nc + 1);
            if (!nb) {
                err = ENOMEM;
                goto out;
            }
            buf = nb;
            cap = nc;
        }
        ssize_t r = recv(fd, buf + n, cap - n, 0);
        if (r > 0) {
            n += (size_t)r;
            continue;
        }
        if (r == 0)
            break;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            err = errno;
            goto out;
        }
        int w = wait_fd(fd, POLLIN, deadline);
        if (w <= 0) {
            err = w == 0 ? ETIMEDOUT : errno;
            goto out;
        }
    }
    if (n == 0) {
        err = ECONNRESET; /* closed without a byte: not ours to ask */
        goto out;
    }
    buf[n] = '\0';
    *len = n;
out:
    close(fd);
    if (err) {
        free(buf);
        errno = err;
        return NULL;
    }
    return buf;
}

/* ---- the jobs there are ------------------------------------------------ */

struct found {
    pid_t pid;
    char path[QDIR_PATH_MAX + 1];
    char *run_id;
    char *cmd;
    double started;      /* epoch seconds, < 0 not known */
    int answered;
};

static void found_free(struct found *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(f[i].run_id);
        free(f[i].cmd);
    }
    free(f);
}

/* The first line of an answer: its kind's rest, or NULL after saying why
 * (an error answer's message). */
static char *answer_body(char *text, const char *kind, const char *who)
{
    char *nl = strchr(text, '\n');
    if (!nl)
        return NULL;
    *nl = '\0';
    size_t pl = strlen(QP_ANSWER);
    if (strncmp(text, QP_ANSWER, pl) == 0 && strcmp(text + pl, kind) == 0)
        return nl + 1;
    if (strncmp(text, QP_ERROR, strlen(QP_ERROR)) == 0)
        msg("%s: %s", who, text + strlen(QP_ERROR));
    else
        msg("%s: an answer amlrun cannot read (another version?)", who);
    return NULL;
}

/* Ask a socket's amlrun who it is; the entry is filled in. */
static void identify(struct found *f)
{
    size_t len;
    char *text = ask(f->path, "info\n", INFO_TIMEOUT_MS, &len);
    f->started = -1;
    if (!text)
        return;
    char *body = answer_body(text, "info", "amlrun");
    char *nl = body ? strchr(body, '\n') : NULL;
    struct qrec r;
    if (nl) {
        *nl = '\0';
        if (qrec_parse(body, &r) == 0 && strcmp(r.type, "job") == 0) {
            const char *id = qrec_get(&r, "run_id");
            const char *cmd = qrec_get(&r, "cmd");
            f->run_id = id ? strdup(id) : NULL;
            f->cmd = cmd ? strdup(cmd) : NULL;
            f->started = qrec_num(&r, "started", -1);
            f->answered = 1;
        }
    }
    free(text);
}

/* Every job with a socket in dir; a socket of a dead amlrun is removed. */
static int list_jobs(const char *dir, struct found **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    size_t n = 0, cap = 0;
    struct found *f = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        pid_t pid = qsock_pid(e->d_name);
        if (pid <= 0)
            continue;
        char path[QDIR_PATH_MAX + 2];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >=
            (int)sizeof path - 1)
            continue;
        if (kill(pid, 0) < 0 && errno == ESRCH) {
            unlink(path); /* its amlrun died without removing it */
            continue;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            struct found *nf = realloc(f, nc * sizeof *nf);
            if (!nf) {
                closedir(d);
                found_free(f, n);
                return -1;
            }
            f = nf;
            cap = nc;
        }
        memset(&f[n], 0, sizeof f[n]);
        f[n].pid = pid;
        memcpy(f[n].path, path, strlen(path) + 1);
        identify(&f[n]);
        n++;
    }
    closedir(d);
    *out = f;
    *nout = n;
    return 0;
}

static void list_print(const struct found *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char id[256], cmd[512], when[64] = "?";
        if (f[i].started >= 0) {
            time_t t = (time_t)f[i].started;
            struct tm tm;
            if (localtime_r(&t, &tm))
                strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
        }
        if (f[i].answered)
            fprintf(stderr, "  run id %s, amlrun pid %d, started %s: %s\n",
                    qt_shown(f[i].run_id, id, sizeof id), (int)f[i].pid, when,
                    qt_shown(f[i].cmd, cmd, sizeof cmd));
        else
            fprintf(stderr, "  amlrun pid %d: not answering\n",
                    (int)f[i].pid);
    }
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* Root naming another user's amlrun by its pid: that user's directory
 * (their XDG_RUNTIME_DIR, read from the process's environment), and the
 * user in *uid. */
static int dir_of_pid(pid_t pid, char *dir, size_t size, uid_t *uid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    if (geteuid() != 0 || stat(path, &st) < 0 || st.st_uid == 0)
        return -1;
    char env[65536], *xdg = NULL;
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, env, sizeof env - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n > 0)
        env[n] = '\0';
    for (ssize_t k = 0; n > 0 && k < n; k += (ssize_t)strlen(env + k) + 1) {
        if (strncmp(env + k, "XDG_RUNTIME_DIR=", 16) == 0)
            xdg = env + k + 16;
    }
    if (qdir_path(st.st_uid, xdg, dir, size) < 0)
        return -1;
    *uid = st.st_uid;
    return 0;
}

/* The job JOB names (NULL: the only one); its index, or -1 after saying
 * why. */
static size_t matches(const struct found *f, size_t n, const char *job,
                      size_t *at)
{
    size_t hits = 0;
    for (size_t i = 0; i < n; i++) {
        int match = !job ||
                    (all_digits(job) && strtol(job, NULL, 10) == f[i].pid) ||
                    (f[i].run_id && strcmp(f[i].run_id, job) == 0);
        if (match) {
            hits++;
            *at = i;
        }
    }
    return hits;
}

static long pick(const struct found *f, size_t n, const char *job,
                 const char *dir)
{
    size_t at = 0, hits = matches(f, n, job, &at);
    if (hits == 1)
        return (long)at;
    char shown_job[256];
    if (n == 0 && !job) {
        msg("no running job of yours on this machine (no amlrun socket in "
            "%s)", dir);
    } else if (n == 0) {
        msg("no job %s: no running job of yours on this machine",
            qt_shown(job, shown_job, sizeof shown_job));
    } else if (!job) {
        msg("%zu jobs of yours run on this machine: name one (a run id or "
            "an amlrun pid):", n);
        list_print(f, n);
    } else if (hits == 0) {
        msg("no job %s; the jobs of yours on this machine:",
            qt_shown(job, shown_job, sizeof shown_job));
        list_print(f, n);
    } else {
        msg("%s names %zu jobs: give an amlrun pid; the jobs of yours on "
            "this machine:", qt_shown(job, shown_job, sizeof shown_job), hits);
        list_print(f, n);
    }
    return -1;
}

/* ---- stacks ------------------------------------------------------------ */

/* The parts of a stacks answer: each node's error, or its stacks, merged
 * into one report (stacks.h) on stdout.  0 when every node answered, 1
 * when some did not (said), -1 when the answer is malformed. */
static int stacks_print(char *body)
{
    int failed = 0;
    struct stk_set set = {NULL, 0};
    for (char *p = body; *p;) {
        char *nl = strchr(p, '\n');
        if (!nl)
            return -1;
        *nl = '\0';
        struct qrec r;
        int node;
        size_t len;
        if (sscanf(p, "part %d %zu", &node, &len) == 2) {
            if (len > strlen(nl + 1) || stk_decode(nl + 1, len, &set) < 0) {
                stk_set_free(&set);
                return -1;
            }
            p = nl + 1 + len;
            continue;
        }
        if (qrec_parse(p, &r) < 0 || strcmp(r.type, "error") != 0) {
            stk_set_free(&set);
            return -1;
        }
        char m[512];
        const char *node_s = qrec_get(&r, "node");
        msg("stacks of node %s: %s", node_s ? node_s : "?",
            qt_shown(qrec_get(&r, "message"), m, sizeof m));
        failed = 1;
        p = nl + 1;
    }
    if (set.n == 0 && !failed) {
        msg("no rank of the job runs now: no stacks to read");
        failed = 1;
    } else if (set.n > 0) {
        struct stk_report rep;
        memset(&rep, 0, sizeof rep);
        if (stk_merge(&set, NULL, 0, STOP_REQUEST, 0, &rep) < 0) {
            msg("out of memory merging the stacks");
            failed = 1;
        } else {
            stk_print(stdout, &set, &rep);
            stk_report_free(&rep);
        }
    }
    stk_set_free(&set);
    return failed;
}

/* The jobs in dir; 0, or -1 (after a message, unless quiet).  A
 * directory that is not safely its owner's is not read at all. */
static int jobs_in(const char *dir, uid_t owner, const char *mode, int quiet,
                   struct found **f, size_t *n)
{
    char why[QDIR_PATH_MAX + 128];
    *f = NULL;
    *n = 0;
    if (qdir_check(dir, 0, owner, why, sizeof why) < 0) {
        if (errno == ENOENT)
            return 0;
        if (!quiet)
            msg("%s: %s", mode, why);
        return -1;
    }
    if (list_jobs(dir, f, n) < 0) {
        msg_errno(errno, "%s", dir);
        return -1;
    }
    return 0;
}

int query_main(enum query_kind kind, int json, const char *job)
{
    const char *mode = kind == QUERY_STATUS ? "--status" : "--stacks";
    char dir[QDIR_PATH_MAX + 1];
    if (qdir_path(geteuid(), getenv("XDG_RUNTIME_DIR"), dir, sizeof dir) < 0) {
        msg("%s: the socket directory's name is too long", mode);
        return 1;
    }
    struct found *f;
    size_t n, at0;
    if (jobs_in(dir, geteuid(), mode, 0, &f, &n) < 0)
        return 1;
    /* A job named but not there may be elsewhere: started where
     * XDG_RUNTIME_DIR was not set (cron, sudo), /tmp/amlrun-<uid>; or,
     * for root naming a pid, another user's, in that user's directory. */
    struct { char dir[QDIR_PATH_MAX + 1]; uid_t owner; } other[2];
    int nother = 0;
    if (job && qdir_path(geteuid(), NULL, other[nother].dir,
                         sizeof other[nother].dir) == 0 &&
        strcmp(other[nother].dir, dir) != 0)
        other[nother++].owner = geteuid();
    if (job && all_digits(job) &&
        dir_of_pid((pid_t)strtol(job, NULL, 10), other[nother].dir,
                   sizeof other[nother].dir, &other[nother].owner) == 0)
        nother++;
    for (int k = 0; k < nother && job && matches(f, n, job, &at0) == 0; k++) {
        struct found *g;
        size_t m;
        if (jobs_in(other[k].dir, other[k].owner, mode, 1, &g, &m) == 0 &&
            matches(g, m, job, &at0)) {
            found_free(f, n);
            f = g;
            n = m;
            memcpy(dir, other[k].dir, sizeof dir);
        } else {
            found_free(g, m);
        }
    }
    long at = pick(f, n, job, dir);
    if (at < 0) {
        found_free(f, n);
        return 1;
    }
    const char *what = kind == QUERY_STATUS ? "status" : "stacks";
    char who[64];
    snprintf(who, sizeof who, "amlrun pid %d", (int)f[at].pid);
    size_t len;
    char *text = ask(f[at].path, kind == QUERY_STATUS ? "status\n" : "stacks\n",
                     kind == QUERY_STATUS ? STATUS_TIMEOUT_MS
                                          : STACKS_TIMEOUT_MS,
                     &len);
    int rc = 1;
    if (!text) {
        msg_errno(errno, "%s: asking for its %s", who, what);
    } else {
        char *body = answer_body(text, what, who);
        if (body) {
            int bad = kind == QUERY_STATUS
                          ? status_print(body, len - (size_t)(body - text),
                                         json)
                          : stacks_print(body);
            if (bad < 0)
                msg("%s: its %s cannot be read", who, what);
            rc = bad != 0;
        }
    }
    free(text);
    found_free(f, n);
    fflush(stdout);
    return rc;
}
