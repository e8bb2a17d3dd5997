/*
 * Strict parsers for values found in launchers' environments.  They return 0
 * or a negative AMLDIST_E* code and never set the last-error message: the
 * caller knows which variable the text came from and names it.
 *
 * Codes: EINVAL for a NULL argument or an unusable buffer/range given by the
 * caller, EPARSE for malformed text, ERANGE for well-formed text whose value
 * is out of range (including numbers too large for a long, and a result that
 * does not fit in the caller's buffer).
 */
#ifndef AMLDIST_PARSE_H
#define AMLDIST_PARSE_H

#include <stddef.h>

/* Room for any host these functions accept, with its NUL: a host name is at
 * most 253 characters, an IPv6 address with a zone at most 45 + 1 + 15. */
#define AMLDIST__HOST_MAX 256
/* Most hosts a hostlist may name (and most nodes in SLURM_TASKS_PER_NODE):
 * far more than any real job, small enough that counts never overflow. */
#define AMLDIST__HOSTLIST_MAX 1000000L

/* Decimal digits only: no sign, no blanks, no "0x", no trailing junk; leading
 * zeros are accepted ("007" is 7).  The value must lie in [min, max].
 * EPARSE for bad text (checked first), ERANGE when it does not fit in a long
 * or lies outside [min, max], EINVAL when min > max.  *out is written only on
 * success (out may be NULL to validate). */
int amldist__parse_long(const char *s, long min, long max, long *out);

/* Seconds as "30", "2.5" or "0.25": digits, an optional fraction (digits
 * past the millisecond are ignored), more than 0 and at most a week.  *ms is
 * the value in milliseconds, written only on success. */
int amldist__parse_seconds_ms(const char *s, long long *ms);

/*
 * 0 if `s` is a host that can be handed to getaddrinfo() without surprise,
 * else EPARSE (EINVAL for NULL):
 *  - an RFC 1123 host name: dot-separated labels of 1..63 letters, digits and
 *    hyphens, not starting or ending with a hyphen, 253 characters at most.
 *    No trailing dot, no underscore.
 *  - a dotted-quad IPv4 address, strictly: four parts 0..255 in decimal
 *    without leading zeros.  A name whose last label is all digits must be
 *    such an address (RFC 3696: no all-numeric top-level label), and so must
 *    anything inet_aton() would read as an address, because getaddrinfo()
 *    would silently turn "010.0.0.1" into 8.0.0.1, "1.2.3" into 1.2.0.3 and
 *    "0x7f000001" into 127.0.0.1: those are rejected.
 *  - an IPv6 address without brackets (inet_pton(AF_INET6)), optionally with
 *    a "%zone" suffix of 1..15 characters [A-Za-z0-9_.-] (an interface name
 *    or index, as link-local addresses need).
 */
int amldist__valid_host(const char *s);

/*
 * "host", "host:port", "1.2.3.4:port", "[v6]:port" or "[v6]"; the host must
 * pass amldist__valid_host() and brackets hold IPv6 only.  Text with two or
 * more colons and no brackets is a bare IPv6 address without port:
 * "fe80::1:8080" is the address fe80::1:8080, never fe80::1 port 8080.
 * The port is 1..65535 (parsed as amldist__parse_long(), so port 0 and 65536
 * are ERANGE).  The host is copied without brackets into host[hostsz]
 * (host may be NULL to validate only; ERANGE if it does not fit); *port is -1
 * when absent.  On failure host is "" and *port is -1.
 */
int amldist__parse_hostport(const char *s, char *host, size_t hostsz, int *port);

/*
 * Slurm hostlists: "gpu[009-011,013],login1,rack[1-2]-n[01-02]".
 *  - Names are separated by commas outside brackets; no empty names, no
 *    blanks.  Each name may hold several bracket groups; a group is a
 *    comma-separated list of numbers and ranges lo-hi (lo <= hi).
 *  - Numbers are printed zero-padded to the width of the text of the range's
 *    start, as Slurm does: gpu[009-011] gives gpu009 gpu010 gpu011, and
 *    n[8-10] gives n8 n9 n10.  At most 18 digits per number.
 *  - Several groups give their cartesian product, the first group varying
 *    slowest: rack[1-2]-n[01-02] is rack1-n01 rack1-n02 rack2-n01 rack2-n02.
 *  - Order and duplicates are kept as written.  No IPv6 (no colons).
 *  - Every host produced must pass amldist__valid_host() (checked for the
 *    whole list by every call, without expanding it: names that could read
 *    as IPv4 addresses, e.g. "10.0.0.[1-4]", are checked label by label and
 *    may have at most 65536 values per label, ERANGE beyond).  At most
 *    AMLDIST__HOSTLIST_MAX hosts (ERANGE beyond).
 * Each call checks the whole list, so nth() fails wherever count() does;
 * neither allocates.  A call costs O(strlen(list)) (plus those label checks);
 * n outside [0, count) is ERANGE, and so is a host that does not fit in
 * outsz (never with outsz >= AMLDIST__HOST_MAX).
 */
long amldist__hostlist_count(const char *list);            /* < 0: error */
int amldist__hostlist_nth(const char *list, long n, char *out, size_t outsz);
/* Calls fn(host, index, arg) for every host in order, in O(total length)
 * rather than count x O(nth); stops at and returns fn's first non-zero
 * return.  The list is checked in full before the first call. */
int amldist__hostlist_foreach(const char *list,
                              int (*fn)(const char *host, long index, void *arg),
                              void *arg);

/*
 * SLURM_TASKS_PER_NODE: comma-separated "count" or "count(xreps)" items,
 * e.g. "2(x3),1": nodes 0..2 run 2 tasks and node 3 runs 1; "4" is one node
 * with 4 tasks.  Numbers have at most 18 digits; count is 1..INT_MAX and
 * reps >= 1, with at most AMLDIST__HOSTLIST_MAX nodes in all (ERANGE
 * otherwise).  tasks_per_node() gives the tasks on node `node` (ERANGE
 * outside [0, nodes)); tasks_nodes() the number of nodes.
 */
int amldist__tasks_per_node(const char *s, long node, long *tasks);
long amldist__tasks_nodes(const char *s);                   /* < 0: error */

#endif /* AMLDIST_PARSE_H */
