/*
 * What the user reads (see stacks.h): the compact report on stderr and the
 * JSON of --hang-report.
 *
 *   amlrun: hang: no progress for 30 s; stacks of 16 ranks, 2 groups; likely cause: rank 7
 *   amlrun:   rank 7 (host gpu-b, pid 4242): train.py:17 slow_step < train.py:40 train
 *   amlrun:   ranks 0-6,8-15 (15): distributed_c10d.py:2501 all_reduce < ... < train.py:42 train
 *
 * A group's frames are its example rank's main thread's (Python frames
 * for a Python worker), innermost first, " < " read "called from": the
 * innermost frame (where it waits or spins), then the innermost frames of
 * user code, "..." where library frames are left out; with no user code,
 * the innermost frames.  File names lose their folders (the JSON has the
 * paths).  Each line fits in WIDTH columns; names come from other
 * processes and nodes, so control characters (a terminal's escapes) and
 * bytes that are not UTF-8 are shown as '?'.  Each line is written whole.
 * Under a group's line, the ranks of it whose stack was read in part say
 * why, one line for each kind of reason (digits aside):
 *
 *   amlrun:     ranks 1-3: no Python frames: the program handles signal 58 ...
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output/json.h"
#include "output/ranklist.h"
#include "stacks/frames.h"
#include "stacks/stacks.h"

#define WIDTH 100       /* columns of one line */
#define USER_FRAMES 3   /* user frames on a group's line */
#define SHOWN_GROUPS 16 /* group lines; the JSON has them all */
#define FRAMES_ROOM 40  /* columns kept for the frames of a culprits' line */
#define NOTE_KINDS 3    /* reason lines under a group; the JSON has them all */

struct line {
    char b[4 * WIDTH + 64]; /* a column is at most 4 bytes of UTF-8 */
    size_t len, cols;
};

/* The length of the UTF-8 character at p (at most n bytes there) when it
 * is well formed and printable, else 0. */
static size_t utf8_char(const unsigned char *p, size_t n)
{
    if (p[0] >= 0x20 && p[0] < 0x7f)
        return 1;
    size_t len = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
    if (p[0] >= 0xf5 || len == 0 || len > n)
        return 0;
    unsigned cp = p[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    static const unsigned least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
        (cp >= 0x80 && cp <= 0x9f)) /* overlong, surrogate, C1 control */
        return 0;
    return len;
}

/* Trusted text (ASCII, ours), if it fits. */
static void add(struct line *l, const char *s)
{
    size_t n = strlen(s);
    if (l->len + n < sizeof l->b) {
        memcpy(l->b + l->len, s, n + 1);
        l->len += n;
        l->cols += n;
    }
}

/* Text from elsewhere, made safe, in at most max columns ("..." at the
 * end when cut). */
static void add_safe(struct line *l, const char *s, size_t max)
{
    size_t total = 0, n = strlen(s);
    for (size_t i = 0; i < n; total++) {
        size_t k = utf8_char((const unsigned char *)s + i, n - i);
        i += k ? k : 1;
    }
    size_t keep = total <= max ? total : max > 3 ? max - 3 : 0;
    for (size_t i = 0, c = 0; c < keep; c++) {
        size_t k = utf8_char((const unsigned char *)s + i, n - i);
        if (l->len + 4 >= sizeof l->b)
            return;
        if (k)
            memcpy(l->b + l->len, s + i, k);
        else
            l->b[l->len] = '?';
        l->len += k ? k : 1;
        l->cols++;
        i += k ? k : 1;
    }
    l->b[l->len] = '\0';
    if (keep < total)
        add(l, "...");
}

/* The line as a line, with one write. */
static void emit(FILE *f, struct line *l)
{
    if (l->len + 1 < sizeof l->b) {
        l->b[l->len++] = '\n';
        l->b[l->len] = '\0';
    }
    fwrite(l->b, 1, l->len, f);
    fflush(f);
}

