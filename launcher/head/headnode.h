/*
 * Head-node mode: `amlrun --hostfile FILE ...` or `--hosts a,b` (or under a
 * Slurm allocation) starts one per-node amlrun on every host through mpirun
 * or srun, by building that command and exec'ing it.
 */
#ifndef AMLRUN_HEADNODE_H
#define AMLRUN_HEADNODE_H

struct headnode_opts {
    const char *hostfile; /* --hostfile FILE (Open MPI / DeepSpeed format) */
    const char *hosts;    /* --hosts a,b,c */
    const char *launcher; /* --launcher mpirun|slurm; NULL: detect */
    int dry_run;          /* --dry-run: print the command, run nothing */
};

/* True when these options (or the environment: SLURM_JOB_ID with
 * --launcher slurm) ask for head-node mode. */
int headnode_wanted(const struct headnode_opts *o);

/* Build the mpirun/srun command that runs `self` (amlrun's own path) once per
 * host with amlrun's original argv minus the head-node options, then exec it
 * (or print it with dry_run).  Returns only on error or dry run: the exit
 * status for amlrun. */
int headnode_run(const struct headnode_opts *o, const char *self, int argc,
                 char *const argv[]);

#endif /* AMLRUN_HEADNODE_H */
