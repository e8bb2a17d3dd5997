/* Hostfiles (Open MPI / DeepSpeed "host slots=N") and --hosts lists. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/hostfile.h"

long hostfile_max_bytes = 64L << 20;

static void say(char *err, size_t errsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t errsz, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errsz, fmt, ap);
    va_end(ap);
}

/* Where a host came from, for messages: "hosts.txt:3" or "--hosts item 2". */
static void where(const struct hostlist *l, const char *origin, int line,
                  char *buf, size_t size)
{
    if (l->from_file)
        snprintf(buf, size, "%s:%d", origin, line);
    else
        snprintf(buf, size, "%s item %d", origin, line);
}

/* Names that mpirun, srun and the resolver all take: letters, digits, '-',
 * '_' and '.', starting with a letter or digit (IPv4 addresses included). */
static int bad_host_char(const char *s)
{
    if (!*s)
        return -1;
    if (!(('a' <= *s && *s <= 'z') || ('A' <= *s && *s <= 'Z') ||
          ('0' <= *s && *s <= '9')))
        return (unsigned char)*s;
    for (; *s; s++) {
        char c = *s;
        if (!(('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') ||
              ('0' <= c && c <= '9') || c == '-' || c == '_' || c == '.'))
            return (unsigned char)c;
    }
    return 0;
}

static int parse_count(const char *s, int *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || v > HOSTFILE_MAX_SLOTS)
        return -1;
    *out = (int)v;
    return 0;
}

/* FNV-1a: names are short and few enough that anything spreads them. */
static size_t name_hash(const char *s)
{
    size_t h = (size_t)14695981039346656037ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * (size_t)1099511628211ULL;
    return h;
}

/* The index slot that holds `name`, or the empty one where it would go
 * (the index has one: it is kept at most half full). */
static int *find_name(const struct hostlist *l, const char *name)
{
    size_t mask = l->index_size - 1;
    for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
        int *slot = &l->index[i];
        if (*slot == 0 || strcmp(l->h[*slot - 1].name, name) == 0)
            return slot;
    }
}

static int grow_index(struct hostlist *l)
{
    size_t size = l->index_size ? 2 * l->index_size : 16;
    int *index = calloc(size, sizeof *index);
    if (!index)
        return -1;
    for (int k = 0; k < l->n; k++) {
        size_t i = name_hash(l->h[k].name) & (size - 1);
        while (index[i])
            i = (i + 1) & (size - 1);
        index[i] = k + 1;
    }
    free(l->index);
    l->index = index;
    l->index_size = size;
    return 0;
}

static int add_host(struct hostlist *l, const char *origin, const char *name,
                    size_t len, int slots, int line, char *err, size_t errsz)
{
    char at[512];
    where(l, origin, line, at, sizeof at);
    if (len > 255) {
        say(err, errsz, "%s: host name is %zu characters long (at most 255)",
            at, len);
        return -1;
    }
    char *copy = strndup(name, len);
    if (!copy) {
        say(err, errsz, "%s: out of memory", at);
        return -1;
    }
    int c = bad_host_char(copy);
    if (c) {
        if (c < 0)
            say(err, errsz, "%s: empty host name", at);
        else if (c > ' ' && c < 127)
            say(err, errsz, "%s: host name '%s' has a '%c', which no host "
                "name can contain", at, copy, c);
        else
            say(err, errsz, "%s: host name '%s' has byte 0x%02x, which no "
                "host name can contain", at, copy, c);
        free(copy);
        return -1;
    }
    int *slot = NULL;
    /* The index stays at most half full, so that probes are short. */
    if ((size_t)(l->n + 1) * 2 > l->index_size && grow_index(l) < 0)
        goto nomem;
    slot = find_name(l, copy);
    if (*slot) {
        /* Open MPI would add the slots up, DeepSpeed refuses: one per-node
         * amlrun per host makes a repeat a mistake. */
        say(err, errsz, "%s: host '%s' is listed twice (first at %s %d)", at,
            copy, l->from_file ? "line" : "item", l->h[*slot - 1].line);
        free(copy);
        return -1;
    }
    if (l->n >= HOSTFILE_MAX_HOSTS) {
        say(err, errsz, "%s: more than %d hosts", at, HOSTFILE_MAX_HOSTS);
        free(copy);
        return -1;
    }
    if ((l->n & (l->n - 1)) == 0) { /* n is a power of two: double */
        struct host *grown = realloc(l->h, (size_t)(l->n ? 2 * l->n : 1) *
                                               sizeof *l->h);
        if (!grown)
            goto nomem;
        l->h = grown;
    }
    l->h[l->n++] = (struct host){copy, slots, line};
    *slot = l->n;
    return 0;
nomem:
    say(err, errsz, "%s: out of memory", at);
    free(copy);
    return -1;
}

