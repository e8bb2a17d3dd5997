/* Hostfiles (Open MPI / DeepSpeed "host slots=N") and --hosts lists. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostfile.h"

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
    for (int i = 0; i < l->n; i++) {
        if (strcmp(l->h[i].name, copy) == 0) {
            /* Open MPI would add the slots up, DeepSpeed refuses: one
             * per-node amlrun per host makes a repeat a mistake. */
            say(err, errsz, "%s: host '%s' is listed twice (first at %s %d)",
                at, copy, l->from_file ? "line" : "item", l->h[i].line);
            free(copy);
            return -1;
        }
    }
    struct host *grown = realloc(l->h, (size_t)(l->n + 1) * sizeof *l->h);
    if (!grown) {
        say(err, errsz, "%s: out of memory", at);
        free(copy);
        return -1;
    }
    l->h = grown;
    l->h[l->n++] = (struct host){copy, slots, line};
    return 0;
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

int hostfile_read(const char *path, struct hostlist *out, char *err,
                  size_t errsz)
{
    *out = (struct hostlist){NULL, 0, 1};
    FILE *f = fopen(path, "re");
    if (!f) {
        say(err, errsz, "cannot read hostfile %s: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (memchr(line, '\0', (size_t)len)) {
            say(err, errsz, "%s:%d: NUL byte: not a text file", path, lineno);
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
    *out = (struct hostlist){NULL, 0, 0};
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
    l->h = NULL;
    l->n = 0;
}
