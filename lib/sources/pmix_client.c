/*
 * The PMIx server's answers about this process: its node index, the node
 * count, job and local sizes, the host of rank 0.  Open MPI 4 exports no node
 * index at all (OMPI_COMM_WORLD_NODE_RANK is something else), and only the
 * runtime knows it when ranks are mapped round-robin by node.
 *
 * libpmix is dlopen'ed, never linked: a program that links libamldist but
 * was not started by a PMIx launcher must not load it.  The structures below
 * are the parts of the PMIx ABI (stable since v2) that we touch.
 *
 * Open MPI 4.1 (PMIx 4.2 server) fails MPI_Init ("getting local rank
 * failed": its PMIx_Get of pmix.lrank finds nothing) once this rank has
 * connected before: finalized or not, from this process or from a forked
 * child, and in a program it execs.  A connection as a tool instead crashes
 * mpirun.  It calls a rank that exits between Init and Finalize "exiting
 * improperly".  So src_ompi.c reads the node index from the daemon variables
 * when they decide it, and the query is the fallback.  When PMIx is
 * already initialised (MPI_Init ran) Init/Finalize only move its reference
 * count; when an MPI library is loaded but not initialised, we keep our
 * reference until exit, so MPI_Init shares the connection and the last
 * Finalize happens at exit; otherwise (a PyTorch script, amlrun) we finalize
 * at once.  A process that queried and finalized cannot MPI_Init afterwards,
 * nor can a program it execs: those set AMLDIST_NO_PMIX (amldist-env(7)).
 *
 * libpmix 4.2 can wait forever inside PMIx_Init (openpmix #2967): about one
 * start in fifty of four ranks on a loaded two-core machine, the caller in
 * pthread_cond_wait and libpmix's progress thread idle.  Open MPI's own
 * MPI_Init waits there the same way.  So the conversation runs on a helper
 * thread and the caller waits at most AMLDIST_PMIX_TIMEOUT seconds: then the
 * fields stay unknown with a reason that names PMIx_Init, and the helper is
 * left where it is.  libpmix cannot be entered again while one PMIx_Init has
 * not returned, so later queries in the process fail at once.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sources/sources.h"
#include "util/parse.h"

#define PMIX_MAX_NSLEN 255
#define PMIX_SUCCESS 0
#define PMIX_STRING 3
#define PMIX_UINT16 13
#define PMIX_UINT32 14
#define PMIX_PROC_RANK 40
#define PMIX_RANK_WILDCARD (UINT32_MAX - 1)
/* How long PMIx_Init and the queries after it may take, unless
 * AMLDIST_PMIX_TIMEOUT says otherwise: a server answers in milliseconds. */
#define AMLDIST__PMIX_TIMEOUT_MS 30000
/* A node list longer than this (some 10000 nodes) is not searched. */
#define AMLDIST__NODE_LIST_MAX (1 << 20)

typedef struct {
    char nspace[PMIX_MAX_NSLEN + 1];
    uint32_t rank;
} pmix_proc_t;

/* Only read through pointers that libpmix returns, never allocated here. */
typedef struct {
    uint16_t type;
    union {
        char *string;
        uint16_t u16;
        uint32_t u32;
        uint64_t align;
    } data;
} pmix_value_t;

typedef int (*init_fn)(pmix_proc_t *, void *, size_t);
typedef int (*get_fn)(const pmix_proc_t *, const char *, const void *, size_t,
                      pmix_value_t **);
typedef int (*finalize_fn)(const void *, size_t);
typedef void (*destruct_fn)(pmix_value_t *);
typedef int (*initialized_fn)(void);

struct api {
    init_fn init;
    get_fn get;
    finalize_fn finalize;
    destruct_fn destruct;
    initialized_fn initialized;
};

/* PMIx is per process: queries are serialised, and at most one reference
 * is kept until exit. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static finalize_fn finalize_at_exit;

static void finalize_now(void)
{
    finalize_at_exit(NULL, 0);
}

/* Will this process call MPI_Init?  Its MPI library is loaded already. */
static int mpi_loaded(void)
{
    static const char *const libs[] = {"libmpi.so.40", "libmpi.so.12",
                                       "libmpi.so"};
    if (dlsym(RTLD_DEFAULT, "PMPI_Init") != NULL)
        return 1;
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++) {
        void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
        if (h != NULL) {
            dlclose(h);
            return 1;
        }
    }
    return 0;
}

