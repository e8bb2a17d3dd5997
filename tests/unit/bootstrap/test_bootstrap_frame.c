/* The bootstrap's frames and settings: encoding, strict decoding, the job
 * token, the port and the timeout from the environment. */
#include <stdint.h>

#include "bootstrap/bootstrap_internal.h"
#include "test.h"

static void test_header_roundtrip(void)
{
    unsigned char b[AMLDIST__FRAME_HEADER_LEN];
    unsigned type;
    uint32_t len;
    const char *why = NULL;
    amldist__frame_put_header(b, AMLDIST__BS_BLOB, 128);
    CHECK(!memcmp(b, "AMLB", 4));
    CHECK_INT_EQ(amldist__bs_get_header(b, &type, &len, &why), 0);
    CHECK_INT_EQ(type, AMLDIST__BS_BLOB);
    CHECK_INT_EQ(len, 128);
    amldist__frame_put_header(b, AMLDIST__BS_HELLO, AMLDIST__BS_HELLO_LEN);
    CHECK_INT_EQ(amldist__bs_get_header(b, &type, &len, &why), 0);
    CHECK_INT_EQ(type, AMLDIST__BS_HELLO);
    amldist__frame_put_header(b, AMLDIST__BS_ACK, 0); /* the empty frame */
    CHECK_INT_EQ(amldist__bs_get_header(b, &type, &len, &why), 0);
    CHECK_INT_EQ(type, AMLDIST__BS_ACK);
    CHECK_INT_EQ(len, 0);
}

static void expect_bad(const unsigned char *b, const char *what)
{
    unsigned type;
    uint32_t len;
    const char *why = NULL;
    CHECK_INT_EQ(amldist__bs_get_header(b, &type, &len, &why), -1);
    CHECK_STR_HAS(why, what);
}

static void test_header_rejects(void)
{
    unsigned char b[AMLDIST__FRAME_HEADER_LEN];
    amldist__frame_put_header(b, AMLDIST__BS_BLOB, 1);
    b[0] = 'X';
    expect_bad(b, "bad magic");
    amldist__frame_put_header(b, AMLDIST__BS_BLOB, 1);
    b[5] = 99; /* a version this library does not speak */
    expect_bad(b, "protocol version");
    amldist__frame_put_header(b, 77, 1);
    expect_bad(b, "unknown frame type");
    amldist__frame_put_header(b, AMLDIST__BS_BLOB, AMLDIST_BOOTSTRAP_MAX_LEN + 1);
    expect_bad(b, "longer than its limit");
    amldist__frame_put_header(b, AMLDIST__BS_BLOB, 0xffffffffu);
    expect_bad(b, "longer than its limit");
    amldist__frame_put_header(b, AMLDIST__BS_HELLO, AMLDIST__BS_HELLO_LEN - 1);
    expect_bad(b, "fixed size");
    amldist__frame_put_header(b, AMLDIST__BS_REFUSE, AMLDIST__BS_REFUSE_LEN + 1);
    expect_bad(b, "longer than its limit");
    /* A failed rank's report and the answer about it are fixed-size too. */
    amldist__frame_put_header(b, AMLDIST__BS_FAIL, AMLDIST__BS_HELLO_LEN);
    expect_bad(b, "fixed size");
    amldist__frame_put_header(b, AMLDIST__BS_PEER, AMLDIST__BS_PEER_LEN + 1);
    expect_bad(b, "longer than its limit");
    amldist__frame_put_header(b, AMLDIST__BS_PEER, 4);
    expect_bad(b, "fixed size");
    amldist__frame_put_header(b, AMLDIST__BS_ACK, 1);
    expect_bad(b, "longer than its limit");
    /* An HTTP request, as a stray client would send. */
    expect_bad((const unsigned char *)"GET / HTTP/1.0\r\n", "bad magic");
}

