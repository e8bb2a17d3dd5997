/* A strict, bounded JSON reader for torchelastic error files (see
 * errorfile.h).  Recursive descent over the buffer; strings are decoded
 * only where a field is kept, everything else is checked and skipped. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/errorfile.h"

/* Deep enough for any error file, shallow enough for the stack. */
#define DEPTH_MAX 64

struct jp {
    const char *buf, *p, *end;
    const char *err; /* first error, static text */
    int depth;
};

static int fail(struct jp *j, const char *what)
{
    if (!j->err)
        j->err = what;
    return -1;
}

static void ws(struct jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' ||
                             *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int expect(struct jp *j, char c)
{
    ws(j);
    if (j->p >= j->end || *j->p != c) {
        static const char *const want[] = {"want '{'", "want ':'", "want '}'",
                                           "want '\"'"};
        return fail(j, c == '{' ? want[0] : c == ':' ? want[1]
                       : c == '}' ? want[2] : want[3]);
    }
    j->p++;
    return 0;
}

/* The four hex digits at p (which has at least four bytes); 0 or -1. */
static int hex_digits(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static int hex4(struct jp *j, unsigned *out)
{
    if (j->end - j->p < 4)
        return fail(j, "a \\u escape cut short");
    if (hex_digits(j->p, out) < 0)
        return fail(j, "a bad \\u escape");
    j->p += 4;
    return 0;
}

/* Whether a \uDC00..\uDFFF escape (a low surrogate) comes next; taken
 * if so.  Anything else is left to be read on its own. */
static int take_low_surrogate(struct jp *j, unsigned *lo)
{
    if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' ||
        hex_digits(j->p + 2, lo) < 0 || *lo < 0xdc00 || *lo >= 0xe000)
        return 0;
    j->p += 6;
    return 1;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string at j->p (after whitespace); decoded into a new *out unless out
 * is NULL.  A decoded string never grows: each escape is at least as long
 * as its UTF-8 (a NUL, \u0000, is kept as U+FFFD so that C strings hold). */
static int string(struct jp *j, char **out)
{
    if (expect(j, '"') < 0)
        return -1;
    const char *start = j->p;
    char *o = NULL;
    size_t n = 0;
    if (out) {
        /* The raw length bounds the decoded one. */
        const char *q = start;
        while (q < j->end && *q != '"')
            q += *q == '\\' && q + 1 < j->end ? 2 : 1;
        if (!(o = malloc((size_t)(q - start) + 1)))
            return fail(j, "out of memory");
    }
    for (;;) {
        if (j->p >= j->end) {
            free(o);
            return fail(j, "a string without its closing quote");
        }
        unsigned char c = (unsigned char)*j->p++;
        if (c == '"')
            break;
        if (c < 0x20) {
            free(o);
            return fail(j, "a control character in a string");
        }
        if (c != '\\') {
            if (o)
                o[n++] = (char)c;
            continue;
        }
        if (j->p >= j->end) {
            free(o);
            return fail(j, "an escape cut short");
        }
        char e = *j->p++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char val[] = "\"\\/\b\f\n\r\t";
            if (o)
                o[n++] = val[simple - "\"\\/bfnrt"];
            continue;
        }
        if (e != 'u') {
            free(o);
            return fail(j, "an unknown escape in a string");
        }
        unsigned cp;
        if (hex4(j, &cp) < 0) {
            free(o);
            return -1;
        }
        if (cp >= 0xd800 && cp < 0xdc00) {
            /* A high surrogate pairs with a low one that follows.  Alone,
             * it is U+FFFD (UTF-8 cannot hold it; Python's json keeps it
             * as is), and whatever follows, another escape included, is
             * read on its own: "\ud800\u0041" is U+FFFD "A". */
            unsigned lo;
            cp = take_low_surrogate(j, &lo)
                     ? 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00)
                     : 0xfffd;
        } else if ((cp >= 0xdc00 && cp < 0xe000) || cp == 0) {
            cp = 0xfffd;
        }
        if (o)
            n += put_utf8(o + n, cp);
    }
    if (o) {
        o[n] = '\0';
        *out = o;
    }
    return 0;
}

static int number(struct jp *j, long long *out)
{
    const char *s = j->p;
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
        return fail(j, "a bad number");
    if (*j->p == '0')
        j->p++;
    else
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    int integral = 1;
    if (j->p < j->end && *j->p == '.') {
        integral = 0;
        j->p++;
        if (j->p >= j->end || *j->p < '0' || *j->p > '9')
            return fail(j, "a bad number");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        integral = 0;
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (j->p >= j->end || *j->p < '0' || *j->p > '9')
            return fail(j, "a bad number");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    }
    if (out) {
        /* The buffer need not be NUL-terminated: copy the digits. */
        char tmp[32];
        size_t len = (size_t)(j->p - s);
        *out = -1;
        if (integral && len < sizeof tmp) {
            memcpy(tmp, s, len);
            tmp[len] = '\0';
            errno = 0;
            long long v = strtoll(tmp, NULL, 10);
            if (!errno)
                *out = v;
        }
    }
    return 0;
}

static int value(struct jp *j);

static int literal(struct jp *j, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n))
        return fail(j, "an unknown word");
    j->p += n;
    return 0;
}

/* Object iteration: after '{', each call reads one key (into *key, or
 * skipped when key is NULL) and its ':'; 1 for a member, 0 at '}'. */
static int member(struct jp *j, int first, char **key)
{
    ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        return 0;
    }
    if (!first) {
        if (j->p >= j->end || *j->p != ',')
            return fail(j, "want ',' or '}'");
        j->p++;
    }
    if (string(j, key) < 0)
        return -1;
    if (expect(j, ':') < 0) {
        if (key) {
            free(*key);
            *key = NULL;
        }
        return -1;
    }
    return 1;
}

