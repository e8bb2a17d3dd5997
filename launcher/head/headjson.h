/*
 * Head-node mode's --dry-run=json: the command it would exec (argv, one
 * string each, not a shell line) with the launcher and the hosts, as one
 * JSON document on stdout, so that a script reads what would run without
 * parsing shell quoting.
 */
#ifndef AMLRUN_HEADJSON_H
#define AMLRUN_HEADJSON_H

struct hostlist;

/* launcher: "mpirun" or "srun"; slots: the --nproc-per-node passed on, or
 * 0 (none: null).  Returns 0, or -1 when stdout failed. */
int headnode_print_json(const char *launcher, const struct hostlist *hl,
                        int slots, char *const argv[]);

#endif /* AMLRUN_HEADJSON_H */
