/*
 * Worker output: each worker's stdout and stderr arrive on pipes; amlrun
 * cuts them into lines and writes whole lines (optionally prefixed) to its
 * own stdout and stderr, so that lines of different ranks never mix, and
 * copies the raw bytes into per-rank log files.  Writes block (on a
 * non-blocking console they wait for room): a slow console slows the
 * workers down, it never loses a line.  A console that is gone (EPIPE)
 * takes the workers' streams to it along: each is closed at its next read,
 * so that the worker's next write fails with EPIPE as it would without
 * amlrun.  Any other console or log error is reported once.
 */
#ifndef AMLRUN_OUTPUT_H
#define AMLRUN_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

/* Lines longer than this are cut into pieces of this size (on the console
 * only; log files get every byte as it came). */
#define OUT_LINE_MAX (1u << 20)
/* A live stream's unfinished line is shown once it has not grown for
 * OUT_SHOW_NS (a bar between updates, a prompt), or OUT_SHOW_MAX_NS after
 * its first byte not yet shown (a bar redrawn faster than that): a line
 * written in quick pieces is never shown in pieces (out_stream_due). */
#define OUT_SHOW_NS 50000000LL
#define OUT_SHOW_MAX_NS 200000000LL
/* Bytes of a stream's end kept for the job's failure summary. */
#define OUT_TAIL_MAX 2048

struct out_stream {
    int fd;            /* read end of the worker's pipe; -1 when closed */
    int console;       /* 1 or 2, or -1 when filtered off the console */
    int log;           /* log file, or -1 */
    char *prefix;      /* NULL: no prefix */
    size_t prefix_len;
    char *carry;       /* the unfinished last line (live: its part not
                          yet shown) */
    /* Live: the console is a terminal (the worker's stream a pty,
     * output/pty.h).  An unfinished line (a "\r" progress bar, a prompt)
     * is shown as it grows, at most OUT_SHOW_NS after it came, its line
     * left open on the terminal (msg_line_set) and continued without a
     * second prefix.  Anyone else who writes to the terminal erases it
     * first ("\r" and erase to the end of the line); it is shown again,
     * whole, once the others' lines are out (OUT_SHOW_NS later, or at
     * its next byte), so that no line is ever split or shares a line;
     * only one wider than the terminal, which erasing would not take
     * back, is ended with a newline there instead.  Whole lines are
     * written as ever; log files get the same bytes either way. */
    int live;
    int opened;        /* live: its line was left open (it may have been
                          ended since: msg_line_owner() says) */
    int erased;        /* live: another writer erased its open line */
    char *seen;        /* live: what its open line showed so far */
    size_t seen_len, seen_cap;
    int64_t due_ns;    /* live: when the carry is to be shown, 0: never */
    int64_t held_ns;   /* live: when its first byte came, 0: none */
    size_t len, cap;
    /* The last bytes the worker wrote, for a failure's summary. */
    char tail[OUT_TAIL_MAX];
    size_t tail_len;
    /* When the last complete line came, and the last byte (a "\r" bar's
     * redraw too), CLOCK_MONOTONIC ns, 0: none; read once per read().
     * The last byte is a worker's sign of life for --hang-timeout, the
     * last line its OUTPUT age in --status. */
    int64_t line_ns, out_ns;
};

/* Read once from s->fd into buf and pass the lines on.  At end of file (or
 * a read error) the unfinished line is written with a newline added and
 * the pipe closed; the pipe is closed too once the stream's console is
 * gone.  Returns 1 while open, 0 once closed. */
int out_stream_read(struct out_stream *s, char *buf, size_t bufsz);
/* Live: when the stream's unfinished line is due on the console
 * (amldist__now_ns()'s clock), 0 when nothing waits; out_stream_show
 * writes it then. */
int64_t out_stream_due(const struct out_stream *s);
void out_stream_show(struct out_stream *s);
/* The last `lines` lines of what the stream carried (at most its last
 * OUT_TAIL_MAX bytes), each prefixed with `indent`, into buf; "" if none. */
void out_stream_tail(const struct out_stream *s, const char *indent,
                     int lines, char *buf, size_t size);
/* The time amlrun's writes to its console spent blocked so far (each
 * write that took OUT_BLOCKED_NS or more: the console did not read, and
 * amlrun read no worker's output meanwhile), and when the last such write
 * ended (0: none), on amldist__now_ns()'s clock. */
#define OUT_BLOCKED_NS 5000000LL
void out_console_blocked(int64_t *total_ns, int64_t *last_end_ns);
/* Whether amlrun's stdout or stderr is gone (EPIPE): workers writing to it
 * get EPIPE (SIGPIPE) at their next write, and a restart would only repeat
 * that. */
int out_console_gone(void);
/* Close the pipe if open (flushing as at end of file) and free buffers;
 * the log fd is not the stream's and stays open. */
void out_stream_close(struct out_stream *s);

/* The prefix for one stream: FMT with %r rank, %l local rank, %n node rank,
 * %h host, %s "stdout"/"stderr", %% a percent sign.  NULL: out of memory. */
char *out_prefix(const char *fmt, int rank, int local, int node,
                 const char *host, const char *stream);

/* Open (creating it if needed) the --log-dir directory, refusing one that
 * is itself a symbolic link; fd or -1 after a message. */
int out_log_dir(const char *dir);
/* Create DIR/rank<R>.<stream> safely: never through a symbolic link, never
 * into a file that is not ours (hard links, FIFOs); an old file of ours is
 * truncated.  A later write error names the rank and the file.  fd or -1
 * after a message. */
int out_log_file(int dirfd, const char *dir, int rank, const char *stream);
/* Name a log file opened elsewhere (torchrun's layout, torchlogs.h) for
 * write errors: "rank R: log file DIR/NAME: ...". */
void out_log_named(int fd, int rank, const char *dir, const char *name);
/* A write to log file fd failed with err: said once, naming its rank and
 * file where known (logfile.c). */
void out_log_failed(int fd, int err);

#endif /* AMLRUN_OUTPUT_H */
