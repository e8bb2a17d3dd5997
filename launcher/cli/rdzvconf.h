/*
 * torchrun's --rdzv-conf "key=value,key=value", parsed as torchrun parses
 * it (blanks around keys and values ignored, every key needs a value, the
 * last of a repeated key wins).  The keys amlrun uses are checked the way
 * torchrun's backends read them; every other key (store_type, rank, a
 * backend's own) is accepted and ignored, as by torchrun's static backend.
 */
#ifndef AMLRUN_RDZVCONF_H
#define AMLRUN_RDZVCONF_H

#include <stddef.h>

struct rdzv_conf {
    /* seconds; 0 where the key is absent */
    double join_timeout;  /* c10d's join_timeout */
    double timeout;       /* the static backend's timeout */
    double read_timeout;  /* the c10d store's read_timeout */
    /* The control plane's (amldist_rdzv(3)); fractions of a second are
     * accepted here, where torchrun takes whole seconds. */
    double last_call_timeout;   /* wait for more nodes after MIN joined */
    double keep_alive_interval; /* heartbeat period */
    int keep_alive_max_attempt; /* missed heartbeats before "dead"; 0 */
};

/* How long the nodes wait for each other, in seconds: the backend's own key
 * (c10d's join_timeout, the static backend's timeout), else the other one;
 * 0 when neither was given. */
double rdzv_conf_join_timeout(const struct rdzv_conf *c, int c10d);

/* Parse s into *c.  Returns 0, or -1 with the reason in why. */
int rdzv_conf_parse(const char *s, struct rdzv_conf *c, char *why,
                    size_t size);

#endif /* AMLRUN_RDZVCONF_H */
