/*
 * The etcd backend's pieces that need no etcd (lib/rdzv/etcd): the JSON
 * reader on answers of etcd 3.4's gateway as they come (numbers quoted,
 * nested objects, strings with escapes), base64 both ways, one watch
 * event's KeyValue decoded, and the endpoint's form and --rdzv-conf keys
 * (the registry's etcd:// picks the backend).  etcd itself: the shell
 * tests (tests/sh/etcd/).
 */
#include <string.h>

#include "rdzv/backend.h"
#include "rdzv/etcd/etcd.h"
#include "test.h"

static amldist__js_t doc(const char *s)
{
    return (amldist__js_t){s, s + strlen(s)};
}

static void test_json(void)
{
    amldist__js_t d = doc("{\"header\":{\"cluster_id\":\"1\",\"revision\":\"42\"},"
                          "\"note\":\"a \\\"quoted\\\" {brace}\",\"succeeded\":true,"
                          "\"kvs\":[{\"key\":\"YQ==\"},{\"key\":\"Yg==\"}],\"n\":7}");
    amldist__js_t v, it, e;
    char s[32];
    CHECK_INT_EQ(amldist__js_path(d, "header.revision", &v), 0);
    CHECK_INT_EQ(amldist__js_int(v, -1), 42);
    CHECK_INT_EQ(amldist__js_get(d, "n", &v), 0);
    CHECK_INT_EQ(amldist__js_int(v, -1), 7);
    CHECK_INT_EQ(amldist__js_get(d, "succeeded", &v), 0);
    CHECK(*v.p == 't');
    CHECK_INT_EQ(amldist__js_get(d, "missing", &v), -1);
    CHECK_INT_EQ(amldist__js_get(d, "kvs", &it), 0);
    int k = 0;
    while (amldist__js_next(&it, &e)) {
        CHECK_INT_EQ(amldist__js_get(e, "key", &v), 0);
        CHECK_INT_EQ(amldist__js_str(v, s, sizeof s), 0);
        CHECK_STR_EQ(s, k ? "Yg==" : "YQ==");
        k++;
    }
    CHECK_INT_EQ(k, 2);
    /* A string with escapes is not taken as plain. */
    CHECK_INT_EQ(amldist__js_get(d, "note", &v), 0);
    CHECK_INT_EQ(amldist__js_str(v, s, sizeof s), -1);
    CHECK_INT_EQ(amldist__js_get(doc("[1,2]"), "a", &v), -1);
    CHECK_INT_EQ(amldist__js_get(doc("{\"a\""), "a", &v), -1);
}

static void test_base64(void)
{
    const char *in[] = {"", "a", "ab", "abc", "abcd", "/amldist/x"};
    for (size_t i = 0; i < sizeof in / sizeof *in; i++) {
        char e[64];
        unsigned char back[64];
        size_t n = strlen(in[i]);
        size_t k = amldist__b64_enc((const unsigned char *)in[i], n, e);
        CHECK_INT_EQ(k, 4 * ((n + 2) / 3));
        CHECK_INT_EQ(amldist__b64_dec(e, k, back), (long)n);
        CHECK(memcmp(back, in[i], n) == 0);
    }
    char e[8];
    amldist__b64_enc((const unsigned char *)"\xff\xfe", 2, e);
    CHECK_STR_EQ(e, "//4=");
    unsigned char b[8];
    CHECK_INT_EQ(amldist__b64_dec("a!==", 4, b), -1);
}

struct got {
    int n, del;
    char key[64];
    char val[64];
    long long crev, mrev;
};

static void on_kv(void *arg, int del, const char *key, size_t klen,
                  const unsigned char *v, size_t vlen, long long crev,
                  long long mrev)
{
    struct got *g = arg;
    g->n++;
    g->del = del;
    memcpy(g->key, key, klen);
    g->key[klen] = '\0';
    memcpy(g->val, v ? (const char *)v : "", vlen);
    g->val[vlen] = '\0';
    g->crev = crev;
    g->mrev = mrev;
}

/* A watch's event as etcd 3.4's gateway writes it. */
static void test_kv(void)
{
    struct got g = {0};
    amldist__js_t kv = doc("{\"key\":\"L2Ev\",\"create_revision\":\"2\","
                           "\"mod_revision\":\"3\",\"version\":\"2\","
                           "\"value\":\"eQ==\"}");
    CHECK_INT_EQ(amldist__js_kv(kv, 0, on_kv, &g), 3);
    CHECK_INT_EQ(g.n, 1);
    CHECK_STR_EQ(g.key, "/a/");
    CHECK_STR_EQ(g.val, "y");
    CHECK_INT_EQ(g.crev, 2);
    memset(&g, 0, sizeof g);
    CHECK_INT_EQ(amldist__js_kv(doc("{\"key\":\"L2Ev\",\"mod_revision\":\"4\"}"),
                                1, on_kv, &g), 4);
    CHECK_INT_EQ(g.del, 1);
    CHECK_INT_EQ(amldist__js_kv(doc("{\"mod_revision\":\"4\"}"), 1, on_kv, &g), -1);
}

/* etcd://LIST[?CONF] picks the backend, whose check reads the list and
 * the keys. */
static void test_endpoint(void)
{
    const char *rest;
    const struct amldist__rz_backend_ops *o =
        amldist__rz_backend_pick("etcd://127.0.0.1:2379,[::1]:2380,h?etcd_prefix=/x", &rest);
    CHECK_STR_EQ(o->scheme, "etcd");
    CHECK_STR_EQ(rest, "127.0.0.1:2379,[::1]:2380,h?etcd_prefix=/x");
    CHECK_INT_EQ(o->check(rest, 2), 0);
    CHECK_INT_EQ(o->check("h1,h2:2379?keep_alive_interval=0.5,protocol=https", 2), 0);
    CHECK(o->check("", 2) < 0);
    CHECK(o->check("h:0", 2) < 0);
    CHECK(o->check("h:1,,h:2", 2) < 0);
    CHECK(o->check("::1:2379", 2) < 0);
    CHECK(o->check("http://h:2379", 2) < 0);
    CHECK(o->check("h?protocol=ftp", 2) < 0);
    CHECK_STR_HAS(amldist_last_error(), "protocol=ftp");
    CHECK(o->check("h?etcd_prefix=relative", 2) < 0);
    CHECK_STR_EQ(amldist__rz_backend_pick("127.0.0.1:29400", &rest)->scheme, "tcp");
}

int main(void)
{
    RUN(test_json);
    RUN(test_base64);
    RUN(test_kv);
    RUN(test_endpoint);
    return test_summary();
}
