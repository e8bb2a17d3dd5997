/* The worker's command line and executable (see command.h). */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "worker/command.h"
#include "worker/pychoose.h"
#include "output/msg.h"

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

/* The interpreter a "#!" line names, as the kernel reads it: after "#!"
 * and blanks, up to a blank or the end of the line, within 256 bytes. */
static int script_interpreter(const char *head, size_t n, char *out,
                              size_t size)
{
    if (n < 2 || head[0] != '#' || head[1] != '!')
        return 0;
    size_t i = 2;
    while (i < n && (head[i] == ' ' || head[i] == '\t'))
        i++;
    size_t k = 0;
    while (i < n && head[i] != ' ' && head[i] != '\t' && head[i] != '\n' &&
           head[i] != '\0' && k + 1 < size)
        out[k++] = head[i++];
    out[k] = '\0';
    return k > 0;
}

/* The program interpreter (PT_INTERP) of an ELF file of this machine's
 * byte order, 32 or 64 bit. */
static int elf_interpreter(int fd, const unsigned char *head, size_t n,
                           char *out, size_t size)
{
    if (n < EI_NIDENT || memcmp(head, ELFMAG, SELFMAG) != 0)
        return 0;
    const union { uint16_t u; unsigned char c[2]; } order = {1};
    if (head[EI_DATA] != (order.c[0] ? ELFDATA2LSB : ELFDATA2MSB))
        return 0;
    uint64_t phoff, off = 0, len = 0;
    unsigned phnum, phentsize;
    if (head[EI_CLASS] == ELFCLASS64 && n >= sizeof(Elf64_Ehdr)) {
        Elf64_Ehdr eh;
        memcpy(&eh, head, sizeof eh);
        phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize;
    } else if (head[EI_CLASS] == ELFCLASS32 && n >= sizeof(Elf32_Ehdr)) {
        Elf32_Ehdr eh;
        memcpy(&eh, head, sizeof eh);
        phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize;
    } else {
        return 0;
    }
    int is64 = head[EI_CLASS] == ELFCLASS64;
    if (phentsize < (is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)))
        return 0;
    for (unsigned i = 0; i < phnum && i < 256 && !len; i++) {
        union { Elf64_Phdr p64; Elf32_Phdr p32; } ph;
        if (pread(fd, &ph, phentsize < sizeof ph ? phentsize : sizeof ph,
                  (off_t)(phoff + (uint64_t)i * phentsize)) <
            (ssize_t)(is64 ? sizeof ph.p64 : sizeof ph.p32))
            return 0;
        if ((is64 ? ph.p64.p_type : ph.p32.p_type) == PT_INTERP) {
            off = is64 ? ph.p64.p_offset : ph.p32.p_offset;
            len = is64 ? ph.p64.p_filesz : ph.p32.p_filesz;
        }
    }
    if (len < 2 || len > size)
        return 0;
    if (pread(fd, out, (size_t)len, (off_t)off) != (ssize_t)len ||
        out[len - 1] != '\0')
        return 0;
    return 1;
}

