/*
 * libFuzzer target for the environment parsers (lib/parse.c, lib/hostlist.c).
 * Every input goes, NUL-terminated, through every parser; besides the
 * sanitizers' checks, the results must agree with each other and with the
 * documented rules, e.g. every host a hostlist yields is a valid host.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/internal.h"
#include "util/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                          \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_parsers: %s:%d: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

static int all_digits(const char *s)
{
    if (*s == '\0')
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

static void fuzz_long(const char *s)
{
    long v = -1;
    int rc = amldist__parse_long(s, 0, LONG_MAX, &v);
    if (rc == 0) {
        /* Round trip: the text is the value, possibly with leading zeros. */
        char buf[32];
        snprintf(buf, sizeof buf, "%ld", v);
        const char *t = s;
        while (t[0] == '0' && t[1] != '\0')
            t++;
        REQUIRE(strcmp(buf, t) == 0);
        /* The range is honoured at both ends. */
        REQUIRE(amldist__parse_long(s, v, v, NULL) == 0);
        if (v < LONG_MAX)
            REQUIRE(amldist__parse_long(s, v + 1, LONG_MAX, NULL) == AMLDIST_ERANGE);
        if (v > 0)
            REQUIRE(amldist__parse_long(s, 0, v - 1, NULL) == AMLDIST_ERANGE);
    } else {
        REQUIRE(v == -1);
        REQUIRE(rc == (all_digits(s) ? AMLDIST_ERANGE : AMLDIST_EPARSE));
    }
}

static void fuzz_host(const char *s)
{
    int rc = amldist__valid_host(s);
    REQUIRE(rc == 0 || rc == AMLDIST_EPARSE);
    if (rc != 0)
        return;
    REQUIRE(strlen(s) < AMLDIST__HOST_MAX);
    char host[AMLDIST__HOST_MAX];
    int port = 0;
    /* A valid host alone is a hostport without port, and (without colons) a
     * one-host hostlist. */
    REQUIRE(amldist__parse_hostport(s, host, sizeof host, &port) == 0);
    REQUIRE(strcmp(host, s) == 0 && port == -1);
    if (strchr(s, ':') == NULL) {
        REQUIRE(amldist__hostlist_count(s) == 1);
        REQUIRE(amldist__hostlist_nth(s, 0, host, sizeof host) == 0);
        REQUIRE(strcmp(host, s) == 0);
    }
}

static void fuzz_hostport(const char *s)
{
    char host[AMLDIST__HOST_MAX];
    int port = 0;
    int rc = amldist__parse_hostport(s, host, sizeof host, &port);
    if (rc != 0) {
        REQUIRE(rc == AMLDIST_EPARSE || rc == AMLDIST_ERANGE);
        REQUIRE(host[0] == '\0' && port == -1);
        return;
    }
    REQUIRE(amldist__valid_host(host) == 0);
    REQUIRE(port == -1 || (port >= 1 && port <= 65535));
    /* Rebuild the text in canonical form: it parses to the same values. */
    char text[AMLDIST__HOST_MAX + 16], again[AMLDIST__HOST_MAX];
    int v6 = strchr(host, ':') != NULL, port2 = 0;
    if (port < 0)
        snprintf(text, sizeof text, v6 ? "[%s]" : "%s", host);
    else
        snprintf(text, sizeof text, v6 ? "[%s]:%d" : "%s:%d", host, port);
    REQUIRE(amldist__parse_hostport(text, again, sizeof again, &port2) == 0);
    REQUIRE(strcmp(again, host) == 0 && port2 == port);
    /* A buffer one byte short is refused, an exact one accepted. */
    size_t len = strlen(host);
    REQUIRE(amldist__parse_hostport(s, again, len, &port2) == AMLDIST_ERANGE);
    REQUIRE(amldist__parse_hostport(s, again, len + 1, &port2) == 0);
}

struct walk {
    long count;
    long checked;
    const char *list;
};

static int check_each(const char *host, long index, void *arg)
{
    struct walk *w = arg;
    char nth[AMLDIST__HOST_MAX];
    REQUIRE(index == w->count);
    w->count++;
    REQUIRE(amldist__valid_host(host) == 0);
    /* foreach and nth agree, on a sample to stay fast. */
    if (index < 32 || index % 97 == 0) {
        REQUIRE(amldist__hostlist_nth(w->list, index, nth, sizeof nth) == 0);
        REQUIRE(strcmp(nth, host) == 0);
        w->checked++;
    }
    return 0;
}


/*
 * A second, naive hostlist expander written independently (recursion on the
 * first bracket group, every host materialised), for lists of up to REF_MAX
 * hosts: the library must give exactly its hosts when all are valid hosts,
 * and fail otherwise.
 */
#define REF_MAX 512

struct ref {
    char hosts[REF_MAX][AMLDIST__HOST_MAX];
    long n;
    int overflow; /* more than REF_MAX hosts: no verdict */
    int bad;      /* malformed, or a host that is not valid */
};

static void ref_add(struct ref *r, const char *host)
{
    if (r->n == REF_MAX) {
        r->overflow = 1;
        return;
    }
    /* Host names and IPv4 only: ':' has no place in a Slurm node name. */
    if (strlen(host) >= AMLDIST__HOST_MAX || amldist__valid_host(host) != 0 ||
        strchr(host, ':')) {
        r->bad = 1;
        return;
    }
    strcpy(r->hosts[r->n++], host);
}

