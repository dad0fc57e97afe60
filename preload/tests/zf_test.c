/* zf_test.c - tests of libzimp-zerofree.so.
 *
 *   zf_test LIB CASE       driver: runs CASE in children started with
 *                          LD_PRELOAD=LIB and the mode CASE needs
 *   zf_test --child CASE   a child role (run by the driver)
 *
 * Exit 0 pass, 1 fail, 77 skip (sanitizer builds: a preload library cannot be
 * combined with a sanitizer that replaces malloc).
 * Freed blocks are inspected through retained pointers: large blocks are
 * kept off mmap and away from the top chunk so their memory stays mapped.
 */
#define _GNU_SOURCE
#include "zimp_zerofree.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

static size_t page;

/* ---- helpers for child roles ---- */

/* The application's own malloc_usable_size: forwards to glibc and counts, so
 * a test can assert that the library does not call it. */
static atomic_long app_usable_calls;
size_t malloc_usable_size(void *p)
{
    static size_t (*real)(void *);
    if (!real)
        real = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    atomic_fetch_add(&app_usable_calls, 1);
    return real(p);
}

/* Bytes of [p+from, p+to) that differ from c. */
static size_t count_not(const unsigned char *p, size_t from, size_t to, unsigned char c)
{
    size_t k = 0;
    for (size_t i = from; i < to; i++)
        k += p[i] != c;
    return k;
}

/* Number of pages of [lo, hi) resident (mincore). */
static size_t resident_pages(uintptr_t lo, uintptr_t hi)
{
    lo = (lo + page - 1) & ~(page - 1);
    hi &= ~(page - 1);
    if (hi <= lo)
        return 0;
    size_t n = (hi - lo) / page;
    static unsigned char v[4096];   /* not from the heap under inspection */
    CHECK(n <= sizeof v && mincore((void *)lo, hi - lo, v) == 0);
    size_t r = 0;
    for (size_t i = 0; i < n; i++)
        r += v[i] & 1;
    return r;
}

static void keep_heap_mapped(void)
{
    CHECK(mallopt(M_MMAP_THRESHOLD, 64 << 20) == 1);
    CHECK(mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1);
}

struct blk { unsigned char *p; size_t n; void *guard; };

/* Allocates a block of n bytes followed by a guard, fills it with 0xA5. */
static struct blk blk_new(size_t n)
{
    struct blk b;
    b.p = malloc(n);
    b.guard = malloc(64);
    CHECK(b.p && b.guard);
    b.n = malloc_usable_size(b.p);
    memset(b.p, 0xA5, b.n);
    return b;
}

/* The part of a freed block glibc leaves alone: it writes list links at the
 * start and the next chunk's prev_size at the end. */
#define META_HEAD 32
#define META_TAIL 8
static size_t blk_dirty(const struct blk *b)
{
    return count_not(b->p, META_HEAD, b->n - META_TAIL, 0);
}
static size_t blk_intact(const struct blk *b)
{
    return b->n - META_HEAD - META_TAIL - count_not(b->p, META_HEAD, b->n - META_TAIL, 0xA5);
}

/* ---- child roles ---- */

/* off: freed memory keeps its contents (proves the checks can fail). */
static int child_off(void)
{
    keep_heap_mapped();
    CHECK(!zimp_zerofree_mode || strcmp(zimp_zerofree_mode(), "off") == 0);
    CHECK(zimp_zerofree_prepare_if_loaded() == -ENOTSUP);
    struct blk b = blk_new(5000), c = blk_new(1 << 20);
    free(b.p);
    free(c.p);
    CHECK(blk_intact(&b) == b.n - META_HEAD - META_TAIL);
    CHECK(blk_intact(&c) == c.n - META_HEAD - META_TAIL);
    return 0;
}

static int child_eager(void)
{
    keep_heap_mapped();
    CHECK(zimp_zerofree_mode && strcmp(zimp_zerofree_mode(), "eager") == 0);
    struct zimp_zerofree_stats s0, s1;
    CHECK(zimp_zerofree_stats(&s0) == 0);
    struct blk a = blk_new(200), b = blk_new(5000), c = blk_new(1 << 20);
    long calls = atomic_load(&app_usable_calls);
    free(a.p);
    free(b.p);
    free(c.p);
    CHECK(atomic_load(&app_usable_calls) == calls); /* library used glibc's own */
    CHECK(zimp_zerofree_stats(&s1) == 0);
    CHECK(s1.frees >= s0.frees + 3);
    CHECK(s1.bytes_zeroed >= s0.bytes_zeroed + a.n + b.n + c.n);
    /* eager keeps pages: the inner pages of c are still resident */
    size_t inner = (c.n - 2 * page) / page;
    CHECK(resident_pages((uintptr_t)c.p, (uintptr_t)c.p + c.n) >= inner);
    CHECK(blk_dirty(&a) == 0);
    CHECK(blk_dirty(&b) == 0);
    CHECK(blk_dirty(&c) == 0);
    return 0;
}

