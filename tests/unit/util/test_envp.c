/*
 * Heap environment arrays (lib/envp.c: amldist_envp_*), the ones amlrun
 * builds its workers' environments in.  The Makefile links this test with
 * -Wl,--wrap for the allocation functions, so that the library's calls come
 * here: a chosen allocation fails, and every block is counted, so a failure
 * that leaves the caller's array changed or leaks a block fails a check.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "amldist.h"
#include "test.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);

static long fail_in = -1; /* allocations left before one fails; -1: never */
static long live;         /* blocks allocated here and not yet freed */

/* Does this allocation fail?  Only the chosen one: the next succeed. */
static int fail_now(void)
{
    if (fail_in < 0)
        return 0;
    return fail_in-- == 0;
}

void *__wrap_malloc(size_t n)
{
    void *p = fail_now() ? NULL : __real_malloc(n);
    live += p != NULL;
    return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
    void *p = fail_now() ? NULL : __real_calloc(n, size);
    live += p != NULL;
    return p;
}

void *__wrap_realloc(void *p, size_t n)
{
    if (fail_now())
        return NULL; /* as realloc does: p is still the caller's */
    void *q = __real_realloc(p, n);
    live += p == NULL && q != NULL;
    return q;
}

void __wrap_free(void *p)
{
    live -= p != NULL;
    __real_free(p);
}

/* glibc's strdup allocates inside libc, out of our sight. */
char *__wrap_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *c = __wrap_malloc(n);
    return c != NULL ? memcpy(c, s, n) : NULL;
}

static size_t length(char *const *e)
{
    size_t n = 0;
    while (e[n] != NULL)
        n++;
    return n;
}

static void test_dup(void)
{
    char **e = NULL;
    CHECK_INT_EQ(amldist_envp_dup(NULL, &e), 0); /* NULL: empty */
    CHECK(e != NULL && e[0] == NULL);
    amldist_envp_free(e);
    char *empty[] = {NULL};
    CHECK_INT_EQ(amldist_envp_dup(empty, &e), 0);
    CHECK(e != NULL && e[0] == NULL);
    amldist_envp_free(e);
    char a[] = "A=1", b[] = "B=x=y";
    char *src[] = {a, b, NULL};
    CHECK_INT_EQ(amldist_envp_dup(src, &e), 0);
    CHECK_INT_EQ(length(e), 2);
    CHECK(e[0] != a && e[1] != b); /* deep: the strings are its own */
    a[2] = '9';
    CHECK_STR_EQ(e[0], "A=1");
    CHECK_STR_EQ(e[1], "B=x=y");
    amldist_envp_free(e);
    CHECK_INT_EQ(amldist_envp_dup(src, NULL), AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "amldist_envp_dup");
    amldist_envp_free(NULL);
}

static void test_set(void)
{
    char **e = NULL;
    /* A NULL array is a new, empty one. */
    CHECK_INT_EQ(amldist_envp_set(&e, "A", "1"), 0);
    CHECK_INT_EQ(amldist_envp_set(&e, "AB", "2"), 0);
    CHECK_INT_EQ(amldist_envp_set(&e, "B", ""), 0);
    CHECK_INT_EQ(length(e), 3);
    /* Replace in place: the same slot, the same length. */
    CHECK_INT_EQ(amldist_envp_set(&e, "A", "x=y"), 0);
    CHECK_INT_EQ(length(e), 3);
    CHECK_STR_EQ(e[0], "A=x=y");
    CHECK_STR_EQ(e[1], "AB=2"); /* a longer name is another variable */
    CHECK_STR_EQ(e[2], "B=");
    /* Append at the end. */
    CHECK_INT_EQ(amldist_envp_set(&e, "C", "3"), 0);
    CHECK_STR_EQ(e[3], "C=3");
    CHECK(e[4] == NULL);
    /* Names that could never be found again, and NULLs. */
    CHECK_INT_EQ(amldist_envp_set(&e, "", "1"), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_envp_set(&e, "A=B", "1"), AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "\"A=B\"");
    CHECK_INT_EQ(amldist_envp_set(&e, NULL, "1"), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_envp_set(&e, "A", NULL), AMLDIST_EINVAL);
    CHECK_STR_HAS(amldist_last_error(), "value is NULL");
    CHECK_INT_EQ(amldist_envp_set(NULL, "A", "1"), AMLDIST_EINVAL);
    CHECK_INT_EQ(length(e), 4);
    amldist_envp_free(e);
}

static void test_get(void)
{
    CHECK(amldist_envp_get(NULL, "A") == NULL);
    char *empty[] = {NULL};
    CHECK(amldist_envp_get(empty, "A") == NULL);
    char *e[] = {"AB=1", "A=", "A=2", "C==3", NULL};
    CHECK_STR_EQ(amldist_envp_get(e, "A"), ""); /* the first wins */
    CHECK_STR_EQ(amldist_envp_get(e, "AB"), "1");
    CHECK_STR_EQ(amldist_envp_get(e, "C"), "=3");
    CHECK(amldist_envp_get(e, "B") == NULL);
    CHECK(amldist_envp_get(e, "") == NULL);
    CHECK(amldist_envp_get(e, "A=") == NULL);
    CHECK(amldist_envp_get(e, NULL) == NULL);
}

