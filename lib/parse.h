/*
 * Strict parsers for values found in launchers' environments.  They return 0
 * or a negative AMLDIST_E* code and never set the last-error message: the
 * caller knows which variable the text came from and names it.
 */
#ifndef AMLDIST_PARSE_H
#define AMLDIST_PARSE_H

#include <stddef.h>

/* Decimal digits only: no sign, no blanks, no trailing junk, no overflow;
 * the value must lie in [min, max].  EPARSE for bad text, ERANGE otherwise. */
int amldist__parse_long(const char *s, long min, long max, long *out);

/* A host name (RFC 1123 labels), dotted IPv4, or IPv6 (without brackets). */
int amldist__valid_host(const char *s);

/* "host", "host:port", "1.2.3.4:port", "[v6]:port" or "[v6]".  The host is
 * copied without brackets; *port is -1 when absent, else 1..65535. */
int amldist__parse_hostport(const char *s, char *host, size_t hostsz, int *port);

/* Slurm hostlists: "gpu[009-011,013],login1,rack[1-2]-n[01-02]".  Several
 * bracket groups per name, ranges, zero padding kept. */
long amldist__hostlist_count(const char *list);            /* < 0: error */
int amldist__hostlist_nth(const char *list, long n, char *out, size_t outsz);

/* SLURM_TASKS_PER_NODE, e.g. "2(x3),1": tasks on node `node`, node count. */
int amldist__tasks_per_node(const char *s, long node, long *tasks);
long amldist__tasks_nodes(const char *s);                   /* < 0: error */

#endif /* AMLDIST_PARSE_H */
