/*
 * The bootstrap's settings: job token, port and timeout, from the options or
 * this process's environment.  Every rank must arrive at the same token and
 * port from its own environment, so only values that a launcher gives every
 * rank of one job alike are used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap_internal.h"
#include "util/parse.h"
#include "util/secret.h"

/* FNV-1a, 64 bits: the token only has to tell jobs apart, not resist an
 * attacker (the job's secret and the channel do that: net/chan.h). */
uint64_t amldist__bs_hash(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* In order: the first one set names the job.  Open MPI's job id comes before
 * Slurm's step, because under `mpirun` inside an allocation the ranks that
 * mpirun starts itself and those started through srun see different steps. */
static const char *const job_vars[] = {
    "TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
    "SLURM_JOB_ID", "AZUREML_RUN_ID"};

int amldist__bs_token(const char *explicit_token, const char *host, int port,
                      int world, uint64_t *token, char *source,
                      size_t source_size)
{
    const char *v;
    char tail[320];
    if (explicit_token) {
        if (!*explicit_token)
            return amldist__fail(AMLDIST_EINVAL,
                                 "bootstrap token in the options is empty");
        *token = amldist__bs_hash(explicit_token, AMLDIST__BS_HASH_START);
        amldist__strlcpy(source, "the options", source_size);
        return 0;
    }
    uint64_t h = amldist__bs_hash("amldist-bootstrap", AMLDIST__BS_HASH_START);
    const char *name = NULL;
    for (size_t i = 0; i < sizeof job_vars / sizeof *job_vars && !name; i++) {
        if ((v = env(job_vars[i]))) {
            name = job_vars[i];
            h = amldist__bs_hash(name, h);
            h = amldist__bs_hash(v, h);
            if (!strcmp(name, "SLURM_JOB_ID") && (v = env("SLURM_STEP_ID")))
                h = amldist__bs_hash(v, amldist__bs_hash(".", h));
        }
    }
    /* Always the rendezvous address and size too: two jobs that share a
     * scheduler id but not a master (or have none) still differ. */
    snprintf(tail, sizeof tail, "|%s|%d|%d", host, port, world);
    *token = amldist__bs_hash(tail, h);
    snprintf(source, source_size, "%s%sMASTER_ADDR:port/WORLD_SIZE",
             name ? name : "", name ? " + " : "");
    return 0;
}

int amldist__bs_port(int explicit_port, int master_port, int *port)
{
    const char *v;
    if (explicit_port > 0) {
        if (explicit_port > 65535)
            return amldist__fail(AMLDIST_ERANGE,
                                 "bootstrap port %d in the options: must be "
                                 "1 .. 65535",
                                 explicit_port);
        *port = explicit_port;
        return 0;
    }
    if ((v = env("AMLDIST_BOOTSTRAP_PORT"))) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*v < '0' || *v > '9' || *end)
            return amldist__fail(AMLDIST_EPARSE,
                                 "AMLDIST_BOOTSTRAP_PORT=%s: not a port number",
                                 v);
        if (n < 1 || n > 65535)
            return amldist__fail(AMLDIST_ERANGE,
                                 "AMLDIST_BOOTSTRAP_PORT=%s: must be 1 .. 65535",
                                 v);
        *port = (int)n;
        return 0;
    }
    if (master_port < 1 || master_port > 65535)
        return amldist__fail(AMLDIST_EMISSING,
                             "no bootstrap port: MASTER_PORT is unknown and "
                             "AMLDIST_BOOTSTRAP_PORT is not set");
    /* PyTorch's TCPStore holds MASTER_PORT itself. */
    *port = master_port < 65535 ? master_port + 1 : master_port - 1;
    return 0;
}

int amldist__bs_timeout(int explicit_ms, int *ms)
{
    const char *v;
    long long n;
    if (explicit_ms > 0) {
        *ms = explicit_ms;
        return 0;
    }
    if ((v = env("AMLDIST_BOOTSTRAP_TIMEOUT"))) {
        if (amldist__parse_seconds_ms(v, &n) < 0)
            return amldist__fail(AMLDIST_EPARSE,
                                 "AMLDIST_BOOTSTRAP_TIMEOUT=%s: expected "
                                 "seconds, more than 0 and at most a week "
                                 "(e.g. 30 or 2.5)",
                                 v);
        *ms = (int)n;
        return 0;
    }
    *ms = AMLDIST_BOOTSTRAP_TIMEOUT_MS;
    return 0;
}

int amldist__bs_secure(amldist__bs_params_t *p)
{
    amldist__secret_t secret;
    char why[400];
    int have = amldist__secret_load(&secret, why, sizeof why);
    if (have < 0)
        return amldist__fail(AMLDIST_EINVAL, "rank %d: bootstrap: %s",
                             p->rank, why);
    if (have == 0)
        return 0;
    int rc = amldist__chan_keys(&p->keys, "bootstrap", secret.bytes,
                                secret.len);
    amldist__strlcpy(p->secret_source, secret.source, sizeof p->secret_source);
    amldist__secret_clear(&secret);
    const char *origin = env(AMLDIST__SECRET_ORIGIN_VAR);
    if (rc < 0 && strcmp(p->secret_source, "AMLDIST_JOB_TOKEN") == 0 &&
        origin && strcmp(origin, AMLDIST__SECRET_ORIGIN_ONE_NODE) == 0)
        /* amlrun's own token for one machine: every rank is on it, the
         * bootstrap's bytes never leave it, and its token is the one of
         * the job's variables, as before amlrun made one: no channel. */
        return 0;
    if (rc < 0)
        return amldist__fail(AMLDIST_ESYS, "rank %d: bootstrap: the job has a "
                             "secret, and OpenSSL 3's libcrypto.so.3 cannot "
                             "be loaded or failed (install libssl3)",
                             p->rank);
    p->secure = 1;
    /* The secret names the job, as AMLDIST_JOB_TOKEN did before it was a
     * secret (ranks whose launchers' variables differ still agree), and
     * neither it nor a digest of it goes on the wire: the channel proves
     * it, the token is 0. */
    if (strcmp(p->token_source, "the options") != 0) {
        p->token = 0;
        amldist__strlcpy(p->token_source, "the job's secret",
                         sizeof p->token_source);
    }
    return 0;
}
