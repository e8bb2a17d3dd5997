/* amlrun's stdin to the workers --stdin names (see stdin.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include "output/msg.h"
#include "run/stdin.h"
#include "util/clock.h"

/* While amlrun is in the background, how often it looks whether it is in
 * the foreground again (a shell's fg need not send SIGCONT). */
#define RECHECK_MS 200

void stdin_plan(struct job *j)
{
    const struct amlrun_opts *o = j->s->o;
    struct job_stdin *in = &j->in;
    in->tty = isatty(0);
    in->rank = -1;
    switch (o->stdin_mode) {
    case STDIN_DEFAULT:
        /* In a terminal rank 0 reads it, as under mpirun; elsewhere as
         * amlrun always did. */
        if (in->tty && isatty(1)) {
            in->rank = 0;
            in->relay = 1;
        } else {
            in->legacy = 1;
        }
        break;
    case STDIN_RANK:
        in->rank = o->stdin_rank;
        in->relay = in->tty;
        break;
    case STDIN_ALL:
        in->relay = 1;
        break;
    case STDIN_NONE:
        in->none = 1;
        break;
    }
    /* A terminal read from the background (bg between the foreground
     * check and the read) then fails with EIO instead of stopping amlrun
     * alone, its workers running on; the workers start with the mask
     * amlrun was started with (spawn.h). */
    if (in->relay && in->tty) {
        sigset_t ttin;
        sigemptyset(&ttin);
        sigaddset(&ttin, SIGTTIN);
        sigprocmask(SIG_BLOCK, &ttin, NULL);
    }
}

static void on_stdin(void *arg, int fd, short revents);
static void on_recheck(void *arg);
static void on_writable(void *arg, int fd, short revents);

/* Read stdin when every reader has taken the chunk and one is left; a
 * terminal only from the foreground. */
static void wake(struct job *j)
{
    struct job_stdin *in = &j->in;
    if (!in->relay || in->eof)
        return;
    int readers = 0, pending = 0;
    for (int i = 0; i < j->n; i++) {
        if (j->w[i].in_fd >= 0) {
            readers++;
            pending += j->w[i].in_off < in->len;
        }
    }
    short ev = readers && !pending && !in->recheck ? POLLIN : 0;
    if (in->watched) {
        amldist__loop_events(j->loop, 0, ev);
    } else if (ev && amldist__loop_watch(j->loop, 0, ev, on_stdin, j) == 0) {
        in->watched = 1;
    }
}

static void close_in(struct job *j, struct worker *w)
{
    if (w->in_fd < 0)
        return;
    amldist__loop_unwatch(j->loop, w->in_fd);
    close(w->in_fd);
    w->in_fd = -1;
}

/* Write what w has not taken of the chunk; on a full pipe wait for room.
 * A reader that closed its stdin (EPIPE) or ended is left out. */
static void push(struct job *j, struct worker *w)
{
    struct job_stdin *in = &j->in;
    while (w->in_fd >= 0 && w->in_off < in->len) {
        ssize_t k = write(w->in_fd, in->buf + w->in_off, in->len - w->in_off);
        if (k > 0) {
            w->in_off += (size_t)k;
        } else if (k < 0 && errno == EINTR) {
            continue;
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (amldist__loop_watch(j->loop, w->in_fd, POLLOUT, on_writable,
                                    w) < 0)
                close_in(j, w);
            return;
        } else {
            close_in(j, w);
        }
    }
    if (w->in_fd >= 0)
        amldist__loop_unwatch(j->loop, w->in_fd);
}

static void on_writable(void *arg, int fd, short revents)
{
    struct worker *w = arg;
    (void)fd;
    (void)revents;
    push(w->job, w);
    wake(w->job);
}

/* Not in the foreground (or EIO: read from the background): asleep, and
 * looked at again soon. */
static void sleep_background(struct job *j)
{
    struct job_stdin *in = &j->in;
    amldist__loop_events(j->loop, 0, 0);
    if (!in->recheck) {
        in->recheck = amldist__loop_timer(j->loop, amldist__now_ms() + RECHECK_MS,
                                          on_recheck, j);
        if (in->recheck < 0)
            in->recheck = 0;
    }
}

