/*
 * The spawner's side of a worker's Python stack channel (stacks.h's
 * stk_channel_open): whether a worker gets one, and the environment that
 * names it.  The directory of amlrun's sitecustomize.py is found from
 * amlrun's own path, the same way in the build tree and installed:
 * BINDIR/../share/amldist/python (build/bin/amlrun and
 * build/share/amldist/python; /usr/bin/amlrun and /usr/share/amldist/python).
 */
#ifndef AMLRUN_STACKS_CHANNEL_H
#define AMLRUN_STACKS_CHANNEL_H

/* The descriptor's variable, the signal's, and where the hook is. */
#define STK_ENV_FD "AMLDIST_STACK_FD"
#define STK_ENV_SIGNAL "AMLDIST_STACK_SIGNAL"
#define STK_ENV_GUARD "AMLDIST_STACK_GUARD"
#define STK_PYTHON_SUBDIR "share/amldist/python"
/* The guard preloaded into a worker with a channel (python/guard.c): it
 * lets go of the channel when the program installs a handler of its own
 * for the signal from C. */
#define STK_GUARD_SUBDIR "lib/amldist"
#define STK_GUARD_NAME "stack-guard.so"

/* The real-time signal a Python worker's faulthandler answers
 * (SIGRTMAX - 6: programs that take real-time signals count up from
 * SIGRTMIN). */
int stk_signal(void);

/* The directory holding amlrun's sitecustomize.py, or NULL when it is not
 * beside amlrun (then workers get no channel, and no Python frames).
 * Looked up once. */
const char *stk_python_dir(void);

/* The guard's real path (BINDIR/../lib/amldist/stack-guard.so), or NULL
 * when it is not there or its path cannot go into LD_PRELOAD (a space or a
 * colon).  Looked up once. */
const char *stk_guard_path(void);

/* Whether a worker of this command is Python: it runs under Python
 * (runs_python: amlrun wraps it, command.h) or is a Python interpreter
 * itself (path's last part python, python3, python3.11, ...). */
int stk_is_python(const char *path, int runs_python);
/* Whether such a worker gets a channel: it is Python and the hook is
 * there. */
int stk_channel_wanted(const char *path, int runs_python);

/* The same, also given the command's argv: no channel for a Python whose
 * own options (before its script, -c or -m) make it skip PYTHONPATH (-E,
 * -I) or the site module that reads the hook (-S, -I): there the channel's
 * variables and PYTHONPATH entry would only reach the program and its
 * children (stk_python_skips_hook() says so). */
int stk_channel_wanted_argv(const char *path, char *const *argv,
                            int runs_python);
int stk_python_skips_hook(char *const *argv);

/* Put the channel into a worker's environment: stk_python_dir() before the
 * rest of PYTHONPATH, STK_ENV_FD = write_fd (the worker inherits that
 * number: spawn_req.keep_fd), STK_ENV_SIGNAL, and stk_guard_path() after
 * the rest of LD_PRELOAD and in STK_ENV_GUARD (when it is there).  0, or -1 when out of
 * memory. */
int stk_channel_env(char ***env, int write_fd);

#endif /* AMLRUN_STACKS_CHANNEL_H */
