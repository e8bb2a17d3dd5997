/*
 * The frame header that the bootstrap and the control plane share, and
 * the big-endian integers of their payloads:
 *
 *     magic "AMLB" u32 | protocol u16 | type u16 | payload length u32
 *
 * Each protocol brings its own types (the bootstrap 1-6, the control plane
 * 16-23, so that neither takes the other's frames) and says what payload
 * each may carry in a table of limits; a header is checked against that
 * table before a byte of its payload is read.
 */
#ifndef AMLDIST_NET_FRAMES_H
#define AMLDIST_NET_FRAMES_H

#include <stdint.h>

#define AMLDIST__FRAME_MAGIC 0x414d4c42u /* "AMLB" */
#define AMLDIST__FRAME_PROTOCOL 3u
#define AMLDIST__FRAME_HEADER_LEN 12

/* One type of a protocol and the least and most payload it may carry.  A
 * protocol's table of them has one entry a type and ends with an entry of
 * type 0, which no protocol uses; types not in it are unknown. */
typedef struct {
    unsigned type;
    uint32_t min, max;
} amldist__frame_limit_t;

void amldist__net_put_u32(unsigned char *p, uint32_t v);
uint32_t amldist__net_get_u32(const unsigned char *p);

void amldist__frame_put_header(unsigned char *p, unsigned type, uint32_t len);
/* Decode a header and check it against `limits`: 0, or -1 with *why naming
 * the defect (bad magic, another protocol version, an unknown type, a
 * length outside the type's limits). */
int amldist__frame_get_header(const unsigned char *p,
                              const amldist__frame_limit_t *limits,
                              unsigned *type, uint32_t *len, const char **why);
/* The same for a sealed frame (net/chan.h), whose length counts
 * `overhead` bytes (its tag) beyond the payload: *len is the payload's,
 * checked against the limits as the whole length is without a channel. */
int amldist__frame_get_header_sealed(const unsigned char *p,
                                     const amldist__frame_limit_t *limits,
                                     uint32_t overhead, unsigned *type,
                                     uint32_t *len, const char **why);
/* The limits of `type`, or NULL when the table does not know it. */
const amldist__frame_limit_t *
amldist__frame_limit(const amldist__frame_limit_t *limits, unsigned type);
/* The most payload `type` may carry; 0 when the table does not know it. */
uint32_t amldist__frame_max_payload(const amldist__frame_limit_t *limits,
                                    unsigned type);

#endif /* AMLDIST_NET_FRAMES_H */
