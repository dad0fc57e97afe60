/*
 * The shared heap: handles, references across processes, deaths, bad input.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "heap/heap_int.h"
#include "task.h"

/* A heap of this test ("zt<pid>-<test>-<tag>"), removed by heap_done. */
static const char *heap_make(char *name, size_t cap, const char *tag, uint64_t size, uint32_t flags)
{
    chan_name(name, cap, tag);
    struct zimp_heap_config c = { .size = size, .flags = flags };
    int rc = zimp_heap_create(name, &c);
    ASSERT_MSG(rc == 0, "zimp_heap_create(%s): %d (%s) %s", name, rc, err_text(rc), zimp_last_detail());
    return name;
}

static void heap_done(const char *name)
{
    ASSERT_OK(zimp_heap_unlink(name));
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm/zimpheap.%s", name);
    ASSERT_MSG(stat(path, &st) != 0, "%s still exists", path);
}

static struct zimp_heap_stats stats(zimp_heap *h)
{
    struct zimp_heap_stats st;
    ASSERT_OK(zimp_heap_stats(h, &st));
    return st;
}

static void fill(void *buf, size_t len, uint64_t seed) { pattern_fill(buf, len, seed); }
static int check(const void *buf, size_t len, uint64_t seed) { return pattern_mismatch(buf, len, seed) == len; }

TEST_IMPL(heap_basic)
{
    char name[128];
    heap_make(name, sizeof name, "h", 1 << 20, 0);
    struct zimp_heap_config bad = { .max_members = 64 };
    ASSERT_EQ(zimp_heap_create(name, NULL), -EEXIST);
    ASSERT_EQ(zimp_heap_create("x", &bad), -EINVAL);
    bad = (struct zimp_heap_config){ .flags = 0x80 };
    ASSERT_EQ(zimp_heap_create("x", &bad), -EINVAL);
    ASSERT_EQ(zimp_heap_create("bad/name", NULL), -EINVAL);
    zimp_heap *h;
    ASSERT_EQ(zimp_heap_open("zt-no-such-heap", &h), -ENOENT);
    ASSERT_OK(zimp_heap_open(name, &h));
    struct zimp_heap_stats st = stats(h);
    ASSERT_EQ(st.size, 1 << 20);
    ASSERT_EQ(st.used, 0);
    ASSERT_EQ(st.members, 1);

    void *buf;
    struct zimp_ref ref, ref2;
    ASSERT_EQ(zimp_heap_alloc(h, 0, &buf, &ref), -EINVAL);
    ASSERT_EQ(zimp_heap_alloc(h, (2 << 20), &buf, &ref), -ENOMEM);
    ASSERT_EQ(zimp_heap_alloc(h, 10, NULL, &ref), -EINVAL);
    ASSERT_OK(zimp_heap_alloc(h, 1000, &buf, &ref));
    fill(buf, 1000, 1);
    ASSERT_EQ(stats(h).blocks, 1);
    ASSERT_EQ(stats(h).used, 1024);        /* whole units */

    const void *ro;
    size_t len = 0;
    ASSERT_OK(zimp_heap_resolve(h, &ref, &ro, &len));     /* a second reference */
    ASSERT_EQ(len, 1000);
    ASSERT(check(ro, 1000, 1));
    ASSERT_OK(zimp_heap_release(h, &ref));
    ASSERT_EQ(stats(h).blocks, 1);                         /* one reference left */
    ASSERT_OK(zimp_heap_release(h, &ref));
    ASSERT_EQ(stats(h).blocks, 0);
    ASSERT_EQ(stats(h).used, 0);
    ASSERT_EQ(zimp_heap_release(h, &ref), -EINVAL);        /* holds none */
    ASSERT_EQ(zimp_heap_resolve(h, &ref, &ro, &len), -ESTALE);

    /* the units are handed out again: the old handle must not reach the new block */
    for (int i = 0; i < 4096; i++) {
        ASSERT_OK(zimp_heap_alloc(h, 1000, &buf, &ref2));
        if (ref2.off == ref.off)
            break;
        ASSERT_OK(zimp_heap_release(h, &ref2));
    }
    ASSERT_EQ(ref2.off, ref.off);
    ASSERT(ref2.gen != ref.gen);
    ASSERT_EQ(zimp_heap_resolve(h, &ref, &ro, &len), -ESTALE);
    ASSERT_EQ(zimp_heap_release(h, &ref), -ESTALE);

    /* forged handles */
    struct zimp_ref f = ref2;
    f.heap ^= 1;
    ASSERT_EQ(zimp_heap_resolve(h, &f, &ro, &len), -EINVAL);
    f = ref2;
    f.off += 1;
    ASSERT_EQ(zimp_heap_resolve(h, &f, &ro, &len), -EINVAL);
    f = ref2;
    f.off = 1ull << 40;
    ASSERT_EQ(zimp_heap_resolve(h, &f, &ro, &len), -EINVAL);
    f = ref2;
    f.gen = 0;
    ASSERT_EQ(zimp_heap_resolve(h, &f, &ro, &len), -EINVAL);
    f = ref2;
    f.off += 256;                                          /* inside the block: not a block */
    ASSERT_EQ(zimp_heap_resolve(h, &f, &ro, &len), -ESTALE);
    ASSERT_EQ(zimp_heap_resolve(h, NULL, &ro, &len), -EINVAL);
    ASSERT_EQ(zimp_heap_resolve(NULL, &ref2, &ro, &len), -EINVAL);

    zimp_heap_close(h);                                    /* drops ref2 */
    ASSERT_OK(zimp_heap_open(name, &h));
    ASSERT_EQ(stats(h).blocks, 0);
    ASSERT_EQ(stats(h).members, 1);
    zimp_heap_close(h);
    zimp_heap_close(NULL);
    heap_done(name);
    return 0;
}

TEST_IMPL(heap_exhaustion)
{
    char name[128];
    heap_make(name, sizeof name, "h", 256 << 10, 0);
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(name, &h));
    enum { MAX = 128 };
    struct zimp_ref refs[MAX];
    void *bufs[MAX];
    int n = 0;
    int rc;
    while ((rc = zimp_heap_alloc(h, 4000, &bufs[n], &refs[n])) == 0) {
        fill(bufs[n], 4000, (uint64_t)n);
        ASSERT(++n < MAX);
    }
    ASSERT_EQ(rc, -ENOMEM);
    ASSERT_EQ(n, (256 << 10) / 4096);
    for (int i = 0; i < n; i++)
        ASSERT_MSG(check(bufs[i], 4000, (uint64_t)i), "block %d damaged by a failed allocation", i);
    for (int i = 0; i < n; i += 2)
        ASSERT_OK(zimp_heap_release(h, &refs[i]));
    ASSERT_EQ(zimp_heap_alloc(h, 8192, &bufs[0], &refs[0]), -ENOMEM);   /* holes of 4 KiB only */
    ASSERT_OK(zimp_heap_alloc(h, 4096, &bufs[0], &refs[0]));
    for (int i = 1; i < n; i += 2)
        ASSERT(check(bufs[i], 4000, (uint64_t)i));
    ASSERT_OK(zimp_heap_release(h, &refs[0]));
    for (int i = 1; i < n; i += 2)
        ASSERT_OK(zimp_heap_release(h, &refs[i]));
    ASSERT_EQ(stats(h).used, 0);
    ASSERT_OK(zimp_heap_alloc(h, 256 << 10, &bufs[0], &refs[0]));     /* the whole heap, one block */
    ASSERT_OK(zimp_heap_release(h, &refs[0]));
    zimp_heap_close(h);
    heap_done(name);
    return 0;
}

/* Allocates, fills, checks and frees blocks of random sizes. */
static void churn_role(void *arg)
{
    const char *name = arg;
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(name, &h));
    struct xrand x = { (uint64_t)getpid() * 0x9e3779b97f4a7c15ull };
    enum { KEEP = 8 };
    struct zimp_ref refs[KEEP];
    void *bufs[KEEP];
    size_t lens[KEEP];
    int held = 0;
    long rounds = scaled(3000);
    for (long i = 0; i < rounds; i++) {
        if (held == KEEP || (held && xrand_below(&x, 2))) {
            int k = (int)xrand_below(&x, (uint64_t)held);
            ASSERT_MSG(check(bufs[k], lens[k], refs[k].off ^ (uint64_t)getpid()),
                       "block at %llu changed under its owner", (unsigned long long)refs[k].off);
            ASSERT_OK(zimp_heap_release(h, &refs[k]));
            refs[k] = refs[held - 1], bufs[k] = bufs[held - 1], lens[k] = lens[held - 1];
            held--;
            continue;
        }
        size_t len = 1 + (size_t)xrand_below(&x, 20000);
        int rc = zimp_heap_alloc(h, len, &bufs[held], &refs[held]);
        if (rc == -ENOMEM)
            continue;
        ASSERT_OK(rc);
        lens[held] = len;
        fill(bufs[held], len, refs[held].off ^ (uint64_t)getpid());
        held++;
    }
    while (held--)
        ASSERT_OK(zimp_heap_release(h, &refs[held]));
    zimp_heap_close(h);
}

TEST_IMPL(heap_many_processes)
{
    char name[128];
    heap_make(name, sizeof name, "h", 2 << 20, 0);
    enum { P = 4 };
    pid_t kids[P];
    for (int i = 0; i < P; i++)
        kids[i] = spawn(churn_role, name);
    for (int i = 0; i < P; i++)
        ASSERT_CHILD_OK(kids[i], tmo(60000));
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(name, &h));
    struct zimp_heap_stats st = stats(h);
    ASSERT_MSG(st.used == 0 && st.blocks == 0, "after every process freed all: %llu bytes in %llu blocks",
               (unsigned long long)st.used, (unsigned long long)st.blocks);
    ASSERT_EQ(st.members, 1);
    zimp_heap_close(h);
    heap_done(name);
    return 0;
}

struct hrx {
    const char *chan, *heap;
    struct tpipe resolved, go;
    int index;
};

/* Receives handles, resolves and checks them, then releases on the parent's word. */
static void handle_rx_role(void *arg)
{
    struct hrx *a = arg;
    zimp_receiver *r;
    zimp_heap *h;
    ASSERT_OK(zimp_receiver_open(a->chan, &r));
    ASSERT_OK(zimp_heap_open(a->heap, &h));
    signal_byte(&a->resolved);                  /* open: the parent may send */
    struct zimp_ref refs[3];
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(zimp_recv(r, &refs[i], sizeof refs[i], tmo(10000) * 1000000ll), (ssize_t)sizeof refs[i]);
        const void *p;
        size_t len;
        ASSERT_OK(zimp_heap_resolve(h, &refs[i], &p, &len));
        ASSERT(len == 5000 && check(p, len, (uint64_t)i));
    }
    signal_byte(&a->resolved);
    char c;
    ASSERT_OK(get_bytes(a->go.r, &c, 1, tmo(10000)));
    for (int i = 0; i < 3; i++)
        ASSERT_OK(zimp_heap_release(h, &refs[i]));
    signal_byte(&a->resolved);
    zimp_heap_close(h);
    zimp_receiver_close(r);
}

