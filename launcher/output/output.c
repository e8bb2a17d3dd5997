/* Line assembly, prefixes and log files (see output.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "output/msg.h"
#include "output/output.h"
#include "util/clock.h"

#define IOV_BATCH 8 /* the pieces of one line, at most */

/* The state of amlrun's stdout and stderr ([0], [1]) as consoles.  Gone
 * (EPIPE: `amlrun ... | head`): the workers' own stdout (stderr) is gone
 * with it, so each stream to it is closed at its next read, and the
 * worker's next write fails with EPIPE (SIGPIPE) as it would have without
 * amlrun.  Failed (any other error: EIO, ENOSPC, EFBIG): said once, later
 * lines dropped, the job and the log files go on.  A non-blocking console
 * is waited on (write_all), never taken for a failed one. */
enum { CONSOLE_OK, CONSOLE_GONE, CONSOLE_FAILED };
static int console_state[2];

struct batch {
    int fd;
    int n;
    struct iovec iov[IOV_BATCH];
};

/* The console writes that blocked (out_console_blocked). */
static int64_t blocked_total, blocked_end;

/* Write to a console, or note once that it is gone or failed; a write
 * that blocks is time amlrun observed nothing (out_console_blocked). */
static void console_writev(int fd, struct iovec *iov, int n)
{
    int *state = &console_state[fd == 2];
    if (n <= 0 || *state != CONSOLE_OK)
        return;
    int64_t t0 = amldist__now_ns();
    int rc = writev_all(fd, iov, n);
    int64_t t1 = amldist__now_ns();
    if (t1 - t0 >= OUT_BLOCKED_NS) {
        blocked_total += t1 - t0;
        blocked_end = t1;
    }
    if (rc < 0) {
        if (errno == EPIPE) {
            *state = CONSOLE_GONE;
        } else {
            *state = CONSOLE_FAILED;
            msg("%s: %s: the rest of the workers' output to it is dropped "
                "(log files go on)", fd == 2 ? "stderr" : "stdout",
                strerror(errno));
        }
    }
}

static void batch_flush(struct batch *b)
{
    console_writev(b->fd, b->iov, b->n);
    b->n = 0;
}

static void batch_add(struct batch *b, const void *p, size_t len)
{
    if (len == 0)
        return;
    if (b->n == IOV_BATCH)
        batch_flush(b);
    b->iov[b->n].iov_base = (void *)p;
    b->iov[b->n].iov_len = len;
    b->n++;
}

static int carry_append(struct out_stream *s, const char *p, size_t n)
{
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + n)
            cap *= 2;
        char *grown = realloc(s->carry, cap);
        if (!grown)
            return -1;
        s->carry = grown;
        s->cap = cap;
    }
    memcpy(s->carry + s->len, p, n);
    s->len += n;
    return 0;
}

/* What an open line showed, kept to show it again whole after another
 * writer erased it; past this, it is ended with a newline instead. */
#define SEEN_MAX 4096u

/* The bytes of s's open line after its last "\r": what the terminal
 * shows of it. */
static size_t seen_visible(const struct out_stream *s)
{
    size_t i = s->seen_len;
    while (i > 0 && s->seen[i - 1] != '\r')
        i--;
    return s->seen_len - i;
}

/* msg_line_end's way with a live stream's open line (output.h): erased,
 * to be shown again whole at its next show (due at once: OUT_SHOW_NS
 * later, when the other writer's lines are out); one wider than the
 * terminal (erasing takes back one row), or too long to keep, ended with
 * a newline, its rest a line of its own as before. */
static void erase_line(const void *owner)
{
    struct out_stream *s = (struct out_stream *)owner;
    struct winsize ws;
    size_t visible = s->prefix_len + seen_visible(s);
    if (s->seen_len < SEEN_MAX && ioctl(s->console, TIOCGWINSZ, &ws) == 0 &&
        visible < ws.ws_col) {
        (void)write_all(s->console, "\r\033[K", 4);
        s->erased = 1;
        s->due_ns = amldist__now_ns() + OUT_SHOW_NS;
    } else {
        (void)write_all(s->console, "\n", 1);
        s->seen_len = 0;
    }
}

static void own_line(struct out_stream *s)
{
    msg_line_ender(erase_line);
    msg_line_set(s, s->console);
}

/* Keep what s shows of its open line (seen); too much: kept no more
 * (seen_len SEEN_MAX, ended with a newline if erased). */
