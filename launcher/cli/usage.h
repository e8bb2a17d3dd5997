/* amlrun --help and --version. */
#ifndef AMLRUN_USAGE_H
#define AMLRUN_USAGE_H

#include <stdio.h>

void usage_print(FILE *f);
void version_print(FILE *f);

#endif /* AMLRUN_USAGE_H */