TEST_IMPL(heap_handles_to_receivers)
{
    char heap[128], chan[128];
    heap_make(heap, sizeof heap, "h", 1 << 20, 0);
    chan_name(chan, sizeof chan, "c");
    create_chan(chan, 8, 64, 1, 4);
    enum { N = 3 };
    struct hrx a[N];
    pid_t kids[N];
    for (int i = 0; i < N; i++) {
        a[i] = (struct hrx){ chan, heap, { 0 }, { 0 }, i };
        tpipe_open(&a[i].resolved);
        tpipe_open(&a[i].go);
        kids[i] = spawn(handle_rx_role, &a[i]);
        ASSERT_OK(wait_bytes(&a[i].resolved, 1, tmo(10000)));
    }
    zimp_heap *h;
    zimp_sender *s;
    ASSERT_OK(zimp_heap_open(heap, &h));
    ASSERT_OK(zimp_sender_open(chan, &s));
    struct zimp_ref refs[3];
    for (int i = 0; i < 3; i++) {
        void *buf;
        ASSERT_OK(zimp_heap_alloc(h, 5000, &buf, &refs[i]));
        fill(buf, 5000, (uint64_t)i);
        ASSERT_OK(zimp_send(s, &refs[i], sizeof refs[i], -1));
    }
    for (int i = 0; i < N; i++)
        ASSERT_OK(wait_bytes(&a[i].resolved, 1, tmo(10000)));
    for (int i = 0; i < 3; i++)                 /* every receiver holds them now */
        ASSERT_OK(zimp_heap_release(h, &refs[i]));
    for (int i = 0; i < N; i++) {
        ASSERT_MSG(stats(h).blocks == 3, "blocks freed while %d receiver(s) still hold them", N - i);
        put_bytes(a[i].go.w, "g", 1);
        ASSERT_OK(wait_bytes(&a[i].resolved, 1, tmo(10000)));
    }
    ASSERT_EQ(stats(h).blocks, 0);              /* the last release freed them */
    for (int i = 0; i < N; i++)
        ASSERT_CHILD_OK(kids[i], tmo(10000));
    zimp_sender_close(s);
    zimp_heap_close(h);
    ASSERT_OK(zimp_unlink(chan));
    heap_done(heap);
    return 0;
}

struct holder { const char *heap; struct zimp_ref ref; struct tpipe ready; };

static void holder_role(void *arg)
{
    struct holder *a = arg;
    zimp_heap *h;
    const void *p;
    ASSERT_OK(zimp_heap_open(a->heap, &h));
    ASSERT_OK(zimp_heap_resolve(h, &a->ref, &p, NULL));
    signal_byte(&a->ready);
    for (;;)
        pause();
}

/* Allocates a block of len bytes, has a child resolve it, then drops our own
 * reference: the child (stopped in pause) holds the block alone. */
static pid_t held_by_child(zimp_heap *h, struct holder *a, size_t len)
{
    void *buf;
    ASSERT_OK(zimp_heap_alloc(h, len, &buf, &a->ref));
    tpipe_open(&a->ready);
    pid_t kid = spawn(holder_role, a);
    ASSERT_OK(wait_bytes(&a->ready, 1, tmo(10000)));
    ASSERT_OK(zimp_heap_release(h, &a->ref));
    return kid;
}

TEST_IMPL(heap_receiver_killed)
{
    char name[128];
    heap_make(name, sizeof name, "h", 1 << 20, 0);
    zimp_heap *h;
    void *buf;
    ASSERT_OK(zimp_heap_open(name, &h));
    struct holder a = { name, { 0 }, { 0 } };
    pid_t kid = held_by_child(h, &a, 3000);
    ASSERT_EQ(stats(h).blocks, 1);              /* the child holds it */
    ASSERT_EQ(zimp_heap_reap(h), 0);            /* alive: nothing to clean */
    ASSERT_OK(kill(kid, SIGKILL));
    ASSERT_EQ(wait_child(kid, tmo(5000)), 128 + SIGKILL);
    /* freed at the next heap call past the reap period (an allocation here) */
    int64_t t0 = now_ns();
    struct zimp_ref r2;
    while (stats(h).blocks != 0 && now_ns() - t0 < tmo(2000) * 1000000ll) {
        sleep_ms(2);
        ASSERT_OK(zimp_heap_alloc(h, 10, &buf, &r2));
        ASSERT_OK(zimp_heap_release(h, &r2));
    }
    ASSERT_MSG(stats(h).blocks == 0, "block of a killed holder still allocated");
    ASSERT_EQ(stats(h).members, 1);
    ASSERT_EQ(zimp_heap_resolve(h, &a.ref, (const void **)&buf, NULL), -ESTALE);
    zimp_heap_close(h);
    heap_done(name);
    return 0;
}

TEST_IMPL(heap_allocator_killed)
{
    char name[128];
    heap_make(name, sizeof name, "h", 1 << 20, 0);
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(name, &h));
    struct xrand x = { 7 };
    long rounds = scaled(40);
    for (long i = 0; i < rounds; i++) {
        pid_t kids[2] = { spawn(churn_role, name), spawn(churn_role, name) };
        sleep_ns((int64_t)xrand_below(&x, 3000000));
        for (int k = 0; k < 2; k++) {
            kill(kids[k], SIGKILL);
            int st = wait_child(kids[k], tmo(5000));
            ASSERT(st == 0 || st == 128 + SIGKILL);
        }
        zimp_heap_reap(h);
        struct zimp_heap_stats st = stats(h);
        ASSERT_MSG(st.used == 0 && st.blocks == 0 && st.members == 1,
                   "round %ld: %llu bytes, %llu blocks, %u members after reaping the killed", i,
                   (unsigned long long)st.used, (unsigned long long)st.blocks, st.members);
    }
    void *buf;
    struct zimp_ref ref;
    ASSERT_OK(zimp_heap_alloc(h, 1 << 20, &buf, &ref));   /* no unit leaked, the lock is free */
    ASSERT_OK(zimp_heap_release(h, &ref));
    zimp_heap_close(h);
    heap_done(name);
    return 0;
}

static void writer_role(void *arg)
{
    struct holder *a = arg;
    zimp_heap *h;
    const void *p;
    ASSERT_OK(zimp_heap_open(a->heap, &h));
    ASSERT_OK(zimp_heap_resolve(h, &a->ref, &p, NULL));
    signal_byte(&a->ready);
    *(volatile char *)p = 1;                    /* must fault */
    _exit(3);
}

TEST_IMPL(heap_receiver_cannot_write)
{
    char name[128];
    heap_make(name, sizeof name, "h", 1 << 20, 0);
    zimp_heap *h;
    void *buf;
    ASSERT_OK(zimp_heap_open(name, &h));
    struct holder a = { name, { 0 }, { 0 } };
    ASSERT_OK(zimp_heap_alloc(h, 100, &buf, &a.ref));
    tpipe_open(&a.ready);
    pid_t kid = spawn(writer_role, &a);
    ASSERT_OK(wait_bytes(&a.ready, 1, tmo(10000)));      /* resolved: now it writes */
    int st = wait_child(kid, tmo(5000));
    ASSERT_MSG(died_of_write_fault(st), "writing into a resolved block: status %d", st);
    zimp_heap_reap(h);
    ASSERT_EQ(stats(h).blocks, 1);              /* ours still */
    zimp_heap_close(h);
    heap_done(name);
    return 0;
}

TEST_IMPL(heap_forged_handles_fuzz)
{
    char name[128];
    heap_make(name, sizeof name, "h", 256 << 10, 0);
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(name, &h));
    enum { B = 16 };
    struct zimp_ref live[B], dead[B];
    void *buf;
    for (int i = 0; i < B; i++) {
        ASSERT_OK(zimp_heap_alloc(h, 700, &buf, &dead[i]));
        ASSERT_OK(zimp_heap_alloc(h, 700, &buf, &live[i]));
    }
    for (int i = 0; i < B; i++)
        ASSERT_OK(zimp_heap_release(h, &dead[i]));
    struct xrand x = { 42 };
    long n = scaled(200000), ok = 0;
    for (long i = 0; i < n; i++) {
        struct zimp_ref f = live[xrand_below(&x, B)];
        switch (xrand_below(&x, 5)) {
        case 0: f.off = xrand_next(&x); break;
        case 1: f.off = xrand_below(&x, 1024) * 256; break;
        case 2: f.gen = (uint32_t)xrand_next(&x); break;
        case 3: f = dead[xrand_below(&x, B)]; break;
        default: f.heap = (uint32_t)xrand_next(&x); break;
        }
        const void *p;
        size_t len;
        int rc = zimp_heap_resolve(h, &f, &p, &len);
        bool real = false;
        for (int k = 0; k < B; k++)
            real |= !memcmp(&f, &live[k], sizeof f);
        ASSERT_MSG(rc == 0 ? real : (rc == -EINVAL || rc == -ESTALE) && !real,
                   "forged handle (heap %08x off %llu gen %u): %d", f.heap, (unsigned long long)f.off,
                   f.gen, rc);
        if (rc == 0) {
            ASSERT_EQ(len, 700);
            ASSERT_OK(zimp_heap_release(h, &f));
            ok++;
        }
    }
    ASSERT(ok > 0);
    ASSERT_EQ(stats(h).blocks, B);
    zimp_heap_close(h);
    heap_done(name);
    return 0;
}

TEST_IMPL(heap_zero_on_free)
{
    char name[128];
    heap_make(name, sizeof name, "h", 64 << 10, ZIMP_ZERO_ON_RELEASE);
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(name, &h));
    void *buf;
    struct zimp_ref ref, again;
    ASSERT_OK(zimp_heap_alloc(h, 1000, &buf, &ref));
    memset(buf, 0xab, 1000);
    ASSERT_OK(zimp_heap_release(h, &ref));
    ASSERT_OK(zimp_heap_alloc(h, 8000, &buf, &ref));
    memset(buf, 0xab, 8000);
    ASSERT_OK(zimp_heap_release(h, &ref));
    ASSERT_OK(zimp_heap_alloc(h, 8000, &buf, &again));     /* the same block, kept by us */
    ASSERT_EQ(again.off, ref.off);
    for (size_t i = 0; i < 8000; i++)
        ASSERT_MSG(((uint8_t *)buf)[i] == 0, "byte %zu of a kept block not zeroed", i);
    memset(buf, 0xab, 8000);
    ASSERT_OK(zimp_heap_release(h, &again));
    ASSERT_OK(zimp_heap_alloc(h, 64 << 10, &buf, &ref));  /* the whole heap (kept block taken back) */
    for (size_t i = 0; i < (64 << 10); i++)
        ASSERT_MSG(((uint8_t *)buf)[i] == 0, "byte %zu not zeroed on free", i);
    ASSERT_OK(zimp_heap_release(h, &ref));
    zimp_heap_close(h);
    heap_done(name);
    return 0;
}

