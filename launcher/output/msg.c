/* amlrun's messages, whole-line writes, small-file reads and the clock. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "output/msg.h"

/* The last message, without its "amlrun: " and newline. */
static char last[4096];

const char *msg_last(void)
{
    return last;
}

static const void *line_owner;
static int line_fd = -1;

void msg_line_set(const void *owner, int fd)
{
    line_owner = owner;
    line_fd = owner ? fd : -1;
}

const void *msg_line_owner(void)
{
    return line_owner;
}

static void (*line_ender)(const void *owner);

void msg_line_ender(void (*end)(const void *owner))
{
    line_ender = end;
}

void msg_line_end(void)
{
    if (line_owner && line_fd >= 0) {
        if (line_ender)
            line_ender(line_owner);
        else
            (void)write_all(line_fd, "\n", 1);
    }
    msg_line_set(NULL, -1);
}

int msg_write(const char *text, size_t len)
{
    msg_line_end();
    return write_all(2, text, len);
}

AMLRUN_PRINTF(2, 0)
static void vmsg(int err, const char *fmt, va_list ap)
{
    char line[4096];
    size_t n = (size_t)snprintf(line, sizeof line, "amlrun: ");
    int k = vsnprintf(line + n, sizeof line - n, fmt, ap);
    if (k > 0)
        n += (size_t)k;
    if (n > sizeof line - 2)
        n = sizeof line - 2;
    if (err) {
        k = snprintf(line + n, sizeof line - n, ": %s", strerror(err));
        if (k > 0)
            n += (size_t)k;
        if (n > sizeof line - 2)
            n = sizeof line - 2;
    }
    snprintf(last, sizeof last, "%.*s", (int)(n - 8), line + 8);
    line[n++] = '\n';
    msg_line_end();
    (void)write_all(2, line, n);
}

void msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(0, fmt, ap);
    va_end(ap);
}

void msg_errno(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(err, fmt, ap);
    va_end(ap);
}

/* After EAGAIN: a parent may have made our stdout or stderr non-blocking
 * (O_NONBLOCK lives in the file description it shares with us, so we must
 * not clear it).  Wait for room as a blocking write would; an error or
 * hang-up shows in the write that follows.  0, or -1 with errno. */
static int wait_writable(int fd)
{
    struct pollfd p = {fd, POLLOUT, 0};
    while (poll(&p, 1, -1) < 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

static int write_retry(int fd)
{
    if (errno == EINTR)
        return 0;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return wait_writable(fd);
    return -1;
}

int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (write_retry(fd) == 0)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int writev_all(int fd, struct iovec *iov, int iovcnt)
{
    while (iovcnt > 0) {
        ssize_t w = writev(fd, iov, iovcnt);
        if (w < 0) {
            if (write_retry(fd) == 0)
                continue;
            return -1;
        }
        /* A pipe or a slow terminal may take part of it: skip what went. */
        while (iovcnt > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

long read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return (long)n;
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* stdio's write of stdout: every byte, waiting for room on EAGAIN. */
static ssize_t stdout_write(void *cookie, const char *buf, size_t len)
{
    (void)cookie;
    return write_all(1, buf, len) == 0 ? (ssize_t)len : -1;
}

int msg_stdout_waits(void)
{
    cookie_io_functions_t io = {.write = stdout_write};
    FILE *f = fopencookie(NULL, "w", io);
    if (!f)
        return -1;
    if (isatty(1))
        setvbuf(f, NULL, _IOLBF, 0);
    fflush(stdout);
    /* glibc's stdout is a variable meant to be set so (its manual, "Standard
     * Streams"); the old stream stays open, its descriptor being ours. */
    stdout = f;
    return 0;
}
