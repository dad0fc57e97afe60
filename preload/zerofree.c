/* zerofree.c - libzimp-zerofree.so: zero freed glibc heap blocks so that
 * checkpoints (process or VM level) skip or compress them better.
 *
 * Interposes free, cfree, realloc and reallocarray; everything else (malloc,
 * calloc, memalign, ...) stays glibc's. Modes (ZIMP_ZEROFREE):
 *   eager  memset the whole user part of each freed block;
 *   pages  blocks >= ZIMP_ZEROFREE_PAGES_MIN: madvise(MADV_DONTNEED) the whole
 *          pages strictly inside the user part, memset the two edges;
 *          smaller blocks: memset;
 *   lazy   free() parks small blocks in a bounded per-thread FIFO (nothing is
 *          written); zimp_zerofree_prepare() or the signal zeroes and releases
 *          the parked blocks, then malloc_trim(0) drops every free page
 *          (in eager and pages modes prepare is the malloc_trim(0) alone);
 *   off    pass through.
 * Design, guarantees and limits: docs/zerofree.md.
 */
#define _GNU_SOURCE
#define ZIMP_ZEROFREE_BUILD
#include "zimp_zerofree.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ZF_API __attribute__((visibility("default")))
#define ZF_TLS __thread __attribute__((tls_model("initial-exec")))
#define ZF_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* glibc's allocator under its exported internal names (GLIBC_2.2.5). */
extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);
extern void *__libc_realloc(void *p, size_t n);

enum zf_mode { ZF_OFF = 0, ZF_EAGER, ZF_PAGES, ZF_LAZY };
static const char *const zf_mode_names[] = { "off", "eager", "pages", "lazy" };

/* Set once by the constructor, read-only afterwards (fork copies them). */
static int zf_mode;                 /* enum zf_mode; ZF_OFF until init */
static int zf_foreign;              /* malloc is not glibc's: pass through */
static int zf_stats_on;
static int zf_signo;                /* lazy prepare signal, 0: none */
static size_t zf_page = 4096;
static size_t zf_pages_min = 128 * 1024;   /* pages mode threshold */
static size_t zf_lazy_bytes = 4u << 20;    /* per-thread parked bytes */
static size_t zf_lazy_block = 64 * 1024;   /* larger blocks are not parked */
static size_t (*zf_usable)(void *);        /* glibc's malloc_usable_size */
static void (*zf_next_free)(void *);       /* used only when zf_foreign */
static void *(*zf_next_realloc)(void *, size_t);

static _Atomic uint64_t st_frees, st_zeroed, st_dropped, st_prepares;

/* ---------------------------------------------------------------------- */
/* Zeroing */

/* Clears [p, p+n): madvise whole inner pages when n >= pages_min (falls back
 * to memset if the kernel refuses, e.g. locked memory), memset the rest.
 * The caller owns the block; errno is preserved. */
static void zf_clear(unsigned char *p, size_t n, size_t pages_min)
{
    if (n >= pages_min) {
        uintptr_t lo = ((uintptr_t)p + zf_page - 1) & ~(uintptr_t)(zf_page - 1);
        uintptr_t hi = ((uintptr_t)p + n) & ~(uintptr_t)(zf_page - 1);
        if (hi > lo) {
            int saved = errno;
            int rc = madvise((void *)lo, hi - lo, MADV_DONTNEED);
            errno = saved;
            if (rc == 0) {
                memset(p, 0, lo - (uintptr_t)p);
                memset((void *)hi, 0, (uintptr_t)p + n - hi);
                if (zf_stats_on) {
                    atomic_fetch_add_explicit(&st_dropped, hi - lo, memory_order_relaxed);
                    atomic_fetch_add_explicit(&st_zeroed, n - (hi - lo), memory_order_relaxed);
                }
                return;
            }
        }
    }
    memset(p, 0, n);
    if (zf_stats_on)
        atomic_fetch_add_explicit(&st_zeroed, n, memory_order_relaxed);
}

/* glibc marks a chunk served by its own mmap with bit 1 of the size word just
 * before the user pointer; such a chunk is munmapped on free, so there is
 * nothing to clear. This is the one glibc layout fact the library relies on. */
static inline int zf_chunk_mmapped(const void *p)
{
    return (((const size_t *)p)[-1] & 2u) != 0;
}

/* ---------------------------------------------------------------------- */
/* Lazy mode: per-thread FIFO of parked blocks */

#define ZF_QCAP 4096u

struct zf_entry { void *p; size_t n; };

