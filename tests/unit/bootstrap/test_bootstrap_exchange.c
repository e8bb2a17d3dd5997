/*
 * The bootstrap exchange between real processes on loopback: every rank is a
 * fork()ed process that calls the server or the client with an explicit
 * rank, world, address and port, and reports into shared memory what it
 * got, how long it took and the error message.
 *
 * amldist-test: slow (its cases wait out the bootstrap's timeouts: 20 s)
 */
#define TEST_TIMEOUT_S 120
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>

#include "bootstrap/bootstrap_internal.h"
#include "test.h"

#define MAX_RANKS 256

typedef struct {
    int rc;
    int same; /* the buffer holds rank 0's bytes */
    long long ms;
    long long end; /* amldist__now_ms() when it returned */
    char msg[512];
} result_t;

static result_t *results;
static unsigned char *blob; /* rank 0's bytes, also what the others expect */

static void setup(size_t len)
{
    results = mmap(NULL, sizeof *results * MAX_RANKS, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    blob = malloc(len);
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    CHECK(results != MAP_FAILED && blob && fd >= 0);
    CHECK_INT_EQ(read(fd, blob, len), (long long)len);
    close(fd);
}

/* A port nobody listens on now (the kernel's choice, then closed). */
static int free_port(int family)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
                              .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    struct sockaddr_in a4 = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_storage got;
    socklen_t len = sizeof got;
    int rc = family == AF_INET6 ? bind(fd, (struct sockaddr *)&a6, sizeof a6)
                                : bind(fd, (struct sockaddr *)&a4, sizeof a4);
    CHECK_INT_EQ(rc, 0);
    getsockname(fd, (struct sockaddr *)&got, &len);
    int port = family == AF_INET6
                   ? ntohs(((struct sockaddr_in6 *)&got)->sin6_port)
                   : ntohs(((struct sockaddr_in *)&got)->sin_port);
    close(fd);
    return port;
}

static amldist__bs_params_t params(const char *host, int port, int world,
                                   int timeout_ms)
{
    amldist__bs_params_t p;
    memset(&p, 0, sizeof p);
    p.world = world;
    amldist__strlcpy(p.host, host, sizeof p.host);
    p.port = port;
    p.timeout_ms = timeout_ms;
    p.token = 0x5eed;
    amldist__strlcpy(p.token_source, "the test", sizeof p.token_source);
    p.round = 1;
    return p;
}

/* Start one rank; its result lands in results[slot]. */
static pid_t spawn(amldist__bs_params_t p, int rank, size_t len, int slot)
{
    p.rank = rank;
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    unsigned char *buf = calloc(1, len ? len : 1);
    if (rank == 0)
        memcpy(buf, blob, len);
    long long t0 = amldist__now_ms();
    int rc = rank == 0 ? amldist__bs_serve(&p, buf, len)
                       : amldist__bs_fetch(&p, buf, len);
    result_t *r = &results[slot];
    r->end = amldist__now_ms();
    r->ms = r->end - t0;
    r->rc = rc;
    r->same = rc == 0 && !memcmp(buf, blob, len);
    amldist__strlcpy(r->msg, amldist_last_error(), sizeof r->msg);
    free(buf);
    _exit(0);
}

