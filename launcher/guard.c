/* The orphan guard (see guard.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "guard.h"
#include "msg.h"

struct guard_msg {
    char op; /* 'A' add, 'D' delete, 'Q' quit */
    int32_t pgid;
};

static int guard_fd = -1;
static pid_t guard_child;

static _Noreturn void guard_main(int fd)
{
    /* Out of amlrun's group: a Ctrl-C or a kill of amlrun's group must not
     * take the guard away before it has done its job.  The signals amlrun
     * blocked stay blocked here; only SIGKILL ends the guard early. */
    setpgid(0, 0);
    prctl(PR_SET_NAME, "amlrun-guard");
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
    }
    pid_t *groups = NULL;
    size_t n = 0, cap = 0;
    struct guard_msg m;
    for (;;) {
        ssize_t r = read(fd, &m, sizeof m);
        if (r < 0 && errno == EINTR)
            continue;
        if (r != (ssize_t)sizeof m)
            break; /* amlrun is gone */
        if (m.op == 'Q')
            _exit(0);
        if (m.op == 'A') {
            if (n == cap) {
                size_t c = cap ? cap * 2 : 16;
                pid_t *g = realloc(groups, c * sizeof *g);
                if (!g)
                    continue;
                groups = g;
                cap = c;
            }
            groups[n++] = m.pgid;
        } else if (m.op == 'D') {
            for (size_t i = 0; i < n; i++)
                if (groups[i] == m.pgid) {
                    groups[i] = groups[--n];
                    break;
                }
        }
    }
    for (size_t i = 0; i < n; i++)
        kill(-groups[i], SIGKILL);
    _exit(0);
}

int guard_start(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        close(p[1]);
        guard_main(p[0]);
    }
    close(p[0]);
    guard_fd = p[1];
    guard_child = pid;
    return 0;
}

static void guard_send(char op, pid_t pgid)
{
    if (guard_fd < 0)
        return;
    struct guard_msg m;
    memset(&m, 0, sizeof m); /* no uninitialised padding on the wire */
    m.op = op;
    m.pgid = (int32_t)pgid;
    /* Small writes to a pipe are atomic; a failure means the guard died,
     * and then there is nothing better to do than go on. */
    (void)write_all(guard_fd, &m, sizeof m);
}

void guard_add(pid_t pgid) { guard_send('A', pgid); }
void guard_del(pid_t pgid) { guard_send('D', pgid); }

void guard_stop(void)
{
    guard_send('Q', 0);
    if (guard_fd >= 0)
        close(guard_fd);
    guard_fd = -1;
}

pid_t guard_pid(void) { return guard_child; }
