/*
 * A status answer (proto.h) printed for people, one table of nodes and one
 * of ranks, or as JSON (--status=json); the parts of every node merged,
 * nodes and ranks in order.  Text that came from another node is printed
 * with its control characters escaped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/json.h"
#include "output/msg.h"
#include "query/client.h"
#include "query/qtext.h"

struct recs {
    struct qrec *r;
    size_t n, cap;
};

static int recs_add(struct recs *v, const struct qrec *r)
{
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 16;
        struct qrec *nr = realloc(v->r, nc * sizeof *nr);
        if (!nr)
            return -1;
        v->r = nr;
        v->cap = nc;
    }
    v->r[v->n++] = *r;
    return 0;
}

static int by_key(const void *a, const void *b, const char *key)
{
    double x = qrec_num(a, key, 1e18), y = qrec_num(b, key, 1e18);
    return (x > y) - (x < y);
}

static int by_node(const void *a, const void *b)
{
    return by_key(a, b, "node");
}

static int by_rank(const void *a, const void *b)
{
    int c = by_key(a, b, "rank");
    return c ? c : by_key(a, b, "node");
}

/* A value for the table: control characters escaped, "-" when unknown. */
static const char *cell(const struct qrec *r, const char *key, char *buf,
                        size_t size)
{
    const char *v = qrec_get(r, key);
    return v ? qt_shown(v, buf, size) : "-";
}

/* An amount: seconds ("0.05s", "12.3s"), or bytes ("12.5M", "1.2G");
 * "-" when unknown. */
static const char *amount(const struct qrec *r, const char *key, int bytes,
                          char *buf, size_t size)
{
    double v = qrec_num(r, key, -1);
    if (v < 0)
        return "-";
    if (bytes && v >= 1 << 30)
        snprintf(buf, size, "%.1fG", v / (1 << 30));
    else if (bytes)
        snprintf(buf, size, "%.1fM", v / (1 << 20));
    else
        snprintf(buf, size, v < 10 ? "%.2fs" : "%.1fs", v);
    return buf;
}

/* A lag: signed seconds ("+0.012s", ahead of the median "-0.003s"), "*"
 * after the consistently last rank's; "-" when unknown. */
static const char *lag(const struct qrec *r, char *buf, size_t size)
{
    if (!qrec_get(r, "lag"))
        return "-";
    snprintf(buf, size, "%+.3fs%s", qrec_num(r, "lag", 0),
             qrec_num(r, "last", 0) > 0 ? "*" : "");
    return buf;
}

static void print_text(const struct qrec *job, const struct recs *nodes,
                       const struct recs *ranks, size_t unanswered)
{
    char a[256], b[1024];
    double restarts = 0, maxr = 0, uptime = -1, interval = -1;
    /* The job's restarts and uptime: the longest running node's. */
    for (size_t i = 0; i < nodes->n; i++) {
        double u = qrec_num(&nodes->r[i], "uptime", -1);
        if (u > uptime) {
            uptime = u;
            restarts = qrec_num(&nodes->r[i], "restarts", 0);
            maxr = qrec_num(&nodes->r[i], "max_restarts", 0);
            interval = qrec_num(&nodes->r[i], "cpu_interval", -1);
        }
    }
    printf("job %s: amlrun pid %s, %zu rank%s on %zu node%s, up %.1f s, "
           "restarts %.0f (at most %.0f)\n",
           cell(job, "run_id", a, sizeof a), qrec_get(job, "pid"), ranks->n,
           ranks->n == 1 ? "" : "s", nodes->n, nodes->n == 1 ? "" : "s",
           uptime < 0 ? 0 : uptime, restarts, maxr);
    printf("command: %s\n", cell(job, "cmd", b, sizeof b));
    double in_job = qrec_num(job, "nodes", -1);
    if (unanswered || in_job > (double)nodes->n)
        printf("(%zu of the job's %.0f nodes answered)\n", nodes->n,
               in_job > (double)nodes->n ? in_job : (double)nodes->n);
    printf("\n%-5s %-24s %-16s %-10s %-8s %s\n", "NODE", "HOST", "ADDRESS",
           "STATE", "PID", "UPTIME");
    for (size_t i = 0; i < nodes->n; i++) {
        const struct qrec *r = &nodes->r[i];
        char c1[32], c2[256], c3[256], c4[32], c5[32], c6[32];
        printf("%-5s %-24s %-16s %-10s %-8s %s\n",
               cell(r, "node", c1, sizeof c1), cell(r, "host", c2, sizeof c2),
               cell(r, "addr", c3, sizeof c3), cell(r, "state", c4, sizeof c4),
               cell(r, "pid", c5, sizeof c5), amount(r, "uptime", 0, c6, sizeof c6));
    }
    printf("\n%-5s %-5s %-4s %-8s %-12s %6s %8s %7s %7s %8s %8s %9s\n",
           "RANK", "LOCAL", "NODE", "PID", "STATE", "CPU%", "RSS", "THREADS",
           "OUTPUT", "STEP", "STEP-AGE", "LAG");
    for (size_t i = 0; i < ranks->n; i++) {
        const struct qrec *r = &ranks->r[i];
        char c[12][96];
        const char *state = cell(r, "state", c[4], sizeof c[4]);
        if (strcmp(state, "ended") == 0 && qrec_get(r, "status"))
            state = cell(r, "status", c[4], sizeof c[4]);
        printf("%-5s %-5s %-4s %-8s %-12s %6s %8s %7s %7s %8s %8s %9s\n",
               cell(r, "rank", c[0], 96), cell(r, "local", c[1], 96),
               cell(r, "node", c[2], 96), cell(r, "pid", c[3], 96), state,
               cell(r, "cpu", c[5], 96), amount(r, "rss", 1, c[6], 96),
               cell(r, "threads", c[7], 96), amount(r, "out_age", 0, c[8], 96),
               cell(r, "step", c[9], 96), amount(r, "step_age", 0, c[10], 96),
               lag(r, c[11], 96));
    }
    printf("\nCPU%%: over %.2f s after the request (the rank's process, "
           "threads included); OUTPUT: the age of its last line; STEP: its "
           "last progress (amldist_progress), STEP-AGE its age; LAG: how "
           "late it reaches its steps, behind the median rank (* "
           "consistently last)\n", interval < 0 ? 0 : interval);
}