static void inherited_role(void *arg)
{
    zimp_heap *h = arg;
    void *buf;
    struct zimp_ref ref;
    ASSERT_EQ(zimp_heap_alloc(h, 10, &buf, &ref), -EBADF);
    zimp_heap_close(h);                         /* frees the copy only */
}

TEST_IMPL(heap_fork_inherited)
{
    char name[128];
    heap_make(name, sizeof name, "h", 1 << 20, 0);
    zimp_heap *h;
    void *buf;
    struct zimp_ref ref;
    ASSERT_OK(zimp_heap_open(name, &h));
    ASSERT_OK(zimp_heap_alloc(h, 10, &buf, &ref));
    pid_t kid = spawn(inherited_role, h);
    ASSERT_CHILD_OK(kid, tmo(5000));
    ASSERT_EQ(stats(h).blocks, 1);
    ASSERT_EQ(stats(h).members, 1);
    ASSERT_OK(zimp_heap_release(h, &ref));
    zimp_heap_close(h);
    heap_done(name);
    return 0;
}

TEST_IMPL(create_enospc)
{
    char name[128];
    chan_name(name, sizeof name, "c");
    /* larger than any /dev/shm here: reserved at create, so a clear error, never SIGBUS */
    struct zimp_config c = { .slots = 64, .slot_size = 1u << 30 };
    int rc = zimp_create(name, &c);
    ASSERT_MSG(rc == -ENOSPC, "zimp_create of 64 GiB: %d (%s)", rc, err_text(rc));
    ASSERT_MSG(strstr(zimp_last_detail(), "free"), "detail does not name /dev/shm's room: %s",
               zimp_last_detail());
    ASSERT(!shm_exists(name));
    struct zimp_heap_config hc = { .size = 1ull << 40 };
    rc = zimp_heap_create(name, &hc);
    ASSERT_MSG(rc == -ENOSPC, "zimp_heap_create of 1 TiB: %d (%s)", rc, err_text(rc));
    zimp_heap *h;
    ASSERT_EQ(zimp_heap_open(name, &h), -ENOENT);
    return 0;
}

/* ---- white box: a member that dies inside the allocation lock ---- */

static struct segmap map_heap_file(const char *name) { return map_shm_file(ZIMP_HEAP_PREFIX, name); }

struct keeper { const char *heap; struct tpipe kept, go; };

/* Allocates and fills four blocks of 16 KiB, then frees them (it keeps them). */
static void keep_blocks(zimp_heap *h)
{
    struct zimp_ref ref[4];
    for (int i = 0; i < 4; i++) {
        void *buf;
        ASSERT_OK(zimp_heap_alloc(h, 16 << 10, &buf, &ref[i]));
        fill(buf, 16 << 10, (uint64_t)i);
    }
    for (int i = 0; i < 4; i++)
        ASSERT_OK(zimp_heap_release(h, &ref[i]));
}

static void keeper_role(void *arg)
{
    struct keeper *a = arg;
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(a->heap, &h));
    keep_blocks(h);
    signal_byte(&a->kept);
    ASSERT_OK(wait_bytes(&a->go, 1, tmo(10000)));
    /* The parent took the kept blocks back and holds the whole heap: nothing is ours. */
    void *buf;
    struct zimp_ref ref;
    ASSERT_EQ(zimp_heap_alloc(h, 16 << 10, &buf, &ref), -ENOMEM);
    signal_byte(&a->kept);
    ASSERT_OK(wait_bytes(&a->go, 1, tmo(10000)));
    keep_blocks(h);                     /* kept again, then killed keeping them */
    signal_byte(&a->kept);
    for (;;)
        pause();
}

/* Number of blocks some member keeps (holders ZIMP_HEAP_CACHED | member). */
static int kept_blocks(const char *name)
{
    struct segmap sm = map_heap_file(name);
    struct zimp_heap_hdr *hd = sm.base;
    struct zimp_heap_desc *d = (struct zimp_heap_desc *)((char *)hd + hd->off_descs);
    int n = 0;
    for (uint64_t u = 0; u < hd->units; u++)
        n += ZIMP_HEAP_IS_CACHED(d[u].holders);
    munmap(sm.base, sm.size);
    return n;
}

/*
 * Blocks a member frees after allocating them are kept for its next
 * allocations: they count as free, another member that needs their room
 * takes them back (and their keeper then cannot use them), and a keeper
 * killed with them loses them to the reaper.
 */
TEST_IMPL(heap_kept_blocks)
{
    char name[128];
    heap_make(name, sizeof name, "h", 256 << 10, 0);
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(name, &h));
    struct keeper a = { name, { 0 }, { 0 } };
    tpipe_open(&a.kept);
    tpipe_open(&a.go);
    pid_t kid = spawn(keeper_role, &a);
    ASSERT_OK(wait_bytes(&a.kept, 1, tmo(10000)));
    ASSERT_EQ(kept_blocks(name), 4);
    struct zimp_heap_stats st = stats(h);
    ASSERT_MSG(st.used == 0 && st.blocks == 0, "kept blocks counted: %llu bytes, %llu blocks",
               (unsigned long long)st.used, (unsigned long long)st.blocks);
    void *buf;
    struct zimp_ref ref;
    ASSERT_OK(zimp_heap_alloc(h, 256 << 10, &buf, &ref));   /* takes them back */
    ASSERT_EQ(kept_blocks(name), 0);
    fill(buf, 256 << 10, 99);
    signal_byte(&a.go);
    ASSERT_OK(wait_bytes(&a.kept, 1, tmo(10000)));          /* its allocation failed */
    ASSERT_MSG(check(buf, 256 << 10, 99), "the keeper wrote into a block it no longer kept");
    ASSERT_OK(zimp_heap_release(h, &ref));                   /* half the heap at most is kept */
    ASSERT_EQ(kept_blocks(name), 0);
    signal_byte(&a.go);
    ASSERT_OK(wait_bytes(&a.kept, 1, tmo(10000)));          /* it keeps four blocks again */
    ASSERT_EQ(kept_blocks(name), 4);
    ASSERT_OK(kill(kid, SIGKILL));
    ASSERT_EQ(wait_child(kid, tmo(5000)), 128 + SIGKILL);
    ASSERT_EQ(zimp_heap_reap(h), 1);
    ASSERT_EQ(kept_blocks(name), 0);
    st = stats(h);
    ASSERT_MSG(st.used == 0 && st.blocks == 0 && st.members == 1, "%llu bytes, %llu blocks, %u members",
               (unsigned long long)st.used, (unsigned long long)st.blocks, st.members);
    ASSERT_OK(zimp_heap_alloc(h, 256 << 10, &buf, &ref));
    ASSERT_OK(zimp_heap_release(h, &ref));
    /* Our own: kept at release, handed out again (new generation), gone at close. */
    struct zimp_ref again;
    ASSERT_OK(zimp_heap_alloc(h, 1000, &buf, &ref));        /* short blocks are not kept */
    ASSERT_OK(zimp_heap_release(h, &ref));
    ASSERT_EQ(kept_blocks(name), 0);
    ASSERT_OK(zimp_heap_alloc(h, 5000, &buf, &ref));
    ASSERT_OK(zimp_heap_release(h, &ref));
    ASSERT_EQ(kept_blocks(name), 1);
    ASSERT_OK(zimp_heap_alloc(h, 4900, &buf, &again));       /* twenty units as well */
    ASSERT(again.off == ref.off && again.gen != ref.gen);
    size_t len;
    const void *p;
    ASSERT_OK(zimp_heap_resolve(h, &again, &p, &len));
    ASSERT_EQ(len, 4900);
    ASSERT_OK(zimp_heap_release(h, &again));
    ASSERT_OK(zimp_heap_release(h, &again));
    ASSERT_EQ(kept_blocks(name), 1);
    zimp_heap_close(h);
    ASSERT_EQ(kept_blocks(name), 0);
    tpipe_close(&a.kept);
    tpipe_close(&a.go);
    heap_done(name);
    return 0;
}

static void stopped_member_role(void *arg)
{
    struct holder *a = arg;
    zimp_heap *h;
    const void *p;
    ASSERT_OK(zimp_heap_open(a->heap, &h));
    if (a->ref.gen)
        ASSERT_OK(zimp_heap_resolve(h, &a->ref, &p, NULL));
    signal_byte(&a->ready);
    raise(SIGSTOP);
}

/* Opens the heap and exits without closing it: a dead member's record. */
static void open_and_exit_role(void *arg)
{
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(arg, &h));
}

/* The member record of the (only) other process: its index. */
static uint32_t other_member(struct zimp_heap_hdr *hd, pid_t pid)
{
    struct zimp_heap_member *m = (struct zimp_heap_member *)((char *)hd + hd->off_members);
    for (uint32_t i = 0; i < hd->max_members; i++)
        if (ZIMP_OWNER_PID(m[i].owner) == pid && ZIMP_OWNER_STATE(m[i].owner) == ZIMP_M_ACTIVE)
            return i;
    ASSERT_MSG(0, "no member record of pid %d", (int)pid);
    return 0;
}

/*
 * Writes the state of member i dead inside the lock in the middle of freeing
 * block u of n units: its step recorded, the block's new generation gen
 * written, the block marked being freed by it, the lock its own.
 */
/*
 * A member process that joined the heap and stopped (SIGSTOP), and the heap
 * mapped so that a test can write the lock word: lock_holder_take makes it
 * name that member, as if it had stopped inside the lock.
 */
struct lock_holder {
    struct holder a;
    pid_t kid;
    struct segmap sm;
    struct zimp_heap_hdr *hd;
    struct zimp_heap_member *m;
    uint32_t index;
};

static void lock_holder_start(struct lock_holder *l, const char *name)
{
    l->a = (struct holder){ name, { 0 }, { 0 } };
    tpipe_open(&l->a.ready);
    l->kid = spawn(stopped_member_role, &l->a);
    ASSERT_OK(wait_bytes(&l->a.ready, 1, tmo(10000)));
    ASSERT_OK(wait_stopped(l->kid, tmo(10000)));
    l->sm = map_heap_file(name);
    l->hd = l->sm.base;
    l->m = (struct zimp_heap_member *)((char *)l->hd + l->hd->off_members);
    l->index = other_member(l->hd, l->kid);
}

