/* amlrun's JSON writer (see json.h). */
#include <stdio.h>

#include "output/json.h"

const char *json_char(unsigned char c, char buf[8])
{
    if (c == '"' || c == '\\')
        snprintf(buf, 8, "\\%c", c);
    else if (c < 0x20 || c >= 0x7f) /* ASCII only: always valid */
        snprintf(buf, 8, "\\u%04x", c);
    else
        snprintf(buf, 8, "%c", c);
    return buf;
}

static void put_string(FILE *f, const char *s)
{
    char e[8];
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        /* A run of bytes that stand for themselves, in one write (a hang
         * report holds megabytes of names). */
        const unsigned char *q = p;
        while (*q >= 0x20 && *q < 0x7f && *q != '"' && *q != '\\')
            q++;
        if (q > p) {
            fwrite(p, 1, (size_t)(q - p), f);
            p = q;
        } else {
            fputs(json_char(*p++, e), f);
        }
    }
    fputc('"', f);
}

/* The separator and key before a value. */
static void key(struct json *j, const char *k)
{
    if (j->count[j->depth]++)
        fputc(',', j->f);
    if (k) {
        put_string(j->f, k);
        fputc(':', j->f);
    }
}

void json_begin(struct json *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->count[0] = 0;
}

static void open_one(struct json *j, const char *k, char c)
{
    key(j, k);
    fputc(c, j->f);
    /* amlrun's documents are shallow: JSON_DEPTH is never reached. */
    if (j->depth + 1 < JSON_DEPTH) {
        j->depth++;
        j->count[j->depth] = 0;
        j->closer[j->depth] = c == '{' ? '}' : ']';
    }
}

void json_object(struct json *j, const char *k)
{
    open_one(j, k, '{');
}

void json_array(struct json *j, const char *k)
{
    open_one(j, k, '[');
}

void json_close(struct json *j)
{
    if (j->depth > 0)
        fputc(j->closer[j->depth--], j->f);
}

void json_str(struct json *j, const char *k, const char *val)
{
    key(j, k);
    if (val)
        put_string(j->f, val);
    else
        fputs("null", j->f);
}

void json_int(struct json *j, const char *k, long long val)
{
    key(j, k);
    fprintf(j->f, "%lld", val);
}

void json_id(struct json *j, const char *k, long long val)
{
    if (val < 0)
        json_null(j, k);
    else
        json_int(j, k, val);
}

void json_num(struct json *j, const char *k, double val, int decimals)
{
    key(j, k);
    fprintf(j->f, "%.*f", decimals, val);
}

void json_bool(struct json *j, const char *k, int val)
{
    key(j, k);
    fputs(val ? "true" : "false", j->f);
}

void json_null(struct json *j, const char *k)
{
    key(j, k);
    fputs("null", j->f);
}

int json_end(struct json *j)
{
    while (j->depth > 0)
        json_close(j);
    fputc('\n', j->f);
    return fflush(j->f) == 0 && !ferror(j->f) ? 0 : -1;
}
