/*
 * Open MPI gives mpirun's whole environment to the ranks of its own node,
 * and to the other nodes only what it forwards: `-x NAME[=VALUE]` (Open
 * MPI 4.1 forwards no family and no list: `-x 'MASTER_*'` and `-x
 * MASTER_ADDR,MASTER_PORT` warn that no such variable exists, tried for
 * real) and the MCA parameter
 * mca_base_env_list ("NAME;NAME=VALUE", on the command line or as
 * OMPI_MCA_mca_base_env_list in mpirun's environment).  A MASTER_ADDR or
 * MASTER_PORT left in mpirun's shell therefore reaches one node's ranks:
 * they would take it while the others take the launcher's master, and the
 * job hangs.  Only the ranks on mpirun's node can tell (their daemon is
 * mpirun; the remote ones never see the variable), and only from mpirun's
 * command line: Open MPI 4.1 exports no list of what -x forwarded.  The
 * variable must also be in mpirun's own environment with our value: one
 * set after mpirun (a wrapper script, an inner launcher such as
 * launch.py) is set on every node alike.  Where mpirun's command line or
 * environment cannot be read, or it names a file of options (--tune,
 * --am), nothing is decided.
 */
#include <stdlib.h>
#include <string.h>

#include "sources/sources.h"

#define DAEMON_URI "OMPI_MCA_orte_local_daemon_uri"
#define HNP_URI "OMPI_MCA_orte_hnp_uri"
#define ENV_LIST "mca_base_env_list"
#define MPIRUN_CMDLINE_MAX 32768
#define MPIRUN_ENVIRON_MAX (1 << 20)

static const struct {
    unsigned bit;
    const char *name;
} master_vars[] = {
    {AMLDIST__MASTER_ADDR_BIT, "MASTER_ADDR"},
    {AMLDIST__MASTER_PORT_BIT, "MASTER_PORT"},
};

/* `bits` less the master variables that one entry of a list (NAME,
 * NAME=VALUE) forwards; entries end at `seps` or the end. */
static unsigned forwarded(const char *list, const char *seps, unsigned bits)
{
    for (const char *e = list; *e != '\0';) {
        size_t n = strcspn(e, seps), name = strcspn(e, "=");
        if (name > n)
            name = n;
        for (size_t i = 0; i < sizeof master_vars / sizeof *master_vars; i++)
            if (name == strlen(master_vars[i].name) &&
                strncmp(master_vars[i].name, e, name) == 0)
                bits &= ~master_vars[i].bit;
        e += n;
        e += *e != '\0';
    }
    return bits;
}

/* An Open MPI mpirun's command line. */
static int is_mpirun(const char *argv, size_t len, void *unused)
{
    static const char *const names[] = {"mpirun", "mpiexec", "orterun",
                                        "oshrun", "mpirun.openmpi",
                                        "mpiexec.openmpi"};
    (void)unused;
    if (len == 0 || argv[len - 1] != '\0')
        return 0;
    const char *arg0 = strrchr(argv, '/');
    arg0 = arg0 != NULL ? arg0 + 1 : argv;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(arg0, names[i]) == 0)
            return 1;
    return 0;
}

/* `bits` less what mpirun's command line forwards; 0 when it names a
 * file of options, which may forward anything. */
static unsigned mpirun_forwards(const char *argv, size_t len, unsigned bits)
{
    const char *end = argv + len;
    for (const char *a = argv; a < end && bits; a += strlen(a) + 1) {
        const char *next = a + strlen(a) + 1;
        const char *opt = a[0] == '-' && a[1] == '-' ? a + 2
                          : a[0] == '-'              ? a + 1
                                                     : NULL;
        if (opt == NULL)
            continue;
        if (strcmp(opt, "tune") == 0 || strcmp(opt, "am") == 0)
            return 0;
        if (next >= end)
            break;
        if (strcmp(opt, "x") == 0) /* one name a -x: no list, no family */
            bits = forwarded(next, "", bits);
        else if ((strcmp(opt, "mca") == 0 || strcmp(opt, "gmca") == 0) &&
                 strcmp(next, ENV_LIST) == 0 && next + strlen(next) + 1 < end)
            bits = forwarded(next + strlen(next) + 1, ";", bits);
    }
    return bits;
}

/* `bits` less the variables whose value in mpirun's environment (`pid`)
 * is not ours: those were set after mpirun, on every node. */
static unsigned from_mpirun(const amldist__env_t *env, long pid,
                            unsigned bits)
{
    char *buf = malloc(MPIRUN_ENVIRON_MAX);
    long n = buf ? amldist__proc_read(pid, "environ", buf, MPIRUN_ENVIRON_MAX)
                 : -1;
    unsigned kept = 0;
    for (size_t i = 0; n >= 0 && n < MPIRUN_ENVIRON_MAX - 1 &&
                       i < sizeof master_vars / sizeof *master_vars;
         i++) {
        const char *name = master_vars[i].name;
        const char *ours = amldist__env_get(env, name);
        size_t len = strlen(name);
        for (const char *e = buf; ours && e < buf + n; e += strlen(e) + 1)
            if (strncmp(e, name, len) == 0 && e[len] == '=' &&
                strcmp(e + len + 1, ours) == 0)
                kept |= master_vars[i].bit;
    }
    free(buf);
    return bits & kept;
}

unsigned amldist__ompi_node_only(const amldist__env_t *env)
{
    const char *uri = amldist__env_get(env, DAEMON_URI);
    const char *hnp = amldist__env_get(env, HNP_URI);
    /* mpirun's own node: our daemon is mpirun. */
    if (uri == NULL || hnp == NULL || strcmp(uri, hnp) != 0 ||
        !amldist__env_own(env, HNP_URI))
        return 0;
    unsigned bits = 0;
    for (size_t i = 0; i < sizeof master_vars / sizeof *master_vars; i++)
        if (amldist__env_own(env, master_vars[i].name))
            bits |= master_vars[i].bit;
    const char *list = amldist__env_get(env, "OMPI_MCA_" ENV_LIST);
    if (bits != 0 && list != NULL)
        bits = forwarded(list, ";", bits);
    if (bits == 0)
        return 0;
    char *buf = malloc(MPIRUN_CMDLINE_MAX);
    size_t len;
    if (buf == NULL)
        return 0;
    long pid = amldist__ancestor(is_mpirun, NULL, buf, MPIRUN_CMDLINE_MAX,
                                 &len);
    bits = pid < 0 ? 0 : mpirun_forwards(buf, len, bits);
    free(buf);
    return bits ? from_mpirun(env, pid, bits) : 0;
}
