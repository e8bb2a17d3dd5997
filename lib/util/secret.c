/*
 * The job's secret (see secret.h): one reader for the control plane, the
 * bootstrap and amlrun (which links this file as an object of its own, to
 * refuse a bad file before anything starts and to make one).
 *
 * A file is opened with O_NOFOLLOW and judged by fstat() of the descriptor
 * that is then read, so nothing can swap it between the check and the read.
 * Its content is the secret, less trailing newlines ("\n", "\r\n"): the file
 * `amlrun --make-secret` writes (64 hex digits and a newline) and
 * AMLDIST_JOB_TOKEN="$(cat FILE)" are the same secret.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/secret.h"

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
                         : "not a regular file";
}

/* 0 when a secret of `len` bytes from `what` is long enough, else -1 with
 * `why` naming it, its length, the minimum and how to make a good one. */
static int long_enough(size_t len, const char *what, char *why,
                       size_t why_size)
{
    if (len >= AMLDIST__SECRET_MIN)
        return 0;
    snprintf(why, why_size, "%s: %zu byte%s, under the %d a secret needs "
             "(a short one can be guessed offline from one sniffed "
             "handshake), refused; make one with amlrun --make-secret, or "
             "head -c 32 /dev/urandom | base64", what, len,
             len == 1 ? "" : "s", AMLDIST__SECRET_MIN);
    return -1;
}

/* Read `fd`'s secret: 1, or -1 with `why`. */
static int read_secret(int fd, const char *path, amldist__secret_t *out,
                       char *why, size_t why_size)
{
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, out->bytes + len, sizeof out->bytes - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(why, why_size, "secret file %s: cannot read it: %s",
                     path, strerror(errno));
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len == sizeof out->bytes) {
            /* The longest secret and the newline `echo` or an editor ends
             * its file with: the newline is not the secret's. */
            char more[3];
            ssize_t m = read(fd, more, sizeof more);
            int eol = (m == 1 && more[0] == '\n') ||
                      (m == 2 && more[0] == '\r' && more[1] == '\n');
            if (m > 0 && !(eol && read(fd, more, 1) == 0)) {
                amldist__secret_clear(out);
                snprintf(why, why_size, "secret file %s: longer than %d "
                         "bytes", path, AMLDIST__SECRET_MAX);
                return -1;
            }
            break;
        }
    }
    while (len > 0 && (out->bytes[len - 1] == '\n' ||
                       out->bytes[len - 1] == '\r'))
        out->bytes[--len] = 0;
    if (len == 0) {
        snprintf(why, why_size, "secret file %s: empty (make one with "
                 "amlrun --make-secret)", path);
        return -1;
    }
    char what[sizeof out->source + 16];
    snprintf(what, sizeof what, "secret file %s", path);
    if (long_enough(len, what, why, why_size) < 0) {
        amldist__secret_clear(out);
        return -1;
    }
    out->len = len;
    snprintf(out->source, sizeof out->source, "%s", path);
    return 1;
}

/* The secret in file `path`: 1; 0 when it does not exist and need not;
 * -1 with `why` when it is refused. */
