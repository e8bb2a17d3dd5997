/* The progress page (lib/progress/page.h): its memfd, the worker's slot
 * lookup and claim, the writer and the reader's consistency (also with
 * threads writing and reading at once), and amldist_progress() in a real
 * child process (this program run again) and in a forked one. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "amldist.h"
#include "progress/page.h"
#include "test.h"

extern char **environ;

static void set_env(const amldist__progress_page_t *pg, int slot)
{
    char fd[16], s[16];
    snprintf(fd, sizeof fd, "%d", amldist__progress_page_fd(pg));
    snprintf(s, sizeof s, "%d", slot);
    setenv(AMLDIST__PROGRESS_FD_ENV, fd, 1);
    setenv(AMLDIST__PROGRESS_SLOT_ENV, s, 1);
}

/* A page of n slots, its descriptor's number written in fd[16]. */
static amldist__progress_page_t *new_page(unsigned n, char *fd)
{
    amldist__progress_page_t *pg = amldist__progress_page_create(n);
    snprintf(fd, 16, "%d", amldist__progress_page_fd(pg));
    return pg;
}

static void test_create(void)
{
    errno = 0;
    CHECK(amldist__progress_page_create(0) == NULL && errno == EINVAL);
    CHECK(amldist__progress_page_create(AMLDIST__PROGRESS_MAX_SLOTS + 1) ==
          NULL);
    amldist__progress_page_t *pg = amldist__progress_page_create(3);
    CHECK(pg != NULL);
    int fd = amldist__progress_page_fd(pg);
    CHECK(fd >= 0);
    CHECK_INT_EQ(amldist__progress_page_slots(pg), 3);
    /* Inherited by the workers: not close-on-exec. */
    CHECK_INT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && S_ISREG(st.st_mode));
    CHECK_INT_EQ(st.st_size, AMLDIST__PROGRESS_HEADER +
                                 3 * AMLDIST__PROGRESS_SLOT_SIZE);
    /* Sealed: no worker shrinks it under amlrun's reads. */
    int seals = fcntl(fd, F_GET_SEALS);
    CHECK((seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ==
          (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
    CHECK(ftruncate(fd, 0) < 0 && errno == EPERM);
    /* A fresh slot has no calls. */
    amldist__progress_sample_t s = {9, 9, 9, 9, 9};
    CHECK_INT_EQ(amldist__progress_page_read(pg, 2, &s), 0);
    CHECK_INT_EQ(s.calls, 0);
    CHECK(amldist__progress_page_read(pg, 3, &s) < 0 && errno == EINVAL);
    amldist__progress_page_destroy(pg);
    amldist__progress_page_destroy(NULL);
}

static void test_open_refuses_bad_values(void)
{
    char fd[16];
    amldist__progress_page_t *pg = new_page(2, fd);
    const char *bad_fd[] = {NULL, "", "-1", "x", "3x", " 3", "+3",
                            "99999999999999999999", "1000000"};
    for (size_t i = 0; i < sizeof bad_fd / sizeof *bad_fd; i++)
        CHECK(amldist__progress_slot_open(bad_fd[i], "0", 42) == NULL);
    const char *bad_slot[] = {NULL, "", "-1", "2", "4096", "1.0", "0x1"};
    for (size_t i = 0; i < sizeof bad_slot / sizeof *bad_slot; i++)
        CHECK(amldist__progress_slot_open(fd, bad_slot[i], 42) == NULL);
    CHECK(amldist__progress_slot_open(fd, "0", 0) == NULL);
    /* A descriptor that is something else: a terminal or /dev/null, a
     * pipe, a file too small, a file of the size without the magic. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    int p[2];
    CHECK(pipe(p) == 0);
    char tmpl[] = "/tmp/progress-page.XXXXXX";
    int file = mkstemp(tmpl);
    unlink(tmpl);
    int others[] = {null, p[0], file};
    for (size_t i = 0; i < 3; i++) {
        char t[16];
        snprintf(t, sizeof t, "%d", others[i]);
        CHECK(amldist__progress_slot_open(t, "0", 42) == NULL);
    }
    CHECK(ftruncate(file, AMLDIST__PROGRESS_HEADER +
                              2 * AMLDIST__PROGRESS_SLOT_SIZE) == 0);
    char t[16];
    snprintf(t, sizeof t, "%d", file);
    CHECK(amldist__progress_slot_open(t, "0", 42) == NULL); /* no magic */
    CHECK(amldist__progress_slot_open(fd, "1", 42) != NULL);
    close(null);
    close(p[0]);
    close(p[1]);
    close(file);
    amldist__progress_page_destroy(pg);
}

static void test_claim(void)
{
    char fd[16];
    amldist__progress_page_t *pg = new_page(1, fd);
    CHECK(amldist__progress_slot_open(fd, "0", 100) != NULL);
    /* Another process that inherited the descriptor finds it taken. */
    CHECK(amldist__progress_slot_open(fd, "0", 200) == NULL);
    /* The same process (a worker that exec'd itself) keeps it. */
    CHECK(amldist__progress_slot_open(fd, "0", 100) != NULL);
    /* A restart frees it. */
    amldist__progress_page_reset(pg, 0);
    CHECK(amldist__progress_slot_open(fd, "0", 200) != NULL);
    amldist__progress_page_destroy(pg);
}

/* A long step announced (amldist_progress_expect): read with its end while
 * no call came since; the next call ends it; a reset forgets it. */
static void test_expect(void)
{
    char fd[16];
    amldist__progress_page_t *pg = new_page(1, fd);
    void *s = amldist__progress_slot_open(fd, "0", 7);
    CHECK(s != NULL);
    amldist__progress_sample_t sm;
    CHECK_INT_EQ(amldist__progress_page_read(pg, 0, &sm), 0);
    CHECK_INT_EQ(sm.expected, 0);
    CHECK_INT_EQ(sm.until_ns, 0);
    /* Before any call (the first step's compilation). */
    amldist__progress_slot_expect(s, 5000);
    CHECK_INT_EQ(amldist__progress_page_read(pg, 0, &sm), 0);
    CHECK_INT_EQ(sm.calls, 0);
    CHECK_INT_EQ(sm.expected, 1);
    CHECK_INT_EQ(sm.until_ns, 5000);
    amldist__progress_slot_write(s, 1, 4000);
    CHECK_INT_EQ(amldist__progress_page_read(pg, 0, &sm), 0);
    CHECK_INT_EQ(sm.until_ns, 0); /* the call ended it */
    CHECK_INT_EQ(sm.expected, 1);
    /* After calls; a new one replaces it. */
    amldist__progress_slot_expect(s, 9000);
    amldist__progress_slot_expect(s, 8000);
    CHECK_INT_EQ(amldist__progress_page_read(pg, 0, &sm), 0);
    CHECK_INT_EQ(sm.until_ns, 8000);
    amldist__progress_page_reset(pg, 0);
    CHECK_INT_EQ(amldist__progress_page_read(pg, 0, &sm), 0);
    CHECK_INT_EQ(sm.expected, 0);
    CHECK_INT_EQ(sm.until_ns, 0);
    amldist__progress_page_destroy(pg);
}

static void test_write_read_marks(void)
{
    char fd[16];
    amldist__progress_page_t *pg = new_page(2, fd);
    void *s = amldist__progress_slot_open(fd, "1", 7);
    CHECK(s != NULL);
    for (uint64_t k = 1; k <= 3; k++)
        amldist__progress_slot_write(s, 100 + k, (int64_t)k * 1000);
    amldist__progress_sample_t sm;
    CHECK_INT_EQ(amldist__progress_page_read(pg, 1, &sm), 0);
    CHECK_INT_EQ(sm.calls, 3);
    CHECK_INT_EQ(sm.step, 103);
    CHECK_INT_EQ(sm.t_ns, 3000);
    CHECK_INT_EQ(amldist__progress_page_read(pg, 0, &sm), 0);
    CHECK_INT_EQ(sm.calls, 0); /* the other slot */
    amldist__progress_mark_t m[AMLDIST__PROGRESS_RING];
    uint64_t cur = 0;
    CHECK_INT_EQ(amldist__progress_page_marks(pg, 1, &cur, m, 64), 3);
    CHECK_INT_EQ(cur, 3);
    CHECK_INT_EQ(m[0].step, 101);
    CHECK_INT_EQ(m[2].step, 103);
    CHECK_INT_EQ(m[2].t_ns, 3000);
    CHECK_INT_EQ(amldist__progress_page_marks(pg, 1, &cur, m, 64), 0);
    /* 70 more: the ring keeps the newest (62 of them are sure). */
    for (uint64_t k = 4; k <= 73; k++)
        amldist__progress_slot_write(s, 100 + k, (int64_t)k * 1000);
    size_t n = amldist__progress_page_marks(pg, 1, &cur, m, 64);
    CHECK_INT_EQ(n, AMLDIST__PROGRESS_RING - 1);
    CHECK_INT_EQ(cur, 73);
    CHECK_INT_EQ(m[n - 1].step, 173);
    for (size_t i = 1; i < n; i++)
        CHECK_INT_EQ(m[i].step, m[i - 1].step + 1);
    /* At most `max` at a time, the cursor on the first not taken. */
    for (uint64_t k = 74; k <= 80; k++)
        amldist__progress_slot_write(s, 100 + k, (int64_t)k * 1000);
    CHECK_INT_EQ(amldist__progress_page_marks(pg, 1, &cur, m, 5), 5);
    CHECK_INT_EQ(cur, 78);
    CHECK_INT_EQ(m[0].step, 174);
    CHECK_INT_EQ(amldist__progress_page_marks(pg, 1, &cur, m, 5), 2);
    CHECK_INT_EQ(m[1].step, 180);
    /* A reset starts the slot and a reader's cursor again. */
    amldist__progress_page_reset(pg, 1);
    CHECK_INT_EQ(amldist__progress_page_read(pg, 1, &sm), 0);
    CHECK_INT_EQ(sm.calls, 0);
    s = amldist__progress_slot_open(fd, "1", 8);
    CHECK(s != NULL);
    amldist__progress_slot_write(s, 1, 5);
    CHECK_INT_EQ(amldist__progress_page_marks(pg, 1, &cur, m, 64), 1);
    CHECK_INT_EQ(cur, 1);
    CHECK_INT_EQ(m[0].step, 1);
    amldist__progress_page_destroy(pg);
}

/* Writers store step k at time 10 k; a reader at the same time must never
 * see a mark or a sample that mixes two calls. */
#define CALLS 200000
struct race {
    int yield; /* the reader yields after each round */
    void *slot;
    const amldist__progress_page_t *pg;
    atomic_int done;
    atomic_uint reads; /* the reader's rounds */
    int bad;
    uint64_t seen;
};

static void *writer(void *arg)
{
    struct race *r = arg;
    for (uint64_t k = 1; k <= CALLS; k++) {
        amldist__progress_slot_write(r->slot, k, (int64_t)k * 10);
        /* Now and then, let the reader take a whole round with the
         * writers still (however the threads are scheduled), so that it
         * surely sees marks; the other rounds race with the writers. */
        if (k % 20000 == 0) {
            unsigned r0 = atomic_load(&r->reads);
            while (atomic_load(&r->reads) < r0 + 2)
                sched_yield();
        }
    }
    return NULL;
}

static void *reader(void *arg)
{
    struct race *r = arg;
    uint64_t cur = 0;
    amldist__progress_mark_t m[AMLDIST__PROGRESS_RING];
    /* Rounds while the writers run, and one after they ended. */
    for (int last = 0; !last;) {
        last = atomic_load(&r->done);
        size_t n = amldist__progress_page_marks(r->pg, 0, &cur, m, 64);
        for (size_t i = 0; i < n; i++)
            if (m[i].t_ns != (int64_t)m[i].step * 10)
                r->bad++;
        r->seen += n;
        amldist__progress_sample_t s;
        if (amldist__progress_page_read(r->pg, 0, &s) == 0 && s.calls &&
            s.t_ns != (int64_t)s.step * 10)
            r->bad++;
        atomic_fetch_add(&r->reads, 1);
        /* Valgrind runs one thread at a time: a reader that never yields
         * holds the writers off (tens of seconds alone). */
        if (r->yield)
            sched_yield();
    }
    return NULL;
}

static void race(int writers)
{
    char fd[16];
    amldist__progress_page_t *pg = new_page(1, fd);
    struct race r = {.yield = test_under_valgrind(),
                     .slot = amldist__progress_slot_open(fd, "0", 9),
                     .pg = pg};
    CHECK(r.slot != NULL);
    pthread_t w[2], rd;
    pthread_create(&rd, NULL, reader, &r);
    for (int i = 0; i < writers; i++)
        pthread_create(&w[i], NULL, writer, &r);
    for (int i = 0; i < writers; i++)
        pthread_join(w[i], NULL);
    atomic_store(&r.done, 1);
    pthread_join(rd, NULL);
    CHECK_INT_EQ(r.bad, 0);
    CHECK(r.seen > 0);
    amldist__progress_sample_t s;
    CHECK_INT_EQ(amldist__progress_page_read(pg, 0, &s), 0);
    /* Two threads of one worker: no call lost, none torn. */
    CHECK_INT_EQ(s.calls, (uint64_t)writers * CALLS);
    amldist__progress_page_destroy(pg);
}

static void test_one_writer_one_reader(void) { race(1); }
static void test_two_writers_one_reader(void) { race(2); }

/* This program run again (posix_spawn: a new process, not a fork): it
 * calls amldist_progress() `calls` times. */
static int spawn_self(const char *self, const char *calls)
{
    char *argv[] = {(char *)self, "--progress", (char *)calls, NULL};
    pid_t pid;
    if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0)
        return -1;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char self_path[4096];

static void test_api_in_a_worker(void)
{
    amldist__progress_page_t *pg = amldist__progress_page_create(4);
    set_env(pg, 3);
    CHECK_INT_EQ(spawn_self(self_path, "1000"), 0);
    amldist__progress_sample_t s;
    CHECK_INT_EQ(amldist__progress_page_read(pg, 3, &s), 0);
    CHECK_INT_EQ(s.calls, 1000);
    CHECK_INT_EQ(s.step, 1000);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    CHECK(s.t_ns > 0 &&
          s.t_ns <= (int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
    /* A second process on the same slot: taken, it records nothing. */
    CHECK_INT_EQ(spawn_self(self_path, "5"), 0);
    CHECK_INT_EQ(amldist__progress_page_read(pg, 3, &s), 0);
    CHECK_INT_EQ(s.calls, 1000);
    amldist__progress_page_destroy(pg);
}

static void test_api_bad_environment_is_no_page(void)
{
    amldist__progress_page_t *pg = amldist__progress_page_create(1);
    const char *fds[] = {"-1", "abc", "2", "999", "0"};
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++) {
        setenv(AMLDIST__PROGRESS_FD_ENV, fds[i], 1);
        setenv(AMLDIST__PROGRESS_SLOT_ENV, "0", 1);
        CHECK_INT_EQ(spawn_self(self_path, "3"), 0);
    }
    set_env(pg, 1); /* a slot the page has not */
    CHECK_INT_EQ(spawn_self(self_path, "3"), 0);
    unsetenv(AMLDIST__PROGRESS_FD_ENV);
    CHECK_INT_EQ(spawn_self(self_path, "3"), 0);
    amldist__progress_sample_t s;
    CHECK_INT_EQ(amldist__progress_page_read(pg, 0, &s), 0);
    CHECK_INT_EQ(s.calls, 0);
    amldist__progress_page_destroy(pg);
}

/* Every case runs in a child that fork() made: amldist_progress() there
 * writes nothing, whatever the environment says. */
static void test_api_in_a_forked_child(void)
{
    amldist__progress_page_t *pg = amldist__progress_page_create(1);
    set_env(pg, 0);
    CHECK_INT_EQ(amldist_progress(1), 0);
    CHECK_INT_EQ(amldist_progress(2), 0);
    amldist__progress_sample_t s;
    CHECK_INT_EQ(amldist__progress_page_read(pg, 0, &s), 0);
    CHECK_INT_EQ(s.calls, 0);
    amldist__progress_page_destroy(pg);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--progress") == 0) {
        long n = atol(argv[2]);
        for (long i = 1; i <= n; i++)
            if (amldist_progress((uint64_t)i) != 0)
                return 1;
        return 0;
    }
    ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (len <= 0)
        return 2;
    self_path[len] = '\0';
    RUN(test_create);
    RUN(test_open_refuses_bad_values);
    RUN(test_claim);
    RUN(test_write_read_marks);
    RUN(test_expect);
    RUN(test_one_writer_one_reader);
    RUN(test_two_writers_one_reader);
    RUN(test_api_in_a_worker);
    RUN(test_api_bad_environment_is_no_page);
    RUN(test_api_in_a_forked_child);
    return test_summary();
}
