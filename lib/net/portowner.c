/* Who listens on a local TCP port (see portowner.h). */
#include <stdio.h>

#include "net/portowner.h"

#define TCP_LISTEN 0x0A /* the kernel's TCP_LISTEN state */

/* One /proc/net/tcp{,6} table: 1 with a stranger's uid, else 0.  A line:
 *   sl local_address rem_address st tx_queue:rx_queue tr:tm->when
 *   retrnsmt uid timeout inode ...
 * with addresses as HEX:PORT (the port in hex). */
static int scan(const char *path, int port, unsigned self, unsigned *uid)
{
    FILE *f = fopen(path, "re");
    char line[512];
    int found = 0;
    if (!f)
        return 0;
    if (!fgets(line, sizeof line, f)) { /* the header */
        fclose(f);
        return 0;
    }
    while (!found && fgets(line, sizeof line, f)) {
        unsigned lport, st, u;
        if (sscanf(line, " %*u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x "
                         "%*x:%*x %*x:%*x %*x %u",
                   &lport, &st, &u) == 3 &&
            (int)lport == port && st == TCP_LISTEN && u != self) {
            *uid = u;
            found = 1;
        }
    }
    fclose(f);
    return found;
}

int amldist__net_port_stranger(int port, unsigned self, unsigned *uid)
{
    return scan("/proc/net/tcp", port, self, uid) ||
           scan("/proc/net/tcp6", port, self, uid);
}