static void wait_all(const pid_t *pids, int n)
{
    for (int i = 0; i < n; i++) {
        int st;
        CHECK_INT_EQ(waitpid(pids[i], &st, 0), pids[i]);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
}

/* A whole job: ranks 0 .. world-1, clients started first so that they must
 * retry until rank 0 listens. */
static void job(const char *host, int world, size_t len)
{
    static pid_t pids[MAX_RANKS];
    setup(len);
    amldist__bs_params_t p = params(host, free_port(strchr(host, ':') ? AF_INET6
                                                                  : AF_INET),
                                    world, 60000);
    for (int r = world - 1; r >= 0; r--)
        pids[r] = spawn(p, r, len, r);
    wait_all(pids, world);
    for (int r = 0; r < world; r++) {
        CHECK_INT_EQ(results[r].rc, 0);
        if (results[r].rc)
            fprintf(stderr, "# rank %d: %s\n", r, results[r].msg);
        CHECK(results[r].same);
    }
}

/* Barrier mode (the NCCL path): rank `failing` (or none, -1) checks in as
 * failed, rank `late` starts `delay_ms` after the others.  No rank may get
 * the blob before every rank is in; with a failure, every rank learns it,
 * names the failed rank, and none waits for the timeout. */
static void barrier_job(int world, int failing, int late, int delay_ms)
{
    static pid_t pids[MAX_RANKS];
    setup(64);
    amldist__bs_params_t p = params("127.0.0.1", free_port(AF_INET), world,
                                    120000);
    p.barrier = 1;
    for (int r = 0; r < world; r++) {
        if (r == late)
            continue;
        p.failed = r == failing;
        snprintf(p.why, sizeof p.why, "rank %d: no GPU here", r);
        pids[r] = spawn(p, r, 64, r);
    }
    long long late_at = 0;
    if (late >= 0) {
        struct timespec ts = {0, delay_ms * 1000000L};
        nanosleep(&ts, NULL);
        late_at = amldist__now_ms();
        p.failed = late == failing;
        snprintf(p.why, sizeof p.why, "rank %d: no GPU here", late);
        pids[late] = spawn(p, late, 64, late);
    }
    wait_all(pids, world);
    /* Nobody waited for the 120 s timeout: that ends in AMLDIST_ETIMEDOUT,
     * and every rank's code is checked below. */
    char want[96];
    for (int r = 0; r < world; r++) {
        if (failing < 0) {
            CHECK_INT_EQ(results[r].rc, 0);
            CHECK(results[r].same);
            /* Nobody went ahead before the late rank came (on the one
             * monotonic clock: a rank's own start may lag under valgrind). */
            if (late >= 0 && r != late)
                CHECK(results[r].end >= late_at);
        } else if (r == failing) {
            CHECK_INT_EQ(results[r].rc, 0); /* its report was taken */
        } else {
            CHECK_INT_EQ(results[r].rc, AMLDIST_EPEER);
            /* Every rank names the failed one and says why it failed. */
            snprintf(want, sizeof want, "rank %d failed: rank %d: no GPU here",
                     failing, failing);
            CHECK(strstr(results[r].msg, want) != NULL);
        }
        if (results[r].rc && !(failing >= 0))
            fprintf(stderr, "# rank %d: %s\n", r, results[r].msg);
    }
}

static void test_barrier_all_ok(void) { barrier_job(8, -1, 5, 300); }
static void test_barrier_rank_fails(void) { barrier_job(8, 5, -1, 0); }
static void test_barrier_late_rank_fails(void) { barrier_job(8, 3, 3, 300); }
static void test_barrier_rank0_fails(void) { barrier_job(6, 0, 2, 200); }
/* The big worlds: a quarter of the ranks under valgrind, where each forked
 * rank costs 33 ms of CPU (8.6 s for 256); natively and under ASan, all. */
static int big(int world)
{
    return test_under_valgrind() ? world / 4 : world;
}

static void test_barrier_128_ranks(void) { barrier_job(big(128), -1, -1, 0); }

static void test_two_ranks(void) { job("127.0.0.1", 2, 128); }
static void test_16_ranks(void) { job("127.0.0.1", 16, 128); }
static void test_256_ranks(void) { job("127.0.0.1", big(256), 128); }
static void test_max_length(void) { job("127.0.0.1", 8, AMLDIST_BOOTSTRAP_MAX_LEN); }
static void test_one_byte(void) { job("127.0.0.1", 3, 1); }
static void test_ipv6_loopback(void) { job("::1", 8, 128); }
/* "localhost" resolves to 127.0.0.1 and ::1: both must be served. */
static void test_hostname(void) { job("localhost", 4, 128); }

static void test_world_of_one(void)
{
    amldist__bs_params_t p = params("127.0.0.1", 1, 1, 1000);
    unsigned char b[4] = {1, 2, 3, 4};
    CHECK_INT_EQ(amldist__bs_serve(&p, b, sizeof b), 0);
}

static void test_length_limits(void)
{
    amldist__bs_params_t p = params("127.0.0.1", free_port(AF_INET), 2, 500);
    static unsigned char big[AMLDIST_BOOTSTRAP_MAX_LEN + 1];
    CHECK_INT_EQ(amldist__bs_serve(&p, big, sizeof big), AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "65537 bytes");
    p.rank = 1;
    CHECK_INT_EQ(amldist__bs_fetch(&p, big, 0), AMLDIST_EINVAL);
}

/* Rank 0 never comes (it died): every client fails with the timeout error,
 * naming the address, close to the configured time. */
static void test_rank0_dead(void)
{
    pid_t pids[4];
    setup(64);
    int port = free_port(AF_INET);
    amldist__bs_params_t p = params("127.0.0.1", port, 4, 1500);
    pid_t r0 = fork();
    if (r0 == 0) {
        pause();
        _exit(0);
    }
    for (int r = 1; r < 4; r++)
        pids[r - 1] = spawn(p, r, 64, r);
    kill(r0, SIGKILL);
    waitpid(r0, NULL, 0);
    wait_all(pids, 3);
    char want[96];
    for (int r = 1; r < 4; r++) {
        CHECK_INT_EQ(results[r].rc, AMLDIST_ETIMEDOUT);
        snprintf(want, sizeof want, "rank %d: no answer from 127.0.0.1:%d "
                 "within 1.5 s", r, port);
        CHECK_STR_HAS(results[r].msg, want);
        CHECK_STR_HAS(results[r].msg, "Connection refused");
        CHECK(results[r].ms >= 1500 && results[r].ms < 4000);
    }
}

/* Rank 0 serves ranks 1 and 2, then is killed: rank 3, late, times out. */
static void test_rank0_killed_midway(void)
{
    pid_t pids[2], late;
    setup(64);
    int port = free_port(AF_INET);
    amldist__bs_params_t p = params("127.0.0.1", port, 4, 1000);
    p.timeout_ms = 30000;
    pid_t r0 = spawn(p, 0, 64, 0);
    p.timeout_ms = 1000;
    pids[0] = spawn(p, 1, 64, 1);
    pids[1] = spawn(p, 2, 64, 2);
    wait_all(pids, 2);
    CHECK(results[1].same && results[2].same);
    kill(r0, SIGKILL);
    waitpid(r0, NULL, 0);
    late = spawn(p, 3, 64, 3);
    wait_all(&late, 1);
    CHECK_INT_EQ(results[3].rc, AMLDIST_ETIMEDOUT);
    CHECK_STR_HAS(results[3].msg, "rank 3: no answer from 127.0.0.1:");
    CHECK(results[3].ms >= 1000 && results[3].ms < 3500);
}

/* Rank 0 waits for ranks that never come, and says which. */
static void test_server_timeout(void)
{
    setup(16);
    amldist__bs_params_t p = params("127.0.0.1", free_port(AF_INET), 5, 800);
    pid_t pids[3];
    pids[0] = spawn(p, 0, 16, 0);
    pids[1] = spawn(p, 2, 16, 2);
    pids[2] = spawn(p, 3, 16, 3);
    wait_all(pids, 3);
    CHECK_INT_EQ(results[0].rc, AMLDIST_ETIMEDOUT);
    CHECK_STR_HAS(results[0].msg, "rank 0: 2 of 4 ranks did not fetch");
    CHECK_STR_HAS(results[0].msg, "within 0.8 s (missing: 1, 4)");
    CHECK(results[2].same && results[3].same);
}

static int connect_to(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int i = 0; i < 500; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
            return fd;
        close(fd);
        usleep(10000);
    }
    return -1;
}