static void lock_holder_take(struct lock_holder *l)
{
    l->hd->lock = ZIMP_HEAP_LOCK_WORD(l->m[l->index].owner, l->index);
}

static void lock_holder_done(struct lock_holder *l)
{
    ASSERT_OK(kill(l->kid, SIGKILL));
    ASSERT_EQ(wait_child(l->kid, tmo(5000)), 128 + SIGKILL);
    munmap(l->sm.base, l->sm.size);
    tpipe_close(&l->a.ready);
}

static void dead_in_free(struct zimp_heap_hdr *hd, uint32_t i, uint64_t u, uint64_t n, uint32_t gen)
{
    struct zimp_heap_member *m = (struct zimp_heap_member *)((char *)hd + hd->off_members);
    struct zimp_heap_desc *d = (struct zimp_heap_desc *)((char *)hd + hd->off_descs);
    d[u].len = (uint32_t)(n * ZIMP_HEAP_UNIT);
    d[u].holders = ZIMP_HEAP_FREEING | i;
    m[i].op_unit = u;
    m[i].op_units = n;
    m[i].op_gen = gen;
    m[i].op = ZIMP_HEAP_OP_FREE;
    d[u].gen = gen;
    hd->lock = ZIMP_HEAP_LOCK_WORD(m[i].owner, i);
}

/*
 * Puts a stopped child in the state "died at step `step`" by writing its
 * record as it would have, kills it, and checks that the next allocation
 * or reap finishes or undoes its work.
 */
static void died_in_lock(int step)
{
    char name[128];
    heap_make(name, sizeof name, "h", 64 << 10, 0);
    zimp_heap *h;
    void *buf;
    ASSERT_OK(zimp_heap_open(name, &h));
    struct holder a = { name, { 0 }, { 0 } };
    if (step != 0)
        ASSERT_OK(zimp_heap_alloc(h, 1000, &buf, &a.ref));   /* the child will hold it last */
    tpipe_open(&a.ready);
    pid_t kid = spawn(stopped_member_role, &a);
    ASSERT_OK(wait_bytes(&a.ready, 1, tmo(10000)));
    ASSERT_OK(wait_stopped(kid, tmo(10000)));
    if (step != 0)
        ASSERT_OK(zimp_heap_release(h, &a.ref));
    struct segmap sm = map_heap_file(name);
    struct zimp_heap_hdr *hd = sm.base;
    struct zimp_heap_member *m = (struct zimp_heap_member *)((char *)hd + hd->off_members);
    struct zimp_heap_desc *d = (struct zimp_heap_desc *)((char *)hd + hd->off_descs);
    zimp_a64 *bits = (zimp_a64 *)((char *)hd + hd->off_bits);
    uint32_t i = other_member(hd, kid);
    uint64_t u = a.ref.off / ZIMP_HEAP_UNIT;
    uint32_t gen = d[u].gen;
    if (step == 0) {                 /* ALLOC: units 100..103 marked, block not handed out */
        m[i].op_unit = 100;
        m[i].op_units = 4;
        m[i].op = ZIMP_HEAP_OP_ALLOC;
        bits[100 / 64] |= 0xfull << (100 % 64);
        hd->lock = ZIMP_HEAP_LOCK_WORD(m[i].owner, i);
    } else if (step == 1) {          /* FREE: new generation written, bits not yet cleared */
        dead_in_free(hd, i, u, 4, gen + 1);
    } else {                         /* won the last reference, died before taking the lock */
        d[u].holders = ZIMP_HEAP_FREEING | i;
    }
    ASSERT_OK(kill(kid, SIGKILL));
    ASSERT_EQ(wait_child(kid, tmo(5000)), 128 + SIGKILL);
    struct zimp_ref r2;
    if (step == 2)
        ASSERT_EQ(zimp_heap_reap(h), 1);
    ASSERT_OK(zimp_heap_alloc(h, 64 << 10, &buf, &r2));   /* the whole heap: nothing left behind */
    ASSERT_OK(zimp_heap_release(h, &r2));
    ASSERT_EQ(hd->lock, 0);
    if (step != 0) {
        ASSERT_EQ(zimp_heap_resolve(h, &a.ref, (const void **)&buf, NULL), -ESTALE);
        ASSERT(d[u].gen != gen);
    }
    ASSERT_MSG(stats(h).members == 1, "step %d: %u members", step, stats(h).members);
    munmap(sm.base, sm.size);
    zimp_heap_close(h);
    heap_done(name);
}

TEST_IMPL(heap_died_in_lock)
{
    for (int step = 0; step < 3; step++)
        died_in_lock(step);
    return 0;
}

/*
 * Inside a small /dev/shm (tests/small_shm.sh mounts an 8 MiB tmpfs over it
 * in a private mount namespace, as Docker's default 64 MiB would be): what
 * does not fit fails at create with -ENOSPC, what fits works, and nothing
 * raises SIGBUS. Skipped on a large /dev/shm.
 */