/* One hostfile line, comments already cut: "host [slots=N] [max_slots=M]". */
static int parse_line(struct hostlist *l, const char *path, int lineno,
                      char *text, char *err, size_t errsz)
{
    const char *ws = " \t\r\n\v\f";
    char *save = NULL;
    char *name = strtok_r(text, ws, &save);
    if (!name)
        return 0;
    char at[512];
    where(l, path, lineno, at, sizeof at);
    int slots = -1, max_slots = -1;
    char *tok;
    while ((tok = strtok_r(NULL, ws, &save))) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            say(err, errsz, "%s: '%s': want key=value (slots=N) after the "
                "host name", at, tok);
            return -1;
        }
        *eq = '\0';
        const char *val = eq + 1;
        int *dst;
        if (strcmp(tok, "slots") == 0)
            dst = &slots;
        else if (strcmp(tok, "max_slots") == 0 || strcmp(tok, "max-slots") == 0)
            dst = &max_slots;
        else {
            say(err, errsz, "%s: unknown key '%s' (want slots=N or "
                "max_slots=N)", at, tok);
            return -1;
        }
        /* Which of two values was meant cannot be known: no last one wins. */
        if (*dst != -1) {
            say(err, errsz, "%s: key '%s' is given twice (%s=%d before)", at,
                tok, dst == &slots ? "slots" : "max_slots", *dst);
            return -1;
        }
        if (parse_count(val, dst) < 0) {
            say(err, errsz, "%s: %s='%s': want a whole number from 1 to %d",
                at, tok, val, HOSTFILE_MAX_SLOTS);
            return -1;
        }
    }
    if (slots > 0 && max_slots > 0 && max_slots < slots) {
        say(err, errsz, "%s: max_slots=%d is less than slots=%d", at,
            max_slots, slots);
        return -1;
    }
    return add_host(l, path, name, strlen(name), slots, lineno, err, errsz);
}

/* One line of f into *buf without its newline; its length, or -1 at the
 * end of the file, or -2 with a reason in err.  Bounded, and a NUL ends it
 * at once: /dev/zero or an endless pipe fails instead of filling memory. */
static long read_line(FILE *f, const char *path, int lineno, long *total,
                      char **buf, size_t *cap, char *err, size_t errsz)
{
    size_t n = 0;
    int c;
    if (*cap == 0) {
        if (!(*buf = malloc(256))) {
            say(err, errsz, "%s:%d: out of memory", path, lineno);
            return -2;
        }
        *cap = 256;
    }
    while ((c = getc(f)) != EOF) {
        if (++*total > hostfile_max_bytes) {
            say(err, errsz, "%s: larger than %ld MiB: not a hostfile", path,
                hostfile_max_bytes >> 20);
            return -2;
        }
        if (c == '\0') {
            say(err, errsz, "%s:%d: NUL byte: not a text file", path, lineno);
            return -2;
        }
        if (c == '\n')
            break;
        if (n >= HOSTFILE_MAX_LINE) {
            say(err, errsz, "%s:%d: line longer than %d bytes: not a hostfile",
                path, lineno, HOSTFILE_MAX_LINE);
            return -2;
        }
        if (n + 1 >= *cap) {
            size_t want = 2 * *cap;
            char *grown = realloc(*buf, want);
            if (!grown) {
                say(err, errsz, "%s:%d: out of memory", path, lineno);
                return -2;
            }
            *buf = grown;
            *cap = want;
        }
        (*buf)[n++] = (char)c;
    }
    if (c == EOF && (n == 0 || ferror(f)))
        return -1;
    (*buf)[n] = '\0';
    return (long)n;
}