/* One per thread that parked a block; mmapped (not in TLS or the heap) so it
 * survives its thread and fork. Fields other than lock/next are guarded by
 * lock; next and owned by zf_reg_lock. */
struct zf_queue {
    atomic_int lock;
    int owned;                   /* a live thread parks into it */
    struct zf_queue *next;       /* registry list */
    size_t head, count, bytes;   /* ring of count entries from head */
    struct zf_entry e[ZF_QCAP];
};

static pthread_mutex_t zf_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zf_queue *zf_reg;            /* all queues ever made */
static _Atomic uint64_t zf_parked_bytes;   /* sum of bytes over queues */
static pthread_key_t zf_key;
static int zf_key_ok;

static ZF_TLS struct zf_queue *tls_q;
static ZF_TLS int tls_exiting;   /* thread destructor ran: no more parking */
static ZF_TLS int tls_busy;      /* inside the library: pass frees through */

static void zf_qlock(struct zf_queue *q)
{
    for (unsigned spins = 0;; spins++) {
        if (!atomic_exchange_explicit(&q->lock, 1, memory_order_acquire))
            return;
        if (spins > 64)
            sched_yield();
    }
}

static void zf_qunlock(struct zf_queue *q)
{
    atomic_store_explicit(&q->lock, 0, memory_order_release);
}

/* Thread exit: leave the queue (and its parked blocks) for the next thread
 * or the next prepare. */
static void zf_thread_exit(void *arg)
{
    struct zf_queue *q = arg;
    tls_exiting = 1;
    tls_q = NULL;
    pthread_mutex_lock(&zf_reg_lock);
    q->owned = 0;
    pthread_mutex_unlock(&zf_reg_lock);
}

/* The calling thread's queue, made or adopted on first use; NULL if none can
 * be had (the caller then frees directly). */
static struct zf_queue *zf_queue_get(void)
{
    if (tls_exiting)
        return NULL;
    struct zf_queue *q;
    pthread_mutex_lock(&zf_reg_lock);
    for (q = zf_reg; q; q = q->next)
        if (!q->owned)
            break;
    if (!q) {
        void *m = mmap(NULL, sizeof(struct zf_queue), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) {
            q = m;                /* mmap gives zeroes: an empty, unlocked queue */
            q->next = zf_reg;
            zf_reg = q;
        }
    }
    if (q)
        q->owned = 1;
    pthread_mutex_unlock(&zf_reg_lock);
    if (q && zf_key_ok)
        pthread_setspecific(zf_key, q);
    tls_q = q;
    return q;
}

/* Parks a block of usable size n; when the queue is over its bounds the
 * oldest blocks go back to glibc as they are (trim covers their pages). */
static void zf_park(void *p, size_t n)
{
    struct zf_queue *q = tls_q;
    if (!q && !(q = zf_queue_get())) {
        __libc_free(p);
        return;
    }
    zf_qlock(q);
    size_t released = 0;
    while (q->count && (q->count == ZF_QCAP || q->bytes + n > zf_lazy_bytes)) {
        struct zf_entry old = q->e[q->head];
        q->head = (q->head + 1) % ZF_QCAP;
        q->count--;
        q->bytes -= old.n;
        released += old.n;
        __libc_free(old.p);
    }
    q->e[(q->head + q->count) % ZF_QCAP] = (struct zf_entry){ p, n };
    q->count++;
    q->bytes += n;
    zf_qunlock(q);
    if (n != released) {
        if (n > released)
            atomic_fetch_add_explicit(&zf_parked_bytes, n - released, memory_order_relaxed);
        else
            atomic_fetch_sub_explicit(&zf_parked_bytes, released - n, memory_order_relaxed);
    }
}

/* Zeroes and releases every parked block of every queue. */
static void zf_drain_all(void)
{
    pthread_mutex_lock(&zf_reg_lock);
    for (struct zf_queue *q = zf_reg; q; q = q->next) {
        zf_qlock(q);
        size_t bytes = q->bytes;
        while (q->count) {
            struct zf_entry e = q->e[q->head];
            q->head = (q->head + 1) % ZF_QCAP;
            q->count--;
            zf_clear(e.p, e.n, zf_pages_min);
            __libc_free(e.p);
        }
        q->head = 0;
        q->bytes = 0;
        zf_qunlock(q);
        atomic_fetch_sub_explicit(&zf_parked_bytes, bytes, memory_order_relaxed);
    }
    pthread_mutex_unlock(&zf_reg_lock);
}