static void seen_add(struct out_stream *s, const char *p, size_t n)
{
    if (s->seen_len >= SEEN_MAX)
        return;
    if (s->seen_len + n > SEEN_MAX) {
        s->seen_len = SEEN_MAX;
        return;
    }
    if (s->seen_len + n > s->seen_cap) {
        size_t cap = s->seen_cap ? s->seen_cap : 128;
        while (cap < s->seen_len + n)
            cap *= 2;
        char *grown = realloc(s->seen, cap);
        if (!grown) {
            s->seen_len = SEEN_MAX;
            return;
        }
        s->seen = grown;
        s->seen_cap = cap;
    }
    memcpy(s->seen + s->seen_len, p, n);
    s->seen_len += n;
}

/* Live and prefixed: p[0..n) with the prefix again after each "\r" that
 * does not end the line ("\r\n"), so that a bar redrawn with "\r" keeps
 * its prefix on the terminal (log files get the bytes as they came).  cr:
 * the byte before p was a "\r"; returns whether p's last byte is one. */
static int live_add(struct batch *b, const struct out_stream *s,
                    const char *p, size_t n, int cr)
{
    const char *end = p + n, *r;
    if (n == 0)
        return cr;
    if (cr && p[0] != '\n')
        batch_add(b, s->prefix, s->prefix_len);
    while ((r = memchr(p, '\r', (size_t)(end - p))) != NULL && r + 1 < end) {
        batch_add(b, p, (size_t)(r + 1 - p));
        if (r[1] != '\n')
            batch_add(b, s->prefix, s->prefix_len);
        p = r + 1;
    }
    batch_add(b, p, (size_t)(end - p));
    return end[-1] == '\r';
}

/* s's open line as it showed it: its prefix (after a leading "\r"
 * where it has a prefix, as show_carry puts it) and its bytes. */
static void live_add_seen(struct batch *b, const struct out_stream *s)
{
    int prefixed = s->prefix != NULL;
    if (!(prefixed && s->seen_len > 1 && s->seen[0] == '\r'))
        batch_add(b, s->prefix, s->prefix_len);
    if (prefixed)
        live_add(b, s, s->seen, s->seen_len, 0);
    else
        batch_add(b, s->seen, s->seen_len);
}

/* A live stream about to write to its terminal: another stream's open
 * line is erased first; this stream's own, if another erased it, is shown
 * again whole (its prefix and what it showed), at once.  Whether this
 * stream's line is open there now (its prefix and start shown). */
static int live_begin(struct out_stream *s)
{
    if (msg_line_owner() == s)
        return 1;
    msg_line_end();
    if (!s->erased)
        return 0;
    s->erased = 0;
    struct batch b;
    b.fd = s->console;
    b.n = 0;
    live_add_seen(&b, s);
    batch_flush(&b);
    own_line(s);
    return 1;
}

/* Whether a live stream's lines need live_add: a prefix, and a "\r" in
 * the carry or in p[0..n). */
static int live_cr(const struct out_stream *s, const char *p, size_t n)
{
    return s->live && s->prefix &&
           (memchr(p, '\r', n) || (s->len && memchr(s->carry, '\r', s->len)));
}

/* The unfinished line written out: as a line of its own, a newline added
 * (eol: end of file, too long, out of memory); or, on a live console, as
 * far as it came, its line left open. */
static void show_carry(struct out_stream *s, int eol)
{
    int prefixed = s->live && s->prefix;
    size_t show = s->len;
    /* Live and prefixed, a "\r" that ends what is shown waits for the
     * next byte: the prefix goes after it unless a "\n" follows. */
    if (!eol && prefixed && show && s->carry[show - 1] == '\r')
        show--;
    if (s->live) {
        s->due_ns = s->held_ns = 0;
        if (!eol && show == 0 && !s->erased)
            return; /* nothing to see yet */
        if (s->len == 0 && msg_line_owner() != s && !s->erased)
            return;
    } else if (s->len == 0) {
        return;
    }
    int open = s->live && live_begin(s);
    struct batch b;
    b.fd = s->console;
    b.n = 0;
    /* A line that starts with "\r" gets its prefix after it (live_add). */
    if (!open && !(prefixed && show > 1 && s->carry[0] == '\r'))
        batch_add(&b, s->prefix, s->prefix_len);
    if (prefixed)
        live_add(&b, s, s->carry, show, 0);
    else
        batch_add(&b, s->carry, show);
    if (eol)
        batch_add(&b, "\n", 1);
    batch_flush(&b);
    if (s->live && !eol)
        seen_add(s, s->carry, show);
    if (show < s->len)
        memmove(s->carry, s->carry + show, s->len - show);
    s->len -= show;
    if (s->live) {
        s->opened = !eol;
        if (eol) {
            s->seen_len = 0;
            msg_line_set(NULL, -1);
        } else {
            own_line(s);
        }
    }
}

static void flush_carry(struct out_stream *s)
{
    show_carry(s, 1);
}