/* "file:line function", the module's name for want of a file. */
static void frame_text(struct line *l, const struct stk_frame *f)
{
    const char *where = f->file ? f->file : f->module;
    if (where) {
        char n[16];
        add_safe(l, stk_base(where), 40);
        if (f->line > 0) {
            snprintf(n, sizeof n, ":%d", f->line);
            add(l, n);
        }
        add(l, " ");
    }
    add_safe(l, f->function ? f->function : "??", 48);
}

static void append(struct line *l, const struct line *piece)
{
    if (l->len + piece->len < sizeof l->b) {
        memcpy(l->b + l->len, piece->b, piece->len + 1);
        l->len += piece->len;
        l->cols += piece->cols;
    }
}

/* The frames that say where a group is: its example rank's. */
static void frames_text(struct line *l, const struct stk_rank *r)
{
    int py = stk_rank_python(r);
    size_t n = 0;
    const struct stk_frame *f = r->nthreads ? stk_thread_frames(&r->threads[0], py, &n) : NULL;
    if (n == 0) {
        add(l, r->error ? "no stack: " : "no frames");
        if (r->error)
            add_safe(l, r->error, WIDTH > l->cols + 8 ? WIDTH - l->cols : 8);
        return;
    }
    size_t user = 0; /* the innermost user frame, n when none */
    while (user < n && !stk_frame_user(&f[user], py))
        user++;
    size_t shown = 0, last = 0, most = user < n ? USER_FRAMES + (user > 0) : USER_FRAMES;
    for (size_t i = 0; i < n && shown < most; i++) {
        if (i > 0 && user < n && !stk_frame_user(&f[i], py))
            continue;
        struct line piece = {.len = 0};
        if (shown)
            add(&piece, i > last + 1 ? " < ... < " : " < ");
        frame_text(&piece, &f[i]);
        size_t room = WIDTH > l->cols ? WIDTH - l->cols : 0;
        if (piece.cols > room) {
            if (shown == 0) /* the first frame shows, cut to fit */
                add_safe(l, piece.b, room);
            break;
        }
        append(l, &piece);
        shown++;
        last = i;
    }
}

static int has_rank(const int *v, size_t n, int rank)
{
    return n && bsearch(&rank, v, n, sizeof rank, stk_int_cmp);
}

/* " (host H, pid P)" for the outliers of a culprits' group. */
static void hosts_text(struct line *l, const struct stk_set *s, const struct stk_report *r,
                       const struct stk_group *g)
{
    size_t shown = 0, more = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct stk_rank *k = &s->ranks[i];
        if (!has_rank(r->outliers, r->noutliers, k->rank) || !has_rank(g->ranks, g->n, k->rank))
            continue;
        /* One at least; more while the frames keep FRAMES_ROOM columns. */
        struct line one = {.len = 0};
        char b[48];
        add(&one, shown ? "; " : " (");
        if (g->n > 1) {
            snprintf(b, sizeof b, "rank %d ", k->rank);
            add(&one, b);
        }
        add(&one, "host ");
        add_safe(&one, k->host ? k->host : "?", 24);
        snprintf(b, sizeof b, ", pid %d", (int)k->pid);
        add(&one, b);
        if (shown && l->cols + one.cols + 12 + FRAMES_ROOM > WIDTH) {
            more++;
            continue;
        }
        append(l, &one);
        shown++;
    }
    if (more) {
        char b[32];
        snprintf(b, sizeof b, "; %zu more", more);
        add(l, b);
    }
    if (shown)
        add(l, ")");
}

/* "rank 7" or "ranks 0-6,8-15", in at most width bytes of list. */
static void ranks_text(struct line *l, const int *ranks, size_t n, size_t width)
{
    char b[64];
    if (width > sizeof b)
        width = sizeof b;
    add(l, n == 1 ? "rank " : "ranks ");
    ranklist_format(ranks, n, b, width);
    add(l, b);
}

/* Two errors of one kind: the same text but for the numbers in it (a
 * pid, a tid, a signal). */
static int same_kind(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            while (isdigit((unsigned char)*a))
                a++;
            while (isdigit((unsigned char)*b))
                b++;
        } else if (*a++ != *b++) {
            return 0;
        }
    }
    return *a == *b;
}

