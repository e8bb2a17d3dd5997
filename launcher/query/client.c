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
#include "query/ask.h"
#include "query/client.h"
#include "query/proto.h"
#include "query/qtext.h"
#include "query/sockdir.h"
#include "util/clock.h"
#include "stacks/stacks.h"

/* How long each question may take, from connect to the last byte; every
 * job is asked "info" at once, so that one stopped amlrun costs this
 * once, not each time. */
#define INFO_TIMEOUT_MS 1000
#define STATUS_TIMEOUT_MS 30000
#define STACKS_TIMEOUT_MS 60000

/* ---- the jobs there are ------------------------------------------------ */

struct found {
    pid_t pid;
    int dfd;             /* its directory (struct dirs owns it) */
    uid_t owner;
    char name[QDIR_PATH_MAX + 1];
    char *run_id;
    char *cmd;
    double started;      /* epoch seconds, < 0 not known */
    int answered;
    int err;             /* why it did not */
    int rendezvous;      /* it is in its rendezvous */
};

struct jobs {
    struct found *f;
    size_t n, cap;
    int dfd[2 * QDIRS_MAX];
    int ndirs;
    char where[2 * QDIRS_MAX * (QDIR_PATH_MAX + 2)]; /* the dirs read */
};

static void jobs_free(struct jobs *J)
{
    for (size_t i = 0; i < J->n; i++) {
        free(J->f[i].run_id);
        free(J->f[i].cmd);
    }
    free(J->f);
    for (int i = 0; i < J->ndirs; i++)
        close(J->dfd[i]);
    memset(J, 0, sizeof *J);
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

/* An "info" answer into its entry. */
static void identified(struct found *f, char *text)
{
    char *body = answer_body(text, "info", "amlrun");
    char *nl = body ? strchr(body, '\n') : NULL;
    struct qrec r;
    if (nl) {
        *nl = '\0';
        if (qrec_parse(body, &r) == 0 && strcmp(r.type, "job") == 0) {
            const char *id = qrec_get(&r, "run_id");
            const char *cmd = qrec_get(&r, "cmd");
            const char *phase = qrec_get(&r, "phase");
            f->run_id = id ? strdup(id) : NULL;
            f->cmd = cmd ? strdup(cmd) : NULL;
            f->started = qrec_num(&r, "started", -1);
            f->rendezvous = phase && strcmp(phase, "rendezvous") == 0;
            f->answered = 1;
        }
    }
}

/* Ask every job found "info", all at once. */
static void identify_all(struct jobs *J)
{
    struct asking *a = calloc(J->n ? J->n : 1, sizeof *a);
    if (!a)
        return;
    for (size_t i = 0; i < J->n; i++) {
        a[i] = (struct asking){-1, J->f[i].dfd, J->f[i].name, J->f[i].owner,
                               "info\n", 0, NULL, 0, 0, 0};
        J->f[i].started = -1;
    }
    ask_all(a, J->n, INFO_TIMEOUT_MS);
    for (size_t i = 0; i < J->n; i++) {
        J->f[i].err = a[i].err;
        if (!a[i].err)
            identified(&J->f[i], a[i].buf);
        free(a[i].buf);
    }
    free(a);
}

/* The sockets in the directory open as dfd, of user `owner`: each one a
 * socket of that user's (lstat: a link or anything else is skipped, never
 * followed); one of a dead amlrun is removed. */
static int list_jobs(struct jobs *J, int dfd, uid_t owner)
{
    int d2 = dup(dfd);
    DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
    if (!d) {
        if (d2 >= 0)
            close(d2);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        pid_t pid = qsock_pid(e->d_name);
        struct stat st;
        if (pid <= 0 || strlen(e->d_name) > QDIR_PATH_MAX ||
            fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISSOCK(st.st_mode) || st.st_uid != owner)
            continue;
        if (kill(pid, 0) < 0 && errno == ESRCH) {
            unlinkat(dfd, e->d_name, 0); /* its amlrun died without */
            continue;
        }
        if (J->n == J->cap) {
            size_t nc = J->cap ? J->cap * 2 : 8;
            struct found *nf = realloc(J->f, nc * sizeof *nf);
            if (!nf) {
                closedir(d);
                return -1;
            }
            J->f = nf;
            J->cap = nc;
        }
        struct found *f = &J->f[J->n++];
        memset(f, 0, sizeof *f);
        f->pid = pid;
        f->dfd = dfd;
        f->owner = owner;
        memcpy(f->name, e->d_name, strlen(e->d_name) + 1);
    }
    closedir(d);
    return 0;
}

/* The run id as the socket's name holds it (escaped, maybe cut: the
 * job's own answer has it whole), for a job that did not answer. */
static const char *name_run_id(const char *name, char *buf, size_t size)
{
    size_t n = 0;
    const char *end = strrchr(name, '.');
    while (end && end > name && end[-1] != '.')
        end--;
    for (const char *p = name; end && p < end - 1 && n + 1 < size; p++) {
        unsigned x;
        if (*p == '%' && sscanf(p + 1, "%2x", &x) == 1) {
            buf[n++] = (char)x;
            p += 2;
        } else {
            buf[n++] = *p;
        }
    }
    buf[n] = '\0';
    return buf;
}

/* "job RUN (amlrun pid P) did not answer ...": one line each. */
static void say_silent(const struct found *f)
{
    char id[256], shown[256], stat[512], path[64];
    char why[128];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)f->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, stat, sizeof stat - 1) : -1;
    if (fd >= 0)
        close(fd);
    char state = '?';
    if (n > 0) {
        stat[n] = '\0';
        char *rp = strrchr(stat, ')');
        if (rp && rp[1] == ' ')
            state = rp[2];
    }
    if (state == 'T' || state == 't')
        snprintf(why, sizeof why, "it is stopped (state %c: SIGSTOP, Ctrl-Z "
                 "or a debugger)", state);
    else if (f->err == ETIMEDOUT)
        snprintf(why, sizeof why, "no answer within %.0f s",
                 INFO_TIMEOUT_MS / 1000.0);
    else
        snprintf(why, sizeof why, "%s", strerror(f->err));
    msg("job %s (amlrun pid %d) did not answer: %s",
        qt_shown(name_run_id(f->name, id, sizeof id), shown, sizeof shown),
        (int)f->pid, why);
}

