/* amldist_bootstrap_bcast(): the layout and the settings in, one exchange
 * out. */
#include <stdatomic.h>
#include <string.h>

#include "bootstrap/bootstrap_internal.h"

/* Calls are numbered so that a rank already at its next call, reaching the
 * server of the previous one, is told to come back instead of taking the
 * previous blob.  Every rank makes the same sequence of calls. */
static atomic_uint calls;

int amldist__bs_exchange(const amldist__bs_params_t *p, void *blob, size_t len)
{
    if (p->world <= 1)
        return 0;
    return p->rank == 0 ? amldist__bs_serve(p, blob, len)
                        : amldist__bs_fetch(p, blob, len);
}

/* Bytes of amldist_bootstrap_options_t in each version (util/optversion.c).  A
 * version that adds field F makes the last entry
 * offsetof(amldist_bootstrap_options_t, F) and appends the sizeof. */
static const size_t options_sizes[AMLDIST_BOOTSTRAP_OPTIONS_VERSION + 1] = {
    [1] = sizeof(amldist_bootstrap_options_t),
};
static const amldist__opts_kind_t options_kind = {
    "amldist_bootstrap_options_t", "AMLDIST_BOOTSTRAP_OPTIONS_INIT",
    AMLDIST_BOOTSTRAP_OPTIONS_VERSION, options_sizes};

int amldist__bs_setup(const amldist_t *layout,
                      const amldist_bootstrap_options_t *opts,
                      amldist__bs_params_t *p)
{
    amldist_bootstrap_options_t current = AMLDIST_BOOTSTRAP_OPTIONS_INIT;
    const char *host;
    int rc;

    memset(p, 0, sizeof *p);
    p->round = atomic_fetch_add(&calls, 1) + 1;
    if (opts && (rc = amldist__opts_copy(&options_kind, "bootstrap",
                                         &current, opts)) < 0)
        return rc;
    opts = &current;
    if ((p->rank = amldist_rank(layout)) < 0)
        return p->rank;
    if ((p->world = amldist_world_size(layout)) < 0)
        return p->world;
    if (p->world <= 1)
        return 0;
    if (!(host = amldist_master_addr(layout)))
        return AMLDIST_EUNKNOWN; /* the getter said why */
    if (amldist__strlcpy(p->host, host, sizeof p->host) < 0)
        return amldist__fail(AMLDIST_ERANGE, "MASTER_ADDR=%s: too long", host);
    /* An unknown MASTER_PORT is fine when the port is set explicitly. */
    if ((rc = amldist_master_port(layout)) < 0)
        amldist__clear_error();
    if ((rc = amldist__bs_port(opts->port, rc, &p->port)) < 0 ||
        (rc = amldist__bs_timeout(opts->timeout_ms, &p->timeout_ms)) < 0 ||
        (rc = amldist__bs_token(opts->token, p->host, p->port, p->world,
                                &p->token, p->token_source,
                                sizeof p->token_source)) < 0)
        return rc;
    return amldist__bs_secure(p);
}

int amldist_bootstrap_bcast(const amldist_t *layout, void *buf, size_t len,
                            const amldist_bootstrap_options_t *opts)
{
    amldist__bs_params_t p;
    int rc;

    amldist__clear_error();
    if (!buf || len == 0 || len > AMLDIST_BOOTSTRAP_MAX_LEN) {
        /* Numbered all the same: the ranks' calls stay in step. */
        amldist__bs_setup(layout, opts, &p);
        return amldist__fail(AMLDIST_EINVAL,
                             "bootstrap buffer of %zu bytes%s: must be 1 .. %d",
                             len, buf ? "" : " at NULL",
                             AMLDIST_BOOTSTRAP_MAX_LEN);
    }
    if ((rc = amldist__bs_setup(layout, opts, &p)) < 0)
        return rc;
    rc = amldist__bs_exchange(&p, buf, len);
    amldist__chan_keys_clear(&p.keys);
    return rc;
}