/* ---------------------------------------------------------------------- */
/* Signal-triggered prepare: the handler only posts a semaphore; a helper
 * thread does the work outside signal context and answers requesters. */

#define ZF_ACK_SLOTS 16
static sem_t zf_sem;
static _Atomic int zf_ack_pid[ZF_ACK_SLOTS];
static atomic_int zf_helper_state;   /* 0 none, 1 wanted (after fork), 2 running */
static pid_t zf_helper_pid;          /* process the helper runs in */

static void zf_on_signal(int sig, siginfo_t *si, void *uctx)
{
    int saved = errno;
    if (si && si->si_code == SI_QUEUE &&
        si->si_value.sival_int == ZIMP_ZEROFREE_ACK_REQUEST && si->si_pid > 0) {
        for (int i = 0; i < ZF_ACK_SLOTS; i++) {
            int expect = 0;
            if (atomic_compare_exchange_strong(&zf_ack_pid[i], &expect, (int)si->si_pid))
                break;
        }
    }
    sem_post(&zf_sem);
    errno = saved;
}

static void *zf_helper(void *arg)
{
    tls_exiting = 1;    /* the helper's own frees never park */
    for (;;) {
        if (sem_wait(&zf_sem) != 0)
            continue;
        while (sem_trywait(&zf_sem) == 0)
            ;           /* coalesce a burst of requests into one prepare */
        zimp_zerofree_prepare();
        for (int i = 0; i < ZF_ACK_SLOTS; i++) {
            int pid = atomic_exchange(&zf_ack_pid[i], 0);
            if (pid > 0 && pid != getpid()) {
                union sigval v = { .sival_int = ZIMP_ZEROFREE_ACK_DONE };
                sigqueue(pid, zf_signo, v);
            }
        }
    }
    return arg;
}

static void zf_helper_start(void)
{
    int expect = 1;
    if (!atomic_compare_exchange_strong(&zf_helper_state, &expect, 2))
        return;
    pthread_attr_t attr;
    sigset_t all;
    pthread_t t;
    sigfillset(&all);
    tls_busy++;
    int ok = pthread_attr_init(&attr) == 0;
    if (ok) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        pthread_attr_setsigmask_np(&attr, &all);
        ok = pthread_create(&t, &attr, zf_helper, NULL) == 0;
        pthread_attr_destroy(&attr);
    }
    if (ok) {
        zf_helper_pid = getpid();
        pthread_setname_np(t, "zimp-zerofree");
    } else {
        atomic_store(&zf_helper_state, 0);
    }
    tls_busy--;
}

/* ---------------------------------------------------------------------- */
/* fork: no queue lock may be held across fork, or the child deadlocks. */

static void zf_atfork_prepare(void)
{
    pthread_mutex_lock(&zf_reg_lock);
    for (struct zf_queue *q = zf_reg; q; q = q->next)
        zf_qlock(q);
}

static void zf_atfork_parent(void)
{
    for (struct zf_queue *q = zf_reg; q; q = q->next)
        zf_qunlock(q);
    pthread_mutex_unlock(&zf_reg_lock);
}

/* The child has only the forking thread: other queues lose their owners
 * (their blocks stay parked until the next prepare), the helper is gone. */
static void zf_atfork_child(void)
{
    for (struct zf_queue *q = zf_reg; q; q = q->next) {
        if (q != tls_q)
            q->owned = 0;
        zf_qunlock(q);
    }
    pthread_mutex_init(&zf_reg_lock, NULL);
    if (atomic_load(&zf_helper_state) == 2)
        atomic_store(&zf_helper_state, 1);    /* restarted on the next free */
}

/* ---------------------------------------------------------------------- */
/* Initialisation */

static void zf_say(const char *msg)
{
    ssize_t r = write(2, msg, strlen(msg));
    (void)r;
}

static size_t zf_env_size(const char *name, size_t dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    if (*end == 'k' || *end == 'K') v <<= 10;
    else if (*end == 'm' || *end == 'M') v <<= 20;
    else if (*end == 'g' || *end == 'G') v <<= 30;
    return (size_t)v;
}

static int zf_env_signal(void)
{
    const char *s = getenv("ZIMP_ZEROFREE_SIGNAL");
    if (!s || !*s)
        return SIGUSR2;
    if (!strncmp(s, "SIG", 3))
        s += 3;
    if (!strcmp(s, "USR1")) return SIGUSR1;
    if (!strcmp(s, "USR2")) return SIGUSR2;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 0 || v >= NSIG || v == SIGKILL || v == SIGSTOP) {
        zf_say("zimp-zerofree: ZIMP_ZEROFREE_SIGNAL not understood; no prepare signal\n");
        return 0;
    }
    return (int)v;
}