TEST_IMPL(small_shm)
{
    struct statvfs vfs;
    ASSERT_OK(statvfs("/dev/shm", &vfs));
    uint64_t room = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    if ((uint64_t)vfs.f_blocks * vfs.f_frsize > (64ull << 20)) {
        fprintf(stderr, "small_shm: /dev/shm is large here; tests/small_shm.sh runs this in a small one\n");
        return TEST_SKIP;
    }
    char name[128], big[128], hname[128];
    chan_name(name, sizeof name, "fits");
    chan_name(big, sizeof big, "big");
    chan_name(hname, sizeof hname, "heap");
    struct zimp_config c = { .slots = 16, .slot_size = (uint32_t)(room / 16 * 2) };
    int rc = zimp_create(big, &c);
    ASSERT_MSG(rc == -ENOSPC, "a channel twice the free room: %d (%s)", rc, err_text(rc));
    ASSERT_MSG(strstr(zimp_last_detail(), "free"), "detail: %s", zimp_last_detail());
    struct zimp_heap_config hc = { .size = room * 2 };
    ASSERT_EQ(zimp_heap_create(hname, &hc), -ENOSPC);
    /* a channel that takes most of the room works to its last byte */
    c.slot_size = (uint32_t)(room / 2 / 16);
    create_chan(name, 16, c.slot_size, 1, 1);
    zimp_sender *s;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    ASSERT_OK(zimp_sender_open(name, &s));
    uint8_t *buf = malloc(c.slot_size);
    ASSERT(buf);
    for (int i = 0; i < 32; i++) {
        void *slot;
        ASSERT_OK(zimp_loan(s, c.slot_size, &slot, NS_PER_S));
        memset(slot, i, c.slot_size);
        ASSERT_OK(zimp_publish(s, slot, c.slot_size));
        ASSERT_EQ(zimp_recv(r, buf, c.slot_size, NS_PER_S), (ssize_t)c.slot_size);
        ASSERT(buf[0] == (uint8_t)i && buf[c.slot_size - 1] == (uint8_t)i);
    }
    /* the rest of the room is too small for another such channel */
    ASSERT_EQ(zimp_create(big, &c), -ENOSPC);
    free(buf);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

static int find_name(const char *name, void *arg) { return strcmp(name, arg) == 0; }

static void heap_creator_role(void *arg)
{
    struct zimp_heap_config c = { .size = 1 << 20 };
    ASSERT_OK(zimp_heap_create(arg, &c));
}

TEST_IMPL(inspect_without_joining)
{
    char name[128], chan[128];
    chan_name(name, sizeof name, "h");
    /* made by a process that exits: while its creator runs, a heap counts as in use */
    ASSERT_CHILD_OK(spawn(heap_creator_role, name), tmo(5000));
    struct zimp_heap_stats st;
    ASSERT_OK(zimp_heap_info(name, &st));
    ASSERT(st.size == 1 << 20 && st.members == 0 && st.blocks == 0);
    ASSERT_EQ(zimp_heap_list(find_name, name), 1);
    zimp_heap *h;
    void *buf;
    struct zimp_ref ref;
    ASSERT_OK(zimp_heap_open(name, &h));
    ASSERT_OK(zimp_heap_alloc(h, 5000, &buf, &ref));
    ASSERT_OK(zimp_heap_info(name, &st));
    ASSERT(st.members == 1 && st.blocks == 1 && st.used == 5120);
    ASSERT_EQ(zimp_heap_gc(name), 0);                    /* in use */
    zimp_heap_close(h);
    ASSERT_EQ(zimp_heap_gc(name), 1);                    /* nobody attached: removed */
    ASSERT_EQ(zimp_heap_info(name, &st), -ENOENT);
    ASSERT_EQ(zimp_heap_list(find_name, name), 0);

    /* a channel's members and positions */
    chan_name(chan, sizeof chan, "c");
    create_chan(chan, 8, 64, 2, 4);
    zimp_sender *s;
    zimp_receiver *r1, *r2;
    ASSERT_OK(zimp_receiver_open(chan, &r1));
    ASSERT_OK(zimp_receiver_open(chan, &r2));
    ASSERT_OK(zimp_sender_open(chan, &s));
    for (int i = 0; i < 3; i++)
        ASSERT_OK(zimp_send(s, "m", 1, NS_PER_S));
    char b[8];
    ASSERT_EQ(zimp_recv(r1, b, sizeof b, NS_PER_S), 1);
    struct zimp_info in;
    ASSERT_OK(zimp_info(chan, &in));
    ASSERT_EQ(in.published, 3);
    ASSERT_EQ(in.lag, 3);                                /* r2 read nothing */
    struct zimp_member_info m[8];
    ASSERT_EQ(zimp_members(chan, NULL, 0), 3);
    ASSERT_EQ(zimp_members(chan, m, 8), 3);
    ASSERT(m[0].role == ZIMP_MEMBER_SENDER && m[0].pid == getpid() && m[0].state == ZIMP_MEMBER_LIVE &&
           m[0].position == UINT64_MAX);
    ASSERT(m[1].role == ZIMP_MEMBER_RECEIVER && m[1].index == (uint32_t)zimp_receiver_index(r1) &&
           m[1].position == 1);
    ASSERT(m[2].role == ZIMP_MEMBER_RECEIVER && m[2].position == 0);
    ASSERT_EQ(zimp_members(chan, m, 1), 3);              /* counts all, fills one */
    zimp_sender_close(s);
    zimp_receiver_close(r1);
    zimp_receiver_close(r2);
    ASSERT_OK(zimp_unlink(chan));
    return 0;
}

/* Opens the heap (taking over a dead member's record), allocates one unit, writes 'J'. */
static void joiner_role(void *arg)
{
    struct holder *a = arg;
    zimp_heap *h;
    void *buf;
    ASSERT_OK(zimp_heap_open(a->heap, &h));
    ASSERT_OK(zimp_heap_alloc(h, 256, &buf, &a->ref));
    memset(buf, 'J', 256);
    put_bytes(a->ready.w, &a->ref, sizeof a->ref);
    ASSERT_OK(zimp_heap_release(h, &a->ref));
    zimp_heap_close(h);
}

/*
 * A member dies holding the lock in the middle of a free, and a joiner
 * takes its record over (the table is full) before anybody took the lock
 * over: the dead step must still be finished exactly once, before anybody
 * allocates on the half-done bitmap, and no live block may be touched.
 */
TEST_IMPL(heap_lock_holder_record_taken_over)
{
    char name[128];
    chan_name(name, sizeof name, "h");
    struct zimp_heap_config c = { .size = 64 * 256, .max_members = 2 };
    ASSERT_OK(zimp_heap_create(name, &c));
    struct zimp_heap_stats st;
    zimp_heap *h;
    void *mine;
    struct zimp_ref mref;
    ASSERT_OK(zimp_heap_open(name, &h));
    struct holder d = { name, { 0 }, { 0 } };
    tpipe_open(&d.ready);
    pid_t dead = spawn(stopped_member_role, &d);
    ASSERT_OK(wait_bytes(&d.ready, 1, tmo(10000)));
    ASSERT_OK(wait_stopped(dead, tmo(10000)));
    struct segmap sm = map_heap_file(name);
    struct zimp_heap_hdr *hd = sm.base;
    struct zimp_heap_member *m = (struct zimp_heap_member *)((char *)hd + hd->off_members);
    struct zimp_heap_desc *dsc = (struct zimp_heap_desc *)((char *)hd + hd->off_descs);
    zimp_a64 *bits = (zimp_a64 *)((char *)hd + hd->off_bits);
    uint32_t i = other_member(hd, dead);
    /* it was freeing units 0..7: new generation written, bits half cleared */
    dead_in_free(hd, i, 0, 8, 7);
    bits[0] = 0xf0;                                 /* half cleared */
    ASSERT_OK(kill(dead, SIGKILL));
    ASSERT_EQ(wait_child(dead, tmo(5000)), 128 + SIGKILL);
    /* the joiner takes record i (the only one not a live member's) */
    struct holder j = { name, { 0 }, { 0 } };
    tpipe_open(&j.ready);
    pid_t jp = spawn(joiner_role, &j);
    ASSERT_OK(get_bytes(j.ready.r, &j.ref, sizeof j.ref, tmo(10000)));
    ASSERT_CHILD_OK(jp, tmo(10000));
    /* we allocate after: nothing half done may be handed out twice */
    ASSERT_OK(zimp_heap_alloc(h, 8 * 256, &mine, &mref));
    memset(mine, 'S', 8 * 256);
    ASSERT_EQ(hd->lock, 0);
    ASSERT_EQ(m[i].op, ZIMP_HEAP_OP_NONE);
    ASSERT(dsc[0].gen == 7 || mref.off == 0);          /* the free was finished with its generation */
    st = stats(h);
    ASSERT_MSG(st.used == 8 * 256 && st.blocks == 1, "used %llu in %llu blocks, want one block of 2 KiB",
               (unsigned long long)st.used, (unsigned long long)st.blocks);
    ASSERT(((char *)mine)[0] == 'S' && ((char *)mine)[8 * 256 - 1] == 'S');
    ASSERT_OK(zimp_heap_release(h, &mref));
    ASSERT_OK(zimp_heap_alloc(h, 64 * 256, &mine, &mref));   /* everything free again */
    ASSERT_OK(zimp_heap_release(h, &mref));

    /*
     * Again, but the joiner is caught between taking the record over and
     * taking the lock (its owner word is written in by hand, the joiner a
     * live stopped process): the next allocator takes the lock over and
     * must finish the dead step itself before it allocates.
     */
    struct holder d2 = { name, { 0 }, { 0 } };
    tpipe_open(&d2.ready);
    dead = spawn(stopped_member_role, &d2);
    ASSERT_OK(wait_bytes(&d2.ready, 1, tmo(10000)));
    ASSERT_OK(wait_stopped(dead, tmo(10000)));
    i = other_member(hd, dead);
    dead_in_free(hd, i, 0, 8, 9);
    bits[0] = 0xf0;                                 /* half cleared */
    pid_t joiner = fork();                          /* only its pid matters */
    if (joiner == 0) {
        raise(SIGSTOP);
        _exit(0);
    }
    ASSERT_OK(wait_stopped(joiner, tmo(5000)));
    m[i].owner = ZIMP_OWNER(ZIMP_OWNER_GEN(m[i].owner) + 1, ZIMP_M_ACTIVE, joiner);
    ASSERT_OK(kill(dead, SIGKILL));
    ASSERT_EQ(wait_child(dead, tmo(5000)), 128 + SIGKILL);
    ASSERT_OK(zimp_heap_alloc(h, 4 * 256, &mine, &mref));
    ASSERT_MSG(m[i].op == ZIMP_HEAP_OP_NONE, "the dead holder's step was not finished before allocating");
    ASSERT_EQ(dsc[0].gen, 9);
    ASSERT_EQ(dsc[0].holders == (ZIMP_HEAP_FREEING | i), false);
    st = stats(h);
    ASSERT_MSG(st.used == 4 * 256 && st.blocks == 1, "used %llu in %llu blocks after the takeover",
               (unsigned long long)st.used, (unsigned long long)st.blocks);
    kill(joiner, SIGKILL);
    wait_child(joiner, tmo(5000));
    ASSERT_OK(zimp_heap_release(h, &mref));
    munmap(sm.base, sm.size);
    zimp_heap_close(h);
    heap_done(name);
    return 0;
}

/* A consumer that only resolves and releases frees what a dead producer held. */
TEST_IMPL(heap_reaped_by_any_call)
{
    char name[128];
    heap_make(name, sizeof name, "h", 1 << 20, 0);
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(name, &h));
    struct holder a = { name, { 0 }, { 0 } };
    pid_t kid = held_by_child(h, &a, 300);
    ASSERT_OK(kill(kid, SIGKILL));
    ASSERT_EQ(wait_child(kid, tmo(5000)), 128 + SIGKILL);
    int64_t t0 = now_ns();
    const void *p;
    int rc;
    while ((rc = zimp_heap_resolve(h, &a.ref, &p, NULL)) == 0 && now_ns() - t0 < tmo(2000) * 1000000ll) {
        ASSERT_OK(zimp_heap_release(h, &a.ref));
        sleep_ms(2);
    }
    ASSERT_MSG(rc == -ESTALE, "the killed holder's block is still resolvable: %d", rc);
    zimp_heap_close(h);
    heap_done(name);
    return 0;
}

/* Damaged headers are refused at open, never followed. */
TEST_IMPL(heap_corrupt_header)
{
    char name[128];
    heap_make(name, sizeof name, "h", 64 << 10, 0);
    struct segmap sm = map_heap_file(name);
    struct zimp_heap_hdr *hd = sm.base, keep = *hd;
    uint64_t bad_members[] = { 256 - 63 * 64, 0, 1, keep.off_members + 8, UINT64_MAX };
    zimp_heap *h;
    for (size_t k = 0; k < sizeof bad_members / sizeof *bad_members; k++) {
        hd->off_members = bad_members[k];
        hd->off_descs = 256;
        ASSERT_EQ(zimp_heap_open(name, &h), -EPROTO);
        *hd = keep;
    }
    hd->units = UINT64_MAX / 16;
    ASSERT_EQ(zimp_heap_open(name, &h), -EPROTO);
    *hd = keep;
    hd->max_members = 64;
    ASSERT_EQ(zimp_heap_open(name, &h), -EPROTO);
    *hd = keep;
    hd->major = 9;
    ASSERT_EQ(zimp_heap_open(name, &h), -EPROTO);
    *hd = keep;
    ASSERT_OK(zimp_heap_open(name, &h));
    zimp_heap_close(h);
    munmap(sm.base, sm.size);
    heap_done(name);
    return 0;
}

/* A heap of 1 MiB and a 4-slot channel carrying its large messages. */
static void heap_chan_make(char *heap, char *chan, size_t cap, const char *tag)
{
    char t[32];
    heap_make(heap, cap, tag, 1 << 20, 0);
    snprintf(t, sizeof t, "%sc", tag);
    chan_name(chan, cap, t);
    struct zimp_config c = { .slots = 4, .slot_size = 256, .heap = heap };
    ASSERT_OK(zimp_create(chan, &c));
}

/*
 * A live process holding the heap's lock long (stopped: the lock word names
 * it) holds nobody else up: a large loan with a timeout returns -ETIMEDOUT
 * naming it, a free is deferred (the call returns at once) and done by the
 * next call once the lock is free again; a lock word naming the caller's own
 * handle (it never waits holding the lock) is damage and is taken over.
 */
