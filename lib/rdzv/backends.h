/*
 * The registry of rendezvous backends (backend.h), one row each: the
 * name --rdzv-backend gives it (torchrun's), and its table.  The first
 * row is the default, whose endpoint has no scheme ("HOST:PORT"); another
 * row's endpoint is "NAME://...".  A new backend is its own folder under
 * lib/rdzv/ and one row here: backends.c reads the tables, and amlrun's
 * command line the names alone (amldist__rz_backend_name(): a header
 * only, nothing of the library's to link).
 */
#ifndef AMLDIST_RDZV_BACKENDS_H
#define AMLDIST_RDZV_BACKENDS_H

#define AMLDIST__RZ_BACKENDS(X)                                                \
    X("c10d", amldist__rz_tcp_backend) /* tcp/: the agents meet at a host */ \
    X("etcd", amldist__rz_etcd_backend) /* etcd/: in an etcd v3 cluster */

/* The name of row i, NULL past the last. */
static inline const char *amldist__rz_backend_name(int i)
{
#define AMLDIST__RZ_BACKEND_NAME(name, ops) name,
    static const char *const names[] = {
        AMLDIST__RZ_BACKENDS(AMLDIST__RZ_BACKEND_NAME)};
#undef AMLDIST__RZ_BACKEND_NAME
    return i >= 0 && i < (int)(sizeof names / sizeof *names) ? names[i]
                                                             : 0;
}

#endif /* AMLDIST_RDZV_BACKENDS_H */
