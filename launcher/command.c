/* The worker's command line and executable (see command.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "command.h"
#include "msg.h"

char *command_which(const char *name, const char *path_env)
{
    if (!*name) {
        errno = ENOENT;
        return NULL;
    }
    if (strchr(name, '/')) {
        /* Let execve() report what is wrong with an explicit path. */
        if (access(name, F_OK) < 0)
            return NULL;
        return strdup(name);
    }
    if (!path_env)
        path_env = "/usr/local/bin:/usr/bin:/bin";
    int saw_eacces = 0;
    size_t nlen = strlen(name);
    for (const char *p = path_env;; p++) {
        const char *end = strchrnul(p, ':');
        size_t dlen = (size_t)(end - p);
        char *cand = malloc(dlen + nlen + 3);
        if (!cand)
            return NULL;
        /* An empty PATH element means the current directory. */
        if (dlen == 0)
            memcpy(cand, ".", (dlen = 1));
        else
            memcpy(cand, p, dlen);
        cand[dlen] = '/';
        memcpy(cand + dlen + 1, name, nlen + 1);
        struct stat st;
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
            if (access(cand, X_OK) == 0)
                return cand;
            saw_eacces = 1;
        }
        free(cand);
        if (!*end)
            break;
        p = end;
    }
    errno = saw_eacces ? EACCES : ENOENT;
    return NULL;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int command_build(const struct amlrun_opts *o, struct command *c)
{
    memset(c, 0, sizeof *c);
    c->local_rank_at = -1;
    c->runs_python = o->module || (!o->no_python && ends_with(o->cmd[0], ".py"));
    int legacy_arg = o->legacy && !o->use_env;
    /* python3 -u [-m] script [--local_rank=N] args... */
    size_t n = (size_t)o->ncmd + 4;
    c->argv = calloc(n, sizeof *c->argv);
    if (!c->argv) {
        msg_errno(ENOMEM, "building the command line");
        return AMLRUN_EXIT_SYSTEM;
    }
    int k = 0;
    const char *prog = o->cmd[0];
    if (c->runs_python) {
        prog = o->python;
        c->argv[k++] = (char *)o->python;
        /* Unbuffered, as torchrun and launch.py run it: lines reach the
         * console when they are printed, not when the buffer fills. */
        c->argv[k++] = "-u";
        if (o->module)
            c->argv[k++] = "-m";
    }
    c->argv[k++] = o->cmd[0];
    if (legacy_arg)
        c->local_rank_at = k++;
    for (int i = 1; i < o->ncmd; i++)
        c->argv[k++] = o->cmd[i];
    c->argv[k] = NULL;
    c->argc = k;
    if (c->local_rank_at >= 0)
        c->argv[c->local_rank_at] = "--local_rank=0";

    c->path = command_which(prog, getenv("PATH"));
    if (!c->path) {
        int err = errno;
        if (err == ENOMEM) {
            msg_errno(err, "looking up %s", prog);
            return AMLRUN_EXIT_SYSTEM;
        }
        msg_errno(err, "%s", prog);
        return err == ENOENT ? AMLRUN_EXIT_NOTFOUND : AMLRUN_EXIT_NOEXEC;
    }
    return -1;
}

char **command_argv_for(const struct command *c, int local_rank)
{
    if (c->local_rank_at < 0)
        return c->argv;
    char **argv = malloc(((size_t)c->argc + 1) * sizeof *argv);
    if (!argv)
        return NULL;
    memcpy(argv, c->argv, ((size_t)c->argc + 1) * sizeof *argv);
    char buf[32];
    snprintf(buf, sizeof buf, "--local_rank=%d", local_rank);
    if (!(argv[c->local_rank_at] = strdup(buf))) {
        free(argv);
        return NULL;
    }
    return argv;
}

void command_argv_free(const struct command *c, char **argv)
{
    if (!argv || argv == c->argv)
        return;
    free(argv[c->local_rank_at]);
    free(argv);
}

char **command_sh_argv(const char *path, char *const *argv)
{
    size_t n = 0;
    while (argv[n])
        n++;
    char **sh = malloc((n + 2) * sizeof *sh);
    if (!sh)
        return NULL;
    sh[0] = "/bin/sh";
    sh[1] = (char *)path;
    for (size_t i = 1; i <= n; i++)
        sh[i + 1] = argv[i];
    return sh;
}

void command_free(struct command *c)
{
    free(c->argv);
    free(c->path);
    c->argv = NULL;
    c->path = NULL;
}
