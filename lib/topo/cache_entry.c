/*
 * A topology cache entry (cache.c): its file name, its bytes (a header,
 * the fingerprint, hwloc's XML) and the check that a file read back is
 * whole and for this fingerprint.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo/cache_internal.h"
#include "topo/topo_internal.h"

#define CACHE_MAGIC "amldist topology cache 1\n"

/* A 64-bit hash (FNV-1a over 8-byte words): it finds a truncated or
 * damaged copy, not a forged one (nobody else can write the directory). */
static uint64_t hash64(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    h ^= (uint64_t)n;
    return h * 0x9e3779b97f4a7c15ull;
}

/* "topo-HOST-BOOT-": the start of every name this host gives its copies
 * during this boot.  The host name keeps machines sharing a directory
 * (a home on NFS) apart; '-' in it becomes '_', so that the parts stay
 * apart too. */
void amldist__cache_prefix(const char *fp, char *out, size_t size)
{
    char host[65] = "";
    if (gethostname(host, sizeof host - 1) < 0 || host[0] == '\0')
        strcpy(host, "localhost");
    host[64] = '\0';
    for (char *p = host; *p != '\0'; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '.' || *p == '_'))
            *p = '_';
    const char *b = strstr(fp, "\nboot ");
    size_t blen = 0;
    if (b != NULL) {
        b += 6;
        blen = strcspn(b, "\n");
    }
    snprintf(out, size, "topo-%s-%.*s-", host, (int)(blen < 48 ? blen : 48),
             b != NULL ? b : "-");
}

void amldist__cache_name(const char *fp, char *name, size_t size)
{
    char prefix[160];
    amldist__cache_prefix(fp, prefix, sizeof prefix);
    snprintf(name, size, "%s%x-%016llx.xml", prefix, hwloc_get_api_version(),
             (unsigned long long)hash64(fp, strlen(fp)));
}

char *amldist__cache_entry(const char *fp, const char *xml, size_t xmllen,
                           size_t *n)
{
    struct amldist__buf b = {0};
    amldist__buf_str(&b, CACHE_MAGIC);
    amldist__buf_printf(&b, "xml %zu %016llx\n", xmllen,
                        (unsigned long long)hash64(xml, xmllen));
    amldist__buf_str(&b, fp);
    amldist__buf_str(&b, "\n");
    amldist__buf_add(&b, xml, xmllen);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    *n = b.len;
    return b.s;
}

const char *amldist__cache_check(const char *data, size_t n, const char *fp,
                                 size_t *xml_off, size_t *xmllen)
{
    size_t magic = strlen(CACHE_MAGIC);
    if (n < magic || memcmp(data, CACHE_MAGIC, magic) != 0)
        return "not a topology cache entry";
    const char *p = data + magic, *end = data + n;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (nl == NULL)
        return "truncated header";
    char line[128];
    size_t ll = (size_t)(nl - p);
    if (ll >= sizeof line)
        return "damaged header";
    memcpy(line, p, ll);
    line[ll] = '\0';
    unsigned long long len, hash;
    char extra;
    char canon[128];
    if (sscanf(line, "xml %llu %llx%c", &len, &hash, &extra) != 2 ||
        (size_t)snprintf(canon, sizeof canon, "xml %llu %016llx", len, hash) !=
            ll ||
        memcmp(canon, line, ll) != 0)
        return "damaged header";
    p = nl + 1;
    size_t fplen = strlen(fp);
    /* the fingerprint, then an empty line */
    if ((size_t)(end - p) < fplen + 1)
        return "truncated header";
    if (memcmp(p, fp, fplen) != 0 || p[fplen] != '\n')
        return "fingerprint differs (another boot, machine, cpuset, device "
               "set or hwloc)";
    p += fplen + 1;
    if ((unsigned long long)(end - p) != len)
        return "truncated or extended XML";
    if (hash64(p, (size_t)len) != hash)
        return "XML does not match its hash";
    *xml_off = (size_t)(p - data);
    *xmllen = (size_t)len;
    return NULL;
}