/* A field as a JSON number (null when unknown) or string. */
static void jnum(struct json *js, const struct qrec *r, const char *key,
                 const char *name, int decimals)
{
    double v = qrec_num(r, key, -1);
    if (v < 0)
        json_null(js, name);
    else
        json_num(js, name, v, decimals);
}

static void print_json(const struct qrec *job, const struct recs *nodes,
                       const struct recs *ranks)
{
    struct json js;
    json_begin(&js, stdout);
    json_object(&js, NULL);
    json_str(&js, "run_id", qrec_get(job, "run_id"));
    jnum(&js, job, "pid", "pid", 0);
    jnum(&js, job, "started", "start_time", 3);
    json_str(&js, "command", qrec_get(job, "cmd"));
    jnum(&js, job, "nodes", "nodes_in_job", 0);
    json_array(&js, "nodes");
    for (size_t i = 0; i < nodes->n; i++) {
        const struct qrec *r = &nodes->r[i];
        json_object(&js, NULL);
        jnum(&js, r, "node", "node", 0);
        json_str(&js, "host", qrec_get(r, "host"));
        json_str(&js, "address", qrec_get(r, "addr"));
        json_str(&js, "state", qrec_get(r, "state"));
        jnum(&js, r, "pid", "pid", 0);
        jnum(&js, r, "uptime", "uptime_s", 1);
        jnum(&js, r, "restarts", "restarts", 0);
        jnum(&js, r, "max_restarts", "max_restarts", 0);
        jnum(&js, r, "cpu_interval", "cpu_interval_s", 2);
        json_close(&js);
    }
    json_close(&js);
    json_array(&js, "ranks");
    for (size_t i = 0; i < ranks->n; i++) {
        const struct qrec *r = &ranks->r[i];
        json_object(&js, NULL);
        jnum(&js, r, "rank", "rank", 0);
        jnum(&js, r, "local", "local_rank", 0);
        jnum(&js, r, "node", "node", 0);
        jnum(&js, r, "pid", "pid", 0);
        json_str(&js, "state", qrec_get(r, "state"));
        json_str(&js, "status", qrec_get(r, "status"));
        jnum(&js, r, "cpu", "cpu_percent", 1);
        jnum(&js, r, "rss", "rss_bytes", 0);
        jnum(&js, r, "threads", "threads", 0);
        jnum(&js, r, "age", "age_s", 1);
        jnum(&js, r, "out_age", "output_age_s", 1);
        jnum(&js, r, "step", "step", 0);
        jnum(&js, r, "step_age", "step_age_s", 3);
        if (qrec_get(r, "lag"))
            json_num(&js, "lag_s", qrec_num(r, "lag", 0), 3);
        else
            json_null(&js, "lag_s");
        json_bool(&js, "consistently_last", qrec_num(r, "last", 0) > 0);
        json_close(&js);
    }
    json_close(&js);
    json_end(&js);
}

int status_print(char *text, size_t len, int json)
{
    struct recs nodes = {0}, ranks = {0};
    struct qrec job;
    int have_job = 0, rc = -1;
    size_t unanswered = 0;
    char *end = text + len;
    for (char *p = text; p < end && *p;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            goto out;
        *nl = '\0';
        struct qrec r;
        if (strncmp(p, "part ", 5) == 0) {
            /* A node's records follow, as lines of their own. */
        } else if (qrec_parse(p, &r) < 0) {
            goto out;
        } else if (strcmp(r.type, "job") == 0) {
            job = r;
            have_job = 1;
        } else if (strcmp(r.type, "node") == 0) {
            if (recs_add(&nodes, &r) < 0)
                goto out;
        } else if (strcmp(r.type, "rank") == 0) {
            if (recs_add(&ranks, &r) < 0)
                goto out;
        } else if (strcmp(r.type, "error") == 0) {
            char m[512];
            msg("status of node %s: %s", cell(&r, "node", m, 32),
                cell(&r, "message", m + 32, sizeof m - 32));
            unanswered++;
        }
        p = nl + 1;
    }
    if (!have_job)
        goto out;
    qsort(nodes.r, nodes.n, sizeof *nodes.r, by_node);
    qsort(ranks.r, ranks.n, sizeof *ranks.r, by_rank);
    if (json)
        print_json(&job, &nodes, &ranks);
    else
        print_text(&job, &nodes, &ranks, unanswered);
    rc = 0;
out:
    free(nodes.r);
    free(ranks.r);
    return rc;
}
