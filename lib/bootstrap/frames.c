/* The bootstrap's frames on net/'s header (see bootstrap_internal.h for the
 * layout): their limits, and the HELLO's encoding. */
#include "bootstrap/bootstrap_internal.h"

const amldist__frame_limit_t amldist__bs_frames[] = {
    {AMLDIST__BS_HELLO, AMLDIST__BS_HELLO_LEN, AMLDIST__BS_HELLO_LEN},
    {AMLDIST__BS_BLOB, 0, AMLDIST_BOOTSTRAP_MAX_LEN},
    {AMLDIST__BS_REFUSE, AMLDIST__BS_REFUSE_LEN, AMLDIST__BS_REFUSE_LEN},
    {AMLDIST__BS_FAIL, AMLDIST__BS_FAIL_LEN, AMLDIST__BS_FAIL_LEN},
    {AMLDIST__BS_PEER, AMLDIST__BS_PEER_LEN, AMLDIST__BS_PEER_LEN},
    {AMLDIST__BS_ACK, 0, 0},
    {0, 0, 0},
};

uint32_t amldist__bs_max_payload(unsigned type)
{
    return amldist__frame_max_payload(amldist__bs_frames, type);
}

int amldist__bs_get_header(const unsigned char *p, unsigned *type,
                           uint32_t *len, const char **why)
{
    return amldist__frame_get_header(p, amldist__bs_frames, type, len, why);
}

void amldist__bs_put_hello(unsigned char *p, const amldist__bs_hello_t *h)
{
    amldist__net_put_u32(p, h->rank);
    amldist__net_put_u32(p + 4, h->world);
    amldist__net_put_u32(p + 8, h->round);
    amldist__net_put_u32(p + 12, h->length);
    amldist__net_put_u32(p + 16, (uint32_t)(h->token >> 32));
    amldist__net_put_u32(p + 20, (uint32_t)h->token);
}

void amldist__bs_get_hello(const unsigned char *p, amldist__bs_hello_t *h)
{
    h->rank = amldist__net_get_u32(p);
    h->world = amldist__net_get_u32(p + 4);
    h->round = amldist__net_get_u32(p + 8);
    h->length = amldist__net_get_u32(p + 12);
    h->token = (uint64_t)amldist__net_get_u32(p + 16) << 32 |
               amldist__net_get_u32(p + 20);
}
