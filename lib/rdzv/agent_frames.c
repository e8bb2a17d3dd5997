/*
 * The decider's actions for this agent (host_sm.h's ASSIGN, STOP, FINISH
 * and REFUSE, in the form of their frames, rdzv_internal.h) turned into
 * the state the caller reads (the sink, agent_state.h, under its mu), the
 * same for every backend: tcp/frames.c hands them over as the host's
 * frames come, etcd/agent.c as it reads them from the store.  Their text
 * is another process's: its control characters are escaped here
 * (util/escape.h), so that nothing that prints it can be made to print a
 * line of its own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/agent_state.h"
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

/* FINISH: the job is over (before this node's first round: a join
 * error). */
static void on_finish(amldist__rz_sink_t *s, const char *endpoint,
                      const unsigned char *p, uint32_t len)
{
    /* A failure summary keeps its lines (the caller prints each in its
     * margin); the error message is one line. */
    size_t size = 4 * (size_t)(len - 4) + 1;
    char *text = malloc(size);
    if (text)
        amldist__escape(text, size, p + 4, len - 4,
                        AMLDIST__ESC_KEEP_NEWLINES);
    if (!s->have_next && !s->err) {
        s->err = AMLDIST_EDENIED;
        int k = snprintf(s->errmsg, sizeof s->errmsg,
                         "rendezvous at %s: the job ended before this "
                         "node got a round%s", endpoint,
                         len > 4 ? ": " : "");
        if (k > 0 && (size_t)k < sizeof s->errmsg)
            amldist__escape(s->errmsg + k, sizeof s->errmsg - (size_t)k,
                            p + 4, len - 4, AMLDIST__ESC_ONE_LINE);
    }
    amldist__rz_set_over(s, (int)(amldist__net_get_u32(p) & 0xff),
                         text ? text : "(out of memory)");
    s->finished = 1;
    free(text);
}

/* REFUSE: this node is not in the job. */
static void on_refuse(amldist__rz_sink_t *s, const char *endpoint,
                      const char *token_source, const unsigned char *p,
                      uint32_t len)
{
    size_t n = len - 4;
    uint32_t reason = amldist__net_get_u32(p);
    s->err = refusal_code(reason);
    int k = snprintf(s->errmsg, sizeof s->errmsg,
                     reason == AMLDIST__RZ_R_TIMEOUT
                         ? "rendezvous at %s: "
                         : "rendezvous at %s refused this node: ",
                     endpoint);
    n = amldist__escape(s->errmsg + k, sizeof s->errmsg - (size_t)k, p + 4,
                        n, AMLDIST__ESC_ONE_LINE);
    if (reason == AMLDIST__RZ_R_TOKEN)
        snprintf(s->errmsg + k + n, sizeof s->errmsg - (size_t)k - n,
                 "; this node's comes from %s", token_source);
    /* A host of protocol 1 takes this node's JOIN for a malformed one. */
    else if (reason == AMLDIST__RZ_R_PROTO && len - 4 >= 16 &&
             !memcmp(p + 4, "a malformed JOIN", 16))
        snprintf(s->errmsg + k + n, sizeof s->errmsg - (size_t)k - n,
                 " (the host's amlrun may be of another version: this "
                 "node's speaks rendezvous protocol %u)",
                 AMLDIST__RZ_PROTOCOL);
    amldist__rz_set_over(s, AMLDIST_RDZV_STATUS_LOST, s->errmsg);
}

/* The ASSIGN just decoded into s->next: 1 when its MASTER_ADDR is one
 * this node's workers cannot reach (master.c).  The round is then not
 * the caller's: its FAIL (final: every round would be the same) and its
 * DONE go to the decider, which stops the other nodes with this reason
 * and ends the job, and the caller's join fails with it. */
static int master_unreachable(amldist__rz_sink_t *s, const char *endpoint,
                              const char *reached)
{
    char why[600];
    if (!reached || !*reached ||
        !amldist__rz_master_unreachable(&s->next, reached, why, sizeof why))
        return 0;
    size_t n = strlen(why);
    struct amldist__rz_fail *f = malloc(sizeof *f + n);
    if (f) {
        *f = (struct amldist__rz_fail){.round = (uint32_t)s->next.round,
                                       .flags = AMLDIST_RDZV_FINAL,
                                       .rank = AMLDIST__RZ_NONE,
                                       .status = 1, .len = n};
        memcpy(f->text, why, n);
        free(s->fail);
        s->fail = f;
    }
    s->done = 1;
    s->done_status = 1;
    s->done_port = 0;
    s->err = AMLDIST_EINVAL;
    /* Cut where it does not fit (the reason first: it names the fix). */
    int at = (int)strnlen(endpoint, 200);
    snprintf(s->errmsg, sizeof s->errmsg, "rendezvous at %.*s: %.*s", at,
             endpoint, (int)(sizeof s->errmsg) - at - 16, why);
    return 1;
}

int amldist__rz_agent_action(amldist__rz_sink_t *s, const char *endpoint,
                             const char *token_source, const char *reached,
                             unsigned type, const unsigned char *p,
                             uint32_t len, const char **why)
{
    switch (type) {
    case AMLDIST__RZ_ASSIGN:
        if (amldist__rz_get_assign(p, len, &s->next, why) < 0)
            return -1;
        if (master_unreachable(s, endpoint, reached))
            return 0;
        s->have_next = 1;
        s->state = C_RUNNING;
        s->stop_why[0] = '\0';
        amldist__rz_signal_caller(s);
        return 0;
    case AMLDIST__RZ_STOP:
        if (s->state == C_RUNNING &&
            (int)amldist__net_get_u32(p) == s->next.round) {
            amldist__escape(s->stop_why, sizeof s->stop_why, p + 4,
                            len - 4, AMLDIST__ESC_ONE_LINE);
            s->state = C_STOP;
            amldist__rz_signal_caller(s);
        }
        return 0;
    case AMLDIST__RZ_FINISH:
        on_finish(s, endpoint, p, len);
        return 0;
    case AMLDIST__RZ_REFUSE:
        on_refuse(s, endpoint, token_source, p, len);
        return 0;
    }
    *why = "a frame only agents send";
    return -1;
}
