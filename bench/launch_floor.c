/* The driver of bench/launch_floor.sh: ROUNDS rounds, each the fork floor
 * (fork and exec N /bin/true, wait for all) then the command after "--"
 * (fork and exec, wait), alternating so that both see the same load.  One
 * line per round: the floor's and the command's wall time in seconds.
 *     launch_floor ROUNDS N -- COMMAND [ARG...]
 * Exit status: 1 when the command failed in some round. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
        fprintf(stderr, "usage: %s ROUNDS N -- COMMAND [ARG...]\n", argv[0]);
        return 2;
    }
    int rounds = atoi(argv[1]), n = atoi(argv[2]), failed = 0;
    char *truev[] = {"/bin/true", NULL};
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        for (int i = 0; i < n; i++)
            if (start(truev) < 0)
                return 2;
        if (wait_all())
            return 2;
        double t1 = now();
        if (start(argv + 4) < 0)
            return 2;
        failed |= wait_all();
        double t2 = now();
        printf("%.6f %.6f\n", t1 - t0, t2 - t1);
    }
    return failed;
}