TEST_IMPL(heap_lock_held_by_stopped_member)
{
    char name[128], chan[128];
    heap_chan_make(name, chan, sizeof name, "lk");
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(chan, &s));
    zimp_heap *h, *h2;
    ASSERT_OK(zimp_heap_open(name, &h));
    ASSERT_OK(zimp_heap_open(name, &h2));
    void *buf;
    struct zimp_ref ref, mine;
    /* h holds the last reference of a block it did not allocate: its release frees */
    ASSERT_OK(zimp_heap_alloc(h2, 1000, &buf, &ref));
    ASSERT_OK(zimp_heap_resolve(h, &ref, (const void **)&buf, NULL));
    ASSERT_OK(zimp_heap_release(h2, &ref));
    zimp_heap_close(h2);
    /* and one it allocated, released and allocated again: kept, no lock needed */
    ASSERT_OK(zimp_heap_alloc(h, 5000, &buf, &mine));
    ASSERT_OK(zimp_heap_release(h, &mine));
    struct lock_holder l;
    lock_holder_start(&l, name);
    struct zimp_heap_hdr *hd = l.hd;
    struct zimp_heap_member *m = l.m;
    lock_holder_take(&l);
    int64_t t0 = now_ns();
    ASSERT_EQ(zimp_loan(s, 4096, &buf, 50 * NS_PER_MS), -ETIMEDOUT);
    ASSERT_MSG(strstr(zimp_last_detail(), "lock"), "detail: %s", zimp_last_detail());
    ASSERT_EQ(zimp_loan(s, 4096, &buf, 0), -EAGAIN);
    ASSERT_OK(zimp_heap_release(h, &ref));             /* deferred, not waited for */
    ASSERT_MSG(now_ns() - t0 < 5000 * NS_PER_MS, "calls waited for the stopped holder");
    ASSERT_EQ(stats(h).blocks, 1);
    struct zimp_ref again;                               /* the kept block needs no lock */
    ASSERT_OK(zimp_heap_alloc(h, 5000, &buf, &again));
    ASSERT_EQ(again.off, mine.off);
    ASSERT(again.gen != mine.gen);
    ASSERT_EQ(zimp_heap_resolve(h, &mine, (const void **)&buf, NULL), -ESTALE);
    ASSERT_EQ(stats(h).blocks, 2);
    ASSERT_OK(zimp_heap_release(h, &again));
    ASSERT_EQ(stats(h).blocks, 1);
    ASSERT_MSG(now_ns() - t0 < 5000 * NS_PER_MS, "calls waited for the stopped holder");
    /*
     * A dead member besides, whose record waits for a reaper (which needs
     * the lock): the calls that reap on their way still hold nobody up.
     */
    ASSERT_CHILD_OK(spawn(open_and_exit_role, name), tmo(5000));
    t0 = now_ns();
    for (int k = 0; k < 3; k++) {
        sleep_ms(12);                                    /* past the reap period */
        ASSERT_EQ(stats(h).blocks, 1);
        ASSERT_EQ(zimp_heap_release(h, &ref), -EINVAL);  /* released: we hold none */
        ASSERT_EQ(zimp_heap_resolve(h, &ref, (const void **)&buf, NULL), -ESTALE);   /* being freed */
        ASSERT_EQ(zimp_loan(s, 4096, &buf, 20 * NS_PER_MS), -ETIMEDOUT);
    }
    ASSERT_MSG(now_ns() - t0 < 3000 * NS_PER_MS, "calls waited for the stopped holder to reap a dead member");
    hd->lock = 0;                                        /* it went on and unlocked */
    ASSERT_OK(zimp_heap_alloc(h, 2000, &buf, &ref));     /* frees the deferred block first */
    ASSERT_EQ(stats(h).blocks, 1);
    ASSERT_OK(zimp_heap_release(h, &ref));
    ASSERT_EQ(stats(h).blocks, 0);
    /* the holder dies: even a poll takes its lock over */
    lock_holder_take(&l);
    ASSERT_OK(kill(l.kid, SIGKILL));
    ASSERT_EQ(wait_child(l.kid, tmo(5000)), 128 + SIGKILL);
    ASSERT_OK(zimp_loan(s, 4096, &buf, 0));
    ASSERT_OK(zimp_unloan(s, buf));
    ASSERT_EQ(hd->lock, 0);
    /* a lock word naming this very handle (ours is the only live record now) */
    zimp_heap_close(h);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(chan));
    ASSERT_OK(zimp_heap_open(name, &h));
    uint32_t k = 0;
    while (k < hd->max_members && ZIMP_OWNER_STATE(m[k].owner) != ZIMP_M_ACTIVE)
        k++;
    ASSERT(k < hd->max_members && ZIMP_OWNER_PID(m[k].owner) == getpid());
    hd->lock = ZIMP_HEAP_LOCK_WORD(m[k].owner, k);
    ASSERT_OK(zimp_heap_alloc(h, 100, &buf, &ref));      /* returns (a hang fails the test) */
    ASSERT_EQ(hd->lock, 0);
    ASSERT_OK(zimp_heap_release(h, &ref));
    munmap(l.sm.base, l.sm.size);
    tpipe_close(&l.a.ready);
    zimp_heap_close(h);
    heap_done(name);
    return 0;
}

/*
 * A handle closed while a stopped process holds the heap's lock cannot free
 * the blocks it keeps: they stay kept (not marked as being freed), so that
 * an allocation that needs their room takes them back once the lock is free,
 * though the closed handle's process lives on.
 */
TEST_IMPL(heap_close_keeping_while_locked)
{
    char name[128];
    heap_make(name, sizeof name, "h", 256 << 10, 0);
    zimp_heap *h, *k;
    ASSERT_OK(zimp_heap_open(name, &h));
    ASSERT_OK(zimp_heap_open(name, &k));
    keep_blocks(k);
    ASSERT_EQ(kept_blocks(name), 4);
    struct lock_holder l;
    lock_holder_start(&l, name);
    lock_holder_take(&l);
    int64_t t0 = now_ns();
    zimp_heap_close(k);
    ASSERT_MSG(now_ns() - t0 < 5000 * NS_PER_MS, "close waited for the stopped holder");
    ASSERT_EQ(kept_blocks(name), 4);
    l.hd->lock = 0;                                        /* it went on and unlocked */
    void *buf;
    struct zimp_ref ref;
    ASSERT_OK(zimp_heap_alloc(h, 256 << 10, &buf, &ref));   /* takes them back */
    ASSERT_EQ(kept_blocks(name), 0);
    ASSERT_OK(zimp_heap_release(h, &ref));
    ASSERT_EQ(stats(h).used, 0);
    lock_holder_done(&l);
    zimp_heap_close(h);
    heap_done(name);
    return 0;
}

/* Opens the heap, keeps four blocks, exits without closing. */
static void keep_and_exit_role(void *arg)
{
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(arg, &h));
    keep_blocks(h);
}

static void join_role(void *arg)
{
    zimp_heap *h;
    ASSERT_EQ(zimp_heap_open(arg, &h), -EUSERS);    /* its lock stays held: gives the record back */
}

/*
 * A joiner that takes a dead keeper's record over and waits for the lock to
 * clean it leaves the record's count of kept units alone meanwhile: a full
 * allocator looks for kept blocks only where a count says there are some.
 */
TEST_IMPL(heap_joiner_keeps_dead_keepers_count)
{
    char name[128];
    chan_name(name, sizeof name, "h");
    struct zimp_heap_config c = { .size = 256 << 10, .max_members = 3 };
    ASSERT_OK(zimp_heap_create(name, &c));
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(name, &h));
    ASSERT_CHILD_OK(spawn(keep_and_exit_role, name), tmo(10000));
    ASSERT_EQ(kept_blocks(name), 4);
    struct lock_holder l;
    lock_holder_start(&l, name);                      /* the third record: all are taken */
    struct zimp_heap_hdr *hd = l.hd;
    struct zimp_heap_member *m = l.m;
    lock_holder_take(&l);
    pid_t joiner = spawn(join_role, name);
    int64_t t0 = now_ns();
    uint32_t d = hd->max_members;
    while (d == hd->max_members && now_ns() - t0 < tmo(5000) * 1000000ll) {
        for (uint32_t k = 0; k < hd->max_members; k++)
            if (ZIMP_OWNER_PID(atomic_load(&m[k].owner)) == joiner)
                d = k;
        if (d == hd->max_members)
            usleep(200);
    }
    ASSERT_MSG(d < hd->max_members, "the joiner never took the dead keeper's record");
    ASSERT_MSG(atomic_load(&m[d].cached) == 4 * (16 << 10) / ZIMP_HEAP_UNIT,
               "the joiner reset the dead keeper's count to %llu before cleaning",
               (unsigned long long)atomic_load(&m[d].cached));
    ASSERT_CHILD_OK(joiner, tmo(5000));
    hd->lock = 0;
    void *buf;
    struct zimp_ref ref;
    ASSERT_OK(zimp_heap_alloc(h, 256 << 10, &buf, &ref));
    ASSERT_OK(zimp_heap_release(h, &ref));
    ASSERT_EQ(kept_blocks(name), 0);
    lock_holder_done(&l);
    zimp_heap_close(h);
    heap_done(name);
    return 0;
}

struct churner { const char *heap; _Atomic int *stop; };

/* Frees and allocates blocks it keeps, now and then a large one that takes kept blocks back. */
static void keep_churn_role(void *arg)
{
    struct churner *a = arg;
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(a->heap, &h));
    struct xrand x = { (uint64_t)getpid() };
    for (long n = 0; !atomic_load(a->stop); n++) {
        size_t len = n % 50 == 49 ? (size_t)600 << 10 : (size_t)(4 + xrand_below(&x, 68)) << 10;
        void *buf;
        struct zimp_ref ref;
        int rc = zimp_heap_alloc(h, len, &buf, &ref);
        ASSERT(rc == 0 || rc == -ENOMEM);
        if (rc == 0)
            ASSERT_OK(zimp_heap_release(h, &ref));
    }
    zimp_heap_close(h);
}

/*
 * Stats read while other processes keep, reuse and take back blocks: the
 * blocks this process holds throughout are always counted (the count once
 * subtracted kept blocks it had not added, down to 0).
 */
TEST_IMPL(heap_stats_while_keeping)
{
    char name[128];
    heap_make(name, sizeof name, "h", 1 << 20, 0);
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(name, &h));
    struct zimp_ref held[4];
    for (int i = 0; i < 4; i++) {
        void *buf;
        ASSERT_OK(zimp_heap_alloc(h, 64 << 10, &buf, &held[i]));
    }
    _Atomic int *stop = mmap(NULL, sizeof *stop, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT(stop != MAP_FAILED);
    atomic_store(stop, 0);
    struct churner c = { name, stop };
    pid_t kids[2] = { spawn(keep_churn_role, &c), spawn(keep_churn_role, &c) };
    int64_t end = now_ns() + 1500 * NS_PER_MS;
    long samples = 0;
    while (now_ns() < end) {
        struct zimp_heap_stats st, info;
        ASSERT_OK(zimp_heap_stats(h, &st));
        ASSERT_OK(zimp_heap_info(name, &info));
        ASSERT_MSG(st.used >= 4 * (64 << 10) && st.blocks >= 4 && st.used <= st.size,
                   "sample %ld: used %llu in %llu blocks", samples, (unsigned long long)st.used,
                   (unsigned long long)st.blocks);
        ASSERT_MSG(info.used >= 4 * (64 << 10) && info.blocks >= 4 && info.used <= info.size,
                   "sample %ld (info): used %llu in %llu blocks", samples, (unsigned long long)info.used,
                   (unsigned long long)info.blocks);
        samples++;
    }
    atomic_store(stop, 1);
    for (int i = 0; i < 2; i++)
        ASSERT_CHILD_OK(kids[i], tmo(10000));
    for (int i = 0; i < 4; i++)
        ASSERT_OK(zimp_heap_release(h, &held[i]));
    zimp_heap_close(h);
    munmap((void *)stop, sizeof *stop);
    heap_done(name);
    return 0;
}