static int load_file(const char *path, int required, amldist__secret_t *out,
                     char *why, size_t why_size)
{
    const char *from = required ? "AMLDIST_JOB_TOKEN_FILE=" : "secret file ";
    if (path[0] != '/') {
        snprintf(why, why_size, "%s%s: not an absolute path", from, path);
        return -1;
    }
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
                            O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        struct stat st;
        if (e == ENOENT && !required)
            return 0;
        if (e == ELOOP && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
            snprintf(why, why_size, "%s%s: a symbolic link, refused (name "
                     "the file itself)", from, path);
        else
            snprintf(why, why_size, "%s%s: %s", from, path, strerror(e));
        return -1;
    }
    struct stat st;
    int rc = -1;
    uid_t me = geteuid();
    if (fstat(fd, &st) < 0)
        snprintf(why, why_size, "%s%s: %s", from, path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        snprintf(why, why_size, "%s%s: %s (mode %04o), not a regular file",
                 from, path, kind_of(st.st_mode),
                 (unsigned)(st.st_mode & 07777));
    else if (st.st_uid != me)
        snprintf(why, why_size, "%s%s: owned by uid %u, not by this user "
                 "(uid %u), refused (mode %04o)", from, path,
                 (unsigned)st.st_uid, (unsigned)me,
                 (unsigned)(st.st_mode & 07777));
    else if (st.st_mode & 077)
        snprintf(why, why_size, "%s%s: mode %04o lets group or others in, "
                 "refused (chmod 600 %s)", from, path,
                 (unsigned)(st.st_mode & 07777), path);
    else
        rc = read_secret(fd, path, out, why, why_size);
    close(fd);
    return rc;
}

int amldist__secret_path(char *buf, size_t size)
{
    const char *base = getenv("XDG_CONFIG_HOME");
    /* The XDG rule: a relative value is ignored. */
    if (base && base[0] == '/')
        return snprintf(buf, size, "%s/amldist/secret", base) < (int)size
                   ? 0 : -1;
    const char *home = getenv("HOME");
    if (!home || home[0] != '/') {
        struct passwd *pw = getpwuid(geteuid());
        home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
    }
    if (!home)
        return -1;
    return snprintf(buf, size, "%s/.config/amldist/secret", home) < (int)size
               ? 0 : -1;
}

int amldist__secret_load(amldist__secret_t *out, char *why, size_t why_size)
{
    char path[sizeof out->source];
    memset(out, 0, sizeof *out);
    if (why_size)
        why[0] = '\0';
    const char *v = getenv("AMLDIST_JOB_TOKEN");
    if (v && *v) {
        size_t len = strlen(v);
        if (len > sizeof out->bytes) {
            snprintf(why, why_size, "AMLDIST_JOB_TOKEN: longer than %d bytes",
                     AMLDIST__SECRET_MAX);
            return -1;
        }
        if (long_enough(len, "AMLDIST_JOB_TOKEN", why, why_size) < 0)
            return -1;
        memcpy(out->bytes, v, len);
        out->len = len;
        snprintf(out->source, sizeof out->source, "AMLDIST_JOB_TOKEN");
        return 1;
    }
    v = getenv("AMLDIST_JOB_TOKEN_FILE");
    if (v && *v) {
        if (strlen(v) >= sizeof path) {
            snprintf(why, why_size, "AMLDIST_JOB_TOKEN_FILE: a path longer "
                     "than %zu bytes", sizeof path - 1);
            return -1;
        }
        return load_file(v, 1, out, why, why_size);
    }
    if (amldist__secret_path(path, sizeof path) < 0)
        return 0;
    return load_file(path, 0, out, why, why_size);
}

void amldist__secret_clear(amldist__secret_t *s)
{
    explicit_bzero(s->bytes, sizeof s->bytes);
    s->len = 0;
}

/* mkdir `path` 0700 unless it is there. */
static int make_dir(const char *path, char *why, size_t why_size)
{
    if (mkdir(path, 0700) == 0 || errno == EEXIST)
        return 0;
    snprintf(why, why_size, "cannot make the directory %s: %s", path,
             strerror(errno));
    return -1;
}

int amldist__secret_make(char *path, size_t size, char *why, size_t why_size)
{
    if (amldist__secret_path(path, size) < 0) {
        snprintf(why, why_size, "no place for a secret: neither "
                 "XDG_CONFIG_HOME nor a home directory is known");
        return -1;
    }
    /* Each missing directory above the file, from the top: those of
     * ${XDG_CONFIG_HOME:-~/.config} too, all 0700. */
    for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        int rc = make_dir(path, why, why_size);
        *s = '/';
        if (rc < 0)
            return -1;
    }
    unsigned char bits[32];
    if (getrandom(bits, sizeof bits, 0) != (ssize_t)sizeof bits) {
        snprintf(why, why_size, "no randomness from the kernel: %s",
                 strerror(errno));
        return -1;
    }
    char hex[2 * sizeof bits + 2];
    for (size_t i = 0; i < sizeof bits; i++)
        snprintf(hex + 2 * i, 3, "%02x", bits[i]);
    explicit_bzero(bits, sizeof bits);
    hex[2 * sizeof bits] = '\n';
    hex[2 * sizeof bits + 1] = '\0';
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0600);
    if (fd < 0) {
        int e = errno;
        explicit_bzero(hex, sizeof hex);
        if (e == EEXIST) {
            snprintf(why, why_size, "%s exists already: not overwritten "
                     "(remove it first to make a new secret; every node "
                     "must then have the new one)", path);
            return 1;
        }
        snprintf(why, why_size, "cannot create %s: %s", path, strerror(e));
        return -1;
    }
    size_t len = strlen(hex), done = 0;
    while (done < len) {
        ssize_t n = write(fd, hex + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    explicit_bzero(hex, sizeof hex);
    int e = done < len ? (errno ? errno : EIO) : 0;
    if (!e && fsync(fd) < 0)
        e = errno;
    if (close(fd) < 0 && !e)
        e = errno;
    if (e) {
        unlink(path);
        snprintf(why, why_size, "cannot write %s: %s", path, strerror(e));
        return -1;
    }
    return 0;
}