int hostfile_read(const char *path, struct hostlist *out, char *err,
                  size_t errsz)
{
    *out = (struct hostlist){NULL, 0, 1, NULL, 0};
    FILE *f = fopen(path, "re");
    if (!f) {
        say(err, errsz, "cannot read hostfile %s: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    long len, total = 0;
    int lineno = 0, rc = 0;
    while ((len = read_line(f, path, lineno + 1, &total, &line, &cap, err,
                            errsz)) != -1) {
        lineno++;
        if (len < 0) {
            rc = -1;
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        if (parse_line(out, path, lineno, line, err, errsz) < 0) {
            rc = -1;
            break;
        }
    }
    if (rc == 0 && ferror(f)) {
        say(err, errsz, "cannot read hostfile %s: %s", path, strerror(errno));
        rc = -1;
    }
    free(line);
    fclose(f);
    if (rc == 0 && out->n == 0) {
        say(err, errsz, "%s: no hosts in the file (only comments or blank "
            "lines)", path);
        rc = -1;
    }
    if (rc < 0)
        hostlist_free(out);
    return rc;
}

int hosts_parse(const char *spec, struct hostlist *out, char *err,
                size_t errsz)
{
    *out = (struct hostlist){NULL, 0, 0, NULL, 0};
    const char *p = spec;
    int item = 0;
    for (;;) {
        item++;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        size_t namelen = colon ? (size_t)(colon - p) : len;
        int slots = -1;
        if (colon) {
            char num[32];
            size_t nlen = len - namelen - 1;
            int ok = nlen < sizeof num;
            if (ok) {
                memcpy(num, colon + 1, nlen);
                num[nlen] = '\0';
                ok = parse_count(num, &slots) == 0;
            }
            if (!ok) {
                say(err, errsz, "--hosts item %d: '%.*s': the slots after "
                    "':' want a whole number from 1 to %d", item, (int)len, p,
                    HOSTFILE_MAX_SLOTS);
                hostlist_free(out);
                return -1;
            }
        }
        if (namelen == 0) {
            say(err, errsz, "--hosts '%s': item %d has no host name", spec,
                item);
            hostlist_free(out);
            return -1;
        }
        if (add_host(out, "--hosts", p, namelen, slots, item, err, errsz) < 0) {
            hostlist_free(out);
            return -1;
        }
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

int hostlist_common_slots(const struct hostlist *l, const char *origin,
                          char *err, size_t errsz)
{
    int first = -1;
    for (int i = 0; i < l->n; i++) {
        if (l->h[i].slots == l->h[0].slots)
            continue;
        first = i;
        break;
    }
    if (first < 0)
        return l->n > 0 && l->h[0].slots > 0 ? l->h[0].slots : 0;
    char a[512], b[512], sa[32], sb[32];
    where(l, origin, l->h[first].line, a, sizeof a);
    where(l, origin, l->h[0].line, b, sizeof b);
    if (l->h[first].slots > 0)
        snprintf(sa, sizeof sa, "slots=%d", l->h[first].slots);
    else
        snprintf(sa, sizeof sa, "no slots");
    if (l->h[0].slots > 0)
        snprintf(sb, sizeof sb, "slots=%d", l->h[0].slots);
    else
        snprintf(sb, sizeof sb, "no slots");
    say(err, errsz, "%s: host '%s' has %s but %s (host '%s') has %s; amlrun "
        "starts the same number of processes on every host: make them equal "
        "or give --nproc-per-node", a, l->h[first].name, sa, b, l->h[0].name,
        sb);
    return -1;
}

void hostlist_free(struct hostlist *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->h[i].name);
    free(l->h);
    free(l->index);
    l->h = NULL;
    l->index = NULL;
    l->n = 0;
    l->index_size = 0;
}
