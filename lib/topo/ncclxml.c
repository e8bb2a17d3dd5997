/*
 * The reader of NCCL topology files (topo/ncclxml.h), over libxml2: no
 * network, no entity expansion, no DTD loading.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "topo/dl.h"
#include "topo/ncclxml.h"

static int is(const xmlNode *n, const char *name)
{
    return n->type == XML_ELEMENT_NODE &&
           strcmp((const char *)n->name, name) == 0;
}

/* The attribute's value copied into buf ("" when absent); 1 when present. */
static int attr(const xmlNode *n, const char *name, char *buf, size_t size)
{
    buf[0] = '\0';
    xmlChar *v = xmlGetProp(n, (const xmlChar *)name);
    if (v == NULL)
        return 0;
    amldist__strlcpy(buf, (const char *)v, size);
    xmlFree(v);
    return 1;
}

static int fail_at(const struct amldist__nx *nx, const xmlNode *n,
                   const char *what, const char *value)
{
    return amldist__fail(AMLDIST_ETOPO,
                         "NCCL topology file %s, line %ld: %s \"%s\"",
                         nx->path, xmlGetLineNo(n), what, value);
}

int amldist__nx_mask(const char *text, hwloc_bitmap_t set)
{
    hwloc_bitmap_zero(set);
    size_t len = strlen(text), digits = 0;
    unsigned bit = 0;
    if (len == 0)
        return -1;
    for (size_t i = len; i-- > 0;) {
        char c = text[i];
        if (c == ',') {
            /* Each word is 8 digits, the first one possibly shorter. */
            if (digits != 8)
                return -1;
            digits = 0;
            continue;
        }
        if (!isxdigit((unsigned char)c) || ++digits > 8 || bit >= 8192)
            return -1;
        unsigned v = (unsigned)(isdigit((unsigned char)c)
                                    ? c - '0'
                                    : tolower((unsigned char)c) - 'a' + 10);
        for (unsigned b = 0; b < 4; b++)
            if (v & (1u << b))
                hwloc_bitmap_set(set, bit + b);
        bit += 4;
    }
    return digits == 0 ? -1 : 0;
}

static int parse_busid(struct amldist__nx_dev *d, const char *s)
{
    char extra;
    if (sscanf(s, "%x:%x:%x.%x%c", &d->domain, &d->bus, &d->dev, &d->func,
               &extra) != 4 ||
        d->domain > 0xffff || d->bus > 0xff || d->dev > 0x1f || d->func > 7)
        return -1;
    snprintf(d->busid, sizeof d->busid, "%04x:%02x:%02x.%x", d->domain,
             d->bus, d->dev, d->func);
    return 0;
}

static unsigned hex_attr(const xmlNode *n, const char *name, int *bad)
{
    char v[32], *end;
    if (!attr(n, name, v, sizeof v) || v[0] == '\0')
        return 0;
    unsigned long x = strtoul(v, &end, 16);
    if (*end != '\0' || x > 0xffffff)
        *bad = 1;
    return (unsigned)x;
}

static void read_net(struct amldist__nx_dev *d, const xmlNode *pci)
{
    for (const xmlNode *c = pci->children; c; c = c->next)
        if (is(c, "nic"))
            for (const xmlNode *k = c->children; k; k = k->next)
                if (is(k, "net") && d->net[0] == '\0') {
                    char port[16];
                    attr(k, "name", d->net, sizeof d->net);
                    if (attr(k, "port", port, sizeof port))
                        d->port = atoi(port);
                }
}

static int read_pci(struct amldist__nx *nx, const xmlNode *n, int cpu,
                    int parent, int depth)
{
    if (nx->ndevs >= AMLDIST__NX_MAX_DEVS || depth > 16)
        return fail_at(nx, n, "too many or too deeply nested", "pci");
    char busid[64];
    attr(n, "busid", busid, sizeof busid);
    struct amldist__nx_dev *d = &nx->devs[nx->ndevs];
    memset(d, 0, sizeof *d);
    if (parse_busid(d, busid) < 0)
        return fail_at(nx, n, "bad PCI bus id", busid);
    if (amldist__nx_find(nx, d->busid) != NULL)
        return fail_at(nx, n, "PCI bus id listed twice:", busid);
    int bad = 0;
    d->cls = hex_attr(n, "class", &bad);
    d->vendor = hex_attr(n, "vendor", &bad);
    d->device = hex_attr(n, "device", &bad);
    if (bad)
        return fail_at(nx, n, "bad class, vendor or device of", busid);
    unsigned base = d->cls >> 16;
    d->kind = base == 0x03   ? AMLDIST__NX_GPU
              : base == 0x02 ? AMLDIST__NX_NIC
              : (d->cls >> 8) == 0x0604 ? AMLDIST__NX_BRIDGE
                                        : AMLDIST__NX_OTHER;
    d->cpu = cpu;
    d->parent = parent;
    d->depth = depth;
    if (d->kind == AMLDIST__NX_NIC)
        read_net(d, n);
    nx->ngpus += d->kind == AMLDIST__NX_GPU;
    nx->nnics += d->kind == AMLDIST__NX_NIC;
    int me = nx->ndevs++;
    for (const xmlNode *c = n->children; c; c = c->next)
        if (is(c, "pci")) {
            int rc = read_pci(nx, c, cpu, me, depth + 1);
            if (rc < 0)
                return rc;
        }
    return 0;
}

