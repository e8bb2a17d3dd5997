/*
 * amlrun's stack-signal guard, preloaded (LD_PRELOAD) into the Python
 * workers that get a stack channel (launcher/stacks/channel.c): a shared
 * object of its own, linked with nothing of amlrun's.
 *
 * amlrun asks a worker for its Python stacks with a real-time signal
 * (AMLDIST_STACK_SIGNAL) that the hook (sitecustomize.py, beside this file
 * in the source tree) registers with faulthandler.  The kernel keeps a
 * process's handlers where amlrun cannot see them (SigCgt is set for
 * faulthandler's as for any other), and a program that takes that signal
 * for a handler of its own from C (a C extension, ctypes) would get
 * amlrun's signal, and amlrun no dump.  So the installs are watched here:
 * the first handler installed for the signal is faulthandler's (the hook
 * registers it before the program runs); any later install of another
 * disposition for it (a handler, SIG_DFL, SIG_IGN) makes this object let
 * go of the channel, in the way amlrun already checks before it signals
 * (capture_core.c's cap_holds_fd: whether the worker still holds the
 * pipe): /dev/null is put over the channel's descriptor, never a close,
 * whose number another thread could take at once (and faulthandler, or
 * the hook, would then write into or close that file).  The call itself
 * goes through unchanged.
 *
 * glibc's signal() and its kin call its internal sigaction, not the one
 * found by symbol: each entry point is watched.  Not seen here: the system
 * call made directly, a symbol looked up in libc's own handle
 * (dlsym(dlopen("libc.so.6"), ...), Python's ctypes.CDLL("libc.so.6")),
 * which searches libc and not the preloaded objects, and a library loaded
 * with RTLD_DEEPBIND.  For those amlrun reads the kernel's handler itself
 * (capture_sigact.c, while ptrace holds the worker for its native frames):
 * so faulthandler's handler is installed as this object's trampoline
 * (guard_handler), and a handler outside this object's code is not
 * amlrun's.  A query of the disposition (the old action of any call) gets
 * faulthandler's own handler back: the program sees what it would see
 * without the guard.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef void (*handler_t)(int);

/* Set once by the constructor, before any thread: the signal and the
 * channel's descriptor (0 and -1: nothing to guard). */
static int guard_sig;
static int guard_fd = -1;

/* What the installs seen so far made of the channel: NONE yet; ARMING,
 * the first being recorded; ARMED, faulthandler's (in armed); LET_GO. */
enum { NONE, ARMING, ARMED, LET_GO };
static int state;
static handler_t armed;

/* A number from the environment, or -1. */
static int env_int(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return -1;
    char *end;
    long n = strtol(v, &end, 10);
    return *end || n < 0 || n > 1 << 20 ? -1 : (int)n;
}

__attribute__((constructor)) static void guard_init(void)
{
    int sig = env_int("AMLDIST_STACK_SIGNAL"), fd = env_int("AMLDIST_STACK_FD");
    struct stat st;
    if (sig < SIGRTMIN || sig > SIGRTMAX || fd < 0 || fstat(fd, &st) < 0 ||
        !S_ISFIFO(st.st_mode))
        return; /* no channel here (a child the variables leaked to) */
    guard_sig = sig;
    guard_fd = fd;
}

/* Called from a signal handler too (sigaction is async-signal-safe):
 * atomics only, no lock. */
static void let_go(void)
{
    if (__atomic_exchange_n(&state, LET_GO, __ATOMIC_ACQ_REL) == LET_GO)
        return;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    /* Without /dev/null (no descriptor left, a bare chroot), a copy of a
     * standard stream: anything but the pipe. */
    int with = null;
    for (int k = 0; with < 0 && k < 3; k++)
        if (fcntl(k, F_GETFD) >= 0)
            with = k;
    if (with >= 0)
        (void)dup2(with, guard_fd);
    if (null >= 0)
        close(null);
}

/* faulthandler's handler, as the kernel has it: amlrun recognises it by
 * its address, within this object's code. */
