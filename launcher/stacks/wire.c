/*
 * A set of stacks as text, to carry between nodes (see stacks.h).  One
 * record a line, fields apart with one space:
 *
 *     amlrun-stacks 1
 *     r RANK LOCAL_RANK NODE PID LAST_PROGRESS_S HOST ERROR
 *     t TID NAME                      a thread of the rank above
 *     p LINE FUNCTION FILE MODULE     a Python frame of the thread above
 *     n LINE FUNCTION FILE MODULE     a native frame of it (after the p lines)
 *     end NRANKS
 *
 * A string is "-" for NULL, or "=" and its bytes with every byte that is
 * not printable ASCII, a space or '%' written %XX (upper-case hex), so that
 * any name (a file name holds any byte but NUL) keeps to its field and its
 * line.  Numbers are decimal ints and LAST_PROGRESS_S is "%.17g", which
 * strtod() reads back exactly.  The text comes from other nodes: the
 * decoder takes only this canonical form (so that encode(decode(t)) == t),
 * within the STK_MAX_* bounds, and never reads past len.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/msg.h"
#include "stacks/stacks.h"

#define MAGIC "amlrun-stacks 1"

/* ---- encoding ---- */

struct out {
    char *p;
    size_t len, cap;
    int oom;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->oom)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *p = realloc(o->p, cap);
        if (!p) {
            o->oom = 1;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void putf(struct out *o, const char *fmt, ...) AMLRUN_PRINTF(2, 3);
static void putf(struct out *o, const char *fmt, ...)
{
    char b[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    put(o, b, n > 0 ? (size_t)n : 0);
}

static int escaped(unsigned char c)
{
    return c <= ' ' || c >= 0x7f || c == '%';
}

/* " " and the string's field. */
static void put_str(struct out *o, const char *s)
{
    if (!s) {
        put(o, " -", 2);
        return;
    }
    put(o, " =", 2);
    size_t n = strnlen(s, STK_MAX_STR);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && !escaped((unsigned char)s[j]))
            j++;
        put(o, s + i, j - i);
        if (j < n)
            putf(o, "%%%02X", (unsigned char)s[j++]);
        i = j;
    }
}

static void put_frames(struct out *o, char kind, const struct stk_frame *f, size_t n)
{
    for (size_t i = 0; i < n && i < STK_MAX_FRAMES; i++) {
        putf(o, "%c %d", kind, f[i].line);
        put_str(o, f[i].function);
        put_str(o, f[i].file);
        put_str(o, f[i].module);
        put(o, "\n", 1);
    }
}

char *stk_encode(const struct stk_set *s, size_t *len)
{
    struct out o = {0};
    size_t nranks = s->n < STK_MAX_RANKS ? s->n : STK_MAX_RANKS;
    put(&o, MAGIC "\n", sizeof MAGIC);
    for (size_t i = 0; i < nranks; i++) {
        const struct stk_rank *r = &s->ranks[i];
        /* A time that is not a number has no text: "never" instead. */
        double last = isfinite(r->last_progress_s) ? r->last_progress_s : -1;
        putf(&o, "r %d %d %d %d ", r->rank, r->local_rank, r->node, (int)r->pid);
        putf(&o, "%.17g", last);
        put_str(&o, r->host);
        put_str(&o, r->error);
        put(&o, "\n", 1);
        for (size_t t = 0; t < r->nthreads && t < STK_MAX_THREADS; t++) {
            const struct stk_thread *th = &r->threads[t];
            putf(&o, "t %d %d", (int)th->tid, (int)th->pid);
            put_str(&o, th->name);
            put(&o, "\n", 1);
            put_frames(&o, 'p', th->python, th->npython);
            put_frames(&o, 'n', th->native, th->nnative);
        }
    }
    putf(&o, "end %zu\n", nranks);
    if (o.oom) {
        free(o.p);
        errno = ENOMEM;
        return NULL;
    }
    if (len)
        *len = o.len;
    return o.p;
}

/* ---- decoding ---- */

/* The fields of one line, [p, end) of the text. */
struct fields {
    const char *p, *end;
};

