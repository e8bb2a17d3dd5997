/* A per-launch job token (see jobtoken.h). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>

#include "run/jobtoken.h"

int job_token_export(void)
{
    unsigned char bits[16];
    char hex[2 * sizeof bits + 1];
    if (getenv("AMLDIST_JOB_TOKEN") != NULL)
        return 0; /* the user's, or the head node's for the whole job */
    if (getrandom(bits, sizeof bits, 0) != (ssize_t)sizeof bits)
        return -1;
    for (size_t i = 0; i < sizeof bits; i++)
        snprintf(hex + 2 * i, 3, "%02x", bits[i]);
    return setenv("AMLDIST_JOB_TOKEN", hex, 1);
}
