/*
 * Issue 20's frames on the decider's side, every backend's
 * (plane_frames.c): what the decider hears of a member's plane frames,
 * and what it sends.
 */
#ifndef AMLDIST_RDZV_PLANE_FRAMES_H
#define AMLDIST_RDZV_PLANE_FRAMES_H

#include <stddef.h>

#include "rdzv/host_sm.h"

/* A member's VIEW, ASK, ANSWER or MARKS (its payload within its type's
 * limits, amldist__rz_frames) as the decider's event in *ev (its who,
 * now and now_ns the caller's): 1, with *views to free after the step
 * (a VIEW's ranks, else NULL); 0 when the frame is none of them (or a
 * VIEW's ranks found no memory: not heard); -1 when malformed, with *why
 * (the member is then lost). */
int amldist__rz_plane_decode(unsigned type, const unsigned char *p,
                             uint32_t len, amldist__rz_event_t *ev,
                             amldist__rz_view_t **views, const char **why);
/* The frame type and head of a QUERY, RESULT or MARKS action (room for
 * AMLDIST__RZ_RESULT_HEAD): the head's length; the action's data follows
 * it in the frame. */
size_t amldist__rz_plane_head(const amldist__rz_action_t *a, unsigned *type,
                              unsigned char *head);
/* The TIMEA that answers a TIMEQ: the agent's t1 (the TIMEQ's 8 bytes),
 * t2 the decider's clock when the TIMEQ was read (as near the wire as the
 * caller allows), t3 the decider's clock now (the time between is the
 * agent's to subtract: c10d's host answers with its next beat): 24 bytes
 * at a. */
void amldist__rz_plane_timea(int64_t t1, int64_t t2, unsigned char *a);

#endif /* AMLDIST_RDZV_PLANE_FRAMES_H */