/* The reasons of g's ranks that have frames and an error (a thread that
 * did not stop, no Python frames), each kind on a line of its own. */
static void notes(FILE *f, const struct stk_set *s, const struct stk_group *g)
{
    const char *kind[NOTE_KINDS];
    size_t nkinds = 0, more = 0;
    int *ranks = malloc(g->n * sizeof *ranks);
    if (!ranks)
        return; /* the JSON has them */
    for (size_t i = 0; i < s->n; i++) {
        const struct stk_rank *k = &s->ranks[i];
        if (!k->nthreads || !k->error || !has_rank(g->ranks, g->n, k->rank))
            continue;
        size_t j = 0;
        while (j < nkinds && !same_kind(kind[j], k->error))
            j++;
        if (j == nkinds && nkinds < NOTE_KINDS)
            kind[nkinds++] = k->error;
        else if (j == nkinds)
            more++;
    }
    for (size_t j = 0; j < nkinds; j++) {
        size_t n = 0;
        for (size_t i = 0; i < s->n; i++) {
            const struct stk_rank *k = &s->ranks[i];
            /* n < g->n: a set that holds a rank twice (a malformed
             * answer) cannot overrun the group's room */
            if (n < g->n && k->nthreads && k->error &&
                has_rank(g->ranks, g->n, k->rank) &&
                same_kind(kind[j], k->error))
                ranks[n++] = k->rank;
        }
        qsort(ranks, n, sizeof *ranks, stk_int_cmp);
        struct line l = {.len = 0};
        add(&l, "amlrun:     ");
        ranks_text(&l, ranks, n, 36);
        add(&l, ": ");
        add_safe(&l, kind[j], WIDTH > l.cols + 8 ? WIDTH - l.cols : 8);
        emit(f, &l);
    }
    if (more) {
        char b[96];
        snprintf(b, sizeof b, "amlrun:     and %zu more ranks with other reasons", more);
        struct line l = {.len = 0};
        add(&l, b);
        emit(f, &l);
    }
    free(ranks);
}

static void head_text(struct line *l, const struct stk_set *s, const struct stk_report *r)
{
    char b[96], t[32];
    double tm = r->timeout_s;
    if (!isfinite(tm) || tm < 0 || tm > 1e9)
        snprintf(t, sizeof t, "?");
    else
        snprintf(t, sizeof t, "%.*f", (double)(long long)tm == tm ? 0 : 1, tm);
    add(l, "amlrun: ");
    const char *head = stop_row(r->reason)->stacks_head;
    if (head) {
        /* The reason's own words, then the limit (stopreason.h). */
        snprintf(b, sizeof b, "%s %s s; ", head, t);
        add(l, b);
    }
    snprintf(b, sizeof b, "stacks of %zu rank%s, %zu group%s; ", s->n, s->n == 1 ? "" : "s",
             r->ngroups, r->ngroups == 1 ? "" : "s");
    add(l, b);
    if (r->noutliers) {
        add(l, "likely cause: ");
        ranks_text(l, r->outliers, r->noutliers, WIDTH > l->cols + 14 ? WIDTH - l->cols - 6 : 8);
    } else {
        add(l, r->ngroups > 1 ? "no rank stands out" : "all at the same place");
    }
}

void stk_print(FILE *f, const struct stk_set *s, const struct stk_report *r)
{
    struct line l = {.len = 0};
    head_text(&l, s, r);
    emit(f, &l);
    size_t left = 0;
    for (size_t i = 0; i < r->ngroups; i++) {
        const struct stk_group *g = &r->groups[i];
        if (i >= SHOWN_GROUPS) {
            left += g->n;
            continue;
        }
        char b[32];
        l = (struct line){.len = 0};
        add(&l, "amlrun:   ");
        ranks_text(&l, g->ranks, g->n, 36);
        if (g->n > 1) {
            snprintf(b, sizeof b, " (%zu)", g->n);
            add(&l, b);
        }
        hosts_text(&l, s, r, g);
        add(&l, ": ");
        if (g->example < s->n)
            frames_text(&l, &s->ranks[g->example]);
        emit(f, &l);
        notes(f, s, g);
    }
    if (r->ngroups > SHOWN_GROUPS) {
        char b[96];
        snprintf(b, sizeof b, "amlrun:   and %zu more groups of %zu ranks in all",
                 r->ngroups - SHOWN_GROUPS, left);
        l = (struct line){.len = 0};
        add(&l, b);
        emit(f, &l);
    }
}

