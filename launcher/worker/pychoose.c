/* The workers' Python when none is named (see pychoose.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/pychoose.h"
#include "worker/torchver.h"

extern char **environ;

/* PATH's python3s and /usr/bin/python3, each asked at most once: a Python
 * costs tens of milliseconds to start (a pyenv shim a tenth of a second),
 * and the first answer that has torch ends the search. */
#define MAX_CANDIDATES 8

struct cands {
    char *path[MAX_CANDIDATES];
    char *real[MAX_CANDIDATES]; /* its directory resolved, + "/python3" */
    int n;
};

/* Add DIR/python3 when it is an executable file not already there: the
 * same file through two directories (/bin and /usr/bin on a merged /usr)
 * once, but a venv's bin/python3, a link to the system's, stays apart:
 * the venv is found from the path it is run by. */
static int add_candidate(struct cands *c, const char *dir, size_t len)
{
    char path[PATH_MAX], real[PATH_MAX];
    struct stat st;
    if (c->n >= MAX_CANDIDATES || len + sizeof "/python3" > sizeof path)
        return 0;
    /* An empty entry is the current directory, as for execvp. */
    snprintf(path, sizeof path, "%.*s/python3", len ? (int)len : 1,
             len ? dir : ".");
    if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) ||
        access(path, X_OK) < 0)
        return 0;
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%.*s", (int)(strrchr(path, '/') - path), path);
    if (!realpath(d, real) || strlen(real) + sizeof "/python3" > sizeof real)
        return 0;
    strcat(real, "/python3");
    for (int k = 0; k < c->n; k++)
        if (strcmp(c->real[k], real) == 0)
            return 0;
    c->path[c->n] = strdup(path);
    c->real[c->n] = strdup(real);
    if (!c->path[c->n] || !c->real[c->n]) {
        free(c->path[c->n]);
        free(c->real[c->n]);
        errno = ENOMEM;
        return -1;
    }
    c->n++;
    return 0;
}

static int find_candidates(const char *path_env, struct cands *c)
{
    const char *p = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
    for (;;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        if (add_candidate(c, p, len) < 0)
            return -1;
        if (!colon)
            break;
        p = colon + 1;
    }
    return add_candidate(c, "/usr/bin", strlen("/usr/bin"));
}

static const char *answer_words(int v)
{
    return v == TORCH_NONE ? "no torch" : "did not answer";
}

/* ch->why for the chosen candidate K of C (its answer V). */
static int say_why(struct py_choice *ch, int k, int v)
{
    int len;
    if (v >= 0 && k == 0)
        len = asprintf(&ch->why, "the first python3 in PATH, which has "
                       "torch");
    else if (v >= 0)
        len = asprintf(&ch->why, "the first python3 with torch; %s",
                       ch->tried);
    else
        len = asprintf(&ch->why, "the first python3 in PATH; none has "
                       "torch: %s", ch->tried);
    if (len < 0) {
        ch->why = NULL;
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

int python_choose(const char *path_env, struct py_choice *ch)
{
    struct cands c = {.n = 0};
    memset(ch, 0, sizeof *ch);
    int rc = find_candidates(path_env, &c), k, v[MAX_CANDIDATES] = {0};
    size_t len = 0;
    for (k = 0; rc == 0 && k < c.n; k++) {
        v[k] = torch_probe(c.path[k], environ);
        if (v[k] >= 0)
            break;
        if (len < sizeof ch->tried)
            len += (size_t)snprintf(ch->tried + len, sizeof ch->tried - len,
                                    "%s%s: %s", len ? ", " : "", c.path[k],
                                    answer_words(v[k]));
    }
    if (rc == 0 && c.n == 0) {
        errno = ENOENT;
        rc = -1;
    }
    if (rc == 0) {
        /* None with torch: PATH's first, as before, and said. */
        int chosen = k < c.n ? k : 0;
        ch->first = chosen == 0;
        ch->torch = v[chosen];
        ch->path = c.path[chosen];
        c.path[chosen] = NULL;
        rc = say_why(ch, chosen, v[chosen]);
    }
    for (k = 0; k < c.n; k++) {
        free(c.path[k]);
        free(c.real[k]);
    }
    return rc;
}

/* Whether the names of one import line (after "import " or "from ") name
 * torch: "torch", "torch.nn", "os, torch", "numpy as np, torch". */
static int names_torch(const char *p, int first_only)
{
    while (*p && *p != '\n') {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        size_t n = strcspn(p, " \t,.\n;");
        if (n == 5 && strncmp(p, "torch", 5) == 0)
            return 1;
        if (first_only)
            return 0;
        p += n;
        p += strcspn(p, " \t,\n;");
        if (*p == ';')
            return 0;
    }
    return 0;
}

int script_imports_torch(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    static char buf[256 << 10];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    for (char *line = buf; line; line = strchr(line, '\n')) {
        while (*line == '\n' || *line == ' ' || *line == '\t')
            line++;
        if ((strncmp(line, "import ", 7) == 0 && names_torch(line + 7, 0)) ||
            (strncmp(line, "from ", 5) == 0 && names_torch(line + 5, 1)))
            return 1;
    }
    return 0;
}

void py_choice_free(struct py_choice *ch)
{
    free(ch->path);
    free(ch->why);
    ch->path = ch->why = NULL;
}
