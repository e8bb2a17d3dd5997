/*
 * A stand-in libpmix, NOT PMIx: the few client calls lib/sources/pmix_client.c
 * makes, with the ABI of the real structures, answering for rank 2 of a
 * 4-rank job on one node called "fakenode".  AMLDIST_PMIX_LIBRARY names it.
 *
 * FAKE_PMIX (read at PMIx_Init) picks the behaviour:
 *   answer  (or unset)  answer at once
 *   slow                answer after FAKE_PMIX_DELAY_MS milliseconds
 *   fail                PMIx_Init returns an error (-31, PMIX_ERR_INIT)
 *   hang                PMIx_Init waits until fake_pmix_release() is called:
 *                       libpmix 4.2's hang (openpmix #2967), on demand
 *   hang-nlist          PMIx_Get of the node list waits the same way
 *
 * The test reads what happened through fake_pmix_state().
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PMIX_STRING 3
#define PMIX_UINT32 14
#define PMIX_PROC_RANK 40
#define PMIX_ERR_INIT (-31)
#define PMIX_ERR_NOT_FOUND (-46)

typedef struct {
    char nspace[256];
    uint32_t rank;
} pmix_proc_t;

typedef struct {
    uint16_t type;
    union {
        char *string;
        uint32_t u32;
        uint64_t align;
    } data;
} pmix_value_t;

struct fake_pmix_state {
    int inits;          /* PMIx_Init calls begun */
    int finalizes;
    int term_blocked;   /* SIGTERM was blocked in the thread that called Init */
};

static struct fake_pmix_state state;
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t released = PTHREAD_COND_INITIALIZER;
static int release;

/* Exported for the tests, which find them with dlsym. */
struct fake_pmix_state *fake_pmix_state(void);
void fake_pmix_release(void);
int PMIx_Init(pmix_proc_t *proc, void *info, size_t ninfo);
int PMIx_Get(const pmix_proc_t *proc, const char *key, const void *info,
             size_t ninfo, pmix_value_t **val);
int PMIx_Finalize(const void *info, size_t ninfo);
int PMIx_Initialized(void);
void PMIx_Value_destruct(pmix_value_t *v);
const char *PMIx_Get_version(void);

struct fake_pmix_state *fake_pmix_state(void)
{
    return &state;
}

void fake_pmix_release(void)
{
    pthread_mutex_lock(&mutex);
    release = 1;
    pthread_cond_broadcast(&released);
    pthread_mutex_unlock(&mutex);
}

static void wait_release(void)
{
    pthread_mutex_lock(&mutex);
    while (!release)
        pthread_cond_wait(&released, &mutex);
    pthread_mutex_unlock(&mutex);
}

int PMIx_Init(pmix_proc_t *proc, void *info, size_t ninfo)
{
    const char *mode = getenv("FAKE_PMIX");
    sigset_t now;
    (void)info;
    (void)ninfo;
    pthread_sigmask(SIG_SETMASK, NULL, &now);
    pthread_mutex_lock(&mutex);
    state.inits++;
    state.term_blocked = sigismember(&now, SIGTERM);
    pthread_mutex_unlock(&mutex);
    if (mode != NULL && strcmp(mode, "hang") == 0)
        wait_release();
    if (mode != NULL && strcmp(mode, "fail") == 0)
        return PMIX_ERR_INIT;
    if (mode != NULL && strcmp(mode, "slow") == 0) {
        const char *d = getenv("FAKE_PMIX_DELAY_MS");
        long ms = d != NULL ? atol(d) : 100;
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    memset(proc, 0, sizeof *proc);
    strcpy(proc->nspace, "fake-job");
    proc->rank = 2;
    return 0;
}

static int u32(pmix_value_t **val, uint16_t type, uint32_t v)
{
    if ((*val = calloc(1, sizeof **val)) == NULL)
        return PMIX_ERR_NOT_FOUND;
    (*val)->type = type;
    (*val)->data.u32 = v;
    return 0;
}

static int string(pmix_value_t **val, const char *s)
{
    if ((*val = calloc(1, sizeof **val)) == NULL)
        return PMIX_ERR_NOT_FOUND;
    (*val)->type = PMIX_STRING;
    (*val)->data.string = strdup(s);
    return 0;
}

int PMIx_Get(const pmix_proc_t *proc, const char *key, const void *info,
             size_t ninfo, pmix_value_t **val)
{
    (void)proc;
    (void)info;
    (void)ninfo;
    *val = NULL;
    if (strcmp(key, "pmix.nodeid") == 0)
        return u32(val, PMIX_UINT32, 0);
    if (strcmp(key, "pmix.lrank") == 0)
        return u32(val, PMIX_UINT32, 2);
    if (strcmp(key, "pmix.num.nodes") == 0)
        return u32(val, PMIX_UINT32, 1);
    if (strcmp(key, "pmix.job.size") == 0 ||
        strcmp(key, "pmix.local.size") == 0)
        return u32(val, PMIX_UINT32, 4);
    if (strcmp(key, "pmix.nlist") == 0) {
        const char *mode = getenv("FAKE_PMIX");
        if (mode != NULL && strcmp(mode, "hang-nlist") == 0)
            wait_release();
    }
    if (strcmp(key, "pmix.hname") == 0 || strcmp(key, "pmix.nlist") == 0)
        return string(val, "fakenode");
    return PMIX_ERR_NOT_FOUND;
}

int PMIx_Finalize(const void *info, size_t ninfo)
{
    (void)info;
    (void)ninfo;
    pthread_mutex_lock(&mutex);
    state.finalizes++;
    pthread_mutex_unlock(&mutex);
    return 0;
}

int PMIx_Initialized(void)
{
    return 0;
}

void PMIx_Value_destruct(pmix_value_t *v)
{
    if (v->type == PMIX_STRING)
        free(v->data.string);
}

const char *PMIx_Get_version(void)
{
    return "FakePMIx 0.0 (the test stand-in)";
}
