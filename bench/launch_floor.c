/* The driver of bench/launch_floor.sh: ROUNDS rounds, each the fork floor
 * (fork and exec N /bin/true, wait for all) and each command given after a
 * "--" (fork and exec, wait), in an order that turns round by round, so
 * that all see the same load and none always comes after another.  One
 * line per round: the floor's wall time, then each command's, in seconds.
 *     launch_floor ROUNDS N -- COMMAND [ARG...] [-- COMMAND [ARG...]]...
 * Exit status: 1 when a command failed in some round. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CMDS 4

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static pid_t start(char **argv)
{
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* Wait for every child; 0 when all exited 0. */
static int wait_all(void)
{
    int status, bad = 0;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bad = 1;
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: %s ROUNDS N -- COMMAND [ARG...] [-- COMMAND [ARG...]]...\n",
                argv[0]);
        return 2;
    }
    int rounds = atoi(argv[1]), n = atoi(argv[2]), failed = 0, ncmd = 0;
    /* Each command's words, its "--" made the end of the one before. */
    char **cmd[MAX_CMDS];
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--") != 0)
            continue;
        argv[i] = NULL;
        if (i + 1 >= argc || strcmp(argv[i + 1], "--") == 0 || ncmd == MAX_CMDS) {
            fprintf(stderr, "%s: an empty command, or more than %d\n", argv[0], MAX_CMDS);
            return 2;
        }
        cmd[ncmd++] = argv + i + 1;
    }
    /* The figures go where stdout went; the children's stdout is
     * /dev/null, so that a command that prints cannot mix into them.  Set
     * once here: no extra call in any child, the floor's or a command's. */
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC), keep = dup(1);
    FILE *out = keep >= 0 ? fdopen(keep, "w") : NULL;
    if (null < 0 || !out || dup2(null, 1) < 0) {
        perror("launch_floor: stdout");
        return 2;
    }
    close(null);
    char *truev[] = {"/bin/true", NULL};
    double t[1 + MAX_CMDS];
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k <= ncmd; k++) {
            int w = (r + k) % (ncmd + 1); /* 0: the floor */
            double t0 = now();
            if (w == 0) {
                for (int i = 0; i < n; i++)
                    if (start(truev) < 0)
                        return 2;
                if (wait_all())
                    return 2;
            } else {
                if (start(cmd[w - 1]) < 0)
                    return 2;
                failed |= wait_all();
            }
            t[w] = now() - t0;
        }
        for (int w = 0; w <= ncmd; w++)
            fprintf(out, "%.6f%c", t[w], w == ncmd ? '\n' : ' ');
    }
    return fclose(out) == 0 ? failed : 2;
}
