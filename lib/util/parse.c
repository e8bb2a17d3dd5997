/* Strict integer, host and host:port parsers (see parse.h for the rules). */
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <string.h>

#include "util/internal.h"
#include "util/parse.h"

#define LABEL_MAX 63
#define NAME_MAX_LEN 253
#define ZONE_MAX 15

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int is_alnum(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

int amldist__parse_long(const char *s, long min, long max, long *out)
{
    if (s == NULL || min > max)
        return AMLDIST_EINVAL;
    if (*s == '\0')
        return AMLDIST_EPARSE;
    long v = 0;
    int overflow = 0;
    /* Read every character even after an overflow, so "999...9x" is a
     * parse error rather than a range error: bad text is reported first. */
    for (const char *p = s; *p; p++) {
        if (!is_digit(*p))
            return AMLDIST_EPARSE;
        int d = *p - '0';
        if (v > (LONG_MAX - d) / 10)
            overflow = 1;
        else if (!overflow)
            v = v * 10 + d;
    }
    if (overflow || v < min || v > max)
        return AMLDIST_ERANGE;
    if (out)
        *out = v;
    return 0;
}

/* Four decimal parts 0..255, no leading zeros, nothing else. */
int amldist__parse_seconds_ms(const char *s, long long *ms)
{
    long long whole = 0, frac = 0, scale = 1000;
    const char *p = s;
    if (p == NULL)
        return AMLDIST_EINVAL;
    if (!is_digit(*p))
        return AMLDIST_EPARSE;
    for (; is_digit(*p); p++)
        if ((whole = whole * 10 + (*p - '0')) > 7 * 86400)
            return AMLDIST_ERANGE;
    if (*p == '.') {
        if (!is_digit(p[1]))
            return AMLDIST_EPARSE;
        for (p++; is_digit(*p); p++)
            if (scale > 1)
                frac += (scale /= 10) * (*p - '0');
    }
    if (*p)
        return AMLDIST_EPARSE;
    if (whole * 1000 + frac <= 0)
        return AMLDIST_ERANGE;
    *ms = whole * 1000 + frac;
    return 0;
}

static int is_strict_ipv4(const char *s)
{
    for (int part = 0; part < 4; part++) {
        if (part > 0 && *s++ != '.')
            return 0;
        if (!is_digit(*s))
            return 0;
        if (*s == '0' && is_digit(s[1]))
            return 0;
        int v = 0, n = 0;
        while (is_digit(*s) && n < 4) {
            v = v * 10 + (*s++ - '0');
            n++;
        }
        if (n > 3 || v > 255)
            return 0;
    }
    return *s == '\0';
}

/* RFC 1123 label syntax and lengths only; no numeric checks. */
static int is_rfc1123_syntax(const char *s)
{
    size_t total = 0, label = 0;
    char prev = '.';
    for (const char *p = s;; p++) {
        char c = *p;
        if (c == '.' || c == '\0') {
            if (label == 0 || prev == '-')
                return 0;
            if (c == '\0')
                return total <= NAME_MAX_LEN;
            label = 0;
        } else if (is_alnum(c) || c == '-') {
            if (label == 0 && c == '-')
                return 0;
            if (++label > LABEL_MAX)
                return 0;
        } else {
            return 0;
        }
        prev = c;
        if (++total > NAME_MAX_LEN)
            return 0;
    }
}

static int last_label_all_digits(const char *s)
{
    const char *dot = strrchr(s, '.');
    const char *p = dot ? dot + 1 : s;
    if (*p == '\0')
        return 0;
    for (; *p; p++)
        if (!is_digit(*p))
            return 0;
    return 1;
}

static int is_ipv6(const char *s)
{
    char addr[INET6_ADDRSTRLEN + 1];
    const char *pct = strchr(s, '%');
    size_t len = pct ? (size_t)(pct - s) : strlen(s);
    if (len == 0 || len >= sizeof addr)
        return 0;
    memcpy(addr, s, len);
    addr[len] = '\0';
    struct in6_addr a6;
    if (inet_pton(AF_INET6, addr, &a6) != 1)
        return 0;
    if (pct == NULL)
        return 1;
    size_t zlen = 0;
    for (const char *z = pct + 1; *z; z++, zlen++)
        if (!(is_alnum(*z) || *z == '_' || *z == '.' || *z == '-'))
            return 0;
    return zlen >= 1 && zlen <= ZONE_MAX;
}

int amldist__valid_host(const char *s)
{
    if (s == NULL)
        return AMLDIST_EINVAL;
    if (strchr(s, ':'))
        return is_ipv6(s) ? 0 : AMLDIST_EPARSE;
    if (!is_rfc1123_syntax(s))
        return AMLDIST_EPARSE;
    if (is_strict_ipv4(s))
        return 0;
    /* Looks numeric but is not a plain address: getaddrinfo() would either
     * misread it (octal, hex, short forms) or it is no valid name. */
    struct in_addr a4;
    if (last_label_all_digits(s) || inet_aton(s, &a4))
        return AMLDIST_EPARSE;
    return 0;
}

/* Check host text [s, s+len) and copy it out. */
static int take_host(const char *s, size_t len, char *host, size_t hostsz)
{
    char buf[AMLDIST__HOST_MAX];
    if (len >= sizeof buf)
        return AMLDIST_EPARSE; /* longer than any valid host */
    memcpy(buf, s, len);
    buf[len] = '\0';
    int rc = amldist__valid_host(buf);
    if (rc < 0)
        return rc;
    if (host && amldist__strlcpy(host, buf, hostsz) < 0)
        return AMLDIST_ERANGE;
    return 0;
}

static int take_port(const char *s, int *port)
{
    long v;
    int rc = amldist__parse_long(s, 1, 65535, &v);
    if (rc == 0 && port)
        *port = (int)v;
    return rc;
}

static int hostport(const char *s, char *host, size_t hostsz, int *port)
{
    if (port)
        *port = -1;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL || strchr(s + 1, '[') != NULL)
            return AMLDIST_EPARSE;
        size_t len = (size_t)(close - s - 1);
        /* Brackets are for IPv6 only: "[host]" is an error. */
        if (memchr(s + 1, ':', len) == NULL)
            return AMLDIST_EPARSE;
        int rc = take_host(s + 1, len, host, hostsz);
        if (rc < 0)
            return rc;
        if (close[1] == '\0')
            return 0;
        if (close[1] != ':')
            return AMLDIST_EPARSE;
        return take_port(close + 2, port);
    }
    const char *colon = strchr(s, ':');
    if (colon == NULL || strchr(colon + 1, ':') != NULL)
        return take_host(s, strlen(s), host, hostsz); /* no port, or IPv6 */
    int rc = take_host(s, (size_t)(colon - s), host, hostsz);
    if (rc < 0)
        return rc;
    return take_port(colon + 1, port);
}

int amldist__parse_hostport(const char *s, char *host, size_t hostsz, int *port)
{
    if (s == NULL || (host && hostsz == 0))
        return AMLDIST_EINVAL;
    int rc = hostport(s, host, hostsz, port);
    if (rc < 0) {
        if (host)
            host[0] = '\0';
        if (port)
            *port = -1;
    }
    return rc;
}
