/*
 * Who listens on a local TCP port: the uid of the socket, from the
 * kernel's socket diagnostics (sock_diag, listening sockets only), else
 * /proc/net/tcp and /proc/net/tcp6 (this network namespace's), so that an
 * agent never joins an endpoint on its own machine that another user's
 * process holds (it would follow whatever squats the port first).
 */
#ifndef AMLDIST_NET_PORTOWNER_H
#define AMLDIST_NET_PORTOWNER_H

/* A uid other than `self` with a socket listening on local TCP port
 * `port` (any address, v4 or v6): 1 with it in *uid; 0 when every
 * listener there is `self`'s or there is none (nor any /proc to read). */
int amldist__net_port_stranger(int port, unsigned self, unsigned *uid);

#endif /* AMLDIST_NET_PORTOWNER_H */
