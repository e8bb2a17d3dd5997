/*
 * Issue 20's part of the agent's thread (see tcp.h): on this backend the
 * plane's frames share the rendezvous connection, so the agent's side of
 * the plane (plane_link.h, every backend's) runs on t->c; the host's own
 * agent shares the host's clock and gets the host's hang gather.
 */
#include "rdzv/tcp/tcp.h"

/* The link on the connection, as the thread stands now (the host may
 * start after the join: hosting.c). */
static amldist__rz_link_t *link_of(amldist__rz_tcp_t *t)
{
    t->pt.s = t->s;
    t->pt.cfg = t->cfg;
    t->pt.c = &t->c;
    t->pt.own = t->host != NULL;
    t->pt.last_beat = &t->last_beat;
    return &t->pt;
}

void amldist__rz_plane_frame(amldist__rz_tcp_t *t, unsigned type,
                             const unsigned char *p, uint32_t len)
{
    amldist__rz_link_frame(link_of(t), type, p, len);
}

int amldist__rz_plane_io(amldist__rz_tcp_t *t)
{
    if (amldist__rz_link_io(link_of(t)) == 0)
        return 0;
    amldist__rz_host_lost(t, "it stopped reading", 0);
    return -1;
}

long long amldist__rz_plane_wake(const amldist__rz_tcp_t *t)
{
    return amldist__rz_link_wake(link_of((amldist__rz_tcp_t *)t));
}

void amldist__rz_plane_free(amldist__rz_tcp_t *t)
{
    amldist__rz_link_free(link_of(t));
}
