/*
 * The host's frames as the agent's thread receives them, turned into the
 * state the caller reads (handle.h's `sh`, under `mu`): a new round, a
 * stop, the job's end, a refusal.  Their text is another process's: its
 * control characters are escaped here (util/escape.h), so that nothing
 * that prints it can be made to print a line of its own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/handle.h"
#include "util/escape.h"

static int refusal_code(uint32_t reason)
{
    switch (reason) {
    case AMLDIST__RZ_R_OPTIONS:
    case AMLDIST__RZ_R_PROTO:
        return AMLDIST_EPROTO;
    case AMLDIST__RZ_R_ORDER:
        return AMLDIST_ECONFLICT;
    case AMLDIST__RZ_R_TIMEOUT:
        return AMLDIST_ETIMEDOUT;
    default:
        return AMLDIST_EDENIED;
    }
}

void amldist__rz_on_frame(amldist_rdzv_t *r, unsigned type,
                          const unsigned char *p, uint32_t len)
{
    const char *why = NULL;
    if (type == AMLDIST__RZ_WAIT) {
        amldist__rz_note_wait(r, p, len);
        return;
    }
    if (type == AMLDIST__RZ_TIMEA || type == AMLDIST__RZ_QUERY ||
        type == AMLDIST__RZ_RESULT || type == AMLDIST__RZ_MARKS) {
        amldist__rz_plane_frame(r, type, p, len);
        return;
    }
    pthread_mutex_lock(&r->mu);
    switch (type) {
    case AMLDIST__RZ_BEAT:
        break;
    case AMLDIST__RZ_ASSIGN:
        if (amldist__rz_get_assign(p, len, &r->sh.next, &why) < 0)
            break;
        r->sh.have_next = 1;
        r->sh.state = C_RUNNING;
        r->sh.stop_why[0] = '\0';
        amldist__rz_signal_caller(r);
        break;
    case AMLDIST__RZ_STOP:
        if (r->sh.state == C_RUNNING &&
            (int)amldist__net_get_u32(p) == r->sh.next.round) {
            amldist__escape(r->sh.stop_why, sizeof r->sh.stop_why, p + 4,
                            len - 4, AMLDIST__ESC_ONE_LINE);
            r->sh.state = C_STOP;
            amldist__rz_signal_caller(r);
        }
        break;
    case AMLDIST__RZ_FINISH: {
        /* A failure summary keeps its lines (the caller prints each in
         * its margin); the error message is one line. */
        size_t size = 4 * (size_t)(len - 4) + 1;
        char *text = malloc(size);
        if (text)
            amldist__escape(text, size, p + 4, len - 4,
                            AMLDIST__ESC_KEEP_NEWLINES);
        if (!r->sh.have_next && !r->sh.err) {
            r->sh.err = AMLDIST_EDENIED;
            int k = snprintf(r->sh.errmsg, sizeof r->sh.errmsg,
                             "rendezvous at %s: the job ended before this "
                             "node got a round%s", r->endpoint,
                             len > 4 ? ": " : "");
            if (k > 0 && (size_t)k < sizeof r->sh.errmsg)
                amldist__escape(r->sh.errmsg + k, sizeof r->sh.errmsg -
                                (size_t)k, p + 4, len - 4,
                                AMLDIST__ESC_ONE_LINE);
        }
        amldist__rz_set_over(r, (int)(amldist__net_get_u32(p) & 0xff),
                             text ? text : "(out of memory)");
        free(text);
        break;
    }
    case AMLDIST__RZ_REFUSE: {
        size_t n = len - 4;
        uint32_t reason = amldist__net_get_u32(p);
        r->sh.err = refusal_code(reason);
        int k = snprintf(r->sh.errmsg, sizeof r->sh.errmsg,
                         reason == AMLDIST__RZ_R_TIMEOUT
                             ? "rendezvous at %s: "
                             : "rendezvous at %s refused this node: ",
                         r->endpoint);
        n = amldist__escape(r->sh.errmsg + k, sizeof r->sh.errmsg - (size_t)k,
                            p + 4, n, AMLDIST__ESC_ONE_LINE);
        if (reason == AMLDIST__RZ_R_TOKEN)
            snprintf(r->sh.errmsg + k + n, sizeof r->sh.errmsg - (size_t)k - n,
                     "; this node's comes from %s", r->cfg.token_source);
        amldist__rz_set_over(r, AMLDIST_RDZV_STATUS_LOST, r->sh.errmsg);
        break;
    }
    default:
        why = "a frame only agents send";
    }
    pthread_mutex_unlock(&r->mu);
    if (why)
        amldist__rz_host_lost(r, why, 0);
}