static int child_pages(void)
{
    keep_heap_mapped();
    CHECK(strcmp(zimp_zerofree_mode(), "pages") == 0);
    struct blk a = blk_new(200), b = blk_new(5000), c = blk_new(1 << 20);
    uintptr_t lo = (uintptr_t)c.p, hi = lo + c.n;
    CHECK(resident_pages(lo, hi) >= (c.n / page) - 2);
    free(a.p);
    free(b.p);
    free(c.p);
    /* whole inner pages given back: not resident before anyone reads them */
    CHECK(resident_pages(lo + page, hi - page) == 0);
    CHECK(blk_dirty(&a) == 0);
    CHECK(blk_dirty(&b) == 0);
    CHECK(blk_dirty(&c) == 0);
    return 0;
}

/* lazy: nothing on free; prepare zeroes what is parked and trims the rest. */
static int child_lazy_api(void)
{
    keep_heap_mapped();
    CHECK(strcmp(zimp_zerofree_mode(), "lazy") == 0);
    struct blk a = blk_new(200), b = blk_new(5000), c = blk_new(1 << 20);
    free(a.p);
    free(b.p);
    free(c.p);
    /* parked blocks are untouched, even by glibc (it does not have them yet) */
    CHECK(count_not(a.p, 0, a.n, 0xA5) == 0);
    CHECK(count_not(b.p, 0, b.n, 0xA5) == 0);
    struct zimp_zerofree_stats s;
    CHECK(zimp_zerofree_stats(&s) == 0 && s.deferred_bytes >= a.n + b.n);
    CHECK(zimp_zerofree_prepare() == 0);
    CHECK(zimp_zerofree_stats(&s) == 0 && s.deferred_bytes == 0 && s.prepares >= 1);
    CHECK(blk_dirty(&a) == 0);
    CHECK(blk_dirty(&b) == 0);
    /* c was too large to park: trim dropped its inner whole pages */
    uintptr_t lo = (uintptr_t)c.p + META_HEAD, hi = (uintptr_t)c.p + c.n - META_TAIL;
    CHECK(resident_pages(lo + page, hi - page) == 0);
    lo = (lo + page - 1) & ~(page - 1);
    hi &= ~(page - 1);
    CHECK(count_not((unsigned char *)lo, 0, hi - lo, 0) == 0);
    return 0;
}

/* lazy via signal: frees, says ready, waits for the driver's "go". */
static int child_lazy_signal(void)
{
    keep_heap_mapped();
    struct blk a = blk_new(300), b = blk_new(9000);
    free(a.p);
    free(b.p);
    CHECK(count_not(b.p, 0, b.n, 0xA5) == 0);
    CHECK(write(1, "r", 1) == 1);
    char c;
    CHECK(read(0, &c, 1) == 1);
    CHECK(blk_dirty(&a) == 0);
    CHECK(blk_dirty(&b) == 0);
    return 0;
}