const char *command_exec_error(const char *path, int err, char *buf,
                               size_t size)
{
    struct stat st;
    if (err == EACCES && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return strerror(EISDIR);
    if (err == ENOENT || err == EACCES) {
        /* The file is there, but what it asks the kernel to run is not. */
        unsigned char head[256];
        char interp[256];
        ssize_t n = -1;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
            n = pread(fd, head, sizeof head, 0);
        int found = 0;
        if (n > 0 && script_interpreter((const char *)head, (size_t)n, interp,
                                        sizeof interp))
            found = 1;
        else if (n > 0 && err == ENOENT &&
                 elf_interpreter(fd, head, (size_t)n, interp, sizeof interp))
            found = 2;
        if (fd >= 0)
            close(fd);
        if (found && access(interp, found == 1 ? X_OK : F_OK) < 0) {
            snprintf(buf, size, "%s %s: %s",
                     found == 1 ? "bad interpreter" : "its ELF interpreter",
                     interp, strerror(errno));
            return buf;
        }
    }
    struct statvfs vfs;
    if (err == EACCES && statvfs(path, &vfs) == 0 && (vfs.f_flag & ST_NOEXEC)) {
        snprintf(buf, size, "%s (its file system is mounted noexec)",
                 strerror(err));
        return buf;
    }
    return strerror(err);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A regular file that exists and that we may not execute. */
static int unexecutable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
           access(path, X_OK) < 0;
}

static int in_path(const char *name)
{
    char *p = command_which(name, getenv("PATH"));
    int found = p != NULL;
    free(p);
    return found;
}

/*
 * torchrun runs every command under python unless --no-python.  amlrun
 * also runs programs, so it hands python what can only be a script for it:
 * a .py name, or a file that exists but cannot be executed (a path, or a
 * name in the current directory that PATH does not have).  Anything else,
 * an executable or a name found in PATH, is executed as it is.  Returns
 * why python runs it, or NULL.
 */
static const char *python_reason(const struct amlrun_opts *o,
                                 const char *name)
{
    if (o->run_path)
        return "--run-path";
    if (o->module)
        return "a Python module (-m)";
    if (o->no_python || !*name)
        return NULL;
    if (ends_with(name, ".py"))
        return "a .py file";
    if (unexecutable_file(name) && (strchr(name, '/') || !in_path(name)))
        return "a file without execute permission, a script as torchrun "
               "sees it (--no-python executes it)";
    return NULL;
}

/* -c code that does what torchrun's --run-path does in its worker. */
static const char run_path_code[] =
    "import runpy, sys; sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')";

/* A dry run of another machine's topology (--topology, or HWLOC_XMLFILE
 * as the library reads it) plans for that machine, where the command will
 * be; this one need not have it.  A real run, or a dry run of this
 * machine, needs it here and fails as it would. */
static const char *other_machine(const struct amlrun_opts *o)
{
    const char *xml = getenv("HWLOC_XMLFILE");
    if (!o->dry_run)
        return NULL;
    if (o->bind.topology != NULL)
        return o->bind.topology;
    return xml != NULL && *xml != '\0' ? xml : NULL;
}

static int absent_here(struct command *c, const char *prog, int err,
                       const char *xml)
{
    if (asprintf(&c->how, "%s: %s here, which a dry run of %s does not "
                          "need: shown as given",
                 prog, strerror(err), xml) < 0) {
        c->how = NULL;
        msg_errno(ENOMEM, "building the command line");
        return AMLRUN_EXIT_SYSTEM;
    }
    if (!(c->path = strdup(prog))) {
        msg_errno(ENOMEM, "building the command line");
        return AMLRUN_EXIT_SYSTEM;
    }
    return -1;
}

/* The python3 that has torch, when no Python was named (pychoose.h); its
 * reason in *why (malloc'd).  -1, or an exit status after a message. */
static int choose_python(const struct amlrun_opts *o, struct command *c,
                         char **why)
{
    struct py_choice ch;
    if (python_choose(getenv("PATH"), &ch) < 0) {
        int err = errno;
        msg_errno(err, err == ENOMEM ? "looking up python3"
                                     : "python3 (in PATH or /usr/bin)");
        return err == ENOMEM ? AMLRUN_EXIT_SYSTEM : AMLRUN_EXIT_NOTFOUND;
    }
    c->path = ch.path;
    c->torch_probed = 1;
    c->torch = ch.torch;
    *why = ch.why;
    /* Python finds sys.executable from argv[0]: the one it runs as. */
    if (!ch.first)
        c->argv[0] = c->path;
    if (ch.torch < 0 && !o->quiet && !o->module && !o->run_path &&
        script_imports_torch(o->cmd[0]))
        msg("%s imports torch, which no python3 here has (%s): name the "
            "Python that has it with --python or AMLRUN_PYTHON", o->cmd[0],
            ch.tried);
    return -1;
}

int command_build(const struct amlrun_opts *o, struct command *c)
{
    memset(c, 0, sizeof *c);
    c->local_rank_at = -1;
    const char *why = python_reason(o, o->cmd[0]);
    c->runs_python = why != NULL;
    int legacy_arg = o->legacy && !o->use_env;
    /* python3 -u [-m | -c code] script [--local_rank=N] args... NULL */
    size_t n = (size_t)o->ncmd + 6;
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
        if (o->run_path) {
            c->argv[k++] = "-c";
            c->argv[k++] = (char *)run_path_code;
        } else if (o->module) {
            c->argv[k++] = "-m";
        }
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

    if (!*prog) {
        /* Not "amlrun: : No such file or directory". */
        msg(c->runs_python ? "the Python interpreter (--python) is empty"
                           : "the command is empty");
        return AMLRUN_EXIT_NOTFOUND;
    }
    char *pywhy = NULL;
    if (c->runs_python && o->python == options_default_python &&
        !other_machine(o)) {
        int rc = choose_python(o, c, &pywhy);
        if (rc >= 0)
            return rc;
    } else {
        c->path = command_which(prog, getenv("PATH"));
    }
    if (!c->path && errno != ENOMEM && other_machine(o))
        return absent_here(c, prog, errno, other_machine(o));
    if (!c->path) {
        int err = errno;
        if (err == ENOMEM) {
            msg_errno(err, "looking up %s", prog);
            return AMLRUN_EXIT_SYSTEM;
        }
        msg_errno(err, "%s", prog);
        return err == ENOENT ? AMLRUN_EXIT_NOTFOUND : AMLRUN_EXIT_NOEXEC;
    }
    /* Each rank's python would say the script is missing, N times over
     * and with its own status 2: say it once, as for a missing program.
     * A dry run starts no python, and shows the plan as before. */
    struct stat st;
    if (c->runs_python && !o->module && !o->dry_run &&
        stat(o->cmd[0], &st) < 0 && (errno == ENOENT || errno == ENOTDIR)) {
        msg_errno(errno, "%s", o->cmd[0]);
        free(pywhy);
        return AMLRUN_EXIT_NOTFOUND;
    }
    int len;
    if (why)
        len = asprintf(&c->how, "%s: %s; runs %sunder %s -u%s%s%s%s",
                       o->cmd[0], why,
                       o->run_path ? "through runpy.run_path() " : "",
                       c->path, !o->run_path && o->module ? " -m" : "",
                       pywhy ? " (" : "", pywhy ? pywhy : "",
                       pywhy ? ")" : "");
    else
        len = asprintf(&c->how, "%s: %s%s%s; executed as it is", o->cmd[0],
                       o->no_python ? "--no-python, " : "",
                       strchr(prog, '/') ? "a path" : "found in PATH as ",
                       strchr(prog, '/') ? "" : c->path);
    free(pywhy);
    if (len < 0) {
        c->how = NULL;
        msg_errno(ENOMEM, "building the command line");
        return AMLRUN_EXIT_SYSTEM;
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
    free(c->how);
    c->argv = NULL;
    c->path = NULL;
    c->how = NULL;
}
