/* The library's messages in amlrun's words (see libwords.h). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cli/libwords.h"

static void add(struct libwords *w, const char *lib, const char *ours)
{
    if (w->n >= (int)(sizeof w->pair / sizeof *w->pair))
        return;
    snprintf(w->pair[w->n].lib, sizeof w->pair[w->n].lib, "%s", lib);
    snprintf(w->pair[w->n].ours, sizeof w->pair[w->n].ours, "%s", ours);
    w->n++;
}

/* The master's address as the user gave it: the option as typed (quoted
 * as the library quotes it), the static rendezvous's --rdzv-endpoint, or
 * --standalone's. */
static void addr_words(const struct amlrun_opts *o, const char *a,
                       int quoted, char *ours, size_t size)
{
    const char *q = quoted ? "\"" : "";
    if (a != o->master_addr)
        snprintf(ours, size, "--standalone (master %.64s)", a);
    else if (a == o->owned_addr && o->endpoint_port > 0)
        snprintf(ours, size, "%s%.64s:%d", o->endpoint_by, a,
                 o->endpoint_port);
    else if (a == o->owned_addr)
        snprintf(ours, size, "%s%.64s", o->endpoint_by, a);
    else
        snprintf(ours, size, "%s%s%.64s%s",
                 o->master_addr_by[0] ? o->master_addr_by : "--master-addr ",
                 q, a, q);
}

/* The master's port: given (the option, or --rdzv-endpoint's), or picked
 * by amlrun. */
static void port_words(const struct amlrun_opts *o, int p,
                       enum libwords_port port, char *ours, size_t size)
{
    const char *host = o->owned_addr ? o->owned_addr : "";
    if (port == PORT_PICKED_STANDALONE)
        snprintf(ours, size, "--standalone (a free port, %d)", p);
    else if (port == PORT_PICKED_ENDPOINT)
        snprintf(ours, size, "%s%.64s:0 (a free port, %d)", o->endpoint_by,
                 host, p);
    else if (port == PORT_PICKED_TAKEN)
        snprintf(ours, size, "port %d, a free one amlrun picked (the "
                 "default was taken)", p);
    else if (o->master_port_by[0] || !o->endpoint_by[0])
        snprintf(ours, size, "%s%d",
                 o->master_port_by[0] ? o->master_port_by : "--master-port ",
                 p);
    else
        snprintf(ours, size, "%s%.64s:%d", o->endpoint_by, host, p);
}

static void master_words(const struct amlrun_opts *o,
                         const amldist_options_t *ao, enum libwords_port port,
                         struct libwords *w)
{
    char lib[96], ours[160];
    if (ao->master_addr != NULL) {
        snprintf(lib, sizeof lib, "option master_addr=%.64s", ao->master_addr);
        addr_words(o, ao->master_addr, 0, ours, sizeof ours);
        add(w, lib, ours);
        /* The refusal of a malformed one quotes it. */
        snprintf(lib, sizeof lib, "option master_addr=\"%.64s\"",
                 ao->master_addr);
        addr_words(o, ao->master_addr, 1, ours, sizeof ours);
        add(w, lib, ours);
    }
    if (ao->master_port > 0) {
        snprintf(lib, sizeof lib, "option master_port=%d", ao->master_port);
        port_words(o, ao->master_port, port, ours, sizeof ours);
        add(w, lib, ours);
    }
}

/* The option amlrun passed as NAME=VALUE, in amlrun's words: what
 * --standalone stands for, or the option as typed (by, else flag). */
static void option_words(struct libwords *w, const char *name, int value,
                         const char *standalone, const char *by,
                         const char *flag)
{
    char lib[96], ours[160];
    snprintf(lib, sizeof lib, "option %s=%d", name, value);
    if (standalone)
        snprintf(ours, sizeof ours, "--standalone (%s)", standalone);
    else
        snprintf(ours, sizeof ours, "%s%d", by[0] ? by : flag, value);
    add(w, lib, ours);
}

void libwords_set(struct libwords *w, const struct amlrun_opts *o,
                  const amldist_options_t *ao, enum libwords_port port)
{
    w->n = 0;
    if (ao->num_nodes > 0)
        option_words(w, "num_nodes", ao->num_nodes,
                     o->standalone ? "one node" : NULL, o->nnodes_by,
                     "--nnodes ");
    if (ao->node_rank >= 0)
        option_words(w, "node_rank", ao->node_rank,
                     o->standalone ? "node rank 0" : NULL, o->node_rank_by,
                     "--node-rank ");
    master_words(o, ao, port, w);
}

/* The library's words end at t: not inside a longer number or name
 * ("option num_nodes=1" in "option num_nodes=12"). */
static int ends_at(const char *lib, const char *t)
{
    unsigned char last = (unsigned char)lib[strlen(lib) - 1];
    unsigned char c = (unsigned char)*t;
    return !isalnum(last) || !(isalnum(c) || c == '.' || c == '-' || c == '_');
}

const char *libwords(const struct libwords *w, const char *text, char *buf,
                     size_t size)
{
    if (w == NULL || w->n == 0 || text == NULL || size == 0 ||
        strstr(text, "option ") == NULL)
        return text;
    size_t n = 0;
    for (const char *t = text; *t != '\0' && n + 1 < size;) {
        int hit = -1;
        for (int i = 0; i < w->n && hit < 0; i++) {
            size_t len = strlen(w->pair[i].lib);
            if (strncmp(t, w->pair[i].lib, len) == 0 &&
                ends_at(w->pair[i].lib, t + len))
                hit = i;
        }
        if (hit < 0) {
            buf[n++] = *t++;
            continue;
        }
        int k = snprintf(buf + n, size - n, "%s", w->pair[hit].ours);
        n = k < 0 || (size_t)k >= size - n ? size - 1 : n + (size_t)k;
        t += strlen(w->pair[hit].lib);
    }
    buf[n] = '\0';
    return buf;
}
