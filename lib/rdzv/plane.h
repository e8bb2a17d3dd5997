/*
 * What the caller's side (api_plane.c) and the thread's (thread_plane.c)
 * of issue 20's calls hand each other under the handle's mu: asks and
 * answers to send, requests and complete gathers to take.  The public
 * structs are the first member of private ones that own their memory.
 */
#ifndef AMLDIST_RDZV_PLANE_H
#define AMLDIST_RDZV_PLANE_H

#include "rdzv/handle.h"

struct amldist__rz_ask {
    struct amldist__rz_ask *next;
    uint32_t tag, topic, timeout_ms;
    size_t arg_len;
    unsigned char arg[];
};

struct amldist__rz_answer {
    struct amldist__rz_answer *next;
    uint32_t id;
    size_t len;
    unsigned char blob[];
};

struct amldist__rz_req {
    amldist_rdzv_request_t pub;
    struct amldist__rz_req *next;
    int stalled[(AMLDIST__RZ_ARG_MAX - 8) / 4];
    unsigned char arg[AMLDIST__RZ_ARG_MAX];
};

struct amldist__rz_got {
    amldist_rdzv_gather_t pub;
    struct amldist__rz_got *next;
    int stalled[(AMLDIST__RZ_ARG_MAX - 8) / 4];
    unsigned char arg[AMLDIST__RZ_ARG_MAX];
};

/* A request as the host's QUERY gives it (asker: NONE for the host); NULL
 * when out of memory. */
struct amldist__rz_req *amldist__rz_req_new(uint32_t id, uint32_t topic,
                                            uint32_t asker,
                                            const unsigned char *arg,
                                            size_t arg_len);
/* A complete gather, with no answers yet. */
struct amldist__rz_got *amldist__rz_got_new(uint32_t tag, uint32_t topic,
                                            const unsigned char *arg,
                                            size_t arg_len);
void amldist__rz_asks_free(struct amldist__rz_ask *a);
void amldist__rz_answers_free(struct amldist__rz_answer *a);

/* thread_plane.c: a gather this agent waits for (its ask, or the host's
 * hang). */
struct amldist__rz_gathering *amldist__rz_gathering_new(uint32_t tag,
                                                        uint32_t topic);
void amldist__rz_plane_track(amldist_rdzv_t *r,
                             struct amldist__rz_gathering *g);

#endif /* AMLDIST_RDZV_PLANE_H */
