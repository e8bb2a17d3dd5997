/*
 * Rank lists written as ranges: "0-6,8-15" (the form that --ranks and
 * --local-ranks-filter read, launcher/cli/rankset.c).  For the reports
 * that name many ranks on one line: the merged stacks, the ranks still
 * running.
 */
#ifndef AMLRUN_RANKLIST_H
#define AMLRUN_RANKLIST_H

#include <stddef.h>

/* Write the n ranks (ascending; a repeat is written once) into buf as
 * ranges.  When they do not fit in size bytes, as many whole items as fit
 * with ",..." after them (or "..." alone).  Always NUL-terminated (size >=
 * 4); 0 when all of it was written, 1 when cut. */
int ranklist_format(const int *ranks, size_t n, char *buf, size_t size);

#endif /* AMLRUN_RANKLIST_H */