/* Same shared object as glibc's own allocator? */
static int zf_same_object(const void *a, const void *b)
{
    Dl_info ia, ib;
    if (!a || !b || !dladdr(a, &ia) || !dladdr(b, &ib))
        return 0;
    return ia.dli_fbase == ib.dli_fbase;
}

__attribute__((constructor)) static void zf_init(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    if (ps > 0)
        zf_page = (size_t)ps;

    void *m = dlsym(RTLD_DEFAULT, "malloc");
    zf_next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    zf_next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    zf_usable = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    if (!zf_same_object(m, (void *)__libc_malloc) ||
        !zf_same_object((void *)zf_next_free, (void *)__libc_free) ||
        !zf_same_object((void *)zf_usable, (void *)__libc_malloc)) {
        Dl_info im;
        char msg[512];
        const char *where = (m && dladdr(m, &im) && im.dli_fname) ? im.dli_fname : "?";
        snprintf(msg, sizeof msg,
                 "zimp-zerofree: malloc in this process comes from %s, not from "
                 "glibc; freed memory will NOT be zeroed (library inactive)\n",
                 *where ? where : "the main program");
        zf_say(msg);
        if (!zf_next_free) zf_next_free = __libc_free;
        if (!zf_next_realloc) zf_next_realloc = __libc_realloc;
        zf_foreign = 1;
        return;
    }

    const char *mode = getenv("ZIMP_ZEROFREE");
    int md = ZF_EAGER;
    if (mode && *mode) {
        if (!strcmp(mode, "eager")) md = ZF_EAGER;
        else if (!strcmp(mode, "pages")) md = ZF_PAGES;
        else if (!strcmp(mode, "lazy")) md = ZF_LAZY;
        else if (!strcmp(mode, "off") || !strcmp(mode, "0")) md = ZF_OFF;
        else {
            zf_say("zimp-zerofree: ZIMP_ZEROFREE must be eager, pages, lazy or off; using off\n");
            md = ZF_OFF;
        }
    }
    const char *st = getenv("ZIMP_ZEROFREE_STATS");
    zf_stats_on = st && *st && strcmp(st, "0") != 0;
    zf_pages_min = zf_env_size("ZIMP_ZEROFREE_PAGES_MIN", zf_pages_min);
    if (zf_pages_min < 2 * zf_page)
        zf_pages_min = 2 * zf_page;
    zf_lazy_bytes = zf_env_size("ZIMP_ZEROFREE_LAZY_BYTES", zf_lazy_bytes);
    zf_lazy_block = zf_env_size("ZIMP_ZEROFREE_LAZY_BLOCK", zf_lazy_block);
    if (zf_lazy_block > zf_lazy_bytes)
        zf_lazy_block = zf_lazy_bytes;

    if (md != ZF_OFF) {
        /* every active mode answers the signal (prepare = trim outside lazy) */
        zf_key_ok = md == ZF_LAZY && pthread_key_create(&zf_key, zf_thread_exit) == 0;
        pthread_atfork(zf_atfork_prepare, zf_atfork_parent, zf_atfork_child);
        zf_signo = zf_env_signal();
        if (zf_signo > 0 && sem_init(&zf_sem, 0, 0) == 0) {
            struct sigaction old, sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = zf_on_signal;
            sa.sa_flags = SA_SIGINFO | SA_RESTART;
            sigemptyset(&sa.sa_mask);
            /* never take over a handler the program already installed */
            if (sigaction(zf_signo, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
                old.sa_handler == SIG_DFL && sigaction(zf_signo, &sa, NULL) == 0) {
                atomic_store(&zf_helper_state, 1);
                zf_helper_start();
            } else {
                zf_signo = 0;
            }
        } else {
            zf_signo = 0;
        }
    }
    const char *verbose = getenv("ZIMP_ZEROFREE_VERBOSE");
    if (verbose && *verbose && strcmp(verbose, "0") != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "zimp-zerofree: pid %d mode %s signal %d\n",
                 (int)getpid(), zf_mode_names[md], zf_signo);
        zf_say(msg);
    }
    atomic_thread_fence(memory_order_seq_cst);
    zf_mode = md;
}