/* realloc keeps contents in every mode; eager/pages zero what is released. */
static int child_realloc(void)
{
    keep_heap_mapped();
    const char *mode = zimp_zerofree_mode();
    int zeroing = strcmp(mode, "eager") == 0 || strcmp(mode, "pages") == 0;
    for (size_t n = 1; n < (1u << 20); n = n * 3 + 7) {
        unsigned char *p = malloc(n);
        CHECK(p);
        for (size_t i = 0; i < n; i++)
            p[i] = (unsigned char)(i * 7 + 1);
        size_t m = n * 2 + 100;
        void *guard = malloc(64);
        struct blk old = { p, malloc_usable_size(p), guard };
        memset(p + n, 0xA5, old.n - n);
        unsigned char *q = realloc(p, m);
        CHECK(q);
        for (size_t i = 0; i < n; i++)
            CHECK(q[i] == (unsigned char)(i * 7 + 1));
        if (zeroing && q != p && old.n > META_HEAD + META_TAIL)
            CHECK(blk_dirty(&old) == 0);
        unsigned char *r = realloc(q, n / 2 + 1);   /* shrink in place */
        CHECK(r == q);
        for (size_t i = 0; i < n / 2 + 1; i++)
            CHECK(r[i] == (unsigned char)(i * 7 + 1));
        free(r);
        free(guard);
    }
    void *z = realloc(NULL, 100);
    CHECK(z);
    errno = 0;
    CHECK(reallocarray(z, SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
    z = reallocarray(z, 10, 20);
    CHECK(z && malloc_usable_size(z) >= 200);
    CHECK(realloc(z, 0) == NULL);      /* frees */
    /* posix_memalign / aligned_alloc blocks are freed through free() */
    void *al = NULL;
    CHECK(posix_memalign(&al, 4096, 10000) == 0);
    memset(al, 1, 10000);
    al = realloc(al, 20000);
    CHECK(al && ((unsigned char *)al)[9999] == 1);
    free(al);
    free(aligned_alloc(64, 640));
    return 0;
}

/* Several threads allocate, check and free concurrently; a live block that
 * loses its tag byte means the library touched live memory. */
#define THREADS 4
static atomic_int stop_flag;

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    enum { SLOTS = 64 };
    unsigned char *slot[SLOTS] = { 0 };
    size_t len[SLOTS] = { 0 };
    for (int it = 0; it < 30000; it++) {
        int k = rand_r(&seed) % SLOTS;
        if (slot[k]) {
            unsigned char tag = (unsigned char)(k + 1);
            for (size_t i = 0; i < len[k]; i += 61)
                CHECK(slot[k][i] == tag);
            CHECK(slot[k][len[k] - 1] == tag);
            if (rand_r(&seed) % 4 == 0) {
                size_t nl = 1 + rand_r(&seed) % 20000;
                unsigned char *q = realloc(slot[k], nl);
                CHECK(q);
                for (size_t i = 0; i < (nl < len[k] ? nl : len[k]); i += 61)
                    CHECK(q[i] == tag);
                memset(q, tag, nl);
                slot[k] = q;
                len[k] = nl;
                continue;
            }
            free(slot[k]);
            slot[k] = NULL;
        } else {
            unsigned r = rand_r(&seed) % 100;
            size_t n = r < 70 ? 1 + rand_r(&seed) % 256
                     : r < 97 ? 256 + rand_r(&seed) % 16384
                              : 100000 + rand_r(&seed) % 300000;
            slot[k] = malloc(n);
            CHECK(slot[k]);
            memset(slot[k], k + 1, n);
            len[k] = n;
        }
    }
    for (int k = 0; k < SLOTS; k++)
        free(slot[k]);
    return NULL;
}

static void *preparer(void *arg)
{
    for (int i = 0; !atomic_load(&stop_flag); i++) {
        CHECK(zimp_zerofree_prepare() == 0);
        if (i % 4 == 0)
            kill(getpid(), SIGUSR2);   /* the helper thread prepares too (all modes) */
        usleep(2000);
    }
    return arg;
}

static int child_threads(void)
{
    pthread_t t[THREADS], pr;
    CHECK(pthread_create(&pr, NULL, preparer, NULL) == 0);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i * 7919 + 1)) == 0);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    atomic_store(&stop_flag, 1);
    CHECK(pthread_join(pr, NULL) == 0);
    CHECK(zimp_zerofree_prepare() == 0);
    return 0;
}

/* fork while other threads free: the child must not inherit a held lock. */
static int child_fork(void)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 11)) == 0);
    for (int f = 0; f < 20; f++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            alarm(5);
            for (int i = 0; i < 1000; i++) {
                void *p = malloc(1 + i % 3000);
                memset(p, 1, 1 + i % 3000);
                free(p);
            }
            _exit(zimp_zerofree_prepare() == 0 ? 0 : 3);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    return 0;
}

/* ---- driver ---- */

static const char *lib;
static char self[4096];

/* Runs `exe --child role` with the library preloaded in mode; returns the
 * exit status (or 100+signal). Optional pipes for stdin/stdout/stderr. */