int amldist__pmix_disabled(const amldist__env_t *env)
{
    const char *v = amldist__env_get(env, "AMLDIST_NO_PMIX");
    return (env->flags & AMLDIST_NO_PMIX) ||
           (v != NULL && *v != '\0' && strcmp(v, "0") != 0);
}

/* Open MPI's libmpi may have loaded libpmix already: prefer that copy, then
 * the usual names, then Debian's private directory. */
static void *open_libpmix(const amldist__env_t *env)
{
    const char *named = amldist__env_get(env, "AMLDIST_PMIX_LIBRARY");
    static const char *const candidates[] = {
        "libpmix.so.2",
        "libpmix.so",
        "/usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so.2",
        "/usr/lib/aarch64-linux-gnu/pmix2/lib/libpmix.so.2",
        "/usr/lib64/pmix/lib/libpmix.so.2",
        "/usr/local/lib/libpmix.so.2",
    };
    void *h;
    if (named != NULL && *named != '\0')
        return dlopen(named, RTLD_NOW | RTLD_LOCAL);
    if ((h = dlopen("libpmix.so.2", RTLD_NOW | RTLD_NOLOAD)) != NULL)
        return h;
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++)
        if ((h = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL)) != NULL)
            return h;
    return NULL;
}

/* Where the helper is, for the message if it never returns: one of these,
 * or the key of the PMIx_Get it waits for. */
static const char in_init[] = "PMIx_Init", in_finalize[] = "PMIx_Finalize";
static void entering(const char *what);

static long get_u32(const struct api *api, const pmix_proc_t *who,
                    const char *key)
{
    pmix_value_t *v = NULL;
    long out = -1;
    entering(key);
    if (api->get(who, key, NULL, 0, &v) != PMIX_SUCCESS || v == NULL)
        return -1;
    if (v->type == PMIX_UINT32 || v->type == PMIX_PROC_RANK)
        out = (long)v->data.u32;
    else if (v->type == PMIX_UINT16)
        out = (long)v->data.u16;
    if (api->destruct != NULL)
        api->destruct(v);
    free(v);
    return out;
}

static void get_string(const struct api *api, const pmix_proc_t *who,
                       const char *key, char *out, size_t outsz)
{
    pmix_value_t *v = NULL;
    out[0] = '\0';
    entering(key);
    if (api->get(who, key, NULL, 0, &v) != PMIX_SUCCESS || v == NULL)
        return;
    if (v->type == PMIX_STRING && v->data.string != NULL &&
        amldist__strlcpy(out, v->data.string, outsz) != 0)
        out[0] = '\0';
    if (api->destruct != NULL)
        api->destruct(v);
    else if (v->type == PMIX_STRING)
        free(v->data.string);
    free(v);
}

/* Where `host` stands in the comma-separated `list`: -1 if absent. */
static long list_index(const char *list, const char *host)
{
    size_t len = strlen(host);
    long i = 0;
    if (len == 0)
        return -1;
    for (const char *p = list; *p != '\0'; i++) {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        if (n == len && memcmp(p, host, len) == 0)
            return i;
        if (end == NULL)
            break;
        p = end + 1;
    }
    return -1;
}

/* One conversation with the server, handed to the helper thread.  Queries
 * are serialised by `lock`, and a call that timed out stays here until its
 * helper returns, so one is enough. */
static struct {
    pthread_mutex_t mutex;
    pthread_cond_t finished;
    struct api api;
    int keep;                     /* keep our reference until exit */
    int running;                  /* a helper has not returned yet */
    int status;                   /* PMIx_Init's */
    const char *in;               /* the call the helper is in */
    amldist__pmix_info_t info;
} call = {.mutex = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t call_once = PTHREAD_ONCE_INIT;

/* The wait is on the monotonic clock: a clock step must not end it early or
 * make it last forever. */
static void call_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&call.finished, &a);
    pthread_condattr_destroy(&a);
}

static void entering(const char *what)
{
    __atomic_store_n(&call.in, what, __ATOMIC_RELEASE);
}

static void blank(amldist__pmix_info_t *out)
{
    out->node_id = out->num_nodes = out->job_size = -1;
    out->local_rank = out->local_size = out->node_index = -1;
    out->list_nodes = -1;
    out->rank0_host[0] = out->host[0] = '\0';
}

/* The helper: everything that talks to the server, from PMIx_Init to
 * PMIx_Finalize.  Only it touches finalize_at_exit. */
