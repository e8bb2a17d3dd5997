/* Placeholder until the launcher lands (issue 3). */
#include <stdio.h>

#include "amldist.h"

int main(void)
{
    printf("amlrun (libamldist %s)\n", amldist_version_string());
    return 0;
}
