/* Temporary files where Python's tempfile puts them (see tmpdir.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output/msg.h"
#include "output/tmpdir.h"

/* tempfile's order: the variables, then the usual places, then here. */
static const char *const tmp_vars[] = {"TMPDIR", "TEMP", "TMP"};
static const char *const tmp_dirs[] = {"/tmp", "/var/tmp", "/usr/tmp"};
enum { NVARS = 3, NCANDS = NVARS + 3 + 1 };

int tmpdir_asked(void)
{
    for (int k = 0; k < NVARS; k++) {
        const char *v = getenv(tmp_vars[k]);
        if (v && *v)
            return 1;
    }
    return 0;
}

/* Candidate k as an absolute directory in buf ("" to skip it: a variable
 * not set, or empty, which tempfile skips too); *label names it. */
static void candidate(int k, char *buf, size_t size, const char **label)
{
    const char *dir = NULL;
    char cwd[PATH_MAX];
    *label = NULL;
    if (k < NVARS) {
        dir = getenv(tmp_vars[k]);
        *label = tmp_vars[k];
    } else if (k < NVARS + 3) {
        dir = tmp_dirs[k - NVARS];
    } else if (getcwd(cwd, sizeof cwd)) {
        dir = cwd;
    }
    buf[0] = '\0';
    if (!dir || !*dir)
        return;
    /* tempfile takes a relative one from the current directory (abspath):
     * the error files' paths must survive a worker's chdir. */
    if (dir[0] == '/' || !getcwd(cwd, sizeof cwd))
        snprintf(buf, size, "%s", dir);
    else if ((size_t)snprintf(buf, size, "%s/%s", cwd, dir) >= size)
        buf[0] = '\0';
}

/* One try in DIR; 0, or -1 with errno. */
static int try_make(const char *dir, char *out, size_t size,
                    const char *leaf, int dir_wanted, int *fd)
{
    size_t n = strlen(dir);
    const char *sep = n && dir[n - 1] == '/' ? "" : "/";
    if ((size_t)snprintf(out, size, "%s%s%s", dir, sep, leaf) >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (dir_wanted)
        return mkdtemp(out) ? 0 : -1;
    *fd = mkostemp(out, O_CLOEXEC);
    return *fd >= 0 ? 0 : -1;
}

int tmpdir_make(char *out, size_t size, const char *leaf, int dir_wanted,
                int *fd, int verbose, const char *what)
{
    char tried[768] = "", first[PATH_MAX + 64] = "";
    size_t len = 0;
    for (int k = 0; k < NCANDS; k++) {
        char dir[PATH_MAX];
        const char *label;
        candidate(k, dir, sizeof dir, &label);
        if (!*dir)
            continue;
        if (try_make(dir, out, size, leaf, dir_wanted, fd) == 0) {
            if (*first && verbose)
                msg("%s: temporary files in %s instead, as Python's "
                    "tempfile falls back", first, dir);
            return 0;
        }
        int err = errno;
        if (!*first)
            snprintf(first, sizeof first, "%s%s%s: %s", label ? label : "",
                     label ? "=" : "", dir, strerror(err));
        if (len < sizeof tried)
            len += (size_t)snprintf(tried + len, sizeof tried - len,
                                    "%s%s%s%s (%s)", len ? ", " : "",
                                    label ? label : "", label ? "=" : "",
                                    dir, strerror(err));
    }
    msg("%s: no usable temporary directory (tried %s)", what,
        *tried ? tried : "none");
    return -1;
}
