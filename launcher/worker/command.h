/*
 * The worker's command line, built once in the parent: the Python wrapping
 * of .py files, modules, --run-path and files that cannot be executed, the
 * legacy --local_rank argument, and the executable found in PATH before any
 * fork (so a missing command is reported once, and the child only calls
 * execve).
 */
#ifndef AMLRUN_COMMAND_H
#define AMLRUN_COMMAND_H

#include "cli/options.h"

struct command {
    char **argv;        /* NULL-terminated; argv[local_rank_at] per worker */
    int argc;
    int local_rank_at;  /* index of "--local_rank=N", or -1 */
    char *path;         /* the executable execve() gets */
    int runs_python;
    char *how;          /* how the command runs and why, for --dry-run and
                           -v: "t.py: a .py file, run under python3 -u" */
    int torch_probed;   /* the Python's torch was asked (pychoose.c): */
    int torch;          /* torch_probe()'s answer */
};

/* Returns -1 on success, else an exit status after a message
 * (AMLRUN_EXIT_NOTFOUND, AMLRUN_EXIT_NOEXEC, AMLRUN_EXIT_SYSTEM). */
int command_build(const struct amlrun_opts *o, struct command *c);
/* argv for one worker: c->argv itself, or a copy with --local_rank=N;
 * free with command_argv_free(c, argv). */
char **command_argv_for(const struct command *c, int local_rank);
void command_argv_free(const struct command *c, char **argv);
/* The argv for /bin/sh when execve() says ENOEXEC, as execvp() does
 * (a script without #!); NULL when out of memory. */
char **command_sh_argv(const char *path, char *const *argv);
void command_free(struct command *c);

/* Why execve(path) failed with `err`, in words for "cannot run PATH: ...":
 * the reason behind a misleading errno where there is one (a directory for
 * EACCES, a missing #! or ELF interpreter for ENOENT, a noexec mount), else
 * strerror(err).  Reads the file; call it in the parent, never between fork
 * and exec.  Returns buf or a static string. */
const char *command_exec_error(const char *path, int err, char *buf,
                               size_t size);

/* Find `name` in `path_env` like execvp: a name with '/' is used as it is.
 * Returns a malloc'd path, or NULL with errno ENOENT or EACCES. */
char *command_which(const char *name, const char *path_env);

#endif /* AMLRUN_COMMAND_H */