static void on_recheck(void *arg)
{
    struct job *j = arg;
    j->in.recheck = 0;
    wake(j);
}

static void stdin_eof(struct job *j)
{
    j->in.eof = 1;
    amldist__loop_unwatch(j->loop, 0);
    j->in.watched = 0;
    for (int i = 0; i < j->n; i++)
        close_in(j, &j->w[i]);
}

static void on_stdin(void *arg, int fd, short revents)
{
    struct job *j = arg;
    struct job_stdin *in = &j->in;
    (void)fd;
    (void)revents;
    /* A terminal read from the background would stop amlrun (SIGTTIN is
     * blocked: the read fails with EIO); the shell's input is not ours.
     * A terminal that is not our controlling one (ENOTTY) has no
     * foreground to wait for. */
    pid_t fg = in->tty ? tcgetpgrp(0) : -1;
    if (fg >= 0 && fg != getpgrp()) {
        sleep_background(j);
        return;
    }
    ssize_t n = read(0, in->buf, sizeof in->buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n < 0 && errno == EIO && in->tty) {
        sleep_background(j);
        return;
    }
    if (n <= 0) {
        if (n < 0)
            msg_errno(errno, "reading stdin (the workers' stdin is closed)");
        stdin_eof(j);
        return;
    }
    in->len = (size_t)n;
    for (int i = 0; i < j->n; i++) {
        j->w[i].in_off = 0;
        push(j, &j->w[i]);
    }
    wake(j);
}

int stdin_check(struct job *j, const struct worker_id *id, int *status)
{
    const struct amlrun_opts *o = j->s->o;
    struct job_stdin *in = &j->in;
    if (o->stdin_mode != STDIN_RANK || id->world <= 0 ||
        o->stdin_rank < id->world)
        return 0;
    if (j->p.restarts > 0) {
        if (!in->told && !o->quiet)
            msg("note: --stdin %d: this round's job has %d ranks (0 to "
                "%d): stdin goes to no worker", o->stdin_rank, id->world,
                id->world - 1);
        in->told = 1;
        return 0;
    }
    msg("--stdin %d: no such rank: this job has %d ranks (0 to %d); no "
        "worker started", o->stdin_rank, id->world, id->world - 1);
    *status = AMLRUN_EXIT_USAGE;
    return -1;
}

void stdin_note(struct job *j)
{
    const struct amlrun_opts *o = j->s->o;
    struct job_stdin *in = &j->in;
    if (o->stdin_mode != STDIN_RANK || in->told || o->quiet || j->n == 0 ||
        o->stdin_rank >= j->w[0].id.world)
        return;
    int lo = j->w[0].id.rank, hi = lo;
    for (int i = 0; i < j->n; i++) {
        if (j->w[i].id.rank == o->stdin_rank)
            return;
        lo = j->w[i].id.rank < lo ? j->w[i].id.rank : lo;
        hi = j->w[i].id.rank > hi ? j->w[i].id.rank : hi;
    }
    msg("note: --stdin %d: rank %d runs on another node (this node runs "
        "ranks %d to %d), whose amlrun gives it that node's stdin; this "
        "node's stdin goes to no worker", o->stdin_rank, o->stdin_rank, lo,
        hi);
    in->told = 1;
}

int stdin_for(struct job *j, struct worker *w, int index, int *owned)
{
    struct job_stdin *in = &j->in;
    *owned = -1;
    w->in_fd = -1;
    if (in->legacy)
        return index == 0 && !in->tty ? 0 : j->null_fd;
    if (in->none || (in->rank >= 0 && w->id.rank != in->rank))
        return j->null_fd;
    if (!in->relay)
        return 0;
    if (in->eof)
        return j->null_fd;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    if (fcntl(p[1], F_SETFL, O_NONBLOCK) < 0) {
        int err = errno;
        close(p[0]);
        close(p[1]);
        errno = err;
        return -1;
    }
    w->in_fd = p[1];
    w->in_off = in->len; /* not the middle of a chunk the others have */
    *owned = p[0];
    wake(j);
    return p[0];
}

void stdin_worker_end(struct job *j, struct worker *w)
{
    close_in(j, w);
    wake(j);
}
