/* Records of the status exchange (see qtext.h). */
#include <stdlib.h>
#include <string.h>

#include "query/qtext.h"

static int plain(unsigned char c)
{
    return c > ' ' && c != 0x7f && c != '%' && c != '=';
}

void qt_str(FILE *f, const char *key, const char *val)
{
    fprintf(f, " %s=", key);
    if (!val) {
        fputc('-', f);
        return;
    }
    /* An empty or "-" value is escaped, so that it reads back as itself. */
    if (!*val || strcmp(val, "-") == 0) {
        fputs(*val ? "%2D" : "%00", f);
        return;
    }
    for (const unsigned char *p = (const unsigned char *)val; *p; p++) {
        if (plain(*p))
            fputc(*p, f);
        else
            fprintf(f, "%%%02X", *p);
    }
}

void qt_int(FILE *f, const char *key, long long val)
{
    fprintf(f, " %s=%lld", key, val);
}

void qt_num(FILE *f, const char *key, double val, int decimals)
{
    if (val < 0)
        fprintf(f, " %s=-", key);
    else
        fprintf(f, " %s=%.*f", key, decimals, val);
}

const char *qt_shown(const char *s, char *buf, size_t size)
{
    if (!s)
        return "?";
    size_t k = 0;
    for (; *s && k + 5 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < ' ' || c == 0x7f)
            k += (size_t)snprintf(buf + k, size - k, "\\x%02x", c);
        else
            buf[k++] = (char)c;
    }
    buf[k] = '\0';
    return buf;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Unescape in place; "%00" is the empty string. */
static void unescape(char *s)
{
    char *out = s;
    for (char *p = s; *p; p++) {
        int hi, lo;
        if (*p == '%' && (hi = hexval(p[1])) >= 0 && (lo = hexval(p[2])) >= 0) {
            if (hi || lo)
                *out++ = (char)(hi << 4 | lo);
            p += 2;
        } else {
            *out++ = *p;
        }
    }
    *out = '\0';
}

int qrec_parse(char *line, struct qrec *r)
{
    memset(r, 0, sizeof *r);
    char *save = NULL, *tok = strtok_r(line, " ", &save);
    if (!tok)
        return -1;
    r->type = tok;
    while ((tok = strtok_r(NULL, " ", &save)) != NULL) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok)
            return -1;
        if (r->n == QT_MAX_FIELDS)
            continue;
        *eq = '\0';
        r->key[r->n] = tok;
        char *v = eq + 1;
        if (strcmp(v, "-") == 0) {
            r->val[r->n] = NULL;
        } else {
            unescape(v);
            r->val[r->n] = v;
        }
        r->n++;
    }
    return 0;
}

const char *qrec_get(const struct qrec *r, const char *key)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->key[i], key) == 0)
            return r->val[i];
    return NULL;
}

double qrec_num(const struct qrec *r, const char *key, double dflt)
{
    const char *v = qrec_get(r, key);
    if (!v || !*v)
        return dflt;
    char *end;
    double d = strtod(v, &end);
    return *end ? dflt : d;
}