/*
 * Prefixed lines are copied into one contiguous buffer per batch and
 * written with one write(): the kernel copies one piece instead of a
 * writev of two small pieces per line (a 14-byte prefix, a 64-byte line),
 * which cost three times the plain relay.  The relay is single-threaded;
 * the buffer is flushed before console_lines() returns.
 */
#define PREFIX_BUF (256u << 10)
static char prefix_buf[PREFIX_BUF];

static void prefix_flush(int fd, size_t *used)
{
    struct iovec iov = {prefix_buf, *used};
    if (*used > 0)
        console_writev(fd, &iov, 1);
    *used = 0;
}

/* Pass the complete lines in p[0..n) to the console, keep the rest. */
static void console_lines(struct out_stream *s, const char *p, size_t n)
{
    const char *end = p + n;
    struct batch b;
    b.fd = s->console;
    b.n = 0;
    /* Live: a line shown open is completed without its prefix again; one
     * that another writer ended (with a newline) and that ends now with
     * nothing more is ended already. */
    int lines = s->live && memchr(p, '\n', n) != NULL;
    int ended = lines && s->opened && msg_line_owner() != s && !s->erased;
    int open = lines && live_begin(s);
    if (lines)
        s->opened = 0;
    if (ended && s->len == 0 && p[0] == '\n') {
        p++;
        n--;
    }
    if (lines && live_cr(s, p, n)) {
        /* A bar's "\r" redraws, prefixed: line by line through live_add. */
        const char *nl;
        while (p < end && (nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
            if (!open)
                batch_add(&b, s->prefix, s->prefix_len);
            int cr = live_add(&b, s, s->carry, s->len, 0);
            live_add(&b, s, p, (size_t)(nl + 1 - p), cr);
            s->len = 0;
            open = 0;
            p = nl + 1;
        }
        batch_flush(&b);
    } else if (!s->prefix) {
        /* No prefixes: everything up to the last newline goes in one
         * write, completing the carried line first. */
        const char *last = memrchr(p, '\n', n);
        if (last) {
            batch_add(&b, s->carry, s->len);
            batch_add(&b, p, (size_t)(last + 1 - p));
            batch_flush(&b);
            s->len = 0;
            p = last + 1;
        }
    } else {
        size_t used = 0;
        const char *nl;
        while (p < end && (nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
            size_t line = (size_t)(nl + 1 - p);
            size_t need = (open ? 0 : s->prefix_len) + s->len + line;
            if (used + need > PREFIX_BUF)
                prefix_flush(s->console, &used);
            if (need > PREFIX_BUF) {
                /* A line longer than the buffer: its pieces in one
                 * writev, after the lines before it. */
                if (!open)
                    batch_add(&b, s->prefix, s->prefix_len);
                batch_add(&b, s->carry, s->len);
                batch_add(&b, p, line);
                batch_flush(&b);
            } else {
                if (!open) {
                    memcpy(prefix_buf + used, s->prefix, s->prefix_len);
                    used += s->prefix_len;
                }
                if (s->len > 0) {
                    memcpy(prefix_buf + used, s->carry, s->len);
                    used += s->len;
                }
                memcpy(prefix_buf + used, p, line);
                used += line;
            }
            s->len = 0; /* the carried line is complete */
            open = 0;
            p = nl + 1;
        }
        prefix_flush(s->console, &used);
    }
    if (lines && msg_line_owner() == s)
        msg_line_set(NULL, -1); /* its line ended with the lines written */
    if (lines)
        s->seen_len = 0;
    while (p < end) {
        size_t room = OUT_LINE_MAX - s->len;
        size_t take = (size_t)(end - p) < room ? (size_t)(end - p) : room;
        if (carry_append(s, p, take) < 0) {
            /* Out of memory: better a cut line than a lost one. */
            flush_carry(s);
            batch_add(&b, s->prefix, s->prefix_len);
            batch_add(&b, p, (size_t)(end - p));
            batch_add(&b, "\n", 1);
            batch_flush(&b);
            return;
        }
        p += take;
        if (s->len == OUT_LINE_MAX)
            show_carry(s, !s->live); /* live: the line goes on, open */
    }
}

static void stream_eof(struct out_stream *s)
{
    if (s->console >= 0)
        flush_carry(s);
    close(s->fd);
    s->fd = -1;
}

static void tail_add(struct out_stream *s, const char *p, size_t n)
{
    if (n >= OUT_TAIL_MAX) {
        memcpy(s->tail, p + n - OUT_TAIL_MAX, OUT_TAIL_MAX);
        s->tail_len = OUT_TAIL_MAX;
        return;
    }
    size_t keep = s->tail_len + n > OUT_TAIL_MAX ? OUT_TAIL_MAX - n
                                                 : s->tail_len;
    memmove(s->tail, s->tail + s->tail_len - keep, keep);
    memcpy(s->tail + keep, p, n);
    s->tail_len = keep + n;
}

void out_stream_tail(const struct out_stream *s, const char *indent,
                     int lines, char *buf, size_t size)
{
    size_t end = s->tail_len, start;
    while (end > 0 && s->tail[end - 1] == '\n')
        end--;
    start = end;
    for (int k = 0; start > 0; start--)
        if (s->tail[start - 1] == '\n' && ++k == lines)
            break;
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = start; i < end && o + 1 < size;) {
        const char *nl = memchr(s->tail + i, '\n', end - i);
        size_t n = nl ? (size_t)(nl - (s->tail + i)) : end - i;
        int w = snprintf(buf + o, size - o, "%s%.*s\n", indent, (int)n,
                         s->tail + i);
        if (w < 0 || (size_t)w >= size - o)
            break;
        o += (size_t)w;
        i += n + 1;
    }
}

int out_stream_read(struct out_stream *s, char *buf, size_t bufsz)
{
    ssize_t n;
    do
        n = read(s->fd, buf, bufsz);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        stream_eof(s);
        return 0;
    }
    tail_add(s, buf, (size_t)n);
    s->out_ns = amldist__now_ns();
    /* A line's end is most often the batch's last byte. */
    if (memrchr(buf, '\n', (size_t)n))
        s->line_ns = s->out_ns;
    if (s->log >= 0 && write_all(s->log, buf, (size_t)n) < 0) {
        out_log_failed(s->log, errno); /* once: the stream forgets its log */
        s->log = -1;
    }
    if (s->console >= 0) {
        console_lines(s, buf, (size_t)n);
        if (console_state[s->console == 2] == CONSOLE_GONE) {
            /* What was read is logged; the worker learns from its next
             * write (see console_state). */
            s->len = 0;
            s->due_ns = s->held_ns = 0;
            if (msg_line_owner() == s)
                msg_line_set(NULL, -1);
            close(s->fd);
            s->fd = -1;
            return 0;
        }
        if (s->live && s->len == 0) {
            s->due_ns = s->held_ns = 0;
        } else if (s->live) {
            /* after a newline the carry is a new line's */
            if (s->held_ns == 0 || s->line_ns == s->out_ns)
                s->held_ns = s->out_ns;
            s->due_ns = s->out_ns + OUT_SHOW_NS;
            if (s->due_ns > s->held_ns + OUT_SHOW_MAX_NS)
                s->due_ns = s->held_ns + OUT_SHOW_MAX_NS;
        }
    }
    return 1;
}