/* The next field: [*fs, *fe), not empty; 0 or -1. */
static int field(struct fields *l, const char **fs, const char **fe)
{
    if (l->p >= l->end)
        return -1;
    const char *sp = memchr(l->p, ' ', (size_t)(l->end - l->p));
    *fs = l->p;
    *fe = sp ? sp : l->end;
    if (*fe == *fs)
        return -1;
    l->p = sp ? sp + 1 : l->end;
    if (sp && l->p == l->end)
        return -1; /* a space at the end of the line */
    return 0;
}

/* A decimal int in canonical form: no '+', no leading zero, no "-0". */
static int int_field(struct fields *l, int *v)
{
    const char *s, *e;
    if (field(l, &s, &e) < 0)
        return -1;
    int neg = *s == '-';
    const char *d = s + neg;
    if (d == e || e - d > 10 || (*d == '0' && (e - d > 1 || neg)))
        return -1;
    long long x = 0;
    for (; d < e; d++) {
        if (*d < '0' || *d > '9')
            return -1;
        x = x * 10 + (*d - '0');
    }
    x = neg ? -x : x;
    if (x < INT_MIN || x > INT_MAX)
        return -1;
    *v = (int)x;
    return 0;
}

static int double_field(struct fields *l, double *v)
{
    const char *s, *e;
    char b[48], back[48];
    if (field(l, &s, &e) < 0 || (size_t)(e - s) >= sizeof b || memchr(s, '\0', (size_t)(e - s)))
        return -1;
    memcpy(b, s, (size_t)(e - s));
    b[e - s] = '\0';
    char *end;
    errno = 0;
    *v = strtod(b, &end);
    if (*end || !isfinite(*v))
        return -1;
    snprintf(back, sizeof back, "%.17g", *v);
    return strcmp(b, back) == 0 ? 0 : -1;
}

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A string field: *v is NULL or malloc'd.  0, or -1 (errno: EINVAL when
 * malformed, ENOMEM). */
static int str_field(struct fields *l, char **v)
{
    const char *s, *e;
    *v = NULL;
    if (field(l, &s, &e) < 0)
        return -1;
    if (e - s == 1 && *s == '-')
        return 0;
    if (*s != '=')
        return -1;
    s++;
    size_t n = 0;
    for (const char *q = s; q < e; n++) {
        if (*q == '%') {
            int hi = e - q >= 3 ? hex(q[1]) : -1, lo = e - q >= 3 ? hex(q[2]) : -1;
            if (hi < 0 || lo < 0 || !escaped((unsigned char)(hi << 4 | lo)) || (hi | lo) == 0)
                return -1; /* not hex, a byte left as it is, or a NUL */
            q += 3;
        } else if (escaped((unsigned char)*q)) {
            return -1;
        } else {
            q++;
        }
        if (n >= STK_MAX_STR)
            return -1;
    }
    char *d = malloc(n + 1);
    if (!d)
        return -1;
    size_t k = 0;
    for (const char *q = s; q < e; k++) {
        if (*q == '%') {
            d[k] = (char)(hex(q[1]) << 4 | hex(q[2]));
            q += 3;
        } else {
            d[k] = *q++;
        }
    }
    d[k] = '\0';
    *v = d;
    return 0;
}

/* Room for one more of an array that holds n of elem bytes, cap allotted:
 * doubled as needed, at most max.  0, or -1. */
static int room(void **a, size_t n, size_t *cap, size_t elem, size_t max)
{
    if (n >= max)
        return -1;
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 4;
    if (c > max)
        c = max;
    void *p = realloc(*a, c * elem);
    if (!p)
        return -1;
    *a = p;
    *cap = c;
    return 0;
}

/* A frame line's fields after its kind, appended to the thread. */
static int frame_line(struct fields *l, struct stk_frame **a, size_t *n, size_t *cap)
{
    struct stk_frame f = {0};
    if (int_field(l, &f.line) < 0 || str_field(l, &f.function) < 0 ||
        str_field(l, &f.file) < 0 || str_field(l, &f.module) < 0 || l->p != l->end ||
        room((void **)a, *n, cap, sizeof **a, STK_MAX_FRAMES) < 0) {
        free(f.function);
        free(f.file);
        free(f.module);
        return -1;
    }
    (*a)[(*n)++] = f;
    return 0;
}

