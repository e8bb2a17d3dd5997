/*
 * The helpers every part of a capture uses (see capture_core.h): the
 * clock, /proc's status and stat lines, a rank's error line, freeing
 * frames.  They call nothing of launcher/stacks.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output/msg.h"
#include "stacks/capture_core.h"
#include "util/clock.h"

const char *cap_status_field(pid_t pid, pid_t tid, const char *name,
                             char *buf, size_t size)
{
    char path[64];
    if (!pid)
        snprintf(path, sizeof path, "/proc/self/status");
    else if (tid)
        snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid,
                 (int)tid);
    else
        snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    const char *found = NULL;
    size_t len = strlen(name);
    while (f && !found && fgets(buf, (int)size, f))
        if (!strncmp(buf, name, len) && buf[len] == ':')
            found = buf + len + 1;
    if (f)
        fclose(f);
    return found;
}

char cap_task_state(pid_t pid, pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    if (read_small(path, buf, sizeof buf) < 0)
        return 0;
    char *p = strrchr(buf, ')'); /* the name may hold anything */
    return p && p[1] == ' ' ? p[2] : 0;
}

int cap_gone_state(char s)
{
    return s == 0 || s == 'Z' || s == 'X' || s == 'x';
}

double cap_now_ms(void)
{
    return (double)amldist__now_ns() / 1e6;
}

int cap_error(struct stk_rank *r, const char *fmt, ...)
{
    char *add, *line;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&add, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    if (!r->error) {
        r->error = add;
        return 0;
    }
    n = asprintf(&line, "%s; %s", r->error, add);
    free(add);
    if (n < 0)
        return -1;
    free(r->error);
    r->error = line;
    return 0;
}

void cap_frames_free(struct stk_frame *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(f[i].function);
        free(f[i].file);
        free(f[i].module);
    }
    free(f);
}

int cap_holds_fd(pid_t pid, int fd)
{
    struct stat mine;
    if (fd < 0 || fstat(fd, &mine) < 0)
        return 0;
    char want[64], path[300], link[64];
    snprintf(want, sizeof want, "pipe:[%lu]", (unsigned long)mine.st_ino);
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1; /* not ours to read (not dumpable): not known */
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        snprintf(path, sizeof path, "/proc/%d/fd/%s", (int)pid, e->d_name);
        ssize_t k = readlink(path, link, sizeof link - 1);
        if (k > 0) {
            link[k] = '\0';
            found = !strcmp(link, want);
        }
    }
    closedir(d);
    return found;
}

void cap_thread_wait(pid_t pid, pid_t tid, char *buf, size_t size)
{
    char path[64], wchan[128];
    char st = cap_task_state(pid, tid);
    snprintf(path, sizeof path, "/proc/%d/task/%d/wchan", (int)pid, (int)tid);
    /* "0" where the kernel hides it (kptr_restrict) or it runs */
    if (read_small(path, wchan, sizeof wchan) <= 0 || !strcmp(wchan, "0"))
        wchan[0] = '\0';
    wchan[strcspn(wchan, "\n")] = '\0';
    const char *what = st == 'D' ? " (uninterruptible sleep)"
                       : st == 'R' ? " (running)" : "";
    snprintf(buf, size, "state %c%s%s%s", st ? st : '?', what,
             wchan[0] ? " in " : "", wchan);
}
