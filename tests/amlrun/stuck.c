/* A native worker for amlrun_hang_stacks.sh, built there with -g -O0.
 *
 * usage: stuck MODE RANK DIR
 * Writes DIR/pid.<its RANK> then, if its RANK is RANK, gets stuck as MODE
 * says: "spin" in a C loop (spin_forever), "read" blocked in read(2) on a
 * pipe nobody writes (wait_for_input), "stop" stopped by SIGSTOP (it stops
 * itself); every other rank waits in pause(2) (wait_for_peers), as ranks
 * blocked in a collective do. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile unsigned long spins;

static void spin_forever(void)
{
    for (;;)
        spins++;
}

static void wait_for_input(void)
{
    int p[2];
    char c;
    if (pipe(p) == 0)
        (void)read(p[0], &c, 1);
}

static void wait_for_peers(void)
{
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    const char *rank = getenv("RANK");
    char path[4096];
    snprintf(path, sizeof path, "%s/pid.%s", argv[3], rank ? rank : "x");
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    if (rank && strcmp(rank, argv[2]) == 0) {
        if (strcmp(argv[1], "spin") == 0)
            spin_forever();
        else if (strcmp(argv[1], "read") == 0)
            wait_for_input();
        else if (strcmp(argv[1], "stop") == 0)
            raise(SIGSTOP);
    }
    wait_for_peers();
    return 0;
}