static void test_hello_roundtrip(void)
{
    unsigned char b[AMLDIST__BS_HELLO_LEN];
    amldist__bs_hello_t in = {255, 256, 7, 65536, 0x0123456789abcdefull}, out;
    amldist__bs_put_hello(b, &in);
    amldist__bs_get_hello(b, &out);
    CHECK_INT_EQ(out.rank, 255);
    CHECK_INT_EQ(out.world, 256);
    CHECK_INT_EQ(out.round, 7);
    CHECK_INT_EQ(out.length, 65536);
    CHECK(out.token == in.token);
    CHECK_INT_EQ(b[16], 0x01); /* big-endian on the wire */
}

static void test_port(void)
{
    int port = 0;
    unsetenv("AMLDIST_BOOTSTRAP_PORT");
    CHECK_INT_EQ(amldist__bs_port(0, 29500, &port), 0);
    CHECK_INT_EQ(port, 29501);
    CHECK_INT_EQ(amldist__bs_port(0, 65535, &port), 0);
    CHECK_INT_EQ(port, 65534);
    CHECK_INT_EQ(amldist__bs_port(4000, 29500, &port), 0);
    CHECK_INT_EQ(port, 4000);
    CHECK_INT_EQ(amldist__bs_port(70000, 29500, &port), AMLDIST_ERANGE);
    CHECK_INT_EQ(amldist__bs_port(0, 0, &port), AMLDIST_EMISSING);
    CHECK_STR_HAS(amldist_last_error(), "MASTER_PORT");
    setenv("AMLDIST_BOOTSTRAP_PORT", "31000", 1);
    CHECK_INT_EQ(amldist__bs_port(0, 29500, &port), 0);
    CHECK_INT_EQ(port, 31000);
    setenv("AMLDIST_BOOTSTRAP_PORT", "31000x", 1);
    CHECK_INT_EQ(amldist__bs_port(0, 29500, &port), AMLDIST_EPARSE);
    CHECK_STR_HAS(amldist_last_error(), "AMLDIST_BOOTSTRAP_PORT=31000x");
    setenv("AMLDIST_BOOTSTRAP_PORT", "-5", 1);
    CHECK_INT_EQ(amldist__bs_port(0, 29500, &port), AMLDIST_EPARSE);
    setenv("AMLDIST_BOOTSTRAP_PORT", "0", 1);
    CHECK_INT_EQ(amldist__bs_port(0, 29500, &port), AMLDIST_ERANGE);
    setenv("AMLDIST_BOOTSTRAP_PORT", "65536", 1);
    CHECK_INT_EQ(amldist__bs_port(0, 29500, &port), AMLDIST_ERANGE);
}

static void test_timeout(void)
{
    int ms = 0;
    unsetenv("AMLDIST_BOOTSTRAP_TIMEOUT");
    CHECK_INT_EQ(amldist__bs_timeout(0, &ms), 0);
    CHECK_INT_EQ(ms, AMLDIST_BOOTSTRAP_TIMEOUT_MS);
    CHECK_INT_EQ(amldist__bs_timeout(1234, &ms), 0);
    CHECK_INT_EQ(ms, 1234);
    setenv("AMLDIST_BOOTSTRAP_TIMEOUT", "2.5", 1);
    CHECK_INT_EQ(amldist__bs_timeout(0, &ms), 0);
    CHECK_INT_EQ(ms, 2500);
    setenv("AMLDIST_BOOTSTRAP_TIMEOUT", "30", 1);
    CHECK_INT_EQ(amldist__bs_timeout(0, &ms), 0);
    CHECK_INT_EQ(ms, 30000);
    setenv("AMLDIST_BOOTSTRAP_TIMEOUT", "0.0015", 1);
    CHECK_INT_EQ(amldist__bs_timeout(0, &ms), 0);
    CHECK_INT_EQ(ms, 1);
    const char *bad[] = {"abc", "0", "0.0001", "-1", "1.", ".5", "1s",
                         "99999999999", " 3", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("AMLDIST_BOOTSTRAP_TIMEOUT", bad[i], 1);
        int rc = amldist__bs_timeout(0, &ms);
        /* An empty value counts as unset. */
        if (!*bad[i]) {
            CHECK_INT_EQ(rc, 0);
            continue;
        }
        CHECK_INT_EQ(rc, AMLDIST_EPARSE);
        CHECK_STR_HAS(amldist_last_error(), "AMLDIST_BOOTSTRAP_TIMEOUT=");
    }
}

