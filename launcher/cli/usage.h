/* amlrun --help and --version. */
#ifndef AMLRUN_USAGE_H
#define AMLRUN_USAGE_H

#include <stdio.h>

void usage_print(FILE *f);
/* amlrun's and libamldist's versions; with `python` (--version -v, the
 * Python amlrun would run) also what was built in and is found at run
 * time: the library's amldist_build_info(), Slurm, the Python module
 * (versioninfo.c). */
void version_print(FILE *f, const char *python);
/* The lines --version -v adds, "    name: value", aligned as ompi_info's. */
void version_details(FILE *f, const char *python);

#endif /* AMLRUN_USAGE_H */