/* With duplicates, set changes the first: the one get (and getenv) read. */
static void test_duplicates(void)
{
    char *src[] = {"A=1", "B=2", "A=3", NULL};
    char **e;
    CHECK_INT_EQ(amldist_envp_dup(src, &e), 0);
    CHECK_INT_EQ(amldist_envp_set(&e, "A", "4"), 0);
    CHECK_STR_EQ(amldist_envp_get(e, "A"), "4");
    CHECK_INT_EQ(length(e), 3);
    /* Unset takes every copy, so that none shows through. */
    CHECK_INT_EQ(amldist_envp_unset(e, "A"), 1);
    CHECK(amldist_envp_get(e, "A") == NULL);
    CHECK_STR_EQ(e[0], "B=2");
    CHECK(e[1] == NULL);
    amldist_envp_free(e);
}

static void test_unset(void)
{
    char *src[] = {"A=1", "B=2", "C=3", "BC=4", NULL};
    char **e;
    CHECK_INT_EQ(amldist_envp_dup(src, &e), 0);
    CHECK_INT_EQ(amldist_envp_unset(e, "B"), 1);
    CHECK_INT_EQ(amldist_envp_unset(e, "B"), 0);
    CHECK_INT_EQ(amldist_envp_unset(e, "D"), 0);
    /* The others keep their order. */
    CHECK_STR_EQ(e[0], "A=1");
    CHECK_STR_EQ(e[1], "C=3");
    CHECK_STR_EQ(e[2], "BC=4");
    CHECK(e[3] == NULL);
    CHECK_INT_EQ(amldist_envp_unset(e, "A"), 1);
    CHECK_INT_EQ(amldist_envp_unset(e, "BC"), 1);
    CHECK_INT_EQ(amldist_envp_unset(e, "C"), 1);
    CHECK(e[0] == NULL);
    CHECK_INT_EQ(amldist_envp_unset(e, "A=1"), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_envp_unset(e, ""), AMLDIST_EINVAL);
    CHECK_INT_EQ(amldist_envp_unset(NULL, "A"), 0);
    /* An emptied array grows again. */
    CHECK_INT_EQ(amldist_envp_set(&e, "Z", "1"), 0);
    CHECK_STR_EQ(e[0], "Z=1");
    amldist_envp_free(e);
}

/* amlrun grows amldist_export_envp()'s array and frees it with the same. */
static void test_export_compatible(void)
{
    char *vars[] = {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", "PATH=/bin",
                    NULL};
    amldist_t *h = NULL;
    CHECK_INT_EQ(amldist_init_from(&h, vars, 0), 0);
    char **e = NULL;
    CHECK_INT_EQ(amldist_export_envp(h, vars, &e), 0);
    for (int i = 0; i < 64; i++) {
        char name[16];
        snprintf(name, sizeof name, "V%d", i);
        CHECK_INT_EQ(amldist_envp_set(&e, name, "x"), 0);
    }
    CHECK_INT_EQ(amldist_envp_set(&e, "RANK", "7"), 0);
    CHECK_STR_EQ(amldist_envp_get(e, "RANK"), "7");
    CHECK_STR_EQ(amldist_envp_get(e, "V63"), "x");
    CHECK_INT_EQ(amldist_envp_unset(e, "PATH"), 1);
    amldist_envp_free(e);
    amldist_free(h);
}

static void test_dup_out_of_memory(void)
{
    char *src[] = {"A=1", "B=2", "C=3", NULL};
    long at_start = live;
    int failures = 0;
    for (long k = 0;; k++) {
        char **e = (char **)src; /* must become NULL on failure */
        long before = live;
        fail_in = k;
        int rc = amldist_envp_dup(src, &e);
        fail_in = -1;
        if (rc == 0) {
            CHECK_INT_EQ(length(e), 3);
            amldist_envp_free(e);
            break;
        }
        failures++;
        CHECK_INT_EQ(rc, AMLDIST_ENOMEM);
        CHECK(e == NULL);
        CHECK_INT_EQ(live, before); /* what it had made is freed */
        if (k > 16)
            break;
    }
    /* The array and each of its three strings. */
    CHECK_INT_EQ(failures, 4);
    CHECK_INT_EQ(live, at_start);
}

/* Every allocation of a set fails in turn: the array stays as it was. */
static void test_set_out_of_memory(void)
{
    char *src[] = {"A=1", "B=2", NULL};
    char **e;
    CHECK_INT_EQ(amldist_envp_dup(src, &e), 0);
    long before = live;
    /* Replacing allocates one string; appending, a string and the array. */
    const char *names[] = {"A", "C"};
    const int allocs[] = {1, 2};
    for (int n = 0; n < 2; n++) {
        for (long k = 0; k < allocs[n]; k++) {
            char **was = e;
            char *first = e[0];
            fail_in = k;
            CHECK_INT_EQ(amldist_envp_set(&e, names[n], "new"), AMLDIST_ENOMEM);
            fail_in = -1;
            CHECK(e == was && e[0] == first);
            CHECK_INT_EQ(length(e), 2);
            CHECK_STR_EQ(e[0], n == 0 ? "A=1" : "A=new");
            CHECK_STR_EQ(e[1], "B=2");
            CHECK_INT_EQ(live, before);
            CHECK_STR_HAS(amldist_last_error(), names[n]);
        }
        /* One more allocation than it makes: it succeeds. */
        fail_in = allocs[n];
        CHECK_INT_EQ(amldist_envp_set(&e, names[n], "new"), 0);
        fail_in = -1;
        CHECK_STR_EQ(amldist_envp_get(e, names[n]), "new");
    }
    CHECK_INT_EQ(length(e), 3);
    amldist_envp_free(e);
    CHECK_INT_EQ(live, before - 3);
}

int main(void)
{
    RUN(test_dup);
    RUN(test_set);
    RUN(test_get);
    RUN(test_duplicates);
    RUN(test_unset);
    RUN(test_export_compatible);
    RUN(test_dup_out_of_memory);
    RUN(test_set_out_of_memory);
    return test_summary();
}
