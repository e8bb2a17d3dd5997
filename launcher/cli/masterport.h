/*
 * A one-node job's MASTER_PORT, checked before any worker starts: rank 0
 * binds PyTorch's store there, and a port some other program listens on
 * would end the job in PyTorch's "address already in use" traceback.
 */
#ifndef AMLRUN_MASTERPORT_H
#define AMLRUN_MASTERPORT_H

/* 1 when a listener could bind `port` on every address of this machine,
 * as rank 0's store does (SO_REUSEADDR: a connection in TIME_WAIT does
 * not count), 0 when something holds it, -1 when it cannot be told. */
int master_port_free(int port);

/* A port nobody listens on now, from the kernel, that a store can take a
 * moment later (-1: none). */
int master_port_pick(void);

#endif /* AMLRUN_MASTERPORT_H */
