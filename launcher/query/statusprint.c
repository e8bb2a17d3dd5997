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

/* ---- the ranks' fields: one row each, for the table, its notes and JSON ---- */

enum field_kind {
    F_CELL,  /* the value as it came */
    F_STATE, /* "ended": the status instead (JSON: a string) */
    F_SECS,  /* an amount of seconds */
    F_BYTES, /* an amount of bytes */
    F_LAG,   /* a signed lag; JSON: a number, null when absent */
    F_BOOL,  /* JSON only: true when > 0 */
};

struct rank_field {
    const char *key;   /* the rank record's key (query/qtext.h) */
    const char *head;  /* the table's column, NULL: JSON only */
    int width;         /* the column's width, negative: left-aligned */
    enum field_kind kind;
    const char *json;  /* the JSON member, NULL: the table only */
    int decimals;      /* a JSON number's decimals, -1: a string */
    const char *note;  /* appended to the table's footnote, or NULL */
};

/* A new field of --status: its row here, and the owner's status hook
 * (launcher/job/hooks.h) writing its key into each rank's record. */
static const struct rank_field rank_fields[] = {
    {"rank", "RANK", -5, F_CELL, "rank", 0, NULL},
    {"local", "LOCAL", -5, F_CELL, "local_rank", 0, NULL},
    {"node", "NODE", -4, F_CELL, "node", 0, NULL},
    {"pid", "PID", -8, F_CELL, "pid", 0, NULL},
    {"state", "STATE", -12, F_STATE, "state", -1, NULL},
    {"status", NULL, 0, F_CELL, "status", -1, NULL},
    {"cpu", "CPU%", 6, F_CELL, "cpu_percent", 1, NULL},
    {"rss", "RSS", 8, F_BYTES, "rss_bytes", 0, NULL},
    {"threads", "THREADS", 7, F_CELL, "threads", 0, NULL},
    {"age", NULL, 0, F_SECS, "age_s", 1, NULL},
    {"out_age", "OUTPUT", 7, F_SECS, "output_age_s", 1,
     "; OUTPUT: the age of its last line"},
    {"step", "STEP", 8, F_CELL, "step", 0,
     "; STEP: its last progress (amldist_progress)"},
    {"step_age", "STEP-AGE", 8, F_SECS, "step_age_s", 3, ", STEP-AGE its age"},
    {"lag", "LAG", 9, F_LAG, "lag_s", 3,
     "; LAG: how late it reaches its steps, behind the median rank (* "
     "consistently last)"},
    {"last", NULL, 0, F_BOOL, "consistently_last", 0, NULL},
};
#define NFIELDS (sizeof rank_fields / sizeof *rank_fields)

/* The field's cell in the table (into buf, or a constant). */
static const char *rank_cell(const struct qrec *r, const struct rank_field *f,
                             char *buf, size_t size)
{
    switch (f->kind) {
    case F_STATE: {
        const char *state = cell(r, f->key, buf, size);
        if (strcmp(state, "ended") == 0 && qrec_get(r, "status"))
            return cell(r, "status", buf, size);
        return state;
    }
    case F_SECS: return amount(r, f->key, 0, buf, size);
    case F_BYTES: return amount(r, f->key, 1, buf, size);
    case F_LAG: return lag(r, buf, size);
    case F_CELL:
    case F_BOOL: break;
    }
    return cell(r, f->key, buf, size);
}

/* The table of ranks: its heads, then a row each. */
static void rank_table(const struct recs *ranks)
{
    const char *sep = "\n";
    for (size_t k = 0; k < NFIELDS; k++) {
        if (!rank_fields[k].head)
            continue;
        printf("%s%*s", sep, rank_fields[k].width, rank_fields[k].head);
        sep = " ";
    }
    fputc('\n', stdout);
    for (size_t i = 0; i < ranks->n; i++) {
        sep = "";
        for (size_t k = 0; k < NFIELDS; k++) {
            char c[96];
            if (!rank_fields[k].head)
                continue;
            printf("%s%*s", sep, rank_fields[k].width,
                   rank_cell(&ranks->r[i], &rank_fields[k], c, sizeof c));
            sep = " ";
        }
        fputc('\n', stdout);
    }
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
    rank_table(ranks);
    printf("\nCPU%%: over %.2f s after the request (the rank's process, "
           "threads included)", interval < 0 ? 0 : interval);
    for (size_t k = 0; k < NFIELDS; k++)
        if (rank_fields[k].note)
            fputs(rank_fields[k].note, stdout);
    fputc('\n', stdout);
}

/* A job in its rendezvous: no node has a part yet, no rank runs. */
static void print_rendezvous(const struct qrec *job)
{
    char a[256], b[1024], c[1024];
    printf("job %s: amlrun pid %s, in its rendezvous for %.1f s: no worker "
           "runs yet\n", cell(job, "run_id", a, sizeof a),
           qrec_get(job, "pid"), qrec_num(job, "waited", 0));
    printf("command: %s\n", cell(job, "cmd", b, sizeof b));
    printf("waiting for: %s\n", cell(job, "waiting", c, sizeof c));
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

/* The field as a JSON member. */
static void rank_json(struct json *js, const struct qrec *r,
                      const struct rank_field *f)
{
    if (!f->json)
        return;
    if (f->kind == F_BOOL)
        json_bool(js, f->json, qrec_num(r, f->key, 0) > 0);
    else if (f->kind == F_LAG && qrec_get(r, f->key))
        json_num(js, f->json, qrec_num(r, f->key, 0), f->decimals);
    else if (f->kind == F_LAG)
        json_null(js, f->json);
    else if (f->decimals < 0)
        json_str(js, f->json, qrec_get(r, f->key));
    else
        jnum(js, r, f->key, f->json, f->decimals);
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
    /* Only in the rendezvous: a running job's JSON is as it was. */
    if (qrec_get(job, "phase")) {
        json_str(&js, "phase", qrec_get(job, "phase"));
        json_str(&js, "waiting_for", qrec_get(job, "waiting"));
        jnum(&js, job, "waited", "waited_s", 1);
    }
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
        for (size_t k = 0; k < NFIELDS; k++)
            rank_json(&js, r, &rank_fields[k]);
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
    /* (none in a rendezvous: qsort's array may not be NULL even then) */
    if (nodes.n > 0)
        qsort(nodes.r, nodes.n, sizeof *nodes.r, by_node);
    if (ranks.n > 0)
        qsort(ranks.r, ranks.n, sizeof *ranks.r, by_rank);
    const char *phase = qrec_get(&job, "phase");
    if (json)
        print_json(&job, &nodes, &ranks);
    else if (phase && strcmp(phase, "rendezvous") == 0)
        print_rendezvous(&job);
    else
        print_text(&job, &nodes, &ranks, unanswered);
    rc = 0;
out:
    free(nodes.r);
    free(ranks.r);
    return rc;
}
