/* --dry-run: what amlrun would start, rank by rank, starting nothing. */
#ifndef AMLRUN_DRYRUN_H
#define AMLRUN_DRYRUN_H

#include <stdio.h>

#include "run/workerenv.h"

/* One line: "rank R (local L, node N): NAME=value ... -- argv..." with the
 * variables that differ from `base` (all of them when `all`), quoted for a
 * shell where needed; the command with the path execve() gets. */
void dryrun_line(FILE *f, const struct worker_id *id, char *const *env,
                 char *const *base, const char *path, char *const *argv,
                 int all);

#endif /* AMLRUN_DRYRUN_H */