/* Read what the server says, until it closes (or 3 s pass). */
static ssize_t slurp(int fd, unsigned char *buf, size_t size)
{
    size_t got = 0;
    struct pollfd pfd = {fd, POLLIN, 0};
    while (got < size && poll(&pfd, 1, 3000) == 1) {
        ssize_t n = recv(fd, buf + got, size - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* Foreign peers (garbage, an oversized frame, a frame of the wrong type, a
 * HELLO with another token, one that connects and says nothing, one that
 * sends half a frame) are refused or dropped, and the real ranks are still
 * served at once: the silent ones hold no one up. */
static void test_foreign_peers(void)
{
    setup(128);
    int port = free_port(AF_INET);
    amldist__bs_params_t p = params("127.0.0.1", port, 3, 20000);
    pid_t r0 = spawn(p, 0, 128, 0);
    unsigned char f[64], reply[64];

    int silent = connect_to(port), half = connect_to(port);
    CHECK(silent >= 0 && half >= 0);
    CHECK_INT_EQ(send(half, "AMLB\0", 5, 0), 5);

    int g = connect_to(port);
    CHECK_INT_EQ(send(g, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27, 0), 27);
    CHECK_INT_EQ(slurp(g, reply, sizeof reply), 0); /* dropped, no answer */
    close(g);

    g = connect_to(port);
    amldist__frame_put_header(f, AMLDIST__BS_HELLO, 0xfffffff0u);
    CHECK_INT_EQ(send(g, f, AMLDIST__FRAME_HEADER_LEN, 0), AMLDIST__FRAME_HEADER_LEN);
    CHECK_INT_EQ(slurp(g, reply, sizeof reply), 0);
    close(g);

    g = connect_to(port);
    amldist__frame_put_header(f, AMLDIST__BS_BLOB, 16);
    memset(f + AMLDIST__FRAME_HEADER_LEN, 0, 16);
    send(g, f, AMLDIST__FRAME_HEADER_LEN + 16, MSG_NOSIGNAL);
    CHECK_INT_EQ(slurp(g, reply, sizeof reply), 0);
    close(g);

    g = connect_to(port);
    amldist__bs_hello_t h = {1, 3, 1, 128, 0xbad};
    amldist__frame_put_header(f, AMLDIST__BS_HELLO, AMLDIST__BS_HELLO_LEN);
    amldist__bs_put_hello(f + AMLDIST__FRAME_HEADER_LEN, &h);
    CHECK_INT_EQ(send(g, f, AMLDIST__FRAME_HEADER_LEN + AMLDIST__BS_HELLO_LEN, 0),
                 AMLDIST__FRAME_HEADER_LEN + AMLDIST__BS_HELLO_LEN);
    CHECK_INT_EQ(slurp(g, reply, sizeof reply),
                 AMLDIST__FRAME_HEADER_LEN + AMLDIST__BS_REFUSE_LEN);
    CHECK_INT_EQ(reply[7], AMLDIST__BS_REFUSE);
    CHECK_INT_EQ(amldist__net_get_u32(reply + AMLDIST__FRAME_HEADER_LEN),
                 AMLDIST__BS_R_TOKEN);
    close(g);

    /* The foreign token did not count as rank 1: the real ones still get
     * served while the silent peers hold their connections open. */
    p.timeout_ms = 3000;
    pid_t pids[2] = {spawn(p, 1, 128, 1), spawn(p, 2, 128, 2)};
    wait_all(pids, 2);
    wait_all(&r0, 1);
    CHECK_INT_EQ(results[0].rc, 0);
    CHECK(results[1].same && results[2].same);
    CHECK(results[1].ms < 2000 && results[2].ms < 2000);
    CHECK(results[0].ms < 4000); /* before the silent peers' own deadline */
    close(silent);
    close(half);
}

/* A client with another job's token fails at once with EDENIED. */
/* A rank that gave up on a connection still in rank 0's backlog: rank 0
 * must not count the abandoned connection as that rank (it answers into a
 * closed socket), or it closes early and the real rank times out. */
static void test_abandoned_connection(void)
{
    setup(128);
    int port = free_port(AF_INET);
    amldist__bs_params_t p = params("127.0.0.1", port, 2, 8000);
    unsigned char f[64];
    pid_t r0 = spawn(p, 0, 128, 0);
    int g = connect_to(port);
    CHECK(g >= 0);
    amldist__bs_hello_t h = {1, 2, 1, 128, p.token};
    amldist__frame_put_header(f, AMLDIST__BS_HELLO, AMLDIST__BS_HELLO_LEN);
    amldist__bs_put_hello(f + AMLDIST__FRAME_HEADER_LEN, &h);
    CHECK_INT_EQ(send(g, f, AMLDIST__FRAME_HEADER_LEN + AMLDIST__BS_HELLO_LEN, 0),
                 AMLDIST__FRAME_HEADER_LEN + AMLDIST__BS_HELLO_LEN);
    close(g); /* gave up before the answer */
    usleep(300000);
    pid_t r1 = spawn(p, 1, 128, 1);
    wait_all(&r1, 1);
    wait_all(&r0, 1);
    CHECK_INT_EQ(results[1].rc, 0);
    CHECK(results[1].same);
    CHECK_INT_EQ(results[0].rc, 0);
}

/* Hundreds of idle connections (more than rank 0 has slots for) must not
 * keep the real ranks waiting until the idle ones time out. */
static void test_idle_crowd(void)
{
    enum { IDLE = 600 };
    static int idle[IDLE];
    setup(128);
    int port = free_port(AF_INET);
    amldist__bs_params_t p = params("127.0.0.1", port, 3, 20000);
    pid_t r0 = spawn(p, 0, 128, 0);
    int opened = 0;
    for (int i = 0; i < IDLE; i++)
        if ((idle[i] = connect_to(port)) >= 0)
            opened++;
    CHECK(opened > 100);
    pid_t pids[2] = {spawn(p, 1, 128, 1), spawn(p, 2, 128, 2)};
    wait_all(pids, 2);
    wait_all(&r0, 1);
    CHECK_INT_EQ(results[0].rc, 0);
    CHECK(results[1].same && results[2].same);
    /* Waiting for slots to free would take rounds of the idle ones' 5 s
     * deadline (about 45 s for 600 over 67 slots). */
    CHECK(results[1].ms < 10000 && results[2].ms < 10000);
    for (int i = 0; i < IDLE; i++)
        if (idle[i] >= 0)
            close(idle[i]);
}

static void test_wrong_token(void)
{
    setup(32);
    int port = free_port(AF_INET);
    amldist__bs_params_t p = params("127.0.0.1", port, 2, 1500);
    pid_t r0 = spawn(p, 0, 32, 0);
    p.token = 0xdead;
    amldist__strlcpy(p.token_source, "AMLDIST_JOB_TOKEN", sizeof p.token_source);
    pid_t c = spawn(p, 1, 32, 1);
    wait_all(&c, 1);
    wait_all(&r0, 1);
    CHECK_INT_EQ(results[1].rc, AMLDIST_EDENIED);
    CHECK_STR_HAS(results[1].msg, "refused this rank's job token (from "
                                  "AMLDIST_JOB_TOKEN)");
    CHECK(!results[1].same);
    CHECK(results[1].ms < 1000);
    CHECK_INT_EQ(results[0].rc, AMLDIST_ETIMEDOUT);
    CHECK_STR_HAS(results[0].msg, "(missing: 1)");
}

/* With the job's secret (issue 21): p's connections the channel's. */
static amldist__bs_params_t secured(amldist__bs_params_t p, const char *secret)
{
    p.secure = 1;
    CHECK_INT_EQ(amldist__chan_keys(&p.keys, "bootstrap", secret,
                                    strlen(secret)),
                 0);
    amldist__strlcpy(p.secret_source, "the test", sizeof p.secret_source);
    return p;
}

/* A whole job with a secret, barrier mode included; a rank with another
 * secret and one with none are refused at once, naming what happened. */
static void test_secret(void)
{
    static pid_t pids[16];
    setup(128);
    amldist__bs_params_t p = secured(params("127.0.0.1", free_port(AF_INET),
                                            16, 60000),
                                     "the job's secret");
    for (int r = 15; r >= 0; r--)
        pids[r] = spawn(p, r, 128, r);
    wait_all(pids, 16);
    for (int r = 0; r < 16; r++) {
        CHECK_INT_EQ(results[r].rc, 0);
        CHECK(results[r].same);
    }
    p.port = free_port(AF_INET);
    p.barrier = 1;
    p.world = 3;
    for (int r = 2; r >= 0; r--)
        pids[r] = spawn(p, r, 128, r);
    wait_all(pids, 3);
    for (int r = 0; r < 3; r++)
        CHECK(results[r].rc == 0 && results[r].same);

    p.barrier = 0;
    p.world = 2;
    p.timeout_ms = 1500;
    p.port = free_port(AF_INET);
    pid_t r0 = spawn(p, 0, 128, 0);
    amldist__bs_params_t other = secured(p, "another secret");
    amldist__bs_params_t none = params("127.0.0.1", p.port, 2, 1500);
    pid_t c[2] = {spawn(other, 1, 128, 1), spawn(none, 1, 128, 2)};
    wait_all(c, 2);
    wait_all(&r0, 1);
    printf("# another secret: %s\n# no secret: %s\n# rank 0: %s\n",
           results[1].msg, results[2].msg, results[0].msg);
    CHECK_INT_EQ(results[1].rc, AMLDIST_EDENIED);
    CHECK_STR_HAS(results[1].msg, "did not prove the job's secret");
    CHECK(!results[1].same && results[1].ms < 1000);
    CHECK_INT_EQ(results[2].rc, AMLDIST_EDENIED);
    CHECK(!results[2].same && results[2].ms < 1000);
    CHECK_INT_EQ(results[0].rc, AMLDIST_ETIMEDOUT);
    /* Rank 0 says who did not prove it. */
    CHECK_STR_HAS(results[0].msg, "last refused:");
    CHECK_STR_HAS(results[0].msg, "127.0.0.1");
}

/* A rank 0 without the secret for a rank with it, and a forged handshake
 * to a rank 0 with it, which still serves the real rank. */
static void test_secret_hostile(void)
{
    setup(64);
    int port = free_port(AF_INET);
    amldist__bs_params_t plain = params("127.0.0.1", port, 2, 1500);
    amldist__bs_params_t p = secured(plain, "the job's secret");
    pid_t r0 = spawn(plain, 0, 64, 0);
    pid_t c = spawn(p, 1, 64, 1);
    wait_all(&c, 1);
    wait_all(&r0, 1);
    CHECK_INT_EQ(results[1].rc, AMLDIST_EDENIED);
    CHECK_STR_HAS(results[1].msg, "did not prove the job's secret");

    p.port = free_port(AF_INET);
    p.timeout_ms = 8000;
    r0 = spawn(p, 0, 64, 0);
    usleep(200000);
    int g = connect_to(p.port);
    CHECK(g >= 0);
    unsigned char f[2 * (AMLDIST__FRAME_HEADER_LEN + 32)], in[256];
    amldist__frame_put_header(f, AMLDIST__HS_HELLO, AMLDIST__HS_HELLO_LEN);
    memset(f + AMLDIST__FRAME_HEADER_LEN, 1, 32);
    amldist__frame_put_header(f + 44, AMLDIST__HS_CLIENT, AMLDIST__HS_CLIENT_LEN);
    memset(f + 44 + AMLDIST__FRAME_HEADER_LEN, 2, 32);
    CHECK_INT_EQ(send(g, f, sizeof f, 0), (long long)sizeof f);
    /* The server's handshake, then a REFUSE in the clear, then the end. */
    size_t have = 0;
    ssize_t n;
    while ((n = recv(g, in + have, sizeof in - have, 0)) > 0)
        have += (size_t)n;
    close(g);
    CHECK_INT_EQ((long long)have, 2 * AMLDIST__FRAME_HEADER_LEN +
                                      AMLDIST__HS_SERVER_LEN +
                                      AMLDIST__BS_REFUSE_LEN);
    c = spawn(p, 1, 64, 1);
    wait_all(&c, 1);
    wait_all(&r0, 1);
    CHECK(results[1].rc == 0 && results[1].same);
    CHECK_INT_EQ(results[0].rc, 0);
}

/* Disagreements that no retry can cure fail at once, naming both values. */
static void test_mismatches(void)
{
    setup(64);
    int port = free_port(AF_INET);
    amldist__bs_params_t p = params("127.0.0.1", port, 3, 3000);
    pid_t r0 = spawn(p, 0, 64, 0);
    amldist__bs_params_t q = p;
    q.world = 4;
    pid_t c[4];
    c[0] = spawn(q, 1, 64, 1);
    c[1] = spawn(p, 2, 32, 2);
    q = p;
    q.round = 0;
    c[2] = spawn(q, 1, 64, 3);
    wait_all(c, 3);
    CHECK_INT_EQ(results[1].rc, AMLDIST_EPROTO);
    CHECK_STR_HAS(results[1].msg, "world size of 3, this rank 4");
    CHECK_INT_EQ(results[2].rc, AMLDIST_EPROTO);
    CHECK_STR_HAS(results[2].msg, "broadcasts 64 bytes, this rank expects 32");
    CHECK_INT_EQ(results[3].rc, AMLDIST_EPROTO);
    CHECK_STR_HAS(results[3].msg, "different numbers of calls");
    /* The job still completes with the right peers. */
    c[0] = spawn(p, 1, 64, 1);
    c[1] = spawn(p, 2, 64, 2);
    wait_all(c, 2);
    wait_all(&r0, 1);
    CHECK_INT_EQ(results[0].rc, 0);
    CHECK(results[1].same && results[2].same);
}

/* Two calls in a row on one port, of different lengths: clients of the
 * second call that reach the first call's server are told to come back, and
 * get the second blob. */
static void test_consecutive_calls(void)
{
    enum { W = 6, L1 = 48, L2 = 100 };
    setup(L2);
    int port = free_port(AF_INET);
    amldist__bs_params_t p = params("127.0.0.1", port, W, 20000);
    pid_t pids[W];
    for (int r = 0; r < W; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            unsigned char a[L1] = {0}, b[L2] = {0};
            amldist__bs_params_t q = p;
            q.rank = r;
            if (r == 0) {
                memcpy(a, blob, L1);
                for (int i = 0; i < L2; i++)
                    b[i] = (unsigned char)(blob[i] ^ 0xff);
            }
            /* Rank 1 is slow for the first call, so the others race ahead
             * to the second while the first server still listens. */
            if (r == 1)
                usleep(300000);
            int rc1 = r ? amldist__bs_fetch(&q, a, L1)
                        : amldist__bs_serve(&q, a, L1);
            q.round = 2;
            int rc2 = r ? amldist__bs_fetch(&q, b, L2)
                        : amldist__bs_serve(&q, b, L2);
            results[r].rc = rc1 ? rc1 : rc2;
            results[r].same = !memcmp(a, blob, L1);
            for (int i = 0; i < L2; i++)
                results[r].same &= (b[i] ^ 0xff) == blob[i];
            amldist__strlcpy(results[r].msg, amldist_last_error(),
                             sizeof results[r].msg);
            _exit(0);
        }
    }
    wait_all(pids, W);
    for (int r = 0; r < W; r++) {
        CHECK_INT_EQ(results[r].rc, 0);
        if (results[r].rc)
            fprintf(stderr, "# rank %d: %s\n", r, results[r].msg);
        CHECK(results[r].same);
    }
}

static void test_port_in_use(void)
{
    int port = free_port(AF_INET);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_INT_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    CHECK_INT_EQ(listen(fd, 1), 0);
    amldist__bs_params_t p = params("127.0.0.1", port, 2, 500);
    unsigned char b[8] = {0};
    CHECK_INT_EQ(amldist__bs_serve(&p, b, sizeof b), AMLDIST_ESYS);
    char want[80];
    snprintf(want, sizeof want, "rank 0: cannot listen on 127.0.0.1:%d: "
             "Address already in use", port);
    CHECK_STR_HAS(amldist_last_error(), want);
    CHECK_STR_HAS(amldist_last_error(), "AMLDIST_BOOTSTRAP_PORT");
    close(fd);
}

/* Something that is not our server on the port: a clear protocol error. */
static void test_other_service(void)
{
    int port = free_port(AF_INET);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_INT_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    CHECK_INT_EQ(listen(fd, 1), 0);
    pid_t pid = fork();
    if (pid == 0) {
        int c = accept(fd, NULL, NULL);
        unsigned char junk[64];
        recv(c, junk, sizeof junk, 0);
        send(c, "HTTP/1.0 400 Bad Request\r\n\r\n", 28, MSG_NOSIGNAL);
        usleep(200000);
        _exit(0);
    }
    amldist__bs_params_t p = params("127.0.0.1", port, 2, 2000);
    p.rank = 1;
    unsigned char b[8];
    CHECK_INT_EQ(amldist__bs_fetch(&p, b, sizeof b), AMLDIST_EPROTO);
    CHECK_STR_HAS(amldist_last_error(), "bad magic");
    CHECK_STR_HAS(amldist_last_error(), "another service");
    waitpid(pid, NULL, 0);
    close(fd);
}

static void test_unresolvable(void)
{
    amldist__bs_params_t p = params("no-such-host.invalid", 29501, 2, 300);
    p.rank = 1;
    unsigned char b[8];
    CHECK_INT_EQ(amldist__bs_fetch(&p, b, sizeof b), AMLDIST_ETIMEDOUT);
    CHECK_STR_HAS(amldist_last_error(), "no answer from no-such-host.invalid:29501");
    CHECK_STR_HAS(amldist_last_error(), "cannot resolve no-such-host.invalid");
}

static int have_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6,
                             .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Rank 0 of warm_up()'s exchange, on a thread of main(). */
static void *warm_serve(void *arg)
{
    amldist__bs_params_t *p = arg;
    unsigned char b[64] = {0};
    (void)amldist__bs_serve(p, b, sizeof b);
    return NULL;
}

/* One exchange between two threads of main(), plain, in barrier mode and
 * sealed, before the cases; what it returns is not looked at (the cases
 * check everything).  Valgrind translates the code a process runs for the
 * first time, and each of 256 forked ranks would translate the client's
 * and the sockets' anew (most of the valgrind pass's time): ranks forked
 * from cases forked from this main() find it translated. */
static void warm_up(void)
{
    for (int k = 0; k < 3; k++) {
        amldist__bs_params_t p = params("127.0.0.1", free_port(AF_INET), 2,
                                        10000);
        p.barrier = k == 1;
        if (k == 2) /* the sealed channel: libcrypto's code */
            p = secured(p, "warm");
        pthread_t th;
        if (pthread_create(&th, NULL, warm_serve, &p) != 0)
            return;
        amldist__bs_params_t c = p;
        c.rank = 1;
        unsigned char b[64];
        (void)amldist__bs_fetch(&c, b, sizeof b);
        pthread_join(th, NULL);
    }
    test__failures_here = 0; /* free_port's, if any: not a case's */
}

int main(void)
{
    warm_up();
    RUN(test_two_ranks);
    RUN(test_16_ranks);
    RUN(test_256_ranks);
    RUN(test_max_length);
    RUN(test_one_byte);
    RUN(test_world_of_one);
    RUN(test_length_limits);
    if (have_ipv6_loopback()) {
        RUN(test_ipv6_loopback);
    } else {
        printf("ok - test_ipv6_loopback # SKIP no IPv6 loopback here\n");
    }
    RUN(test_hostname);
    RUN(test_rank0_dead);
    RUN(test_rank0_killed_midway);
    RUN(test_server_timeout);
    RUN(test_foreign_peers);
    RUN(test_wrong_token);
    RUN(test_secret);
    RUN(test_secret_hostile);
    RUN(test_mismatches);
    RUN(test_consecutive_calls);
    RUN(test_port_in_use);
    RUN(test_other_service);
    RUN(test_unresolvable);
    RUN(test_abandoned_connection);
    RUN(test_idle_crowd);
    RUN(test_barrier_all_ok);
    RUN(test_barrier_rank_fails);
    RUN(test_barrier_late_rank_fails);
    RUN(test_barrier_rank0_fails);
    RUN(test_barrier_128_ranks);
    return test_summary();
}
