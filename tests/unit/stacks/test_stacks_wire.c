/* The stacks between nodes (launcher/stacks/wire.c): decode(encode(x)) == x
 * for any byte in a name, the canonical form only, every cut of a text
 * refused, the bounds kept by the encoder and enforced by the decoder. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#include "stkfixture.h"

/* A set with the awkward cases: NULL and empty names, names that look
 * like the encoding's own marks, every byte but NUL, extreme numbers. */
static void awkward(struct stk_set *s)
{
    char all[256];
    for (int i = 1; i < 256; i++)
        all[i - 1] = (char)i;
    all[255] = '\0';
    fx_py_allreduce(s, 0, 42);
    fx_rank(s, INT_MAX);
    s->ranks[1].local_rank = -1;
    s->ranks[1].node = INT_MIN;
    s->ranks[1].pid = 0;
    s->ranks[1].last_progress_s = -1;
    free(s->ranks[1].host);
    s->ranks[1].host = NULL;
    fx_error(s, "ptrace: Operation not permitted\n(and a second line)");
    fx_rank(s, 2);
    s->ranks[2].last_progress_s = 0.1;
    fx_thread(s, 7, "");
    fx_py(s, "-", "=", 0);
    fx_py(s, "%41 %%", " lead and trail ", -5);
    fx_nat(s, all, "caf\xc3\xa9/\xff\xfe.c", INT_MAX, "[vdso]");
    fx_nat(s, NULL, NULL, 0, NULL);
    fx_thread(s, 8, NULL); /* a thread with no frames */
    fx_rank(s, 3);
    s->ranks[3].last_progress_s = -0.0;
    fx_rank(s, 4);
    s->ranks[4].last_progress_s = 1e300;
}

static char *encode(const struct stk_set *s, size_t *len)
{
    char *t = stk_encode(s, len);
    CHECK(t != NULL);
    CHECK(t && strlen(t) == *len);
    return t;
}

static void test_roundtrip(void)
{
    struct stk_set a = {0}, b = {0};
    awkward(&a);
    size_t len, len2;
    char *t = encode(&a, &len);
    /* One record a line: no name's newline or space got through raw. */
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += t[i] == '\n';
    CHECK_INT_EQ(lines, 1 + 14 + 1 + 7 + 1 + 1 + 1); /* head, ranks 0-4, end */
    CHECK_INT_EQ(stk_decode(t, len, &b), 0);
    CHECK(fx_set_eq(&a, &b));
    char *t2 = encode(&b, &len2);
    CHECK(len == len2 && memcmp(t, t2, len) == 0);
    free(t);
    free(t2);
    stk_set_free(&a);
    stk_set_free(&b);
    CHECK(a.ranks == NULL && a.n == 0);
}

static void test_empty_set(void)
{
    struct stk_set a = {0}, b = {0};
    size_t len;
    char *t = encode(&a, &len);
    CHECK_STR_EQ(t, "amlrun-stacks 1\nend 0\n");
    CHECK_INT_EQ(stk_decode(t, len, &b), 0);
    CHECK_INT_EQ(b.n, 0);
    free(t);
}

/* Decoding appends: one set of the job from every node's text. */
static void test_appends(void)
{
    struct stk_set n0 = {0}, n1 = {0}, job = {0};
    fx_py_allreduce(&n0, 0, 42);
    fx_py_allreduce(&n0, 1, 42);
    fx_py_stuck(&n1, 8, 17);
    size_t l0, l1;
    char *t0 = encode(&n0, &l0), *t1 = encode(&n1, &l1);
    CHECK_INT_EQ(stk_decode(t0, l0, &job), 0);
    CHECK_INT_EQ(stk_decode(t1, l1, &job), 0);
    CHECK_INT_EQ(job.n, 3);
    CHECK_INT_EQ(job.ranks[2].rank, 8);
    CHECK_STR_EQ(job.ranks[2].threads[0].python[0].function, "slow_step");
    /* A bad text leaves what is there as it was. */
    CHECK_INT_EQ(stk_decode(t1, l1 - 1, &job), -1);
    CHECK_INT_EQ(errno, EINVAL);
    CHECK_INT_EQ(job.n, 3);
    free(t0);
    free(t1);
    stk_set_free(&n0);
    stk_set_free(&n1);
    stk_set_free(&job);
}

/* Decode an exact-size copy (no NUL after it: a read past the end is
 * the sanitizers' to see); the set must stay empty on failure. */
static int decode_copy(const char *text, size_t len, struct stk_set *out)
{
    char *c = malloc(len ? len : 1);
    memcpy(c, text, len);
    size_t before = out->n;
    int rc = stk_decode(c, len, out);
    if (rc != 0)
        CHECK_INT_EQ(out->n, before);
    free(c);
    return rc;
}