static void guard_handler(int sig)
{
    handler_t h = __atomic_load_n(&armed, __ATOMIC_ACQUIRE);
    if (h)
        h(sig);
}

static int is_handler(handler_t h)
{
    return h != SIG_DFL && h != SIG_IGN && h != SIG_HOLD && h != SIG_ERR;
}

/* An install (or a query: h unused) of sig's disposition: 1 when it is
 * faulthandler's (the first, or the same handler again), a handler to be
 * installed as guard_handler; else 0. */
static int note(int sig, int install, handler_t h)
{
    if (!install || sig != guard_sig || guard_fd < 0)
        return 0;
    int none = NONE, arming = ARMING;
    if (__atomic_compare_exchange_n(&state, &none, ARMING, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        /* The first: faulthandler's.  An install racing this one finds
         * ARMING, and lets go: then the state stays LET_GO. */
        __atomic_store_n(&armed, h, __ATOMIC_RELEASE);
        (void)__atomic_compare_exchange_n(&state, &arming, ARMED, 0,
                                          __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        return is_handler(h);
    }
    if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == ARMED && h == armed)
        return is_handler(h); /* the same handler again */
    let_go();
    return 0;
}

/* What the program is told of an old disposition: faulthandler's own
 * handler where the kernel holds the trampoline. */
static handler_t shown(handler_t h)
{
    return h == guard_handler ? __atomic_load_n(&armed, __ATOMIC_ACQUIRE) : h;
}

/* The next definition of name (libc's), looked up at the first call: a
 * constructor run before this one's may install a handler already. */
static void *next_fn(void **cache, const char *name)
{
    void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        __atomic_store_n(cache, f, __ATOMIC_RELEASE);
    }
    return f;
}

typedef int (*sigaction_t)(int, const struct sigaction *, struct sigaction *);
typedef handler_t (*signal_t)(int, handler_t);

/* faulthandler's handler (sa_handler, never SA_SIGINFO's) goes in as
 * the trampoline. */
static int do_sigaction(sigaction_t real, int sig, const struct sigaction *act,
                        struct sigaction *old)
{
    struct sigaction mine;
    if (note(sig, act != NULL, act ? act->sa_handler : NULL) &&
        !(act->sa_flags & SA_SIGINFO)) {
        mine = *act;
        mine.sa_handler = guard_handler;
        act = &mine;
    }
    int rc = real(sig, act, old);
    if (rc == 0 && old && !(old->sa_flags & SA_SIGINFO))
        old->sa_handler = shown(old->sa_handler);
    return rc;
}

#define SIGACTION_FN(fn, name)                                               \
    EXPORT int fn(int sig, const struct sigaction *act,                     \
                  struct sigaction *old);                                    \
    int fn(int sig, const struct sigaction *act, struct sigaction *old)      \
    {                                                                        \
        static void *cache;                                                  \
        return do_sigaction((sigaction_t)next_fn(&cache, name), sig, act,    \
                            old);                                            \
    }
SIGACTION_FN(sigaction, "sigaction")
SIGACTION_FN(__sigaction, "__sigaction")

/* signal(), and the names glibc gives it (signal with _DEFAULT_SOURCE is
 * bsd_signal; strict ISO C's is __sysv_signal); sigset(SIG_HOLD) blocks
 * the signal and leaves its handler. */
#define SIGNAL_FN(fn, name)                                                  \
    EXPORT handler_t fn(int sig, handler_t h);                              \
    handler_t fn(int sig, handler_t h)                                       \
    {                                                                        \
        static void *cache;                                                  \
        signal_t real = (signal_t)next_fn(&cache, name);                     \
        (void)note(sig, h != SIG_HOLD, h);                                   \
        return shown(real(sig, h));                                          \
    }
SIGNAL_FN(signal, "signal")
SIGNAL_FN(bsd_signal, "bsd_signal")
SIGNAL_FN(ssignal, "ssignal")
SIGNAL_FN(sysv_signal, "sysv_signal")
SIGNAL_FN(__sysv_signal, "__sysv_signal")
SIGNAL_FN(sigset, "sigset")