static void list_print(const struct found *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char id[256], cmd[512], when[64] = "?";
        if (!f[i].answered)
            continue;
        if (f[i].started >= 0) {
            time_t t = (time_t)f[i].started;
            struct tm tm;
            if (localtime_r(&t, &tm))
                strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
        }
        fprintf(stderr, "  run id %s, amlrun pid %d, started %s%s: %s\n",
                qt_shown(f[i].run_id, id, sizeof id), (int)f[i].pid, when,
                f[i].rendezvous ? " (in its rendezvous)" : "",
                qt_shown(f[i].cmd, cmd, sizeof cmd));
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

/* Root naming another user's amlrun by its pid: that user's candidate
 * directories (their XDG_RUNTIME_DIR read from the process's
 * environment), and the user in *uid. */
static int dirs_of_pid(pid_t pid, struct qdirs *dirs, uid_t *uid)
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
    qdir_candidates(st.st_uid, xdg, dirs);
    *uid = st.st_uid;
    return 0;
}

/* The answered jobs JOB names (NULL: any); the last one's index in *at. */
static size_t matches(const struct found *f, size_t n, const char *job,
                      size_t *at)
{
    size_t hits = 0;
    for (size_t i = 0; i < n; i++) {
        int match = f[i].answered &&
                    (!job ||
                     (all_digits(job) && strtol(job, NULL, 10) == f[i].pid) ||
                     (f[i].run_id && strcmp(f[i].run_id, job) == 0));
        if (match) {
            hits++;
            *at = i;
        }
    }
    return hits;
}

/* The job to ask, or -1 after saying why.  The jobs that did not answer
 * are named, one line each, wherever they may be the one meant. */
