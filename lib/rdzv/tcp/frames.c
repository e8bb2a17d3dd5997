/*
 * The host's frames as the agent's thread receives them: the decider's
 * actions for this agent (a new round, a stop, the job's end, a refusal)
 * handed to lib/rdzv's agent_frames.c, which sets the state the caller
 * reads (the sink, agent_state.h, under its mu), as every backend does;
 * the forming round's WAIT lines to the note descriptor; issue 20's frames
 * to plane.c.
 */
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "rdzv/tcp/tcp.h"

/* The host's address as this agent reached it (an ASSIGN's MASTER_ADDR
 * is checked against it, agent_frames.c), "" when not known. */
static void reached_addr(const amldist__rz_tcp_t *t, char *out, size_t size)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    out[0] = '\0';
    if (getpeername(t->c.fd, (struct sockaddr *)&ss, &sl) < 0 ||
        getnameinfo((struct sockaddr *)&ss, sl, out, (socklen_t)size, NULL, 0,
                    NI_NUMERICHOST) != 0)
        out[0] = '\0';
}

void amldist__rz_on_frame(amldist__rz_tcp_t *t, unsigned type,
                          const unsigned char *p, uint32_t len)
{
    amldist__rz_sink_t *s = t->s;
    const char *why = NULL;
    if (type == AMLDIST__RZ_WAIT) {
        amldist__rz_note_wait(s, p, len);
        return;
    }
    if (type == AMLDIST__RZ_TIMEA || type == AMLDIST__RZ_QUERY ||
        type == AMLDIST__RZ_RESULT || type == AMLDIST__RZ_MARKS) {
        amldist__rz_plane_frame(t, type, p, len);
        return;
    }
    char reached[INET6_ADDRSTRLEN] = "";
    if (type == AMLDIST__RZ_ASSIGN)
        reached_addr(t, reached, sizeof reached);
    pthread_mutex_lock(&s->mu);
    if (type != AMLDIST__RZ_BEAT &&
        amldist__rz_agent_action(s, t->endpoint, t->cfg->token_source,
                                 reached, type, p, len, &why) == 0)
        why = NULL;
    pthread_mutex_unlock(&s->mu);
    if (why)
        amldist__rz_host_lost(t, why, 0);
}
