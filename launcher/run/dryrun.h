/* --dry-run: what amlrun would start, rank by rank, starting nothing. */
#ifndef AMLRUN_DRYRUN_H
#define AMLRUN_DRYRUN_H

#include <stdio.h>

#include "cli/mode.h"
#include "worker/command.h"
#include "worker/workerenv.h"

/* One line: "rank R (local L, node N): NAME=value ... -- argv..." with the
 * variables that differ from `base` (all of them when `all`), quoted for a
 * shell where needed; the command with the path execve() gets. */
void dryrun_line(FILE *f, const struct worker_id *id, char *const *env,
                 char *const *base, const char *path, char *const *argv,
                 int all);

/* The job's secret, shown by --dry-run -v as "(hidden)": true for the
 * entry AMLDIST_JOB_TOKEN=... */
int dryrun_hidden(const char *entry);
#define DRYRUN_HIDDEN "(hidden)"

/* --dry-run=json: one document for this node, rank by rank: the variables
 * as in the text (all of them with -v), the argv, the binding.  0, or an
 * exit status. */
int dryrun_json(const struct amlrun_opts *o, const struct plan *p,
                const struct command *c, struct env_spec *es,
                const struct amlrun_binding *b, FILE *f);

#endif /* AMLRUN_DRYRUN_H */