static pid_t spawn(const char *exe, const char *role, const char *mode, int in, int out, int err)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (in >= 0) dup2(in, 0);
        if (out >= 0) dup2(out, 1);
        if (err >= 0) dup2(err, 2);
        setenv("LD_PRELOAD", lib, 1);
        setenv("ZIMP_ZEROFREE", mode, 1);
        setenv("ZIMP_ZEROFREE_STATS", "1", 1);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        alarm(30);
        execl(exe, exe, "--child", role, (char *)NULL);
        _exit(126);
    }
    return pid;
}

static int reap(pid_t pid)
{
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (WIFSIGNALED(st))
        return 100 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

static int run(const char *role, const char *mode)
{
    int rc = reap(spawn(self, role, mode, -1, -1, -1));
    if (rc != 0)
        fprintf(stderr, "role %s mode %s: status %d\n", role, mode, rc);
    return rc;
}

static int drive_lazy_signal(void)
{
    int to_child[2], from_child[2];
    CHECK(pipe(to_child) == 0 && pipe(from_child) == 0);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    CHECK(sigprocmask(SIG_BLOCK, &set, NULL) == 0);
    pid_t pid = spawn(self, "lazy_signal", "lazy", to_child[0], from_child[1], -1);
    close(to_child[0]);
    close(from_child[1]);
    char c;
    CHECK(read(from_child[0], &c, 1) == 1 && c == 'r');
    union sigval v = { .sival_int = ZIMP_ZEROFREE_ACK_REQUEST };
    CHECK(sigqueue(pid, SIGUSR2, v) == 0);
    siginfo_t si;
    struct timespec ts = { 10, 0 };
    CHECK(sigtimedwait(&set, &si, &ts) == SIGUSR2);
    CHECK(si.si_pid == pid && si.si_value.sival_int == ZIMP_ZEROFREE_ACK_DONE);
    CHECK(write(to_child[1], "g", 1) == 1);
    return reap(pid);
}

/* A program with its own malloc: the library must say so on stderr. */
static int drive_foreign(const char *foreign)
{
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t pid = spawn(foreign, "x", "eager", -1, -1, p[1]);
    close(p[1]);
    char buf[4096];
    size_t len = 0;
    ssize_t r;
    while ((r = read(p[0], buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)r;
    buf[len] = 0;
    int rc = reap(pid);
    fprintf(stderr, "foreign program said: %s", buf);
    CHECK(rc == 0);
    CHECK(strstr(buf, "not from glibc") != NULL);
    CHECK(strstr(buf, "foreign-ok") != NULL);
    return 0;
}

int main(int argc, char **argv)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    if (argc == 3 && !strcmp(argv[1], "--child")) {
        const char *r = argv[2];
        if (!strcmp(r, "off")) return child_off();
        if (!strcmp(r, "eager")) return child_eager();
        if (!strcmp(r, "pages")) return child_pages();
        if (!strcmp(r, "lazy_api")) return child_lazy_api();
        if (!strcmp(r, "lazy_signal")) return child_lazy_signal();
        if (!strcmp(r, "realloc")) return child_realloc();
        if (!strcmp(r, "threads")) return child_threads();
        if (!strcmp(r, "fork")) return child_fork();
        return 2;
    }
#ifdef ZF_SANITIZED
    fprintf(stderr, "skip: sanitizer build, a preload library cannot be tested\n");
    return 77;
#endif
    if (argc < 3) {
        fprintf(stderr, "usage: %s LIB CASE [FOREIGN_EXE]\n", argv[0]);
        return 2;
    }
    lib = argv[1];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n] = 0;
    const char *c = argv[2];
    if (!strcmp(c, "off"))
        return run("off", "off") || run("off", "bogus");
    if (!strcmp(c, "eager")) return run("eager", "eager");
    if (!strcmp(c, "pages")) return run("pages", "pages");
    if (!strcmp(c, "lazy_api")) return run("lazy_api", "lazy");
    if (!strcmp(c, "lazy_signal")) return drive_lazy_signal();
    if (!strcmp(c, "realloc"))
        return run("realloc", "eager") || run("realloc", "pages") || run("realloc", "lazy") ||
               run("realloc", "off");
    if (!strcmp(c, "threads"))
        return run("threads", "eager") || run("threads", "pages") || run("threads", "lazy");
    if (!strcmp(c, "fork"))
        return run("fork", "lazy") || run("fork", "eager");
    if (!strcmp(c, "foreign") && argc == 4) return drive_foreign(argv[3]);
    fprintf(stderr, "unknown case %s\n", c);
    return 2;
}