static int rank_line(struct fields *l, struct stk_set *s, size_t *cap)
{
    struct stk_rank r = {0};
    int pid;
    if (int_field(l, &r.rank) < 0 || int_field(l, &r.local_rank) < 0 ||
        int_field(l, &r.node) < 0 || int_field(l, &pid) < 0 ||
        double_field(l, &r.last_progress_s) < 0 || str_field(l, &r.host) < 0 ||
        str_field(l, &r.error) < 0 || l->p != l->end ||
        room((void **)&s->ranks, s->n, cap, sizeof *s->ranks, STK_MAX_RANKS) < 0) {
        free(r.host);
        free(r.error);
        return -1;
    }
    r.pid = (pid_t)pid;
    s->ranks[s->n++] = r;
    return 0;
}

static int thread_line(struct fields *l, struct stk_rank *r, size_t *cap)
{
    struct stk_thread t = {0};
    int tid, pid;
    if (int_field(l, &tid) < 0 || int_field(l, &pid) < 0 ||
        str_field(l, &t.name) < 0 || l->p != l->end ||
        room((void **)&r->threads, r->nthreads, cap, sizeof *r->threads,
             STK_MAX_THREADS) < 0) {
        free(t.name);
        return -1;
    }
    t.tid = (pid_t)tid;
    t.pid = (pid_t)pid;
    r->threads[r->nthreads++] = t;
    return 0;
}

/* The lines after the first, into s; 0 or -1. */
static int decode_lines(const char *p, const char *end, struct stk_set *s)
{
    size_t rcap = 0, tcap = 0, pcap = 0, ncap = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return -1; /* cut short */
        struct fields l = {p + 2, nl};
        struct stk_rank *r = s->n ? &s->ranks[s->n - 1] : NULL;
        struct stk_thread *t = r && r->nthreads ? &r->threads[r->nthreads - 1] : NULL;
        int bad;
        if (nl - p > 4 && memcmp(p, "end ", 4) == 0) {
            int n;
            l.p = p + 4;
            /* The count makes a text cut at a line's end malformed too. */
            bad = int_field(&l, &n) < 0 || l.p != l.end || n < 0 || (size_t)n != s->n;
            return bad || nl + 1 != end ? -1 : 0;
        } else if (nl - p < 2 || p[1] != ' ') {
            bad = 1;
        } else if (p[0] == 'r') {
            bad = rank_line(&l, s, &rcap) < 0;
            tcap = 0;
        } else if (p[0] == 't' && r) {
            bad = thread_line(&l, r, &tcap) < 0;
            pcap = ncap = 0;
        } else if (p[0] == 'p' && t && !t->nnative) { /* Python frames first */
            bad = frame_line(&l, &t->python, &t->npython, &pcap) < 0;
        } else if (p[0] == 'n' && t) {
            bad = frame_line(&l, &t->native, &t->nnative, &ncap) < 0;
        } else {
            bad = 1;
        }
        if (bad)
            return -1;
        p = nl + 1;
    }
    return -1; /* no end */
}

int stk_decode(const char *text, size_t len, struct stk_set *out)
{
    struct stk_set s = {0};
    size_t m = sizeof MAGIC - 1;
    errno = 0;
    if (text && len > m && memcmp(text, MAGIC, m) == 0 && text[m] == '\n' &&
        decode_lines(text + m + 1, text + len, &s) == 0) {
        if (s.n == 0)
            return 0;
        struct stk_rank *a = realloc(out->ranks, (out->n + s.n) * sizeof *a);
        if (a) {
            memcpy(a + out->n, s.ranks, s.n * sizeof *a);
            out->ranks = a;
            out->n += s.n;
            free(s.ranks);
            return 0;
        }
    }
    int err = errno == ENOMEM ? ENOMEM : EINVAL;
    stk_set_free(&s);
    errno = err;
    return -1;
}