/* ---- JSON ---- */

static void json_frames(struct json *j, const char *key, const struct stk_frame *f, size_t n)
{
    json_array(j, key);
    for (size_t i = 0; i < n; i++) {
        json_object(j, NULL);
        json_str(j, "function", f[i].function);
        json_str(j, "file", f[i].file);
        json_id(j, "line", f[i].line > 0 ? f[i].line : -1);
        json_close(j);
    }
    json_close(j);
}

static void json_rank(struct json *j, const struct stk_rank *r)
{
    json_object(j, NULL);
    json_int(j, "rank", r->rank);
    json_id(j, "local_rank", r->local_rank);
    json_id(j, "node", r->node);
    json_str(j, "host", r->host);
    json_int(j, "pid", r->pid);
    if (isfinite(r->last_progress_s) && r->last_progress_s >= 0)
        json_num(j, "last_progress_s", r->last_progress_s, 3);
    else
        json_null(j, "last_progress_s");
    json_array(j, "threads");
    for (size_t t = 0; t < r->nthreads; t++) {
        const struct stk_thread *th = &r->threads[t];
        json_object(j, NULL);
        json_id(j, "tid", th->tid > 0 ? th->tid : -1);
        json_id(j, "pid", th->pid > 0 ? th->pid : -1);
        json_str(j, "name", th->name);
        json_frames(j, "python", r->threads[t].python, r->threads[t].npython);
        json_frames(j, "native", r->threads[t].native, r->threads[t].nnative);
        json_close(j);
    }
    json_close(j);
    if (r->error)
        json_str(j, "error", r->error);
    json_close(j);
}

static void json_report(FILE *f, const struct stk_set *s, const struct stk_report *r,
                        struct json *j)
{
    json_begin(j, f);
    json_object(j, NULL);
    json_str(j, "reason", stop_row(r->reason)->name);
    if (isfinite(r->timeout_s))
        json_num(j, "timeout_s", r->timeout_s, 3);
    else
        json_null(j, "timeout_s");
    json_array(j, "ranks");
    for (size_t i = 0; i < s->n; i++)
        json_rank(j, &s->ranks[i]);
    json_close(j);
    json_array(j, "groups");
    for (size_t i = 0; i < r->ngroups; i++) {
        const struct stk_group *g = &r->groups[i];
        json_object(j, NULL);
        json_array(j, "ranks");
        for (size_t k = 0; k < g->n; k++)
            json_int(j, NULL, g->ranks[k]);
        json_close(j);
        /* The frames that decide the group: its example's main thread's. */
        const struct stk_rank *e = g->example < s->n ? &s->ranks[g->example] : NULL;
        size_t n = 0;
        const struct stk_frame *fr =
            e && e->nthreads ? stk_thread_frames(&e->threads[0], stk_rank_python(e), &n) : NULL;
        json_frames(j, "frames", fr, n);
        json_close(j);
    }
    json_close(j);
    json_array(j, "outliers");
    for (size_t i = 0; i < r->noutliers; i++)
        json_int(j, NULL, r->outliers[i]);
    json_close(j);
}

int stk_write_json(const char *path, const struct stk_set *s, const struct stk_report *r)
{
    /* A temporary file beside it, renamed over it when whole: a reader sees
     * the old report or the new one, never half of one. */
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int err = errno;
        close(fd);
        unlink(tmp);
        errno = err;
        return -1;
    }
    struct json j;
    json_report(f, s, r, &j);
    int rc = json_end(&j);
    int err = errno;
    if (fclose(f) != 0 && rc == 0) {
        rc = -1;
        err = errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -1;
        err = errno;
    }
    if (rc != 0) {
        unlink(tmp);
        errno = err ? err : EIO;
    }
    return rc;
}
