/* torchrun's run directory and its -r/--tee values (see torchlogs.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "output/msg.h"
#include "output/output.h"
#include "output/tmpdir.h"
#include "output/torchlogs.h"

/* A digit string in [0, max]; -1 otherwise. */
static int small_num(const char *s, size_t len, int max)
{
    if (len == 0 || len > 9)
        return -1;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v <= max ? v : -1;
}

int std_map_parse(const char *s, struct std_map *out)
{
    std_map_free(out);
    int v = small_num(s, strlen(s), STD_ALL);
    if (v >= 0) {
        out->all = v;
        return 0;
    }
    /* torchrun's _MAPPING_REGEX: ^(\d:[0123],)*(\d:[0123]),?$ -- one
     * digit of local rank there; any local rank here. */
    for (const char *p = s; *p;) {
        const char *colon = strchr(p, ':');
        const char *comma = strchr(p, ',');
        if (!comma)
            comma = p + strlen(p);
        if (!colon || colon > comma)
            goto bad;
        int local = small_num(p, (size_t)(colon - p), 1 << 20);
        int val = small_num(colon + 1, (size_t)(comma - colon - 1), STD_ALL);
        if (local < 0 || val < 0)
            goto bad;
        void *grown = realloc(out->m, (size_t)(out->n + 1) * sizeof *out->m);
        if (!grown)
            goto bad;
        out->m = grown;
        out->m[out->n].local = local;
        out->m[out->n].v = val;
        out->n++;
        p = *comma ? comma + 1 : comma;
    }
    if (out->n > 0)
        return 0;
bad:
    std_map_free(out);
    return -1;
}

int std_map_get(const struct std_map *m, int local)
{
    if (m->n == 0)
        return m->all;
    int v = STD_NONE;
    for (int i = 0; i < m->n; i++) /* the last mention wins, as in a dict */
        if (m->m[i].local == local)
            v = m->m[i].v;
    return v;
}

int std_map_any(const struct std_map *m)
{
    if (m->n == 0)
        return m->all != STD_NONE;
    for (int i = 0; i < m->n; i++)
        if (m->m[i].v != STD_NONE)
            return 1;
    return 0;
}

void std_map_free(struct std_map *m)
{
    free(m->m);
    m->m = NULL;
    m->n = 0;
    m->all = STD_NONE;
}

struct rundir {
    int fd;            /* <base>/<run_id>_<random> */
    char *path;        /* its absolute path */
    char *temp_base;   /* a private base to remove, or NULL */
    int attempt_fd;    /* attempt_<n>, or -1 */
    char *attempt_path;
    int last_attempt;  /* the highest <n> made, or -1 */
    int workers;       /* 1 + the highest <local> made in any attempt */
};

/* Remove what is in directory FD, depth-first, never following a link;
 * torchrun's tree is three levels deep, a worker may add a few more. */
static void empty_dir(int fd, int depth)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            continue;
        if ((errno != EISDIR && errno != EPERM) || depth >= 16)
            continue;
        int sub = openat(dirfd(d), e->d_name,
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) {
            empty_dir(sub, depth + 1);
            unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
        }
    }
    closedir(d);
}

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a);
    char *s = malloc(la + strlen(b) + 2);
    if (s)
        sprintf(s, "%s%s%s", a, la && a[la - 1] == '/' ? "" : "/", b);
    return s;
}

/* A run id as one path component: torchrun takes it as it is, a '/' in it
 * would make a directory elsewhere. */
static void safe_component(char *s)
{
    for (; *s; s++)
        if (*s == '/')
            *s = '_';
}

/* A private base for error files alone: where Python's tempfile would put
 * it when TMPDIR, TEMP or TMP is set (tmpdir.h); else on /dev/shm when
 * that is a tmpfs, where the tree's mkdirs and rmdirs cost microseconds,
 * not a disk file system's journal (on ext4 /tmp they were half of the
 * launch's time above the fork floor, issue 23); else /tmp and tempfile's
 * other places.  Redirected output (KEEP) never goes to /dev/shm: it may
 * be large, and it stays after the job. */
static char *private_base(int keep, int verbose)
{
    struct statfs fs;
    if (!tmpdir_asked() && !keep && statfs("/dev/shm", &fs) == 0 &&
        fs.f_type == 0x01021994 /* TMPFS_MAGIC */) {
        char *base = join("/dev/shm", "amlrun_XXXXXX");
        if (!base) {
            errno = ENOMEM;
            return NULL;
        }
        if (mkdtemp(base))
            return base;
        free(base); /* full, or not ours to write: the usual place */
    }
    char path[PATH_MAX];
    if (tmpdir_make(path, sizeof path, "amlrun_XXXXXX", 1, NULL, verbose,
                    "a private directory for the error files") < 0) {
        errno = 0;
        return NULL;
    }
    char *base = strdup(path);
    if (!base)
        errno = ENOMEM;
    return base;
}