/* Expands name `s` (no top-level commas), appended to `prefix`. */
static void ref_name(struct ref *r, const char *prefix, const char *s)
{
    if (r->bad || r->overflow)
        return;
    const char *open = strchr(s, '['), *close = strchr(s, ']');
    if (open == NULL) {
        if (close) {
            r->bad = 1;
            return;
        }
        char host[1024];
        snprintf(host, sizeof host, "%s%s", prefix, s);
        ref_add(r, host);
        return;
    }
    if (close == NULL || close < open || memchr(open + 1, '[', (size_t)(close - open - 1))) {
        r->bad = 1;
        return;
    }
    char group[600];
    size_t glen = (size_t)(close - open - 1);
    memcpy(group, open + 1, glen);
    group[glen] = '\0';
    char *save = NULL, *item;
    if (glen == 0 || group[0] == ',' || group[glen - 1] == ',' || strstr(group, ",,")) {
        r->bad = 1;
        return;
    }
    for (item = strtok_r(group, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *dash = strchr(item, '-');
        char *lo = item, *hi = item;
        if (dash) {
            *dash = '\0';
            hi = dash + 1;
        }
        if (!all_digits(lo) || !all_digits(hi) || strlen(lo) > 18 || strlen(hi) > 18) {
            r->bad = 1;
            return;
        }
        unsigned long long a = strtoull(lo, NULL, 10), b = strtoull(hi, NULL, 10);
        if (b < a || b - a >= REF_MAX) {
            r->bad = b < a;
            r->overflow = !r->bad;
            return;
        }
        for (unsigned long long v = a; v <= b && !r->bad && !r->overflow; v++) {
            char next[1024];
            snprintf(next, sizeof next, "%s%.*s%0*llu", prefix, (int)(open - s), s,
                     (int)strlen(lo), v);
            ref_name(r, next, close + 1);
        }
    }
}

static void ref_list(struct ref *r, const char *list)
{
    char buf[600];
    const char *s = list;
    r->n = 0;
    r->overflow = r->bad = 0;
    for (;;) {
        const char *p = s;
        int inside = 0;
        while (*p && (inside || *p != ',')) {
            inside = *p == '[' ? 1 : *p == ']' ? 0 : inside;
            p++;
        }
        if (p == s || (size_t)(p - s) >= sizeof buf) {
            r->bad = 1;
            return;
        }
        memcpy(buf, s, (size_t)(p - s));
        buf[p - s] = '\0';
        ref_name(r, "", buf);
        if (*p == '\0' || r->bad || r->overflow)
            return;
        s = p + 1;
    }
}

static struct ref ref_result;

static void compare_with_ref(const char *s, long n)
{
    struct ref *r = &ref_result;
    ref_list(r, s);
    if (r->overflow && !r->bad)
        return;
    if (r->bad) {
        REQUIRE(n < 0);
        return;
    }
    REQUIRE(n == r->n);
    for (long i = 0; i < n; i++) {
        char host[AMLDIST__HOST_MAX];
        REQUIRE(amldist__hostlist_nth(s, i, host, sizeof host) == 0);
        REQUIRE(strcmp(host, r->hosts[i]) == 0);
    }
}

static void fuzz_hostlist(const char *s)
{
    char host[AMLDIST__HOST_MAX];
    long n = amldist__hostlist_count(s);
    compare_with_ref(s, n);
    if (n < 0) {
        REQUIRE(n == AMLDIST_EPARSE || n == AMLDIST_ERANGE);
        REQUIRE(amldist__hostlist_nth(s, 0, host, sizeof host) == n);
        return;
    }
    REQUIRE(n >= 1 && n <= AMLDIST__HOSTLIST_MAX);
    REQUIRE(amldist__hostlist_nth(s, n, host, sizeof host) == AMLDIST_ERANGE);
    if (n <= 4096) {
        struct walk w = {0, 0, s};
        REQUIRE(amldist__hostlist_foreach(s, check_each, &w) == 0);
        REQUIRE(w.count == n);
    } else {
        /* Huge lists: the ends and the middle only. */
        long idx[] = {0, 1, n / 2, n - 2, n - 1};
        for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
            REQUIRE(amldist__hostlist_nth(s, idx[i], host, sizeof host) == 0);
            REQUIRE(amldist__valid_host(host) == 0);
        }
    }
    /* Without brackets and a single name, the list is that host. */
    if (strpbrk(s, "[],") == NULL) {
        REQUIRE(n == 1 && amldist__valid_host(s) == 0);
        REQUIRE(amldist__hostlist_nth(s, 0, host, sizeof host) == 0);
        REQUIRE(strcmp(host, s) == 0);
    }
}

static void fuzz_tasks(const char *s)
{
    long n = amldist__tasks_nodes(s);
    long t = -7;
    if (n < 0) {
        REQUIRE(n == AMLDIST_EPARSE || n == AMLDIST_ERANGE);
        REQUIRE(amldist__tasks_per_node(s, 0, &t) == n && t == -7);
        return;
    }
    REQUIRE(n >= 1 && n <= AMLDIST__HOSTLIST_MAX);
    long idx[] = {0, n / 2, n - 1};
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
        REQUIRE(amldist__tasks_per_node(s, idx[i], &t) == 0);
        REQUIRE(t >= 1 && t <= INT_MAX);
    }
    REQUIRE(amldist__tasks_per_node(s, n, &t) == AMLDIST_ERANGE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    fuzz_long(s);
    fuzz_host(s);
    fuzz_hostport(s);
    fuzz_hostlist(s);
    fuzz_tasks(s);
    free(s);
    return 0;
}