static int read_cpu(struct amldist__nx *nx, const xmlNode *n)
{
    char v[256];
    if (nx->ncpus >= AMLDIST__NX_MAX_CPUS)
        return fail_at(nx, n, "too many elements", "cpu");
    struct amldist__nx_cpu *c = &nx->cpus[nx->ncpus];
    char *end;
    if (!attr(n, "numaid", v, sizeof v) || v[0] == '\0')
        return fail_at(nx, n, "<cpu> without a numaid:", "");
    long id = strtol(v, &end, 10);
    if (*end != '\0' || id < 0 || id >= 1024)
        return fail_at(nx, n, "bad numaid", v);
    for (int i = 0; i < nx->ncpus; i++)
        if (nx->cpus[i].numaid == id)
            return fail_at(nx, n, "numaid listed twice:", v);
    c->numaid = (int)id;
    c->cpus = hwloc_bitmap_alloc();
    if (c->cpus == NULL)
        return amldist__fail(AMLDIST_ENOMEM, "NCCL topology: out of memory");
    nx->ncpus++;
    if (attr(n, "affinity", v, sizeof v) && amldist__nx_mask(v, c->cpus) < 0)
        return fail_at(nx, n, "bad affinity (not a Linux cpumask)", v);
    for (int i = 0; i < nx->ncpus - 1; i++)
        if (hwloc_bitmap_intersects(nx->cpus[i].cpus, c->cpus))
            return fail_at(nx, n, "affinity overlaps another <cpu>'s:", v);
    for (const xmlNode *k = n->children; k; k = k->next) {
        if (is(k, "pci")) {
            int rc = read_pci(nx, k, nx->ncpus - 1, -1, 0);
            if (rc < 0)
                return rc;
        } else if (is(k, "nic")) {
            amldist__warn(nx->notes, sizeof nx->notes,
                          "a NIC of NUMA node %d has no PCI bus id in %s "
                          "(line %ld): not listed",
                          c->numaid, nx->path, xmlGetLineNo(k));
        }
    }
    return 0;
}

static int read_doc(struct amldist__nx *nx, xmlDoc *doc)
{
    const xmlNode *root = xmlDocGetRootElement(doc);
    if (root != NULL && is(root, "graphs"))
        return amldist__fail(AMLDIST_ETOPO,
                             "%s is an NCCL graph file (NCCL_GRAPH_FILE, "
                             "<graphs>), not a topology file "
                             "(NCCL_TOPO_FILE, <system>)",
                             nx->path);
    if (root == NULL || !is(root, "system"))
        return amldist__fail(AMLDIST_ETOPO,
                             "%s is not an NCCL topology file: its root "
                             "element is <%s>, not <system>",
                             nx->path,
                             root != NULL ? (const char *)root->name : "");
    for (const xmlNode *n = root->children; n; n = n->next)
        if (is(n, "cpu")) {
            int rc = read_cpu(nx, n);
            if (rc < 0)
                return rc;
        }
    if (nx->ncpus == 0)
        return amldist__fail(AMLDIST_ETOPO,
                             "NCCL topology file %s has no <cpu> element",
                             nx->path);
    return 0;
}

int amldist__nx_read(const char *path, struct amldist__nx **out)
{
    *out = NULL;
    /* libxml2 is loaded here, at the first NCCL file (topo/dl.h); the
     * reader's cpu masks are hwloc's. */
    if (amldist__dl_xml() < 0 || amldist__dl_hwloc() < 0)
        return -1;
    struct amldist__nx *nx = calloc(1, sizeof *nx);
    if (nx != NULL)
        nx->devs = calloc(AMLDIST__NX_MAX_DEVS, sizeof *nx->devs);
    if (nx == NULL || nx->devs == NULL) {
        free(nx);
        return amldist__fail(AMLDIST_ENOMEM, "NCCL topology: out of memory");
    }
    amldist__strlcpy(nx->path, path, sizeof nx->path);
    xmlDoc *doc = xmlReadFile(path, NULL,
                              XML_PARSE_NONET | XML_PARSE_NOERROR |
                                  XML_PARSE_NOWARNING);
    int rc;
    if (doc == NULL) {
        const xmlError *e = xmlGetLastError();
        char why[256] = "cannot be read";
        if (e != NULL && e->message != NULL) {
            snprintf(why, sizeof why, "line %d: %s", e->line, e->message);
            why[strcspn(why, "\n")] = '\0';
        }
        rc = amldist__fail(AMLDIST_ETOPO,
                           "NCCL topology file %s: not well-formed XML (%s)",
                           path, why);
    } else {
        rc = read_doc(nx, doc);
        xmlFreeDoc(doc);
    }
    if (rc < 0) {
        amldist__nx_free(nx);
        return rc;
    }
    *out = nx;
    return 0;
}

void amldist__nx_free(struct amldist__nx *nx)
{
    if (nx == NULL)
        return;
    for (int i = 0; i < nx->ncpus; i++)
        hwloc_bitmap_free(nx->cpus[i].cpus);
    free(nx->devs);
    free(nx);
}

const struct amldist__nx_dev *amldist__nx_find(const struct amldist__nx *nx,
                                               const char *busid)
{
    for (int i = 0; i < nx->ndevs; i++)
        if (strcasecmp(nx->devs[i].busid, busid) == 0)
            return &nx->devs[i];
    return NULL;
}

int amldist__nx_sniff(const char *path)
{
    char head[4096];
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = '\0';
    return strstr(head, "<topology") == NULL &&
           (strstr(head, "<system") != NULL || strstr(head, "<graphs") != NULL);
}