static void *converse(void *unused)
{
    (void)unused;
    const struct api *api = &call.api;
    amldist__pmix_info_t info;
    pmix_proc_t me, job, rank0;
    blank(&info);
    memset(&me, 0, sizeof me);
    int rc = api->init(&me, NULL, 0);
    if (rc == PMIX_SUCCESS) {
        job = me;
        job.rank = PMIX_RANK_WILDCARD;
        rank0 = me;
        rank0.rank = 0;
        info.node_id = get_u32(api, &me, "pmix.nodeid");
        info.local_rank = get_u32(api, &me, "pmix.lrank");
        info.num_nodes = get_u32(api, &job, "pmix.num.nodes");
        info.job_size = get_u32(api, &job, "pmix.job.size");
        info.local_size = get_u32(api, &job, "pmix.local.size");
        get_string(api, &rank0, "pmix.hname", info.rank0_host,
                   sizeof info.rank0_host);
        /* PMIX_NODEID is Open MPI's daemon number, which skips mpirun's node
         * when it runs no rank; the job's node list (daemon order) does
         * not. */
        char *list = malloc(AMLDIST__NODE_LIST_MAX);
        if (list != NULL) {
            get_string(api, &me, "pmix.hname", info.host, sizeof info.host);
            get_string(api, &job, "pmix.nlist", list, AMLDIST__NODE_LIST_MAX);
            info.node_index = list_index(list, info.host);
            if (list[0] != '\0') {
                info.list_nodes = 1;
                for (const char *p = list; (p = strchr(p, ',')) != NULL; p++)
                    info.list_nodes++;
            }
            free(list);
        }
        if (call.keep && finalize_at_exit == NULL &&
            atexit(finalize_now) == 0) {
            finalize_at_exit = api->finalize;
        } else {
            entering(in_finalize);
            api->finalize(NULL, 0);
        }
    }
    pthread_mutex_lock(&call.mutex);
    call.status = rc;
    call.info = info;
    call.running = 0;
    pthread_cond_signal(&call.finished);
    pthread_mutex_unlock(&call.mutex);
    return NULL;
}

/* Start the helper with every signal blocked, so that neither it nor the
 * threads libpmix starts from it takes a signal meant for the program.
 * 0, or an error number. */
static int start_helper(void)
{
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    int rc = pthread_attr_init(&attr);
    if (rc != 0)
        return rc;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&t, &attr, converse, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return rc;
}

static int timeout_ms(const amldist__env_t *env, long long *ms, char *why,
                      size_t whysz)
{
    const char *v = amldist__env_get(env, "AMLDIST_PMIX_TIMEOUT");
    *ms = AMLDIST__PMIX_TIMEOUT_MS;
    if (v == NULL || amldist__parse_seconds_ms(v, ms) == 0)
        return 0;
    snprintf(why, whysz, "AMLDIST_PMIX_TIMEOUT=%.40s: expected seconds, "
                         "more than 0 and at most a week (e.g. 30 or 2.5)",
             v);
    return AMLDIST_EPARSE;
}

/* Run the conversation and wait for it at most `ms` (call_init done). */
static int converse_within(long long ms, amldist__pmix_info_t *out,
                           char *why, size_t whysz)
{
    struct timespec end;
    int rc;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += (time_t)(ms / 1000);
    end.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&call.mutex);
    call.running = 1;
    entering(in_init); /* before the helper runs: a timeout may come first */
    if ((rc = start_helper()) != 0) {
        call.running = 0;
        pthread_mutex_unlock(&call.mutex);
        snprintf(why, whysz, "no thread for the PMIx query (%s)",
                 strerror(rc));
        return AMLDIST_ESYS;
    }
    while (call.running && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&call.finished, &call.mutex, &end);
    if (call.running) {
        const char *in = __atomic_load_n(&call.in, __ATOMIC_ACQUIRE);
        int get = in != in_init && in != in_finalize;
        pthread_mutex_unlock(&call.mutex);
        snprintf(why, whysz,
                 "%s%s%s did not return within %lld.%03lld s (libpmix hang, "
                 "openpmix #2967; AMLDIST_PMIX_TIMEOUT sets the bound)",
                 get ? "PMIx_Get(" : "", in, get ? ")" : "", ms / 1000,
                 ms % 1000);
        return AMLDIST_ETIMEDOUT;
    }
    *out = call.info;
    rc = call.status;
    pthread_mutex_unlock(&call.mutex);
    if (rc != PMIX_SUCCESS) {
        snprintf(why, whysz, "PMIx_Init failed (status %d)", rc);
        return AMLDIST_ESYS;
    }
    return 0;
}

