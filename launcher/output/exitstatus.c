/* Wait statuses in words (see exitstatus.h). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "output/exitstatus.h"

int status_exit_code(int wstatus)
{
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return 255;
}

int status_failed(int wstatus)
{
    return !(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
}

void signal_name(int sig, char *buf, size_t size)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
        snprintf(buf, size, "SIG%s", abbrev);
    else
        snprintf(buf, size, "SIG%d", sig);
}

void status_describe(int wstatus, char *buf, size_t size)
{
    if (WIFEXITED(wstatus)) {
        snprintf(buf, size, "exited with status %d", WEXITSTATUS(wstatus));
    } else if (WIFSIGNALED(wstatus)) {
        char name[32];
        signal_name(WTERMSIG(wstatus), name, sizeof name);
        snprintf(buf, size, "killed by signal %d (%s)%s", WTERMSIG(wstatus),
                 name, WCOREDUMP(wstatus) ? ", core dumped" : "");
    } else {
        snprintf(buf, size, "ended with wait status 0x%x", (unsigned)wstatus);
    }
}
