/* What a frame is (see frames.h). */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "stacks/frames.h"

int stk_thread_own(const struct stk_rank *r, const struct stk_thread *t)
{
    return t->pid <= 0 || t->pid == r->pid;
}

int stk_rank_python(const struct stk_rank *r)
{
    for (size_t i = 0; i < r->nthreads; i++)
        if (r->threads[i].npython && stk_thread_own(r, &r->threads[i]))
            return 1;
    return 0;
}

const struct stk_frame *stk_thread_frames(const struct stk_thread *t, int python, size_t *n)
{
    *n = python ? t->npython : t->nnative;
    return python ? t->python : t->native;
}

static int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

const char *stk_base(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

int stk_int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* ".../lib/python3.11/..." or lib64: the standard library's folder (the
 * packages in it are under site-packages or dist-packages). */
static int stdlib_path(const char *file)
{
    static const char *const dirs[] = {"/lib/python", "/lib64/python"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        for (const char *p = strstr(file, dirs[i]); p; p = strstr(p + 1, dirs[i]))
            if (isdigit((unsigned char)p[strlen(dirs[i])]))
                return 1;
    return 0;
}

int stk_frame_user(const struct stk_frame *f, int python)
{
    const char *path = python ? f->file : f->module;
    if (!path || !*path)
        return 0;
    if (strstr(path, "/site-packages/") || strstr(path, "/dist-packages/"))
        return 0;
    if (python) {
        /* "<frozen importlib._bootstrap>", "<eval_with_key>.3" are not the
         * user's; "python -c" and a script on stdin are. */
        if (path[0] == '<')
            return strcmp(path, "<string>") == 0 || strcmp(path, "<stdin>") == 0;
        return !stdlib_path(path);
    }
    static const char *const dirs[] = {"/lib/",          "/lib32/",        "/lib64/",
                                       "/usr/lib/",      "/usr/lib32/",    "/usr/lib64/",
                                       "/usr/libexec/",  "/usr/local/cuda", "/usr/bin/",
                                       "/bin/"};
    static const char *const names[] = {"ld-linux", "ld-musl", "linux-vdso", "linux-gate",
                                        "libc.",    "libc-",   "libpthread", "libpython",
                                        "python",   "libcuda", "libnccl"};
    if (path[0] == '[') /* [vdso], [vsyscall] */
        return 0;
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        if (starts(path, dirs[i]))
            return 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (starts(stk_base(path), names[i]))
            return 0;
    return 1;
}

/* s contains word, ignoring case. */
static int has_word(const char *s, const char *word)
{
    size_t n = strlen(word);
    for (; *s; s++)
        if (strncasecmp(s, word, n) == 0)
            return 1;
    return 0;
}

int stk_frame_collective(const struct stk_frame *f)
{
    static const char *const words[] = {
        "all_reduce", "allreduce",      "all_gather",    "allgather", "reduce_scatter",
        "reducescatter", "all_to_all",  "alltoall",      "broadcast", "barrier",
        "MPI_",        "gloo::",        "ncclGroupEnd",  "monitored_barrier"};
    if (f->file && strstr(f->file, "/torch/distributed/"))
        return 1;
    for (size_t i = 0; f->function && i < sizeof words / sizeof *words; i++)
        if (has_word(f->function, words[i]))
            return 1;
    return 0;
}

/* NULL (unknown) before any name. */
static int str_cmp(const char *a, const char *b)
{
    if (!a || !b)
        return (a != NULL) - (b != NULL);
    return strcmp(a, b);
}

int stk_frames_cmp(const struct stk_frame *a, size_t na, const struct stk_frame *b,
                   size_t nb)
{
    if (na != nb)
        return na < nb ? -1 : 1;
    for (size_t i = 0; i < na; i++) {
        int c = str_cmp(a[i].function, b[i].function);
        if (!c)
            c = str_cmp(a[i].file, b[i].file);
        if (!c && !a[i].function && !a[i].file)
            c = str_cmp(a[i].module, b[i].module);
        if (!c && i > 0 && a[i].line != b[i].line)
            c = a[i].line < b[i].line ? -1 : 1;
        if (c)
            return c;
    }
    return 0;
}
