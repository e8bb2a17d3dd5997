/*
 * "Did you mean": for a long or short option amlrun lacks, the option a
 * user of mpirun or srun meant by it (--tag-output, --label: --prefix), or
 * the one a typo is nearest to, from the option table.
 */
#ifndef AMLRUN_OPTSUGGEST_H
#define AMLRUN_OPTSUGGEST_H

/* For `word`, an option amlrun lacks as it was typed ("--tag-output",
 * "--nproc_per_nodes", "-np"): amlrun's option that mpirun's or srun's
 * name means, or the one a typo is nearest to, or NULL.  *whose says which
 * launcher's name it was ("mpirun's"), or is NULL for a typo. */
const char *optsuggest(const char *word, const char **whose);

#endif /* AMLRUN_OPTSUGGEST_H */