static int query(const amldist__env_t *env, amldist__pmix_info_t *out,
                 char *why, size_t whysz)
{
    long long ms;
    blank(out);
    if (amldist__pmix_disabled(env)) {
        snprintf(why, whysz, "PMIx query disabled (AMLDIST_NO_PMIX)");
        return AMLDIST_ENOTSUP;
    }
    /* PMIx_Init reads the real environment: only ask when the array we were
     * given describes this very process. */
    const char *ns = amldist__env_get(env, "PMIX_NAMESPACE");
    const char *rank = amldist__env_get(env, "PMIX_RANK");
    const char *real_ns = getenv("PMIX_NAMESPACE");
    const char *real_rank = getenv("PMIX_RANK");
    if (ns == NULL || rank == NULL || real_ns == NULL || real_rank == NULL ||
        strcmp(ns, real_ns) != 0 || strcmp(rank, real_rank) != 0) {
        snprintf(why, whysz, "no PMIx server for this process "
                             "(PMIX_NAMESPACE/PMIX_RANK not set)");
        return AMLDIST_ENOTSUP;
    }
    int rc = timeout_ms(env, &ms, why, whysz);
    if (rc != 0)
        return rc;
    pthread_once(&call_once, call_init);
    pthread_mutex_lock(&call.mutex);
    int stuck = call.running;
    pthread_mutex_unlock(&call.mutex);
    if (stuck) {
        snprintf(why, whysz, "an earlier PMIx query in this process has not "
                             "returned (libpmix hang, openpmix #2967)");
        return AMLDIST_ETIMEDOUT;
    }
    void *lib = open_libpmix(env);
    if (lib == NULL) {
        snprintf(why, whysz, "libpmix.so.2 not found (%s)", dlerror());
        return AMLDIST_ENOTSUP;
    }
    struct api *api = &call.api;
    *(void **)&api->init = dlsym(lib, "PMIx_Init");
    *(void **)&api->get = dlsym(lib, "PMIx_Get");
    *(void **)&api->finalize = dlsym(lib, "PMIx_Finalize");
    *(void **)&api->destruct = dlsym(lib, "PMIx_Value_destruct");
    *(void **)&api->initialized = dlsym(lib, "PMIx_Initialized");
    if (api->init == NULL || api->get == NULL || api->finalize == NULL) {
        snprintf(why, whysz, "libpmix lacks PMIx_Init/PMIx_Get/PMIx_Finalize");
        dlclose(lib);
        return AMLDIST_ENOTSUP;
    }
    call.keep = (api->initialized == NULL || !api->initialized()) &&
                mpi_loaded();
    rc = converse_within(ms, out, why, whysz);
    /* libpmix keeps threads and atexit state: never unload it. */
    if (rc == 0)
        snprintf(why, whysz, "PMIx server");
    return rc;
}

int amldist__pmix_query(const amldist__env_t *env, amldist__pmix_info_t *out,
                        char *why, size_t whysz)
{
    pthread_mutex_lock(&lock);
    int rc = query(env, out, why, whysz);
    pthread_mutex_unlock(&lock);
    return rc;
}

