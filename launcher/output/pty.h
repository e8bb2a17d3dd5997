/*
 * Pseudo-terminals for the workers' streams that go to a terminal: a
 * worker then sees a terminal on its stdout (stderr) as under torchrun or
 * mpirun (isatty, line-buffered stdio, colours, live progress bars) while
 * amlrun still relays whole lines between the ranks.  The pty is never
 * the worker's controlling terminal: the worker stays in amlrun's session,
 * its own process group, so that Ctrl-C and Ctrl-Z reach amlrun's group
 * and are passed on by amlrun as before, and /dev/tty is still the real
 * terminal.  Output processing is off (no ONLCR): what amlrun reads is
 * byte for byte what the worker wrote, as through a pipe.
 */
#ifndef AMLRUN_PTY_H
#define AMLRUN_PTY_H

/* A new pty: its master in *master (amlrun's end, close-on-exec), its
 * slave in *slave (close-on-exec; the spawn dup2s it to the worker's
 * stream), its window the size of console's.  0, or -1 with errno. */
int out_pty_open(int console, int *master, int *slave);
/* The master's window made console's size again (SIGWINCH). */
void out_pty_resize(int console, int master);

#endif /* AMLRUN_PTY_H */
