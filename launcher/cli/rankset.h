/* Rank lists like "0,2,4-7": amlrun's --ranks and --local-ranks-filter. */
#ifndef AMLRUN_RANKSET_H
#define AMLRUN_RANKSET_H

/* Empty (n == 0) means every rank. */
struct rankset {
    int n;
    struct { int lo, hi; } *r;
};

/* Parse "0,2,4-7" (ranks >= 0); 0 or -1. */
int rankset_parse(const char *s, struct rankset *out);
/* True when r is in the set, or the set is empty. */
int rankset_has(const struct rankset *s, int r);

#endif /* AMLRUN_RANKSET_H */