/* The index of the heap's (only) channel record; *m: the member records. */
static uint32_t channel_record(struct zimp_heap_hdr *hd, struct zimp_heap_member **m)
{
    *m = (struct zimp_heap_member *)((char *)hd + hd->off_members);
    uint32_t k = 0;
    while (k < hd->max_members && ZIMP_OWNER_STATE((*m)[k].owner) != ZIMP_HEAP_M_CHANNEL)
        k++;
    ASSERT(k < hd->max_members);
    return k;
}

/*
 * A large-message channel's heap record is retired (marked, then freed if
 * no live member is counted): a member joining while it is marked leaves
 * with -ENOENT instead of using a channel whose blocks are being freed, and
 * a retirement that counts a live member puts the mark back.
 */
TEST_IMPL(heap_channel_retired_while_joining)
{
    char heap[128], chan[128];
    heap_chan_make(heap, chan, sizeof heap, "rt");
    struct segmap sm = map_heap_file(heap);
    struct zimp_heap_member *m;
    uint32_t k = channel_record(sm.base, &m);
    uint64_t owner = m[k].owner;
    m[k].owner = ZIMP_OWNER(ZIMP_OWNER_GEN(owner), ZIMP_HEAP_M_CHANNEL, 1);   /* being retired */
    zimp_sender *s;
    zimp_receiver *r;
    ASSERT_EQ(zimp_sender_open(chan, &s), -ENOENT);
    ASSERT_EQ(zimp_receiver_open(chan, &r), -ENOENT);
    m[k].owner = owner;                                  /* the retirer counted a member */
    ASSERT_OK(zimp_receiver_open(chan, &r));
    ASSERT_OK(zimp_sender_open(chan, &s));
    void *buf;
    ASSERT_OK(zimp_loan(s, 4000, &buf, T_LONG));
    memset(buf, 7, 4000);
    ASSERT_OK(zimp_publish(s, buf, 4000));
    /* removed with live members: the record stays theirs, the last close frees it */
    ASSERT_OK(zimp_unlink(chan));
    ASSERT_EQ(m[k].owner, owner);
    const void *p;
    size_t n;
    ASSERT_OK(zimp_read(r, &p, &n, T_LONG));
    ASSERT_EQ(n, 4000);
    ASSERT_EQ(((const unsigned char *)p)[3999], 7);
    ASSERT_OK(zimp_release(r));
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_EQ(ZIMP_OWNER_STATE(m[k].owner), ZIMP_M_FREE);
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(heap, &h));
    ASSERT_EQ(stats(h).blocks, 0);
    zimp_heap_close(h);
    munmap(sm.base, sm.size);
    heap_done(heap);
    return 0;
}

/*
 * A large-message channel removed while its members use it, then every
 * member killed: nobody closes, so nobody frees the channel's record and the
 * blocks it holds, unless the heap's reaper finds the channel. zimp_unlink
 * renames the file to a hidden name made from the record instead of
 * unlinking it (the channel's name is gone all the same); the reaper of the
 * next heap call maps it, finds no live member, frees the record with its
 * blocks and removes the file.
 */
struct rt_member { const char *chan; int sender; struct tpipe ready; };

static void rt_member_role(void *arg)
{
    struct rt_member *a = arg;
    if (a->sender) {
        zimp_sender *s;
        void *buf;
        ASSERT_OK(zimp_sender_open(a->chan, &s));
        ASSERT_OK(zimp_loan(s, 5000, &buf, T_LONG));        /* a heap block: slots are 256 B */
        memset(buf, 5, 5000);
        ASSERT_OK(zimp_publish(s, buf, 5000));
    } else {
        zimp_receiver *r;
        ASSERT_OK(zimp_receiver_open(a->chan, &r));
    }
    signal_byte(&a->ready);
    for (;;)
        pause();
}

/* A receiver, then a sender that sent a large message, of chan: processes that wait to be killed. */
static void rt_members_start(const char *chan, pid_t *kr, pid_t *ks)
{
    struct rt_member rx = { chan, 0, { 0 } }, tx = { chan, 1, { 0 } };
    tpipe_open(&rx.ready);
    tpipe_open(&tx.ready);
    *kr = spawn(rt_member_role, &rx);
    ASSERT_OK(wait_bytes(&rx.ready, 1, tmo(10000)));
    *ks = spawn(rt_member_role, &tx);
    ASSERT_OK(wait_bytes(&tx.ready, 1, tmo(10000)));
    tpipe_close(&rx.ready);
    tpipe_close(&tx.ready);
}

static void rt_members_kill(pid_t kr, pid_t ks)
{
    ASSERT_OK(kill(kr, SIGKILL));
    ASSERT_OK(kill(ks, SIGKILL));
    ASSERT_EQ(wait_child(kr, tmo(5000)), 128 + SIGKILL);
    ASSERT_EQ(wait_child(ks, tmo(5000)), 128 + SIGKILL);
}

/* Retired channel files of heap `heap` (named after the heap's id). */
static int retired_files(const char *heap)
{
    struct segmap sm = map_heap_file(heap);
    char prefix[64];
    snprintf(prefix, sizeof prefix, ".zimp-retired.%08x.", ((struct zimp_heap_hdr *)sm.base)->id);
    munmap(sm.base, sm.size);
    int n = 0;
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

TEST_IMPL(heap_channel_removed_members_died)
{
    char heap[128], chan[128];
    heap_chan_make(heap, chan, sizeof heap, "rd");
    pid_t kr, ks;
    rt_members_start(chan, &kr, &ks);
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(heap, &h));
    ASSERT_EQ(stats(h).blocks, 1);                         /* the channel holds the message */
    ASSERT_OK(zimp_unlink(chan));                          /* members live: the record stays */
    zimp_sender *s;
    ASSERT_EQ(zimp_sender_open(chan, &s), -ENOENT);        /* the name is gone */
    ASSERT_EQ(retired_files(heap), 1);
    ASSERT_EQ(zimp_heap_reap(h), 0);                       /* still used: nothing to free */
    ASSERT_EQ(stats(h).blocks, 1);
    rt_members_kill(kr, ks);
    zimp_heap_reap(h);                                     /* the dead sender's record, the channel's */
    ASSERT_MSG(stats(h).blocks == 0, "the removed channel's block is still held");
    ASSERT_EQ(stats(h).members, 1);                        /* ours only: the channel's record is free */
    ASSERT_EQ(retired_files(heap), 0);
    zimp_heap_close(h);
    heap_done(heap);
    return 0;
}

/*
 * A large-message channel removed while the heap's member records are all
 * taken: the unlink cannot open the heap to free the channel's record, so
 * the record and its block wait, found through the channel's retired file,
 * for the reaper of any member once one is free again.
 */
TEST_IMPL(heap_channel_removed_records_full)
{
    char heap[128], chan[128], t[32];
    chan_name(heap, sizeof heap, "rf");
    struct zimp_heap_config hc = { .size = 1 << 20, .max_members = 3 };
    ASSERT_OK(zimp_heap_create(heap, &hc));
    snprintf(t, sizeof t, "rfc");
    chan_name(chan, sizeof chan, t);
    struct zimp_config c = { .slots = 4, .slot_size = 256, .heap = heap };
    ASSERT_OK(zimp_create(chan, &c));
    zimp_sender *s;
    void *buf;
    ASSERT_OK(zimp_sender_open(chan, &s));
    ASSERT_OK(zimp_loan(s, 100000, &buf, T_LONG));
    memset(buf, 1, 100000);
    ASSERT_OK(zimp_publish(s, buf, 100000));
    zimp_sender_close(s);
    zimp_heap *a, *b, *h;
    ASSERT_OK(zimp_heap_open(heap, &a));
    ASSERT_OK(zimp_heap_open(heap, &b));                   /* the channel's record + these two: full */
    ASSERT_EQ(stats(a).blocks, 1);
    ASSERT_OK(zimp_unlink(chan));
    ASSERT_EQ(retired_files(heap), 1);                     /* kept for a reaper */
    ASSERT_EQ(stats(a).blocks, 1);
    zimp_heap_close(b);
    ASSERT_EQ(zimp_heap_reap(a), 0);                       /* no dead member, but the retired channel */
    ASSERT_EQ(stats(a).blocks, 0);
    ASSERT_EQ(retired_files(heap), 0);
    zimp_heap_close(a);
    ASSERT_OK(zimp_heap_open(heap, &h));
    ASSERT_EQ(stats(h).members, 1);
    zimp_heap_close(h);
    heap_done(heap);
    return 0;
}

/*
 * A retirer (the unlinker, the last member closing, or a reaper) that dies
 * between marking the channel's record and deciding leaves the mark; the
 * mark names its pid, so the heap's reaper sees it is stale, takes it off
 * and retires the channel itself.
 */
static void exit_role(void *arg) { (void)arg; }

TEST_IMPL(heap_channel_retirer_died)
{
    char heap[128], chan[128];
    heap_chan_make(heap, chan, sizeof heap, "rk");
    pid_t kr, ks;
    rt_members_start(chan, &kr, &ks);
    ASSERT_OK(zimp_unlink(chan));                          /* members live: retired name */
    rt_members_kill(kr, ks);
    pid_t gone = spawn(exit_role, NULL);                   /* a pid that no longer runs */
    ASSERT_CHILD_OK(gone, tmo(5000));
    struct segmap sm = map_heap_file(heap);
    struct zimp_heap_member *m;
    uint32_t k = channel_record(sm.base, &m);
    m[k].owner = ZIMP_OWNER(ZIMP_OWNER_GEN(m[k].owner), ZIMP_HEAP_M_CHANNEL, (uint32_t)gone);   /* its mark */
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(heap, &h));
    zimp_heap_reap(h);
    ASSERT_MSG(stats(h).blocks == 0, "a dead retirer's mark kept the channel's block");
    ASSERT_EQ(ZIMP_OWNER_STATE(m[k].owner), ZIMP_M_FREE);
    ASSERT_EQ(retired_files(heap), 0);
    zimp_heap_close(h);
    munmap(sm.base, sm.size);
    heap_done(heap);
    return 0;
}

/*
 * The program puts its own memfd over the heap's descriptor before the
 * first allocation (which maps the data writable through it): the
 * allocation must fail with -EBADF, not write the block into the program's
 * file, and closing the heap must leave that descriptor open.
 */
TEST_IMPL(heap_fd_taken)
{
    char name[128];
    heap_make(name, sizeof name, "fdt", 1 << 20, 0);
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(name, &h));
    const char *const segment[] = { name, NULL };
    int fd;
    ASSERT_MSG(find_fds(&fd, 1, segment) == 1, "the heap keeps no descriptor");
    int mine = memfd_create("program", MFD_CLOEXEC);
    ASSERT(mine >= 0 && ftruncate(mine, 4 << 20) == 0);
    ASSERT(dup2(mine, fd) == fd);
    void *buf;
    struct zimp_ref ref;
    ASSERT_EQ(zimp_heap_alloc(h, 64, &buf, &ref), -EBADF);
    zimp_heap_close(h);
    ASSERT_MSG(fcntl(fd, F_GETFD) >= 0, "zimp closed the program's descriptor %d", fd);
    close(fd);
    close(mine);
    heap_done(name);
    return 0;
}

