/*
 * The end of the agent's connection to the host (see tcp.h): closed, or
 * lost, which the sink (agent_state.h) then tells the caller.  Below the
 * files that notice it: the loop's (thread.c), the connect's, the reads
 * (client.c), the frames' and the plane's.
 */
#include "net/loop.h"
#include "rdzv/tcp/tcp.h"

/* The connection to the host closes through here: its descriptor is in
 * the loop exactly while it is open (client.c opens it). */
void amldist__rz_client_close(amldist__rz_tcp_t *t)
{
    if (t->c.fd >= 0)
        amldist__loop_unwatch(t->loop, t->c.fd);
    amldist__conn_close(&t->c);
}

/* The connection to the host is gone: after the first round the job is
 * over on this node.  Before it, a connection that merely closed is tried
 * again until the join deadline (a host that was out of descriptors, or
 * one that died while the round formed: an agent on its machine then
 * takes over); anything else is a join error. */
void amldist__rz_host_lost(amldist__rz_tcp_t *t, const char *why, int closed)
{
    amldist__rz_sink_t *s = t->s;
    amldist__rz_client_close(t);
    pthread_mutex_lock(&s->mu);
    if (s->state < C_RUNNING && !s->err && closed &&
        amldist__now_ms() < t->join_deadline) {
        s->state = C_CONNECTING;
        t->next_try = amldist__now_ms() + t->backoff_ms;
    } else {
        amldist__rz_set_lost(s, t->endpoint, "host", why);
    }
    pthread_mutex_unlock(&s->mu);
}
