/* Encoding and strict decoding of the bootstrap frames (see
 * bootstrap_internal.h for the layout). */
#include "bootstrap/bootstrap_internal.h"

void amldist__bs_put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

uint32_t amldist__bs_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           (uint32_t)p[3];
}

uint32_t amldist__bs_max_payload(unsigned type)
{
    switch (type) {
    case AMLDIST__BS_HELLO:
        return AMLDIST__BS_HELLO_LEN;
    case AMLDIST__BS_FAIL:
        return AMLDIST__BS_FAIL_LEN;
    case AMLDIST__BS_PEER:
        return AMLDIST__BS_PEER_LEN;
    case AMLDIST__BS_ACK:
        return 0;
    case AMLDIST__BS_BLOB:
        return AMLDIST_BOOTSTRAP_MAX_LEN;
    case AMLDIST__BS_REFUSE:
        return AMLDIST__BS_REFUSE_LEN;
    default:
        return 0;
    }
}

void amldist__bs_put_header(unsigned char *p, unsigned type, uint32_t len)
{
    amldist__bs_put_u32(p, AMLDIST__BS_MAGIC);
    p[4] = (unsigned char)(AMLDIST__BS_PROTOCOL >> 8);
    p[5] = (unsigned char)AMLDIST__BS_PROTOCOL;
    p[6] = (unsigned char)(type >> 8);
    p[7] = (unsigned char)type;
    amldist__bs_put_u32(p + 8, len);
}

int amldist__bs_get_header(const unsigned char *p, unsigned *type,
                           uint32_t *len, const char **why)
{
    unsigned proto = (unsigned)p[4] << 8 | p[5];
    *type = (unsigned)p[6] << 8 | p[7];
    *len = amldist__bs_get_u32(p + 8);
    if (amldist__bs_get_u32(p) != AMLDIST__BS_MAGIC)
        *why = "not a bootstrap frame (bad magic)";
    else if (proto != AMLDIST__BS_PROTOCOL)
        *why = "unsupported bootstrap protocol version";
    else if (amldist__bs_max_payload(*type) == 0 && *type != AMLDIST__BS_ACK)
        *why = "unknown frame type";
    else if (*len > amldist__bs_max_payload(*type))
        *why = "frame longer than its limit";
    /* Fixed-size frames must be exactly their size: a short HELLO is as
     * malformed as a long one. */
    else if (*type != AMLDIST__BS_BLOB &&
             *len != amldist__bs_max_payload(*type))
        *why = "frame length differs from its fixed size";
    else
        return 0;
    return -1;
}

void amldist__bs_put_hello(unsigned char *p, const amldist__bs_hello_t *h)
{
    amldist__bs_put_u32(p, h->rank);
    amldist__bs_put_u32(p + 4, h->world);
    amldist__bs_put_u32(p + 8, h->round);
    amldist__bs_put_u32(p + 12, h->length);
    amldist__bs_put_u32(p + 16, (uint32_t)(h->token >> 32));
    amldist__bs_put_u32(p + 20, (uint32_t)h->token);
}

void amldist__bs_get_hello(const unsigned char *p, amldist__bs_hello_t *h)
{
    h->rank = amldist__bs_get_u32(p);
    h->world = amldist__bs_get_u32(p + 4);
    h->round = amldist__bs_get_u32(p + 8);
    h->length = amldist__bs_get_u32(p + 12);
    h->token = (uint64_t)amldist__bs_get_u32(p + 16) << 32 |
               amldist__bs_get_u32(p + 20);
}
