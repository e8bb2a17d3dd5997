/*
 * progress_steps: a training loop's shape with the progress API.  Each of
 * STEPS steps "works" STEP_MS milliseconds (a sleep; SLOW_RANK's steps
 * EXTRA_MS more), then tells amlrun with amldist_progress(step):
 *
 *     $ amlrun -n 4 progress_steps 40 10 2 15
 *     ...
 *     amlrun: slowest rank 2: node 0 (host vm), 309 ms behind the median over 40 steps
 *
 * `progress_steps --loop N` calls amldist_progress() N times as fast as it
 * can and prints the nanoseconds per call (bench/progress.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <amldist.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int loop(unsigned long long n)
{
    int rc = 0;
    double t0 = now_ns();
    for (unsigned long long i = 1; i <= n; i++)
        rc |= amldist_progress(i);
    double t1 = now_ns();
    printf("%.1f ns per call (%llu calls)\n", (t1 - t0) / (double)n, n);
    return rc != 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--loop") == 0)
        return loop(strtoull(argv[2], NULL, 10));
    if (argc != 3 && argc != 5) {
        fprintf(stderr, "usage: progress_steps STEPS STEP_MS [SLOW_RANK "
                        "EXTRA_MS] | --loop N\n");
        return 2;
    }
    long steps = strtol(argv[1], NULL, 10);
    long ms = strtol(argv[2], NULL, 10);
    const char *r = getenv("RANK");
    int rank = r ? atoi(r) : 0;
    if (argc == 5 && rank == atoi(argv[3]))
        ms += strtol(argv[4], NULL, 10);
    for (long s = 1; s <= steps; s++) {
        struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&d, NULL);
        if (amldist_progress((unsigned long long)s) != 0)
            return 1;
    }
    printf("rank %d: %ld steps\n", rank, steps);
    return 0;
}