/* Every text cut short is refused: a node's text that arrived in part
 * must not pass for a smaller job. */
static void test_every_cut_refused(void)
{
    struct stk_set a = {0}, b = {0};
    awkward(&a);
    size_t len;
    char *t = encode(&a, &len);
    for (size_t cut = 0; cut < len; cut++)
        if (decode_copy(t, cut, &b) == 0) {
            TEST__FAIL("a text cut at %zu of %zu was taken", cut, len);
            break;
        }
    CHECK_INT_EQ(b.n, 0);
    free(t);
    stk_set_free(&a);
}

/* Any one byte changed: refused, or taken in canonical form (it encodes
 * back to the same text); never a crash. */
static void test_every_byte_changed(void)
{
    struct stk_set a = {0};
    awkward(&a);
    size_t len;
    char *t = encode(&a, &len);
    static const unsigned char subst[] = {0, ' ', '\n', '%', '-', '=', '0', '9', 'A', 'z', 0x80, 0xff};
    char *c = malloc(len);
    size_t taken = 0, tried = 0;
    /* Under valgrind (a decode there costs 500 times one here), each byte
     * takes every fourth substitute, in turn: every position and every
     * substitute still, a quarter of the pairs.  Natively and under ASan,
     * all of them. */
    const size_t every = test_under_valgrind() ? 4 : 1;
    for (size_t i = 0; i < len; i++)
        for (size_t k = i % every; k < sizeof subst; k += every) {
            if (t[i] == (char)subst[k])
                continue;
            memcpy(c, t, len);
            c[i] = (char)subst[k];
            tried++;
            struct stk_set b = {0};
            if (decode_copy(c, len, &b) == 0) {
                size_t l2;
                char *t2 = stk_encode(&b, &l2);
                CHECK(t2 && l2 == len && memcmp(t2, c, len) == 0);
                free(t2);
                taken++;
            }
            stk_set_free(&b);
        }
    printf("# %zu of %zu one-byte changes are valid texts too\n", taken, tried);
    free(c);
    free(t);
    stk_set_free(&a);
}

static int decodes(const char *text)
{
    struct stk_set s = {0};
    int rc = decode_copy(text, strlen(text), &s);
    stk_set_free(&s);
    return rc == 0;
}

#define HEAD "amlrun-stacks 1\n"
#define RANK "r 0 0 0 10 1.5 =h -\n"

static void test_malformed(void)
{
    CHECK(decodes(HEAD RANK "t 10 0 -\np 3 =f =a.py -\nn 0 - - -\nend 1\n"));
    static const char *const bad[] = {
        "",
        "amlrun-stacks 2\nend 0\n",                 /* another version */
        "amlrun-stacks 1 \nend 0\n",
        HEAD "end 1\n",                             /* a count that lies */
        HEAD "end 0\nr 0 0 0 10 1.5 =h -\n",        /* after the end */
        HEAD "end 0\n\n",
        HEAD "end 0",                               /* no newline */
        HEAD "end -0\n",
        HEAD "end 00\n",
        HEAD RANK,                                  /* no end */
        HEAD "t 10 0 -\nend 0\n",                     /* a thread of no rank */
        HEAD RANK "p 3 =f =a.py -\nend 1\n",        /* a frame of no thread */
        HEAD "r 0 0 0 10 1.5 =h\nend 1\n",          /* a field short */
        HEAD "r 0 0 0 10 1.5 =h - -\nend 1\n",      /* a field more */
        HEAD "r 0 0 0 10 1.5 =h -- \nend 1\n",
        HEAD "r 0 0 0 10 1.5 =h - \nend 1\n",       /* a space at the end */
        HEAD "r 0  0 0 10 1.5 =h -\nend 1\n",       /* an empty field */
        HEAD "r +1 0 0 10 1.5 =h -\nend 1\n",
        HEAD "r 01 0 0 10 1.5 =h -\nend 1\n",
        HEAD "r -0 0 0 10 1.5 =h -\nend 1\n",
        HEAD "r 2147483648 0 0 10 1.5 =h -\nend 1\n",
        HEAD "r -2147483649 0 0 10 1.5 =h -\nend 1\n",
        HEAD "r 99999999999 0 0 10 1.5 =h -\nend 1\n",
        HEAD "r 1x 0 0 10 1.5 =h -\nend 1\n",
        HEAD "r 0 0 0 10 nan =h -\nend 1\n",
        HEAD "r 0 0 0 10 inf =h -\nend 1\n",
        HEAD "r 0 0 0 10 1e5 =h -\nend 1\n",        /* not %.17g's form */
        HEAD "r 0 0 0 10 1.50 =h -\nend 1\n",
        HEAD "r 0 0 0 10 0x1p1 =h -\nend 1\n",
        HEAD "r 0 0 0 10 1.5 h -\nend 1\n",         /* a string without '=' */
        HEAD "r 0 0 0 10 1.5 =h%4 -\nend 1\n",      /* an escape cut short */
        HEAD "r 0 0 0 10 1.5 =h%0a -\nend 1\n",     /* lower-case hex */
        HEAD "r 0 0 0 10 1.5 =h%41 -\nend 1\n",     /* a byte that needs none */
        HEAD "r 0 0 0 10 1.5 =h%00 -\nend 1\n",     /* a NUL */
        HEAD "r 0 0 0 10 1.5 =h\t -\nend 1\n",      /* a raw control character */
        HEAD "r 0 0 0 10 1.5 =h\xc3\xa9 -\nend 1\n", /* a raw byte over 0x7e */
        HEAD "x 0\nend 0\n",
        HEAD "r\nend 1\n",
        HEAD "\nend 0\n",
        HEAD RANK "t 10 0 -\nq 3 =f =a.py -\nend 1\n",
        HEAD RANK "t 10 0 -\nn 3 =f =a.c -\np 3 =f =a.py -\nend 1\n", /* out of order */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (decodes(bad[i]))
            TEST__FAIL("taken: \"%s\"", bad[i]);
    /* A NUL inside the text is a malformed byte, not its end. */
    static const char nul[] = HEAD "end 0\n\0";
    struct stk_set s = {0};
    CHECK_INT_EQ(decode_copy(nul, sizeof nul - 1, &s), -1);
    CHECK_INT_EQ(stk_decode(NULL, 0, &s), -1);
}

/* Decode head, then n times rep, then tail, then the end line. */
static int decode_made(const char *head, const char *rep, int n, const char *tail,
                       struct stk_set *out)
{
    char *p = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&p, &len);
    fputs(head, f);
    for (int i = 0; i < n; i++)
        fputs(rep, f);
    fprintf(f, "%send 1\n", tail);
    fclose(f);
    int rc = decode_copy(p, len, out);
    free(p);
    return rc;
}

