/* Frames waiting their turn behind a connection's queue (see
 * plane_link.h): a gather's chunks go out as the peer reads them, so
 * that one large answer never fills the connection's queue (which would
 * count the peer as stuck); an agent's ANSWER chunks and a decider's
 * RESULTs, every backend's. */
#include <stdlib.h>
#include <string.h>

#include "rdzv/plane_link.h"

struct amldist__rz_out {
    struct amldist__rz_out *next;
    unsigned type;
    size_t len;
    unsigned char p[];
};

int amldist__rz_outbox_push(amldist__rz_outbox_t *o, unsigned type,
                            const void *head, size_t hlen, const void *p,
                            size_t len)
{
    if (o->bytes + hlen + len > AMLDIST__RZ_OUTBOX_MAX)
        return -1;
    struct amldist__rz_out *f = malloc(sizeof *f + hlen + len);
    if (!f)
        return -1;
    f->next = NULL;
    f->type = type;
    f->len = hlen + len;
    if (hlen)
        memcpy(f->p, head, hlen);
    if (len)
        memcpy(f->p + hlen, p, len);
    if (o->tail)
        o->tail->next = f;
    else
        o->head = f;
    o->tail = f;
    o->bytes += f->len;
    return 0;
}

int amldist__rz_outbox_pump(amldist__rz_outbox_t *o, amldist__conn_t *c)
{
    while (o->head && c->fd >= 0 &&
           c->out_len - c->out_off +
                   (c->tail ? c->tail->len - c->tail_off : 0) <
               AMLDIST__RZ_OUTBOX_LOW) {
        struct amldist__rz_out *f = o->head;
        if (amldist__conn_send(c, f->type, f->p, f->len) < 0)
            return -1;
        o->head = f->next;
        if (!o->head)
            o->tail = NULL;
        o->bytes -= f->len;
        free(f);
    }
    return 0;
}

void amldist__rz_outbox_clear(amldist__rz_outbox_t *o)
{
    while (o->head) {
        struct amldist__rz_out *f = o->head;
        o->head = f->next;
        free(f);
    }
    o->tail = NULL;
    o->bytes = 0;
}