struct rundir *rundir_open(int base_fd, const char *base_path,
                           const char *run_id, int keep, int verbose)
{
    struct rundir *r = calloc(1, sizeof *r);
    char *base = NULL, *tmpl = NULL;
    int made_base = 0;
    if (!r)
        goto nomem;
    r->fd = r->attempt_fd = -1;
    r->last_attempt = -1;
    if (base_fd >= 0) {
        /* Absolute, so that a worker that changes directory still finds
         * its error file. */
        base = realpath(base_path, NULL);
        if (!base) {
            msg_errno(errno, "--log-dir %s", base_path);
            goto fail;
        }
    } else {
        base = private_base(keep, verbose);
        if (!base) {
            if (errno == ENOMEM)
                goto nomem;
            goto fail;
        }
        made_base = 1;
    }
    size_t idlen = strlen(run_id);
    tmpl = malloc(strlen(base) + idlen + 10);
    if (!tmpl)
        goto nomem;
    /* The unique part is made where the base is; mkdtemp's 0700 keeps the
     * error files and logs to the user. */
    char *leaf = tmpl + sprintf(tmpl, "%s/", base);
    sprintf(leaf, "%s_XXXXXX", run_id);
    safe_component(leaf);
    if (!mkdtemp(tmpl)) {
        msg_errno(errno, "cannot make a run directory in %s", base);
        goto fail;
    }
    r->path = tmpl;
    tmpl = NULL;
    r->fd = open(r->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (r->fd < 0) {
        msg_errno(errno, "%s", r->path);
        goto fail;
    }
    if (made_base && !keep)
        r->temp_base = base;
    else
        free(base);
    return r;
nomem:
    msg("the run directory: out of memory");
fail:
    free(tmpl);
    if (r && r->path && r->fd < 0)
        rmdir(r->path);
    if (made_base)
        rmdir(base);
    free(base);
    rundir_close(r);
    return NULL;
}

const char *rundir_path(const struct rundir *r)
{
    return r->path;
}

int rundir_attempt(struct rundir *r, int n)
{
    char name[32];
    snprintf(name, sizeof name, "attempt_%d", n);
    if (r->attempt_fd >= 0)
        close(r->attempt_fd);
    free(r->attempt_path);
    r->attempt_path = NULL;
    r->attempt_fd = -1;
    if (mkdirat(r->fd, name, 0777) < 0 ||
        (r->attempt_fd = openat(r->fd, name, O_RDONLY | O_DIRECTORY |
                                                 O_NOFOLLOW | O_CLOEXEC)) < 0) {
        msg_errno(errno, "%s/%s", r->path, name);
        return -1;
    }
    if (n > r->last_attempt)
        r->last_attempt = n;
    r->attempt_path = join(r->path, name);
    if (!r->attempt_path) {
        msg("%s/%s: out of memory", r->path, name);
        return -1;
    }
    return 0;
}

static int log_create(int dfd, const char *dir, const char *name, int rank)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                                   O_CLOEXEC | O_NOCTTY, 0666);
    if (fd < 0)
        msg_errno(errno, "%s/%s", dir, name);
    else
        out_log_named(fd, rank, dir, name);
    return fd;
}

int rundir_worker(struct rundir *r, int local, int rank, int streams,
                  char **error_file, int *out, int *err)
{
    char name[16];
    snprintf(name, sizeof name, "%d", local);
    *out = *err = -1;
    *error_file = NULL;
    if (r->attempt_fd < 0)
        return -1;
    char *dir = join(r->attempt_path, name);
    if (!dir) {
        msg("the run directory: out of memory");
        return -1;
    }
    int dfd = -1, rc = -1;
    /* Opened only for the log files: the error file is the worker's to
     * write. */
    if (mkdirat(r->attempt_fd, name, 0777) < 0 ||
        (streams != STD_NONE &&
         (dfd = openat(r->attempt_fd, name, O_RDONLY | O_DIRECTORY |
                                                O_NOFOLLOW | O_CLOEXEC)) < 0)) {
        msg_errno(errno, "%s", dir);
        goto out;
    }
    if (local >= r->workers)
        r->workers = local + 1;
    if ((streams & STD_OUT) &&
        (*out = log_create(dfd, dir, "stdout.log", rank)) < 0)
        goto out;
    if ((streams & STD_ERR) &&
        (*err = log_create(dfd, dir, "stderr.log", rank)) < 0)
        goto out;
    if (!(*error_file = join(dir, "error.json"))) {
        msg("the run directory: out of memory");
        goto out;
    }
    rc = 0;
out:
    if (rc < 0) {
        if (*out >= 0)
            close(*out);
        if (*err >= 0)
            close(*err);
        *out = *err = -1;
    }
    if (dfd >= 0)
        close(dfd);
    free(dir);
    return rc;
}

/* Remove the tree rundir_attempt and rundir_worker made under the run
 * directory by name, without listing it: what a success leaves.  0, or -1
 * when something is left (a worker's error file or files of its own), for
 * the listing walk to remove. */
static int remove_known(struct rundir *r)
{
    char name[48];
    int rc = 0;
    for (int a = 0; a <= r->last_attempt; a++) {
        for (int l = 0; l < r->workers; l++) {
            snprintf(name, sizeof name, "attempt_%d/%d", a, l);
            if (unlinkat(r->fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                rc = -1;
        }
        snprintf(name, sizeof name, "attempt_%d", a);
        if (unlinkat(r->fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
            rc = -1;
    }
    return rc == 0 && rmdir(r->path) == 0 ? 0 : -1;
}

void rundir_keep(struct rundir *r)
{
    free(r->temp_base);
    r->temp_base = NULL;
}

void rundir_close(struct rundir *r)
{
    if (!r)
        return;
    if (r->attempt_fd >= 0)
        close(r->attempt_fd);
    int gone = r->temp_base && r->fd >= 0 && remove_known(r) == 0 &&
               rmdir(r->temp_base) == 0;
    if (r->fd >= 0)
        close(r->fd);
    if (r->temp_base && !gone) {
        int fd = open(r->temp_base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                        O_CLOEXEC);
        if (fd >= 0)
            empty_dir(fd, 0);
        rmdir(r->temp_base);
    }
    free(r->temp_base);
    free(r->attempt_path);
    free(r->path);
    free(r);
}