/* Size of heap file `name`, or 0. */
static uint64_t heap_file_size(const char *name)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm/zimpheap.%s", name);
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

struct flipper { const char *path; const void *a, *b; size_t n; volatile int *stop; };

/* Writes header a, then b, over the file, in a loop. */
static void flipper_role(void *p)
{
    const struct flipper *f = p;
    int fd = open(f->path, O_WRONLY);
    ASSERT(fd >= 0);
    while (!*f->stop) {
        ASSERT(pwrite(fd, f->a, f->n, 0) == (ssize_t)f->n);
        ASSERT(pwrite(fd, f->b, f->n, 0) == (ssize_t)f->n);
    }
    close(fd);
}

/*
 * An inspector copies a heap's header, records and bitmap in two reads: a
 * header rewritten between them with another geometry of the same file size
 * (1 member against 63, fewer units) pointed the second past the buffer the
 * first sized (an outside review; ASan: heap-buffer-overflow). Two real heaps
 * of equal file size and different layouts give the two headers.
 */
TEST_IMPL(heap_geometry_flipped_while_inspected)
{
    char a[128], b[128];
    chan_name(a, sizeof a, "ga");
    chan_name(b, sizeof b, "gb");
    uint64_t want = 0;
    for (uint64_t size = 4096; size <= (256u << 10) && !want; size += 4096) {
        struct zimp_heap_config ca = { .size = size, .max_members = 1 };
        ASSERT_OK(zimp_heap_create(a, &ca));
        uint64_t sa = heap_file_size(a);
        for (uint64_t sb = size - 4096; sb >= 4096 && sb + (64u << 10) > size && !want; sb -= 256) {
            struct zimp_heap_config cb = { .size = sb, .max_members = 63 };
            ASSERT_OK(zimp_heap_create(b, &cb));
            if (heap_file_size(b) == sa)
                want = sa;
            else
                ASSERT_OK(zimp_heap_unlink(b));
        }
        if (!want)
            ASSERT_OK(zimp_heap_unlink(a));
    }
    ASSERT_MSG(want, "no two heap layouts of the same file size found");
    struct segmap ma = map_heap_file(a), mb = map_heap_file(b);
    struct zimp_heap_hdr ha = *(struct zimp_heap_hdr *)ma.base, hb = *(struct zimp_heap_hdr *)mb.base;
    ASSERT(ha.off_data != hb.off_data);
    hb.id = ha.id;                              /* the same heap, as far as a reader can tell */
    char path[512];
    snprintf(path, sizeof path, "/dev/shm/zimpheap.%s", a);
    volatile int *stop = shared_alloc(sizeof *stop);
    struct flipper f = { path, &ha, &hb, sizeof ha, stop };
    pid_t flipper = spawn(flipper_role, &f);
    struct zimp_heap_stats st;
    for (int i = 0; i < 20000; i++) {
        int rc = zimp_heap_info(a, &st);
        ASSERT_MSG(rc == 0 || rc == -EPROTO, "zimp_heap_info: %d (%s)", rc, err_text(rc));
    }
    *stop = 1;
    ASSERT_CHILD_OK(flipper, 10000);
    shared_free((void *)stop, sizeof *stop);
    munmap(ma.base, ma.size);
    munmap(mb.base, mb.size);
    ASSERT_OK(zimp_heap_unlink(a));
    ASSERT_OK(zimp_heap_unlink(b));
    return 0;
}

/*
 * A member killed while it drops a channel's hold on a block (it won the
 * hold's entry; the block's bit for the channel not gone yet, its record
 * says ZIMP_HEAP_OP_DROP): the reaper finishes the drop, so the block is
 * not lost until the channel is removed.
 */
TEST_IMPL(heap_died_dropping_hold)
{
    char name[128], chan[128];
    heap_make(name, sizeof name, "h", 2 << 20, 0);
    chan_name(chan, sizeof chan, "c");
    struct zimp_config cfg = { .slots = 4, .slot_size = 1024, .heap = name };
    ASSERT_OK(zimp_create(chan, &cfg));
    zimp_receiver *r;
    zimp_sender *s;
    ASSERT_OK(zimp_receiver_open(chan, &r));
    ASSERT_OK(zimp_sender_open(chan, &s));
    void *buf;
    const void *p;
    size_t n;
    ASSERT_OK(zimp_loan(s, 1 << 20, &buf, T_LONG));
    memset(buf, 7, 1 << 20);
    ASSERT_OK(zimp_publish(s, buf, 1 << 20));
    ASSERT_OK(zimp_read(r, &p, &n, T_LONG));
    ASSERT_OK(zimp_release(r));

    struct holder a = { name, { 0 }, { 0 } };
    tpipe_open(&a.ready);
    pid_t kid = spawn(stopped_member_role, &a);
    ASSERT_OK(wait_bytes(&a.ready, 1, tmo(10000)));
    ASSERT_OK(wait_stopped(kid, tmo(10000)));
    struct segmap hm = map_heap_file(name), cm = map_shm_file(ZIMP_SHM_PREFIX, chan);
    struct zimp_heap_hdr *hd = hm.base;
    struct zimp_heap_member *m = (struct zimp_heap_member *)((char *)hd + hd->off_members);
    struct zimp_heap_desc *d = (struct zimp_heap_desc *)((char *)hd + hd->off_descs);
    uint32_t ci = hd->max_members;
    for (uint32_t i = 0; i < hd->max_members; i++)
        if (ZIMP_OWNER_STATE(m[i].owner) == ZIMP_HEAP_M_CHANNEL)
            ci = i;
    ASSERT(ci < hd->max_members);
    uint64_t u = hd->units;
    for (uint64_t k = 0; k < hd->units && u == hd->units; k++)
        if (!(d[k].holders & ZIMP_HEAP_FREEING) && (d[k].holders & (1ull << ci)))
            u = k;
    ASSERT_MSG(u < hd->units, "the channel holds no block");
    /* The child won the hold of position 0, recorded its drop, and died. */
    struct zimp_header *ch = cm.base;
    struct zimp_hold *hold = (struct zimp_hold *)((char *)ch + ch->off_holds);
    ASSERT_EQ(hold[0].pos, 1);
    hold[0].pos = 0;
    uint32_t i = other_member(hd, kid);
    m[i].op_unit = u;
    m[i].op_units = 0;
    m[i].op_gen = (uint64_t)ci << 32 | d[u].gen;
    m[i].op = ZIMP_HEAP_OP_DROP;
    ASSERT_OK(kill(kid, SIGKILL));
    ASSERT_EQ(wait_child(kid, tmo(5000)), 128 + SIGKILL);

    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(name, &h));
    ASSERT_EQ(zimp_heap_reap(h), 1);
    ASSERT_EQ(m[i].op, ZIMP_HEAP_OP_NONE);
    ASSERT_MSG(stats(h).blocks == 0, "%llu blocks left after the dead member's drop was finished",
               (unsigned long long)stats(h).blocks);
    ASSERT_OK(zimp_heap_alloc(h, 2 << 20, &buf, &a.ref));   /* the whole heap */
    ASSERT_OK(zimp_heap_release(h, &a.ref));
    zimp_heap_close(h);
    munmap(hm.base, hm.size);
    munmap(cm.base, cm.size);
    tpipe_close(&a.ready);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(chan));
    heap_done(name);
    return 0;
}

/*
 * A creator killed inside zimp_create of a large-message channel, after it
 * took the channel's heap record and before the channel had a file (the
 * record names its creator until the channel's inode replaces it): the
 * reaper frees the record once the creator is dead, not before.
 */
TEST_IMPL(heap_channel_creator_died)
{
    char name[128];
    heap_make(name, sizeof name, "h", 64 << 10, 0);
    struct holder a = { name, { 0 }, { 0 } };
    tpipe_open(&a.ready);
    pid_t live = spawn(stopped_member_role, &a);           /* a creator still at work */
    ASSERT_OK(wait_bytes(&a.ready, 1, tmo(10000)));
    ASSERT_OK(wait_stopped(live, tmo(10000)));
    pid_t dead = fork();
    ASSERT(dead >= 0);
    if (dead == 0)
        _exit(0);
    ASSERT_EQ(wait_child(dead, tmo(5000)), 0);
    struct segmap sm = map_heap_file(name);
    struct zimp_heap_hdr *hd = sm.base;
    struct zimp_heap_member *m = (struct zimp_heap_member *)((char *)hd + hd->off_members);
    uint32_t rec[2], n = 0;
    for (uint32_t i = 0; i < hd->max_members && n < 2; i++)
        if (ZIMP_OWNER_STATE(m[i].owner) == ZIMP_M_FREE)
            rec[n++] = i;
    ASSERT_EQ(n, 2);
    pid_t creator[2] = { dead, live };
    for (int k = 0; k < 2; k++) {
        uint64_t gen = ZIMP_OWNER_GEN(m[rec[k]].owner) + 1;
        m[rec[k]].owner = ZIMP_OWNER(gen, ZIMP_HEAP_M_CHANNEL, 0);
        m[rec[k]].ident = 0;
        m[rec[k]].ident_of = ZIMP_OWNER(gen, ZIMP_HEAP_M_CHANNEL, (uint32_t)creator[k]);
    }
    /* Inspectors count the live creator's record and its own member, not the dead one's. */
    struct zimp_heap_stats st;
    ASSERT_OK(zimp_heap_info(name, &st));
    ASSERT_MSG(st.members == 2, "zimp_heap_info: %u members (the stopped member, the live creator's record)",
               st.members);
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(name, &h));
    zimp_heap_reap(h);
    ASSERT_MSG(ZIMP_OWNER_STATE(m[rec[0]].owner) == ZIMP_M_FREE, "the dead creator's record is still taken");
    ASSERT_MSG(ZIMP_OWNER_STATE(m[rec[1]].owner) == ZIMP_HEAP_M_CHANNEL, "a live creator's record was freed");
    ASSERT_OK(kill(live, SIGKILL));
    ASSERT_EQ(wait_child(live, tmo(5000)), 128 + SIGKILL);
    zimp_heap_reap(h);
    ASSERT_EQ(ZIMP_OWNER_STATE(m[rec[1]].owner), ZIMP_M_FREE);
    zimp_heap_close(h);
    munmap(sm.base, sm.size);
    tpipe_close(&a.ready);
    heap_done(name);
    return 0;
}