/* Past the bounds: the encoder keeps the innermost frames, the first
 * threads and a name's first bytes; the decoder refuses more. */
static void test_bounds(void)
{
    struct stk_set a = {0}, b = {0};
    fx_rank(&a, 0);
    fx_thread(&a, 1, "main");
    for (int i = 0; i < STK_MAX_FRAMES + 5; i++)
        fx_py(&a, i == 0 ? "innermost" : "deeper", "a.py", i + 1);
    char *longname = malloc(STK_MAX_STR + 11);
    memset(longname, 'x', STK_MAX_STR + 10);
    longname[STK_MAX_STR + 10] = '\0';
    fx_nat(&a, longname, NULL, 0, NULL);
    for (int i = 1; i < STK_MAX_THREADS + 3; i++)
        fx_thread(&a, 1 + i, NULL);
    size_t len;
    char *t = encode(&a, &len);
    CHECK_INT_EQ(stk_decode(t, len, &b), 0);
    if (b.n == 1) {
        struct stk_thread *th = &b.ranks[0].threads[0];
        CHECK_INT_EQ(b.ranks[0].nthreads, STK_MAX_THREADS);
        CHECK_INT_EQ(th->npython, STK_MAX_FRAMES);
        CHECK_STR_EQ(th->python[0].function, "innermost");
        CHECK_INT_EQ(strlen(th->native[0].function), STK_MAX_STR);
    }
    stk_set_free(&b);
    free(t);

    /* The same past the bounds by hand: one frame, thread, byte more. */
    CHECK_INT_EQ(decode_made(HEAD RANK "t 1 0 -\n", "n 1 =f - -\n", STK_MAX_FRAMES + 1, "", &b), -1);
    CHECK_INT_EQ(decode_made(HEAD RANK, "t 1 0 -\n", STK_MAX_THREADS + 1, "", &b), -1);
    CHECK_INT_EQ(decode_made(HEAD "r 0 0 0 10 1.5 =", "x", STK_MAX_STR + 1, " -\n", &b), -1);
    CHECK_INT_EQ(decode_made(HEAD "r 0 0 0 10 1.5 =", "x", STK_MAX_STR, " -\n", &b), 0);
    stk_set_free(&b);
    free(longname);
    stk_set_free(&a);
}

int main(void)
{
    RUN(test_roundtrip);
    RUN(test_empty_set);
    RUN(test_appends);
    RUN(test_every_cut_refused);
    RUN(test_every_byte_changed);
    RUN(test_malformed);
    RUN(test_bounds);
    return test_summary();
}