static int enter(struct jp *j)
{
    if (++j->depth > DEPTH_MAX)
        return fail(j, "nested too deeply");
    return 0;
}

/* Check and skip any value. */
static int value(struct jp *j)
{
    ws(j);
    if (j->p >= j->end)
        return fail(j, "want a value");
    int rc, first = 1;
    switch (*j->p) {
    case '{':
        if (enter(j) < 0)
            return -1;
        j->p++;
        while ((rc = member(j, first, NULL)) == 1) {
            first = 0;
            if (value(j) < 0)
                return -1;
        }
        j->depth--;
        return rc;
    case '[':
        if (enter(j) < 0)
            return -1;
        j->p++;
        ws(j);
        if (j->p < j->end && *j->p == ']') {
            j->p++;
            j->depth--;
            return 0;
        }
        for (;;) {
            if (value(j) < 0)
                return -1;
            ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == ']') {
                j->p++;
                j->depth--;
                return 0;
            }
            return fail(j, "want ',' or ']'");
        }
    case '"':
        return string(j, NULL);
    case 't': return literal(j, "true");
    case 'f': return literal(j, "false");
    case 'n': return literal(j, "null");
    default:
        return number(j, NULL);
    }
}

/* A string field kept (the last one wins, as in Python's json); any other
 * type is skipped. */
static int keep_string(struct jp *j, char **slot)
{
    ws(j);
    if (j->p < j->end && *j->p == '"') {
        char *s = NULL;
        if (string(j, &s) < 0)
            return -1;
        free(*slot);
        *slot = s;
        return 0;
    }
    return value(j);
}

/* A timestamp: torch writes a string of digits; a number is taken too. */
static int keep_timestamp(struct jp *j, long long *ts)
{
    ws(j);
    if (j->p < j->end && (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')))
        return number(j, ts);
    char *s = NULL;
    if (j->p >= j->end || *j->p != '"')
        return value(j);
    if (string(j, &s) < 0)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    *ts = !errno && end != s && !*end && v >= 0 ? v : -1;
    free(s);
    return 0;
}

static int extra_info(struct jp *j, struct errorfile *ef)
{
    ws(j);
    if (j->p >= j->end || *j->p != '{')
        return value(j);
    if (enter(j) < 0)
        return -1;
    j->p++;
    char *key = NULL;
    int rc, first = 1;
    while ((rc = member(j, first, &key)) == 1) {
        first = 0;
        if (strcmp(key, "py_callstack") == 0)
            rc = keep_string(j, &ef->traceback);
        else if (strcmp(key, "timestamp") == 0)
            rc = keep_timestamp(j, &ef->timestamp);
        else
            rc = value(j);
        free(key);
        key = NULL;
        if (rc < 0)
            return -1;
    }
    j->depth--;
    return rc;
}

/* The inner {"message": ..., "extraInfo": {...}, "errorCode": N}. */
static int inner(struct jp *j, struct errorfile *ef)
{
    if (enter(j) < 0)
        return -1;
    j->p++;
    char *key = NULL;
    int rc, first = 1;
    while ((rc = member(j, first, &key)) == 1) {
        first = 0;
        if (strcmp(key, "message") == 0)
            rc = keep_string(j, &ef->message);
        else if (strcmp(key, "extraInfo") == 0)
            rc = extra_info(j, ef);
        else
            rc = value(j);
        free(key);
        key = NULL;
        if (rc < 0)
            return -1;
    }
    if (rc == 0) {
        ef->inner_close = (size_t)(j->p - 1 - j->buf);
        ef->inner_empty = first;
    }
    j->depth--;
    return rc;
}

static int top(struct jp *j, struct errorfile *ef)
{
    if (expect(j, '{') < 0)
        return -1;
    j->depth = 1;
    char *key = NULL;
    int rc, first = 1;
    long long outer_ts = -1;
    while ((rc = member(j, first, &key)) == 1) {
        first = 0;
        if (strcmp(key, "message") == 0) {
            ws(j);
            /* A repeated "message" replaces the earlier one. */
            free(ef->message);
            free(ef->traceback);
            ef->message = ef->traceback = NULL;
            ef->timestamp = -1;
            ef->inner_close = 0;
            if (j->p < j->end && *j->p == '{')
                rc = inner(j, ef);
            else
                rc = keep_string(j, &ef->message);
        } else if (strcmp(key, "timestamp") == 0) {
            rc = keep_timestamp(j, &outer_ts);
        } else {
            rc = value(j);
        }
        free(key);
        key = NULL;
        if (rc < 0)
            return -1;
    }
    if (rc < 0)
        return -1;
    /* The old form keeps its timestamp beside a string message. */
    if (ef->timestamp < 0 && ef->inner_close == 0)
        ef->timestamp = outer_ts;
    ws(j);
    if (j->p != j->end)
        return fail(j, "something after the object");
    return 0;
}

int errorfile_parse(const char *buf, size_t len, struct errorfile *ef,
                    char *why, size_t whysz)
{
    memset(ef, 0, sizeof *ef);
    ef->timestamp = -1;
    struct jp j = {buf, buf, buf + len, NULL, 0};
    if (len > ERRORFILE_MAX) {
        snprintf(why, whysz, "larger than %u bytes", ERRORFILE_MAX);
        return -1;
    }
    if (top(&j, ef) < 0) {
        snprintf(why, whysz, "malformed JSON at byte %zu: %s",
                 (size_t)(j.p - buf), j.err ? j.err : "?");
        errorfile_free(ef);
        return -1;
    }
    return 0;
}

void errorfile_free(struct errorfile *ef)
{
    free(ef->message);
    free(ef->traceback);
    ef->message = ef->traceback = NULL;
}
