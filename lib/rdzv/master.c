/*
 * The round's master address (issue 38): whether an address is this
 * machine's loopback, where a round's MASTER_ADDR came from in words, and
 * the check every agent makes of an ASSIGN before its workers start: a
 * loopback MASTER_ADDR on a node that reached the host over the network
 * sends its workers to their own machine, where no store listens, and
 * PyTorch would wait there 30 minutes without a word.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "rdzv/rdzv_internal.h"

int amldist__rz_addr_loopback(const char *addr)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (!addr || !addr[0])
        return 0;
    if (inet_pton(AF_INET, addr, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, addr, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6) ||
               (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    /* RFC 6761: localhost and the names below it are loopback wherever
     * they are resolved; other names are the resolver's to say. */
    size_t n = strlen(addr);
    if (n && addr[n - 1] == '.')
        n--;
    return (n == 9 && strncasecmp(addr, "localhost", 9) == 0) ||
           (n > 10 && strncasecmp(addr + n - 10, ".localhost", 10) == 0);
}

const char *amldist__rz_addr_source(unsigned flags)
{
    if (flags & AMLDIST__RZ_F_ADDR_OPTION)
        return "the rendezvous host's --master-addr";
    if (flags & AMLDIST__RZ_F_ADDR_LOCAL)
        return "node 0's --local-addr";
    if (flags & AMLDIST__RZ_F_ADDR_REACHED)
        return "the rendezvous host's address as the other nodes reached it "
               "(node 0 came over loopback)";
    return "node 0's address as the rendezvous host sees it";
}

int amldist__rz_master_unreachable(const amldist__rz_round_t *rd,
                                   const char *reached, char *msg,
                                   size_t size)
{
    /* Node 0's own workers, and a node that reached the host over
     * loopback (on the host's machine, where node 0 is then too), reach a
     * loopback master; a node that came over the network does not. */
    if (rd->node == 0 || !amldist__rz_addr_loopback(rd->master_addr) ||
        !reached || !reached[0] || amldist__rz_addr_loopback(reached))
        return 0;
    snprintf(msg, size, "MASTER_ADDR=%s (%s) is a loopback address, and "
             "this node (node %d of %d) reached the rendezvous host at %s: "
             "its workers would dial their own machine and wait there for "
             "ever; give an address of node 0 that every node can reach "
             "with --master-addr (on the rendezvous host) or --local-addr "
             "(on node 0)", rd->master_addr,
             amldist__rz_addr_source(rd->flags), rd->node, rd->nnodes,
             reached);
    return 1;
}
