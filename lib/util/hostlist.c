/*
 * Slurm hostlists ("gpu[009-011,013],rack[1-2]-n[01-02]") and
 * SLURM_TASKS_PER_NODE ("2(x3),1"), read in place: every call walks the text
 * again instead of building the expanded list, so nothing is allocated and
 * the worst case is bounded by the text's length and AMLDIST__HOSTLIST_MAX.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "util/internal.h"
#include "util/parse.h"

#define LABEL_MAX 63
#define NAME_MAX_LEN 253
#define NUM_DIGITS_MAX 18 /* 10^18 - 1 fits in unsigned long long easily */

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int is_alnum(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Digits at *p (before end): value and number of digits; advances *p. */
static int scan_number(const char **p, const char *end, unsigned long long *v,
                       int *ndigits)
{
    const char *s = *p;
    unsigned long long x = 0;
    int n = 0;
    while (s < end && is_digit(*s)) {
        if (++n > NUM_DIGITS_MAX)
            return AMLDIST_ERANGE;
        x = x * 10 + (unsigned long long)(*s++ - '0');
    }
    if (n == 0)
        return AMLDIST_EPARSE;
    *p = s;
    *v = x;
    *ndigits = n;
    return 0;
}

static int count_digits(unsigned long long v)
{
    int n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* One item of a bracket group: lo..hi printed at least `width` wide. */
struct range {
    unsigned long long lo, hi;
    int width;
};

static int scan_range(const char **p, const char *end, struct range *r)
{
    int nlo, nhi;
    int rc = scan_number(p, end, &r->lo, &nlo);
    if (rc < 0)
        return rc;
    r->width = nlo;
    r->hi = r->lo;
    if (*p < end && **p == '-') {
        (*p)++;
        rc = scan_number(p, end, &r->hi, &nhi);
        if (rc < 0)
            return rc;
        if (r->hi < r->lo)
            return AMLDIST_EPARSE;
    }
    return 0;
}

/*
 * The group whose text starts after '[' at *p: number of hosts and widest
 * number printed; with pick >= 0 also the pick-th number and its width.
 * Advances *p past the ']'.
 */
static int scan_group(const char **p, const char *end, long *count,
                      int *maxwidth, long pick, unsigned long long *picked,
                      int *picked_width)
{
    long n = 0;
    int w = 0;
    for (;;) {
        struct range r;
        int rc = scan_range(p, end, &r);
        if (rc < 0)
            return rc;
        unsigned long long k = r.hi - r.lo + 1;
        if (k > (unsigned long long)(AMLDIST__HOSTLIST_MAX - n))
            return AMLDIST_ERANGE;
        if (pick >= n && (unsigned long long)(pick - n) < k) {
            *picked = r.lo + (unsigned long long)(pick - n);
            *picked_width = r.width;
        }
        n += (long)k;
        int rw = count_digits(r.hi);
        if (rw < r.width)
            rw = r.width;
        if (rw > w)
            w = rw;
        if (*p < end && **p == ',') {
            (*p)++;
            continue;
        }
        if (*p < end && **p == ']') {
            (*p)++;
            break;
        }
        return AMLDIST_EPARSE;
    }
    *count = n;
    *maxwidth = w;
    return 0;
}

/* The host number idx (0 <= idx < n) of name [s, end) holding n hosts. */
static int name_nth(const char *s, const char *end, long n, long idx,
                    char *out, size_t outsz)
{
    size_t len = 0;
    long rest = n; /* hosts per value of the current group: the product of
                      the later groups, as the first group varies slowest */
    for (const char *p = s; p < end;) {
        char num[NUM_DIGITS_MAX + 1];
        const char *text = p;
        size_t tlen = 1;
        if (*p == '[') {
            const char *g = ++p;
            long c;
            int w, pw = 0;
            unsigned long long v = 0;
            int rc = scan_group(&p, end, &c, &w, -1, NULL, NULL);
            if (rc < 0)
                return rc;
            rest /= c;
            p = g;
            rc = scan_group(&p, end, &c, &w, idx / rest, &v, &pw);
            if (rc < 0)
                return rc;
            idx %= rest;
            tlen = (size_t)snprintf(num, sizeof num, "%0*llu", pw, v);
            text = num;
        } else {
            p++;
        }
        if (len + tlen >= outsz)
            return AMLDIST_ERANGE;
        memcpy(out + len, text, tlen);
        len += tlen;
    }
    out[len] = '\0';
    return 0;
}

/* "0" or 1..255 without leading zeros. */
static int is_octet(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 3 || (s[0] == '0' && n > 1))
        return 0;
    int v = 0;
    for (; *s; s++) {
        if (!is_digit(*s))
            return 0;
        v = v * 10 + (*s - '0');
    }
    return v <= 255;
}

/*
 * A name that might read as an IPv4 address.  Labels hold their own groups
 * (groups never contain dots), so the hosts are the product of each label's
 * values and the label can be checked one by one instead of the hosts:
 *  - last label all digits: every host must be a dotted quad, so four labels
 *    whose every value is an octet;
 *  - otherwise inet_aton() reads some host as an address exactly when every
 *    label has a value it reads as that part (checked with "0" in the other
 *    parts), and such a name is refused as a whole.
 * A label may have at most LABEL_VALUES_MAX values here (ERANGE beyond).
 */
#define LABEL_VALUES_MAX 65536L

static int numeric_check(const char *s, const char *end, int quad)
{
    const char *lab[4], *labend[4];
    int k = 0;
    for (const char *p = s;; p++) {
        if (p == end || *p == '.') {
            if (k == 4) /* five labels: never an address */
                return quad ? AMLDIST_EPARSE : 0;
            lab[k] = k ? labend[k - 1] + 1 : s;
            labend[k++] = p;
            if (p == end)
                break;
        }
    }
    if (quad && k != 4)
        return AMLDIST_EPARSE;
    for (int i = 0; i < k; i++) {
        long n = 1;
        for (const char *p = lab[i]; p < labend[i];) {
            if (*p++ != '[')
                continue;
            long gc;
            int gw;
            int rc = scan_group(&p, labend[i], &gc, &gw, -1, NULL, NULL);
            if (rc < 0)
                return rc;
            if (n > LABEL_VALUES_MAX / gc)
                return AMLDIST_ERANGE;
            n *= gc;
        }
        int readable = 0;
        for (long j = 0; j < n && !readable; j++) {
            char val[AMLDIST__HOST_MAX], probe[AMLDIST__HOST_MAX + 8];
            int rc = name_nth(lab[i], labend[i], n, j, val, sizeof val);
            if (rc < 0)
                return rc;
            if (quad) {
                if (!is_octet(val))
                    return AMLDIST_EPARSE;
                continue;
            }
            struct in_addr a;
            size_t len = 0;
            for (int m = 0; m < k; m++)
                len += (size_t)snprintf(probe + len, sizeof probe - len, "%s%s",
                                        m ? "." : "", m == i ? val : "0");
            readable = inet_aton(probe, &a);
        }
        if (!quad && !readable)
            return 0;
    }
    return quad ? 0 : AMLDIST_EPARSE;
}

/*
 * Check name [s, end) and count its hosts.  Labels, hyphens and lengths are
 * checked on the template (a group prints at least one digit and at most its
 * widest number); only a name whose hosts could read as IPv4 addresses needs
 * numeric_check().
 */
static int name_count(const char *s, const char *end, long *count)
{
    long n = 1;
    size_t total = 0, label = 0;
    int hyphen_last = 0;
    /* About the current label: all digits so far, starts with a digit or a
     * group, holds only hex digits and 'x' (what inet_aton() reads), has an
     * 'x'; and whether every label so far looked like an inet_aton() part. */
    int all_digits = 1, digit_first = 0, hexish = 1, has_x = 0, parts = 1;
    if (s == end)
        return AMLDIST_EPARSE;
    for (const char *p = s; p < end;) {
        char c = *p;
        size_t w = 1;
        if (c == '[') {
            long gc;
            int gw;
            p++;
            int rc = scan_group(&p, end, &gc, &gw, -1, NULL, NULL);
            if (rc < 0)
                return rc;
            if (n > AMLDIST__HOSTLIST_MAX / gc)
                return AMLDIST_ERANGE;
            n *= gc;
            if (label == 0)
                digit_first = 1;
            hyphen_last = 0;
            w = (size_t)gw;
        } else if (c == '.') {
            if (label == 0 || hyphen_last)
                return AMLDIST_EPARSE;
            parts = parts && digit_first && hexish;
            label = 0;
            all_digits = hexish = 1;
            digit_first = has_x = 0;
            p++;
            total++;
            continue;
        } else if (c == '-' && label > 0) {
            hyphen_last = 1;
            all_digits = hexish = 0;
            p++;
        } else if (is_alnum(c)) {
            if (label == 0)
                digit_first = is_digit(c);
            all_digits = all_digits && is_digit(c);
            has_x = has_x || c == 'x' || c == 'X';
            hexish = hexish && (is_digit(c) || c == 'x' || c == 'X' ||
                                (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'));
            hyphen_last = 0;
            p++;
        } else {
            return AMLDIST_EPARSE;
        }
        label += w;
        total += w;
        if (label > LABEL_MAX || total > NAME_MAX_LEN)
            return AMLDIST_EPARSE;
    }
    if (label == 0 || hyphen_last)
        return AMLDIST_EPARSE;
    int rc = 0;
    if (all_digits) /* groups count as digits */
        rc = numeric_check(s, end, 1);
    else if (parts && digit_first && hexish && has_x)
        rc = numeric_check(s, end, 0);
    if (rc < 0)
        return rc;
    *count = n;
    return 0;
}

/* End of the name starting at s: the first comma outside brackets. */
static const char *name_end(const char *s)
{
    int inside = 0;
    for (; *s; s++) {
        if (*s == '[')
            inside = 1;
        else if (*s == ']')
            inside = 0;
        else if (*s == ',' && !inside)
            break;
    }
    return s;
}

/* Check the whole list and count its hosts; with fn, call it on every name
 * (text [s, end), n hosts, index of its first host) until it returns != 0. */
typedef int (*name_fn)(const char *s, const char *end, long n, long first,
                       void *arg);

static int walk_names(const char *list, name_fn fn, void *arg, long *total)
{
    if (list == NULL)
        return AMLDIST_EINVAL;
    long sum = 0;
    const char *s = list;
    for (;;) {
        const char *end = name_end(s);
        long n = 0;
        int rc = name_count(s, end, &n);
        if (rc < 0)
            return rc;
        if (n > AMLDIST__HOSTLIST_MAX - sum)
            return AMLDIST_ERANGE;
        if (fn && (rc = fn(s, end, n, sum, arg)) != 0)
            return rc;
        sum += n;
        if (*end == '\0')
            break;
        s = end + 1;
    }
    *total = sum;
    return 0;
}

long amldist__hostlist_count(const char *list)
{
    long total;
    int rc = walk_names(list, NULL, NULL, &total);
    return rc < 0 ? rc : total;
}

struct nth_arg {
    long n;
    char *out;
    size_t outsz;
};

static int nth_name(const char *s, const char *end, long n, long first,
                    void *arg)
{
    struct nth_arg *a = arg;
    if (a->n < first || a->n >= first + n)
        return 0;
    /* Found, but keep walking: the rest of the list must be valid too. */
    return name_nth(s, end, n, a->n - first, a->out, a->outsz);
}

int amldist__hostlist_nth(const char *list, long n, char *out, size_t outsz)
{
    if (list == NULL || out == NULL || outsz == 0)
        return AMLDIST_EINVAL;
    out[0] = '\0';
    struct nth_arg a = {n, out, outsz};
    long total;
    int rc = walk_names(list, nth_name, &a, &total);
    if (rc == 0 && (n < 0 || n >= total))
        rc = AMLDIST_ERANGE;
    if (rc < 0)
        out[0] = '\0';
    return rc;
}

struct foreach_arg {
    int (*fn)(const char *host, long index, void *arg);
    void *arg;
    int rc; /* fn's first non-zero return */
};

static int foreach_name(const char *s, const char *end, long n, long first,
                        void *arg)
{
    struct foreach_arg *fa = arg;
    char host[AMLDIST__HOST_MAX];
    for (long i = 0; i < n; i++) {
        int rc = name_nth(s, end, n, i, host, sizeof host);
        if (rc < 0)
            return rc;
        if ((fa->rc = fa->fn(host, first + i, fa->arg)) != 0)
            return 1;
    }
    return 0;
}

int amldist__hostlist_foreach(const char *list,
                              int (*fn)(const char *host, long index, void *arg),
                              void *arg)
{
    if (list == NULL || fn == NULL)
        return AMLDIST_EINVAL;
    long total;
    int rc = walk_names(list, NULL, NULL, &total);
    if (rc < 0)
        return rc;
    struct foreach_arg fa = {fn, arg, 0};
    rc = walk_names(list, foreach_name, &fa, &total);
    return rc < 0 ? rc : fa.rc;
}

/*
 * SLURM_TASKS_PER_NODE.  Walks the items; with node >= 0 stores that node's
 * task count.  Returns the number of nodes or < 0.
 */
static long tasks_walk(const char *s, long node, long *tasks)
{
    if (s == NULL)
        return AMLDIST_EINVAL;
    const char *end = s + strlen(s);
    const char *p = s;
    long total = 0;
    for (;;) {
        unsigned long long count, reps = 1;
        int nd;
        int rc = scan_number(&p, end, &count, &nd);
        if (rc < 0)
            return rc;
        if (p < end && *p == '(') {
            if (p + 1 >= end || p[1] != 'x')
                return AMLDIST_EPARSE;
            p += 2;
            rc = scan_number(&p, end, &reps, &nd);
            if (rc < 0)
                return rc;
            if (p >= end || *p != ')')
                return AMLDIST_EPARSE;
            p++;
        }
        if (p < end && *p != ',')
            return AMLDIST_EPARSE;
        if (count < 1 || count > INT_MAX || reps < 1)
            return AMLDIST_ERANGE;
        if (reps > (unsigned long long)(AMLDIST__HOSTLIST_MAX - total))
            return AMLDIST_ERANGE;
        if (node >= total && (unsigned long long)(node - total) < reps)
            *tasks = (long)count;
        total += (long)reps;
        if (p == end)
            return total;
        p++; /* the comma */
    }
}

int amldist__tasks_per_node(const char *s, long node, long *tasks)
{
    if (tasks == NULL)
        return AMLDIST_EINVAL;
    long t = 0;
    long n = tasks_walk(s, node, &t);
    if (n < 0)
        return (int)n;
    if (node < 0 || node >= n)
        return AMLDIST_ERANGE;
    *tasks = t;
    return 0;
}

long amldist__tasks_nodes(const char *s)
{
    long t;
    return tasks_walk(s, -1, &t);
}
