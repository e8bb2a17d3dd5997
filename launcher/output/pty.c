/* Pseudo-terminals for the workers' streams (see pty.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "output/pty.h"

void out_pty_resize(int console, int master)
{
    struct winsize ws;
    if (ioctl(console, TIOCGWINSZ, &ws) == 0)
        (void)ioctl(master, TIOCSWINSZ, &ws);
}

int out_pty_open(int console, int *master, int *slave)
{
    char name[64];
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC), s = -1;
    if (m < 0)
        return -1;
    if (grantpt(m) < 0 || unlockpt(m) < 0 ||
        ptsname_r(m, name, sizeof name) != 0)
        goto fail;
    s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (s < 0)
        goto fail;
    /* No output processing: "\n" stays "\n" (ONLCR would make it "\r\n"),
     * so that the console and the log files get the bytes a pipe gives. */
    struct termios t;
    if (tcgetattr(s, &t) < 0)
        goto fail;
    t.c_oflag &= ~(tcflag_t)OPOST;
    if (tcsetattr(s, TCSANOW, &t) < 0)
        goto fail;
    out_pty_resize(console, m);
    *master = m;
    *slave = s;
    return 0;
fail:;
    int err = errno;
    close(m);
    if (s >= 0)
        close(s);
    errno = err;
    return -1;
}
