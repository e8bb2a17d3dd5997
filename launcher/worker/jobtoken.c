/* A per-launch job token and the job's secret (see jobtoken.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "output/msg.h"
#include "worker/jobtoken.h"
#include "util/secret.h"

int job_token_export(int one_node)
{
    unsigned char bits[16];
    char hex[2 * sizeof bits + 1];
    /* A token that crosses machines is never the one-node kind, whoever
     * made it: the marker an outer amlrun left does not pass on. */
    if (!one_node)
        unsetenv(AMLDIST__SECRET_ORIGIN_VAR);
    if (getenv("AMLDIST_JOB_TOKEN") != NULL)
        return 0; /* the user's, or the head node's for the whole job */
    if (getrandom(bits, sizeof bits, 0) != (ssize_t)sizeof bits)
        return -1;
    for (size_t i = 0; i < sizeof bits; i++)
        snprintf(hex + 2 * i, 3, "%02x", bits[i]);
    explicit_bzero(bits, sizeof bits);
    int rc = setenv("AMLDIST_JOB_TOKEN", hex, 1);
    explicit_bzero(hex, sizeof hex);
    /* Ours, for one machine: the bootstrap may go without the channel
     * where libcrypto cannot be loaded (lib/bootstrap/config.c). */
    if (rc == 0 && one_node)
        rc = setenv(AMLDIST__SECRET_ORIGIN_VAR, AMLDIST__SECRET_ORIGIN_ONE_NODE, 1);
    return rc;
}

int job_secret_check(int several, int notice, int plane)
{
    static amldist__secret_t s; /* 4 KiB: not on the stack */
    char why[600];
    const char *req = getenv("AMLDIST_REQUIRE_SECRET");
    int require = req && !strcmp(req, "1");
    if (req && *req && !require && strcmp(req, "0")) {
        msg("AMLDIST_REQUIRE_SECRET=%s: want 1 (refuse a job of several "
            "nodes without a secret) or 0", req);
        return AMLRUN_EXIT_USAGE;
    }
    int got = amldist__secret_load(&s, why, sizeof why);
    amldist__secret_clear(&s);
    if (got < 0) {
        msg("%s; no worker started", why);
        return AMLRUN_EXIT_USAGE;
    }
    if (got > 0 || !several)
        return -1;
    if (require) {
        msg("AMLDIST_REQUIRE_SECRET=1 and this job of several nodes has no "
            "secret: refused; make one with amlrun --make-secret (every "
            "node must have the same file), or set AMLDIST_JOB_TOKEN_FILE or "
            "AMLDIST_JOB_TOKEN on every node; no worker started");
        return AMLRUN_EXIT_USAGE;
    }
    /* Per-process mode (srun or mpirun starts amlrun in place) has no
     * control plane: the workers' bootstrap is all there is to close. */
    if (notice && plane)
        msg("note: no secret: this job's control plane and bootstrap are "
            "open to anyone who can reach their ports; amlrun --make-secret "
            "closes them (see amldist_rdzv(3), SECURITY)");
    else if (notice)
        msg("note: no secret: this job's bootstrap is open to anyone who "
            "can reach its port; amlrun --make-secret closes it (see "
            "amldist_bootstrap(3), JOB TOKEN)");
    return -1;
}

int job_secret_make(void)
{
    char path[300], why[600];
    int rc = amldist__secret_make(path, sizeof path, why, sizeof why);
    if (rc < 0) {
        msg("--make-secret: %s", why);
        return AMLRUN_EXIT_SYSTEM;
    }
    if (rc > 0) {
        msg("--make-secret: %s", why);
        return 1;
    }
    printf("%s\n", path);
    return 0;
}
