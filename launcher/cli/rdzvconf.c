/* torchrun's --rdzv-conf (see rdzvconf.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/rdzvconf.h"

/* [*s, *e) without the blanks around it, as Python's str.strip(). */
static void strip(const char **s, const char **e)
{
    while (*s < *e && isspace((unsigned char)**s))
        (*s)++;
    while (*e > *s && isspace((unsigned char)(*e)[-1]))
        (*e)--;
}

static int is_key(const char *k, size_t n, const char *name)
{
    return strlen(name) == n && memcmp(k, name, n) == 0;
}

/* A value as a string of its own, for strtol()/strtod(); -1 if it cannot
 * be one (empty, too long, or not starting with a digit). */
static int value_str(const char *v, size_t n, char *buf, size_t size)
{
    if (n == 0 || n >= size || !isdigit((unsigned char)v[0]))
        return -1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    errno = 0;
    return 0;
}

/* torchrun reads its timeouts with int() and refuses those <= 0. */
static int seconds(const char *v, size_t n, double *out)
{
    char buf[32], *end;
    if (value_str(v, n, buf, sizeof buf) < 0)
        return -1;
    long s = strtol(buf, &end, 10);
    if (errno || *end || s <= 0 || s > 100000000)
        return -1;
    *out = (double)s;
    return 0;
}

/* Seconds > 0 with a fraction (amlrun's own keys). */
static int fraction(const char *v, size_t n, double *out)
{
    char buf[32], *end;
    if (value_str(v, n, buf, sizeof buf) < 0)
        return -1;
    double s = strtod(buf, &end);
    if (errno || *end || !(s > 0) || s > 1e6)
        return -1;
    *out = s;
    return 0;
}

/* The spellings of RendezvousParameters.get_as_bool(). */
static int is_bool(const char *v, size_t n)
{
    static const char *const words[] = {"1", "true", "t", "yes", "y",
                                        "0", "false", "f", "no", "n"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strlen(words[i]) == n && strncasecmp(v, words[i], n) == 0)
            return 1;
    return 0;
}

int rdzv_conf_parse(const char *s, struct rdzv_conf *c, char *why,
                    size_t size)
{
    memset(c, 0, sizeof *c);
    const char *all = s, *all_end = s + strlen(s);
    strip(&all, &all_end);
    if (all == all_end)
        return 0;
    for (const char *p = all; p <= all_end;) {
        const char *end = memchr(p, ',', (size_t)(all_end - p));
        if (!end)
            end = all_end;
        const char *eq = memchr(p, '=', (size_t)(end - p));
        const char *k = p, *k_end = eq ? eq : end;
        const char *v = eq ? eq + 1 : end, *v_end = end;
        strip(&k, &k_end);
        strip(&v, &v_end);
        size_t kn = (size_t)(k_end - k), vn = (size_t)(v_end - v);
        if (kn == 0) {
            snprintf(why, size, "want key=value,key=value,...");
            return -1;
        }
        if (vn == 0) {
            snprintf(why, size, "'%.*s' has no value", (int)kn, k);
            return -1;
        }
        double *t = is_key(k, kn, "join_timeout")   ? &c->join_timeout
                    : is_key(k, kn, "timeout")      ? &c->timeout
                    : is_key(k, kn, "read_timeout") ? &c->read_timeout
                                                    : NULL;
        double ignored, attempts;
        if (!t && is_key(k, kn, "close_timeout"))
            t = &ignored;
        if (t && seconds(v, vn, t) < 0) {
            snprintf(why, size, "%.*s=%.*s: want whole seconds > 0", (int)kn,
                     k, (int)vn, v);
            return -1;
        }
        double *f = is_key(k, kn, "last_call_timeout") ? &c->last_call_timeout
                    : is_key(k, kn, "keep_alive_interval")
                        ? &c->keep_alive_interval : NULL;
        if (f && fraction(v, vn, f) < 0) {
            snprintf(why, size, "%.*s=%.*s: want seconds > 0 (0.5, 2, ...)",
                     (int)kn, k, (int)vn, v);
            return -1;
        }
        if (is_key(k, kn, "keep_alive_max_attempt")) {
            if (seconds(v, vn, &attempts) < 0 || attempts > 1000000) {
                snprintf(why, size, "keep_alive_max_attempt=%.*s: want a "
                         "whole number > 0", (int)vn, v);
                return -1;
            }
            c->keep_alive_max_attempt = (int)attempts;
        }
        if (is_key(k, kn, "is_host") && !is_bool(v, vn)) {
            snprintf(why, size, "is_host=%.*s: want true or false (1, yes, "
                     "0, no, ...)", (int)vn, v);
            return -1;
        }
        p = end + 1;
    }
    return 0;
}

double rdzv_conf_join_timeout(const struct rdzv_conf *c, int c10d)
{
    double mine = c10d ? c->join_timeout : c->timeout;
    return mine > 0 ? mine : c10d ? c->timeout : c->join_timeout;
}