__attribute__((destructor)) static void zf_fini(void)
{
    if (!zf_stats_on)
        return;
    char msg[320];
    snprintf(msg, sizeof msg,
             "zimp-zerofree: pid %d mode %s: frees %llu, zeroed %llu B, dropped %llu B, "
             "prepares %llu\n", (int)getpid(), zf_mode_names[zf_mode],
             (unsigned long long)atomic_load(&st_frees), (unsigned long long)atomic_load(&st_zeroed),
             (unsigned long long)atomic_load(&st_dropped), (unsigned long long)atomic_load(&st_prepares));
    zf_say(msg);
}

/* ---------------------------------------------------------------------- */
/* Interposed entry points */

/* Releases p per the active mode. */
static void zf_release(void *p)
{
    size_t n;
    if (ZF_UNLIKELY(tls_busy) || zf_chunk_mmapped(p) || (n = zf_usable(p)) == 0) {
        __libc_free(p);    /* munmapped by glibc, or not a live chunk */
        return;
    }
    if (zf_stats_on)
        atomic_fetch_add_explicit(&st_frees, 1, memory_order_relaxed);
    if (ZF_UNLIKELY(atomic_load_explicit(&zf_helper_state, memory_order_relaxed) == 1))
        zf_helper_start();    /* first free in a forked child */
    switch (zf_mode) {
    case ZF_EAGER:
        zf_clear(p, n, SIZE_MAX);
        break;
    case ZF_PAGES:
        zf_clear(p, n, zf_pages_min);
        break;
    case ZF_LAZY:
        if (n <= zf_lazy_block && !tls_exiting) {
            zf_park(p, n);
            return;
        }
        break;
    }
    __libc_free(p);
}

ZF_API void free(void *p)
{
    if (!p)
        return;
    if (ZF_UNLIKELY(zf_foreign)) {
        zf_next_free(p);
        return;
    }
    if (zf_mode == ZF_OFF) {
        __libc_free(p);
        return;
    }
    zf_release(p);
}

ZF_API void cfree(void *p)
{
    free(p);
}

ZF_API void *realloc(void *p, size_t n)
{
    if (ZF_UNLIKELY(zf_foreign))
        return zf_next_realloc(p, n);
    if (zf_mode == ZF_OFF || zf_mode == ZF_LAZY || !p || ZF_UNLIKELY(tls_busy) ||
        zf_chunk_mmapped(p))
        return __libc_realloc(p, n);   /* lazy: moved-from blocks left to trim */
    if (n == 0) {                      /* glibc: realloc(p, 0) frees, returns NULL */
        zf_release(p);
        return NULL;
    }
    size_t old = zf_usable(p);
    if (old == 0)
        return __libc_realloc(p, n);
    if (n <= old) {
        /* Shrinks in place; the bytes past n are no longer the caller's. */
        zf_clear((unsigned char *)p + n, old - n, zf_mode == ZF_PAGES ? zf_pages_min : SIZE_MAX);
        return __libc_realloc(p, n);
    }
    /* Growth: glibc would free the old block itself if it moved it, out of
     * our reach, so move it here and release the old block our way. */
    void *q = __libc_malloc(n);
    if (!q)
        return NULL;                   /* errno ENOMEM; p untouched */
    memcpy(q, p, old);
    zf_release(p);
    return q;
}

ZF_API void *reallocarray(void *p, size_t nmemb, size_t size)
{
    size_t n;
    if (__builtin_mul_overflow(nmemb, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, n);
}

/* ---------------------------------------------------------------------- */
/* Control API */

ZF_API int zimp_zerofree_prepare(void)
{
    if (zf_foreign || zf_mode == ZF_OFF)
        return -ENOTSUP;
    tls_busy++;
    if (zf_mode == ZF_LAZY)
        zf_drain_all();
    malloc_trim(0);
    tls_busy--;
    atomic_fetch_add_explicit(&st_prepares, 1, memory_order_relaxed);
    return 0;
}

ZF_API const char *zimp_zerofree_mode(void)
{
    return zf_foreign ? "off" : zf_mode_names[zf_mode];
}

ZF_API int zimp_zerofree_stats(struct zimp_zerofree_stats *out)
{
    if (!out)
        return -EINVAL;
    out->frees = atomic_load(&st_frees);
    out->bytes_zeroed = atomic_load(&st_zeroed);
    out->bytes_dropped = atomic_load(&st_dropped);
    out->prepares = atomic_load(&st_prepares);
    out->deferred_bytes = atomic_load(&zf_parked_bytes);
    return 0;
}