static void clear_job_env(void)
{
    const char *vars[] = {"AMLDIST_JOB_TOKEN", "TORCHELASTIC_RUN_ID",
                          "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
                          "SLURM_JOB_ID", "SLURM_STEP_ID", "AZUREML_RUN_ID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
}

static uint64_t token(const char *explicit_token, char *src)
{
    uint64_t t = 0;
    CHECK_INT_EQ(amldist__bs_token(explicit_token, "10.0.0.4", 29501, 16, &t,
                                   src, 64),
                 0);
    return t;
}

static void test_token(void)
{
    char src[64];
    clear_job_env();
    uint64_t plain = token(NULL, src);
    CHECK_STR_EQ(src, "MASTER_ADDR:port/WORLD_SIZE");
    /* Another address, port or size: another job. */
    uint64_t t;
    CHECK_INT_EQ(amldist__bs_token(NULL, "10.0.0.5", 29501, 16, &t, src, 64), 0);
    CHECK(t != plain);
    CHECK_INT_EQ(amldist__bs_token(NULL, "10.0.0.4", 29501, 8, &t, src, 64), 0);
    CHECK(t != plain);

    setenv("SLURM_JOB_ID", "4711", 1);
    setenv("SLURM_STEP_ID", "0", 1);
    uint64_t step0 = token(NULL, src);
    CHECK_STR_EQ(src, "SLURM_JOB_ID + MASTER_ADDR:port/WORLD_SIZE");
    CHECK(step0 != plain);
    setenv("SLURM_STEP_ID", "1", 1);
    CHECK(token(NULL, src) != step0);
    setenv("SLURM_STEP_ID", "0", 1);
    CHECK(token(NULL, src) == step0); /* stable: every rank derives it */

    /* Open MPI's job id wins over Slurm's (see lib/bootstrap/config.c). */
    setenv("OMPI_MCA_ess_base_jobid", "123", 1);
    uint64_t ompi = token(NULL, src);
    CHECK_STR_EQ(src, "OMPI_MCA_ess_base_jobid + MASTER_ADDR:port/WORLD_SIZE");
    setenv("SLURM_STEP_ID", "1", 1);
    CHECK(token(NULL, src) == ompi);

    setenv("TORCHELASTIC_RUN_ID", "run-a", 1);
    uint64_t te = token(NULL, src);
    CHECK_STR_HAS(src, "TORCHELASTIC_RUN_ID");
    setenv("TORCHELASTIC_RUN_ID", "run-b", 1);
    CHECK(token(NULL, src) != te);

    /* The job's secret is not the token (the channel proves it, and
     * amldist__bs_secure() makes the token 0: test_bootstrap_exchange). */
    setenv("AMLDIST_JOB_TOKEN", "s3cret-s3cret-s3cret-s3cret-s3cret", 1);
    CHECK(token(NULL, src) == token(NULL, src));
    CHECK_STR_HAS(src, "TORCHELASTIC_RUN_ID");
    uint64_t job = token("s3cret", src);
    CHECK_STR_EQ(src, "the options");
    CHECK(token("other", src) != job);
    uint64_t dummy;
    CHECK_INT_EQ(amldist__bs_token("", "h", 1, 2, &dummy, src, 64),
                 AMLDIST_EINVAL);
}

int main(void)
{
    RUN(test_header_roundtrip);
    RUN(test_header_rejects);
    RUN(test_hello_roundtrip);
    RUN(test_port);
    RUN(test_timeout);
    RUN(test_token);
    return test_summary();
}