void amldist__pmix_complete(const amldist__env_t *env, struct amldist *r,
                            struct amldist *master)
{
    amldist__pmix_info_t info;
    char why[160];
    int rc = amldist__pmix_query(env, &info, why, sizeof why);
    if (rc == 0 && r->pmix_first) {
        /* The server's node list numbers every rank's node alike; the
         * daemons' numbers of this rank may be another order (seq). */
        static const amldist_field_t redo[] = {AMLDIST_FIELD_NODE_RANK,
                                               AMLDIST_FIELD_NUM_NODES};
        for (size_t i = 0; i < sizeof redo / sizeof *redo; i++)
            amldist__set(r, redo[i], AMLDIST_EUNKNOWN,
                         "unknown: no PMIx answer");
    }
    if (rc != 0) {
        for (int f = 0; f < AMLDIST_FIELD_MASTER_ADDR; f++)
            if (!amldist__known(r, (amldist_field_t)f)) {
                size_t n = strlen(r->why[f]);
                snprintf(r->why[f] + n, sizeof r->why[f] - n, "%s%s",
                         n ? "; PMIx: " : "unknown: ", why);
            }
        return;
    }
    static const struct {
        amldist_field_t f;
        const char *key;
    } keys[] = {
        {AMLDIST_FIELD_WORLD_SIZE, "PMIX_JOB_SIZE"},
        {AMLDIST_FIELD_LOCAL_RANK, "PMIX_LOCAL_RANK"},
        {AMLDIST_FIELD_LOCAL_WORLD_SIZE, "PMIX_LOCAL_SIZE"},
        {AMLDIST_FIELD_NUM_NODES, "PMIX_NUM_NODES"},
        {AMLDIST_FIELD_NODE_RANK, "PMIX_NODEID"},
    };
    long vals[] = {info.job_size, info.local_rank, info.local_size,
                   info.num_nodes, info.node_id};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        amldist_field_t f = keys[i].f;
        long nodes = r->val[AMLDIST_FIELD_NUM_NODES];
        if (amldist__known(r, f))
            continue;
        /* Under a rankfile Open MPI 4's daemons away from mpirun count
         * the nodes twice in PMIX_NUM_NODES, not in the node list. */
        if (f == AMLDIST_FIELD_NUM_NODES && info.list_nodes > 0 &&
            info.list_nodes < INT_MAX && info.list_nodes != vals[i])
            amldist__set(r, f, info.list_nodes,
                         "PMIx PMIX_NODE_LIST has %ld hosts (PMIX_NUM_NODES="
                         "%ld is not their count)",
                         info.list_nodes, vals[i]);
        else if (f == AMLDIST_FIELD_NODE_RANK && info.node_index >= 0 &&
            info.node_index < INT_MAX)
            amldist__set(r, f, info.node_index,
                         "PMIx PMIX_HOSTNAME=%.64s is entry %ld of the "
                         "job's PMIX_NODE_LIST",
                         info.host, info.node_index);
        else if (vals[i] < 0 || vals[i] > INT_MAX - 1)
            amldist__why(r, f, "unknown: the PMIx server has no %s",
                         keys[i].key);
        else if (f == AMLDIST_FIELD_NODE_RANK && nodes > 0 &&
                 vals[i] >= nodes)
            /* Node ids are daemon ids: a mpirun host that runs no rank
             * leaves a gap, and the id is then not an index. */
            amldist__why(r, f,
                         "unknown: PMIx PMIX_NODEID=%ld is not below the "
                         "node count %ld (%s)",
                         vals[i], nodes, r->why[AMLDIST_FIELD_NUM_NODES]);
        else
            amldist__set(r, f, vals[i], "PMIx %s=%ld", keys[i].key, vals[i]);
    }
    if (!amldist__known(master, AMLDIST_FIELD_MASTER_ADDR) &&
        info.rank0_host[0] != '\0' &&
        amldist__valid_host(info.rank0_host) == 0) {
        amldist__strlcpy(master->addr, info.rank0_host, sizeof master->addr);
        amldist__why(master, AMLDIST_FIELD_MASTER_ADDR,
                     "PMIx PMIX_HOSTNAME=%s (host of rank 0)",
                     info.rank0_host);
    }
}

/* "PMIx: yes, OpenPMIx 4.2.2 (/usr/lib/.../libpmix.so.2)", or why not: the
 * library amldist__pmix_query() would open, asked its version only (no
 * PMIx_Init, which needs a server). */
void amldist__pmix_describe(char *const *envp, char *line, size_t size)
{
    amldist__env_t env = {envp, 0};
    void *h = open_libpmix(&env);
    if (h == NULL) {
        snprintf(line, size, "PMIx: no (libpmix.so.2 not found; "
                             "AMLDIST_PMIX_LIBRARY names the file to use)");
        return;
    }
    const char *(*version)(void);
    void *p = dlsym(h, "PMIx_Get_version");
    memcpy(&version, &p, sizeof p);
    Dl_info info;
    const char *where = p && dladdr(p, &info) && info.dli_fname
                            ? info.dli_fname : "?";
    /* "OpenPMIx 4.2.2 (PMIx Standard: 4.2, ...)": the name and number. */
    const char *v = version ? version() : "?";
    size_t n = strcspn(v, "(");
    while (n > 0 && v[n - 1] == ' ')
        n--;
    snprintf(line, size, "PMIx: yes, %.*s (%s)", (int)n, v, where);
}
