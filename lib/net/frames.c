/* The shared frame header and big-endian integers (see frames.h). */
#include <stddef.h>

#include "net/frames.h"

void amldist__net_put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

uint32_t amldist__net_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           (uint32_t)p[3];
}

void amldist__frame_put_header(unsigned char *p, unsigned type, uint32_t len)
{
    amldist__net_put_u32(p, AMLDIST__FRAME_MAGIC);
    p[4] = (unsigned char)(AMLDIST__FRAME_PROTOCOL >> 8);
    p[5] = (unsigned char)AMLDIST__FRAME_PROTOCOL;
    p[6] = (unsigned char)(type >> 8);
    p[7] = (unsigned char)type;
    amldist__net_put_u32(p + 8, len);
}

const amldist__frame_limit_t *
amldist__frame_limit(const amldist__frame_limit_t *limits, unsigned type)
{
    for (; limits->type != 0; limits++)
        if (limits->type == type)
            return limits;
    return NULL;
}

uint32_t amldist__frame_max_payload(const amldist__frame_limit_t *limits,
                                    unsigned type)
{
    const amldist__frame_limit_t *lim = amldist__frame_limit(limits, type);
    return lim ? lim->max : 0;
}

int amldist__frame_get_header(const unsigned char *p,
                              const amldist__frame_limit_t *limits,
                              unsigned *type, uint32_t *len, const char **why)
{
    return amldist__frame_get_header_sealed(p, limits, 0, type, len, why);
}

int amldist__frame_get_header_sealed(const unsigned char *p,
                                     const amldist__frame_limit_t *limits,
                                     uint32_t overhead, unsigned *type,
                                     uint32_t *len, const char **why)
{
    unsigned proto = (unsigned)p[4] << 8 | p[5];
    const amldist__frame_limit_t *lim;
    *type = (unsigned)p[6] << 8 | p[7];
    *len = amldist__net_get_u32(p + 8);
    lim = amldist__frame_limit(limits, *type);
    if (amldist__net_get_u32(p) != AMLDIST__FRAME_MAGIC)
        *why = "not an amldist frame (bad magic)";
    else if (proto != AMLDIST__FRAME_PROTOCOL)
        *why = "unsupported protocol version";
    else if (!lim)
        *why = "unknown frame type";
    else if (*len < overhead)
        *why = "sealed frame shorter than its tag";
    else if ((*len -= overhead) > lim->max)
        *why = "frame longer than its limit";
    /* Fixed-size frames must be exactly their size: a short one is as
     * malformed as a long one. */
    else if (*len < lim->min)
        *why = lim->min == lim->max ? "frame length differs from its fixed "
                                      "size"
                                    : "frame shorter than its type needs";
    else
        return 0;
    return -1;
}
