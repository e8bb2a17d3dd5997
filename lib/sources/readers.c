/*
 * The table of readers: one row per launcher.  Within a kind the rows'
 * order is the precedence of amldist-env(7) ("the MPI family, first found:
 * Open MPI, MVAPICH2, MPICH or Intel MPI, PMIx"); the kinds' own order is
 * layout.c's.
 */
#include "sources/sources.h"

static const struct {
    amldist__read_kind_t kind;
    int (*read)(const amldist__env_t *env, struct amldist *r);
    int (*master)(const amldist__env_t *env, const struct amldist *layout,
                  struct amldist *r);
} readers[] = {
    {AMLDIST__READ_CANONICAL, amldist__src_canonical, NULL},
    {AMLDIST__READ_MPI, amldist__src_ompi, NULL},
    {AMLDIST__READ_MPI, amldist__src_mvapich2, NULL},
    {AMLDIST__READ_MPI, amldist__src_mpich, NULL},
    {AMLDIST__READ_MPI, amldist__src_pmix, NULL},
    {AMLDIST__READ_OUTER, amldist__src_slurm, NULL},
    {AMLDIST__READ_MASTER, NULL, amldist__src_azureml},
};

int amldist__read_first(amldist__read_kind_t kind, const amldist__env_t *env,
                        const struct amldist *layout, struct amldist *r)
{
    for (size_t i = 0; i < sizeof readers / sizeof *readers; i++) {
        if (readers[i].kind != kind)
            continue;
        int rc = readers[i].master != NULL
                     ? readers[i].master(env, layout, r)
                     : readers[i].read(env, r);
        if (rc != 0)
            return rc;
    }
    return 0;
}
