/* The root-cause summary (see rootcause.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "output/errorfile.h"
#include "output/exitstatus.h"
#include "output/msg.h"
#include "output/rootcause.h"

/* Read a worker's error file: at most ERRORFILE_MAX + 1 bytes (more is
 * refused by the parser), only from a regular file (a worker could leave a
 * FIFO there: O_NONBLOCK keeps the open from waiting on it).  The bytes in
 * a new *buf, or NULL with why[] filled in. */
static char *read_bounded(const char *path, size_t *len, char *why,
                          size_t whysz)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK |
                            O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            snprintf(why, whysz, "not written");
        else
            snprintf(why, whysz, "cannot open it: %s", strerror(errno));
        return NULL;
    }
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, whysz, "not a regular file");
    } else if (!(buf = malloc(ERRORFILE_MAX + 1))) {
        snprintf(why, whysz, "out of memory");
    } else {
        size_t n = 0;
        ssize_t k;
        while (n < ERRORFILE_MAX + 1 &&
               ((k = read(fd, buf + n, ERRORFILE_MAX + 1 - n)) > 0 ||
                (k < 0 && errno == EINTR)))
            if (k > 0)
                n += (size_t)k;
        *len = n;
    }
    close(fd);
    return buf;
}

/* Text from a worker, shown safely: control characters (a terminal
 * escape, say) become '?'; each line after the first is indented. */
static void put_text(FILE *f, const char *s, const char *indent)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n') {
            if (s[1])
                fprintf(f, "\namlrun: %s", indent);
        } else if (c < 0x20 && c != '\t') {
            fputc('?', f);
        } else if (c == 0x7f) {
            fputc('?', f);
        } else {
            fputc(c, f);
        }
    }
    fputc('\n', f);
}

/* torchrun's exit code: the status, or minus the signal. */
static int exitcode(int status)
{
    if (WIFSIGNALED(status))
        return -WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : status_exit_code(status);
}

/* The copy for an agent above amlrun, as torch's dump_error_file makes it:
 * the same JSON with "errorCode" set in the inner message object (a
 * member added last wins in Python's json), written as a new file. */
static void forward(const char *buf, size_t len, const struct errorfile *ef,
                    int code, const char *dest)
{
    char add[48] = "";
    size_t at = len;
    if (ef->inner_close > 0 && code != 0) {
        at = ef->inner_close;
        snprintf(add, sizeof add, "%s\"errorCode\": %d",
                 ef->inner_empty ? "" : ", ", code);
    }
    if (unlink(dest) < 0 && errno != ENOENT) {
        msg_errno(errno, "TORCHELASTIC_ERROR_FILE %s", dest);
        return;
    }
    int fd = open(dest, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC |
                            O_NOCTTY, 0666);
    if (fd < 0 || write_all(fd, buf, at) < 0 ||
        write_all(fd, add, strlen(add)) < 0 ||
        write_all(fd, buf + at, len - at) < 0)
        msg_errno(errno, "TORCHELASTIC_ERROR_FILE %s", dest);
    if (fd >= 0)
        close(fd);
}

char *rootcause_text(const struct failure *f, const char *forward_to)
{
    struct errorfile ef;
    char why[160] = "none given";
    char *buf = NULL;
    size_t len = 0;
    int parsed = 0;
    memset(&ef, 0, sizeof ef);
    ef.timestamp = -1;
    if (f->error_file &&
        (buf = read_bounded(f->error_file, &len, why, sizeof why)) != NULL)
        parsed = errorfile_parse(buf, len, &ef, why, sizeof why) == 0;

    char *out = NULL;
    size_t size = 0;
    FILE *m = open_memstream(&out, &size);
    if (!m) {
        msg("root cause: rank %d: out of memory", f->rank);
        goto done;
    }
    time_t when = ef.timestamp >= 0 ? (time_t)ef.timestamp : f->when;
    struct tm tm;
    char ts[64] = "?";
    if (localtime_r(&when, &tm))
        strftime(ts, sizeof ts, "%Y-%m-%d_%H:%M:%S", &tm);
    char rank[12], local[12];
    snprintf(rank, sizeof rank, "%d", f->rank);
    snprintf(local, sizeof local, "%d", f->local);
    int code = exitcode(f->status);
    fprintf(m, "amlrun: root cause (first observed failure):\n"
               "amlrun:   time      : %s\n"
               "amlrun:   host      : %s\n"
               "amlrun:   rank      : %s (local_rank: %s)\n"
               "amlrun:   exitcode  : %d (pid: %d)",
            ts, f->host, f->rank < 0 ? "?" : rank,
            f->local < 0 ? "?" : local, code, (int)f->pid);
    char sig[32] = "";
    if (WIFSIGNALED(f->status)) {
        char what[96];
        status_describe(f->status, what, sizeof what);
        signal_name(WTERMSIG(f->status), sig, sizeof sig);
        fprintf(m, ": %s", what);
    }
    fputc('\n', m);
    /* A file that was never written is not named: its directory goes
     * with the run's, as torchrun 1.13 says <N/A> for it. */
    int written = f->error_file && strcmp(why, "not written") != 0;
    if (parsed)
        fprintf(m, "amlrun:   error_file: %s\n", f->error_file);
    else if (written)
        fprintf(m, "amlrun:   error_file: %s (%s)\n", f->error_file, why);
    else
        fprintf(m, "amlrun:   error_file: <N/A>\n");
    if (parsed && (ef.message || ef.traceback)) {
        fprintf(m, "amlrun:   message   : ");
        put_text(m, ef.message ? ef.message : "<N/A>", "              ");
        if (ef.traceback) {
            fprintf(m, "amlrun:   traceback : ");
            put_text(m, ef.traceback, "              ");
        }
    } else if (WIFSIGNALED(f->status)) {
        /* torchrun's words for a worker that left no error file. */
        fprintf(m, "amlrun:   message   : Signal %d (%s) received by PID %d\n",
                WTERMSIG(f->status), sig, (int)f->pid);
    } else if (parsed || written || !f->python) {
        /* torchrun's hint is for Python's entry point: a C program, or
         * amldist-nccl-check, has no decorator to add. */
        fprintf(m, "amlrun:   message   : <N/A>\n");
    } else {
        fprintf(m, "amlrun:   message   : <N/A> (for the exception and its "
                   "traceback, decorate the entry point with "
                   "torch.distributed.elastic.multiprocessing.errors."
                   "record)\n");
    }
    if (fclose(m) != 0) {
        msg("root cause: rank %d: out of memory", f->rank);
        free(out);
        out = NULL;
        goto done;
    }
    if (parsed && forward_to && *forward_to)
        forward(buf, len, &ef, code, forward_to);
done:
    errorfile_free(&ef);
    free(buf);
    return out;
}