int64_t out_stream_due(const struct out_stream *s)
{
    if (!s->live || s->fd < 0)
        return 0;
    if (s->len > 0)
        return s->due_ns;
    /* Erased with nothing new: shown again once the terminal's line is
     * free (no one else's open: two open lines would take it in turns). */
    return s->erased && !msg_line_owner() ? s->due_ns : 0;
}

void out_stream_show(struct out_stream *s)
{
    if (s->live && s->console >= 0 && s->fd >= 0)
        show_carry(s, 0);
}

void out_console_blocked(int64_t *total_ns, int64_t *last_end_ns)
{
    *total_ns = blocked_total;
    *last_end_ns = blocked_end;
}

int out_console_gone(void)
{
    return console_state[0] == CONSOLE_GONE ||
           console_state[1] == CONSOLE_GONE;
}

void out_stream_close(struct out_stream *s)
{
    if (s->fd >= 0)
        stream_eof(s);
    if (msg_line_owner() == s)
        msg_line_set(NULL, -1);
    free(s->carry);
    free(s->prefix);
    free(s->seen);
    s->carry = s->prefix = s->seen = NULL;
    s->len = s->cap = s->prefix_len = 0;
    s->seen_len = s->seen_cap = 0;
    s->erased = 0;
}

/* A number of the prefix; an unknown one (negative) is "?", never a code. */
static void put_num(FILE *f, int v)
{
    if (v < 0)
        fputc('?', f);
    else
        fprintf(f, "%d", v);
}

char *out_prefix(const char *fmt, int rank, int local, int node,
                 const char *host, const char *stream)
{
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    if (!f)
        return NULL;
    for (const char *p = fmt; *p; p++) {
        if (*p != '%' || !p[1]) {
            fputc(*p, f);
            continue;
        }
        switch (*++p) {
        case 'r': put_num(f, rank); break;
        case 'l': put_num(f, local); break;
        case 'n': put_num(f, node); break;
        case 'h': fputs(host, f); break;
        case 's': fputs(stream, f); break;
        case '%': fputc('%', f); break;
        default: fputc('%', f); fputc(*p, f); break;
        }
    }
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}