static long pick(const struct jobs *J, const char *job)
{
    const struct found *f = J->f;
    size_t n = J->n, at = 0, hits = matches(f, n, job, &at), answered = 0;
    pid_t want = job && all_digits(job) ? (pid_t)strtol(job, NULL, 10) : 0;
    for (size_t i = 0; i < n; i++) {
        answered += f[i].answered;
        if (!f[i].answered && (hits != 1 || !job) &&
            (!want || want == f[i].pid))
            say_silent(&f[i]);
    }
    if (hits == 1)
        return (long)at;
    char shown_job[256];
    if (n == 0 && !job) {
        msg("no running job of yours on this machine (no amlrun socket in "
            "%s)", J->where);
    } else if (answered == 0 && !job) {
        msg("no running job of yours on this machine answered");
    } else if (answered == 0 || (hits == 0 && want && answered < n)) {
        msg("no job %s: no running job of yours on this machine%s",
            qt_shown(job, shown_job, sizeof shown_job),
            answered < n ? " answered" : "");
    } else if (!job) {
        msg("%zu jobs of yours run on this machine: name one (a run id or "
            "an amlrun pid):", answered);
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

/* Add the sockets of each directory of `dirs` in [from, to) (of user
 * `owner`), each one opened and checked (qdir_open) and read by its
 * descriptor; a refused one is said unless quiet, never read.  The number
 * of directories that passed. */
static int jobs_in(struct jobs *J, const struct qdirs *dirs, int from,
                   int to, uid_t owner, const char *mode, int quiet)
{
    int passed = 0;
    for (int i = from; i < to && J->ndirs < 2 * QDIRS_MAX; i++) {
        char why[QDIR_PATH_MAX + 128];
        int fd = qdir_open(dirs->dir[i], 0, owner, why, sizeof why);
        if (fd < 0) {
            if (errno != ENOENT && !quiet)
                msg("%s: %s: not read", mode, why);
            continue;
        }
        passed++;
        J->dfd[J->ndirs++] = fd;
        size_t wl = strlen(J->where);
        snprintf(J->where + wl, sizeof J->where - wl, "%s%s", wl ? ", " : "",
                 dirs->dir[i]);
        if (list_jobs(J, fd, owner) < 0)
            msg_errno(errno, "%s", dirs->dir[i]);
    }
    return passed;
}

int query_main(enum query_kind kind, int json, const char *job)
{
    const char *mode = kind == QUERY_STATUS ? "--status" : "--stacks";
    struct jobs J;
    memset(&J, 0, sizeof J);
    struct qdirs mine;
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    qdir_candidates(geteuid(), xdg, &mine);
    /* Where a job of this environment puts its socket (sockdir.h): the
     * XDG_RUNTIME_DIR one when it passes (or is not made yet), else
     * /tmp's.  A job named may be in any of them: started where
     * XDG_RUNTIME_DIR was not set (cron, sudo), or while /tmp's was
     * another user's. */
    int xdg_first = mine.nfixed == 2;
    char why[QDIR_PATH_MAX + 128];
    int xfd = xdg_first ? qdir_open(mine.dir[0], 0, geteuid(), why,
                                    sizeof why) : -1;
    int xdg_ok = xdg_first && (xfd >= 0 || errno == ENOENT);
    if (xfd >= 0)
        close(xfd);
    if (xdg_first)
        jobs_in(&J, &mine, 0, 1, geteuid(), mode, 0);
    if (!xdg_ok || job)
        jobs_in(&J, &mine, xdg_first, mine.n, geteuid(), mode, xdg_ok);
    if (!J.where[0])
        snprintf(J.where, sizeof J.where, "%s", mine.dir[xdg_ok ? 0 : xdg_first]);
    /* Root naming a pid: another user's job, in that user's directories. */
    struct qdirs theirs;
    uid_t them;
    if (job && all_digits(job) &&
        dirs_of_pid((pid_t)strtol(job, NULL, 10), &theirs, &them) == 0)
        jobs_in(&J, &theirs, 0, theirs.n, them, mode, 1);
    identify_all(&J);
    long at = pick(&J, job);
    if (at < 0) {
        jobs_free(&J);
        return 1;
    }
    struct found *f = J.f;
    const char *what = kind == QUERY_STATUS ? "status" : "stacks";
    char who[64];
    snprintf(who, sizeof who, "amlrun pid %d", (int)f[at].pid);
    size_t len;
    char *text = ask(f[at].dfd, f[at].name, f[at].owner,
                     kind == QUERY_STATUS ? "status\n" : "stacks\n",
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
    jobs_free(&J);
    fflush(stdout);
    return rc;
}
