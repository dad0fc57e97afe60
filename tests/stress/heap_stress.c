/*
 * zimp-heap-stress: randomized trials of the shared heap under kill -9.
 *
 * A trial is drawn from one seed: 2-6 member processes on a heap of
 * 256 KiB-4 MiB, with or without zero-on-free, and a kill rate from none to
 * one every few milliseconds. Each member loops: allocate a block of random
 * size (half of them of one of three lengths, so that freed blocks are kept
 * for reuse and taken back), fill it with a pattern derived from its handle (offset and
 * generation, so the data of any other block, or of this block's earlier
 * life, cannot pass the check), post the handle to a random peer through a
 * mailbox in anonymous shared memory; take handles posted to it, resolve
 * them, check every byte, keep them a while (checking again: a block freed
 * and reused under a holder would show), release. An allocator drops its
 * own reference once the receiver says it resolved, or after a while.
 * The driver kills members at random and starts replacements. Checked:
 *   - every successful resolve and every re-check sees the block's own
 *     pattern (a freed block is never resolved, a held block never freed);
 *   - resolves fail only with -ESTALE (the allocator gave it up or died);
 *   - no call hangs (members stop on their own at the end; the driver
 *     waits with a bound);
 *   - after the last member exits and a reap, nothing is allocated, no block
 *     is kept for a member (a dead member's kept blocks were freed), and the
 *     whole heap can be allocated as one block (no unit leaked, the lock free).
 *
 * Usage: zimp-heap-stress [--seed S | --trials N [--base-seed B]]
 *        ZIMP_SOAK_S=seconds runs trials until that much time has passed.
 */
#include <zimp/zimp.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heap/heap_int.h"              /* to look for kept blocks left behind */
#include <unistd.h>

#define MAX_MEMBERS 6
#define BOXES       4                  /* mailbox slots per receiving member */
#define HOLD        8                  /* references a member keeps at once */

/*
 * A mailbox slot: EMPTY -> CLAIMED (a poster writes the handle) -> POSTED ->
 * TAKEN (the receiver resolves) -> RESOLVED or DONE (it failed) -> EMPTY
 * (the poster, who then drops its reference). A poster may take back a
 * POSTED handle nobody took. A receiver empties boxes whose poster died.
 */
enum box_state { BOX_EMPTY, BOX_CLAIMED, BOX_POSTED, BOX_TAKEN, BOX_RESOLVED, BOX_DONE };

struct box {
    _Atomic int state;
    int from;                          /* poster's member index */
    uint32_t from_inc;                 /* and incarnation */
    struct zimp_ref ref;
    uint32_t len;
};

struct shared {
    char heap[64];
    _Atomic int stop;
    _Atomic uint32_t incarnation[MAX_MEMBERS];
    struct box box[MAX_MEMBERS][BOXES];
    _Atomic uint64_t resolves, stale, allocs, checks;
    _Atomic int violation;
    char why[256];
};

static struct shared *sh;

struct rng { uint64_t s; };
static uint64_t next(struct rng *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    uint64_t z = r->s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t below(struct rng *r, uint64_t n) { return n ? next(r) % n : 0; }

static uint8_t pattern(const struct zimp_ref *ref, size_t i)
{
    uint64_t k = ref->off * 0x9e3779b97f4a7c15ull ^ ref->gen;
    return (uint8_t)(k >> (8 * (i % 8))) ^ (uint8_t)(i >> 6);
}

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...)
{
    int expect = 0;
    if (atomic_compare_exchange_strong(&sh->violation, &expect, 1)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh->why, sizeof sh->why, fmt, ap);
        va_end(ap);
    }
}

static bool check(const struct zimp_ref *ref, const void *p, size_t len, const char *when)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        if (b[i] != pattern(ref, i)) {
            violation("%s: block at %llu gen %u byte %zu of %zu is 0x%02x, not 0x%02x", when,
                      (unsigned long long)ref->off, ref->gen, i, len, b[i], pattern(ref, i));
            return false;
        }
    return true;
}

struct held { struct zimp_ref ref; const void *p; size_t len; };
struct mine { struct zimp_ref ref; int to, slot; uint32_t age; bool live; };

/* Takes what was posted to member `me`: resolve, check, keep. */
static void take_posts(zimp_heap *h, int me, struct held *held, int *nheld)
{
    for (int k = 0; k < BOXES && *nheld < HOLD; k++) {
        struct box *b = &sh->box[me][k];
        int st = atomic_load(&b->state);
        if ((st == BOX_RESOLVED || st == BOX_DONE) && atomic_load(&sh->incarnation[b->from]) != b->from_inc)
            atomic_compare_exchange_strong(&b->state, &st, BOX_EMPTY);     /* poster died */
        int expect = BOX_POSTED;
        if (!atomic_compare_exchange_strong(&b->state, &expect, BOX_TAKEN))
            continue;
        const void *p;
        size_t len;
        int rc = zimp_heap_resolve(h, &b->ref, &p, &len);
        atomic_fetch_add(&sh->resolves, 1);
        if (rc == -ESTALE) {
            atomic_fetch_add(&sh->stale, 1);
        } else if (rc != 0) {
            violation("resolve: %d (%s)", rc, zimp_last_detail());
        } else {
            if (len != b->len)
                violation("resolve: length %zu, posted %u", len, b->len);
            check(&b->ref, p, len, "resolve");
            held[(*nheld)++] = (struct held){ b->ref, p, len };
        }
        atomic_store(&b->state, rc == 0 ? BOX_RESOLVED : BOX_DONE);
    }
}

static void member(int me, uint64_t seed)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct rng r = { seed };
    zimp_heap *h;
    int rc = zimp_heap_open(sh->heap, &h);
    if (rc != 0) {
        violation("member %d: open: %d (%s)", me, rc, zimp_last_detail());
        _exit(1);
    }
    struct held held[HOLD];
    struct mine mine[HOLD];
    int nheld = 0;
    memset(mine, 0, sizeof mine);
    /* boxes addressed to us from an earlier incarnation: start empty */
    for (int k = 0; k < BOXES; k++)
        atomic_store(&sh->box[me][k].state, BOX_EMPTY);
    while (!atomic_load(&sh->stop) && !atomic_load(&sh->violation)) {
        /* allocate and post */
        int slot = -1;
        for (int i = 0; i < HOLD; i++)
            if (!mine[i].live)
                slot = i;
        int peer = (int)below(&r, MAX_MEMBERS);
        if (slot >= 0 && peer != me) {
            int bi = (int)below(&r, BOXES);
            struct box *b = &sh->box[peer][bi];
            /* Half of the lengths from three, so that blocks are kept and reused (docs/heap.md). */
            static const size_t usual[] = { 5000, 20000, 70000 };
            size_t len = below(&r, 2) ? usual[below(&r, 3)] : 1 + below(&r, below(&r, 4) ? 3000 : 200000);
            void *buf;
            struct zimp_ref ref;
            rc = zimp_heap_alloc(h, len, &buf, &ref);
            if (rc == 0) {
                atomic_fetch_add(&sh->allocs, 1);
                for (size_t i = 0; i < len; i++)
                    ((uint8_t *)buf)[i] = pattern(&ref, i);
                mine[slot] = (struct mine){ ref, -1, -1, 0, true };
                int expect = BOX_EMPTY;
                if (atomic_compare_exchange_strong(&b->state, &expect, BOX_CLAIMED)) {
                    b->ref = ref;
                    b->len = (uint32_t)len;
                    b->from = me;
                    b->from_inc = atomic_load(&sh->incarnation[me]);
                    atomic_store(&b->state, BOX_POSTED);
                    mine[slot].to = peer;
                    mine[slot].slot = bi;
                }
            } else if (rc != -ENOMEM) {
                violation("alloc: %d (%s)", rc, zimp_last_detail());
            }
        }
        take_posts(h, me, held, &nheld);
        /* our allocations: drop once resolved (or given up) or old */
        for (int i = 0; i < HOLD; i++) {
            if (!mine[i].live)
                continue;
            mine[i].age++;
            _Atomic int *state = mine[i].to >= 0 ? &sh->box[mine[i].to][mine[i].slot].state : NULL;
            int st = state ? atomic_load(state) : BOX_DONE;
            if (st == BOX_TAKEN || (st == BOX_POSTED && mine[i].age < 50))
                continue;               /* being resolved, or give it time */
            if (st == BOX_POSTED) {     /* nobody came: take the post back if we can */
                int expect = BOX_POSTED;
                if (!atomic_compare_exchange_strong(state, &expect, BOX_EMPTY))
                    continue;
            } else if (state && (st == BOX_RESOLVED || st == BOX_DONE)) {
                atomic_compare_exchange_strong(state, &st, BOX_EMPTY);
            }                           /* else: the receiver died and its boxes were reset */
            if ((rc = zimp_heap_release(h, &mine[i].ref)) != 0)
                violation("release own: %d (%s)", rc, zimp_last_detail());
            mine[i].live = false;
        }
        /* what we hold: re-check, release some */
        for (int i = 0; i < nheld; i++) {
            atomic_fetch_add(&sh->checks, 1);
            check(&held[i].ref, held[i].p, held[i].len, "held");
            if (below(&r, 3) == 0) {
                if ((rc = zimp_heap_release(h, &held[i].ref)) != 0)
                    violation("release: %d (%s)", rc, zimp_last_detail());
                held[i--] = held[--nheld];
            }
        }
    }
    zimp_heap_close(h);
    _exit(0);
}

static pid_t start(int me, uint64_t seed)
{
    atomic_fetch_add(&sh->incarnation[me], 1);
    pid_t p = fork();
    if (p == 0)
        member(me, seed);
    return p;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits for pid up to ms: its status, or -1 after killing it. */
/* Blocks of heap `name` kept for a member (holders ZIMP_HEAP_CACHED | member); -1 if unreadable. */
static long kept_blocks(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "/dev/shm/" ZIMP_HEAP_PREFIX "%s", name);
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    void *base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED)
        return -1;
    const struct zimp_heap_hdr *hd = base;
    const struct zimp_heap_desc *d = (const void *)((const char *)base + hd->off_descs);
    long n = 0;
    for (uint64_t u = 0; u < hd->units; u++)
        n += ZIMP_HEAP_IS_CACHED(atomic_load_explicit(&d[u].holders, memory_order_relaxed));
    munmap(base, (size_t)st.st_size);
    return n;
}

static int reap_child(pid_t pid, long ms)
{
    int st;
    for (int64_t end = now_ns() + ms * 1000000ll; now_ns() < end;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return st;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static int trial(uint64_t seed)
{
    struct rng r = { seed };
    memset(sh, 0, sizeof *sh);
    snprintf(sh->heap, sizeof sh->heap, "hstress-%d", (int)getpid());
    int members = 2 + (int)below(&r, MAX_MEMBERS - 1);
    bool zero = below(&r, 3) == 0;
    struct zimp_heap_config c = { .size = (256u << 10) << below(&r, 5), .flags = zero ? ZIMP_ZERO_ON_RELEASE : 0 };
    int64_t kill_every_us = below(&r, 4) == 0 ? 0 : 2000 + (int64_t)below(&r, 50000);
    double secs = 0.3 + (double)below(&r, 700) / 1000.0;
    zimp_heap_unlink(sh->heap);
    int rc = zimp_heap_create(sh->heap, &c);
    if (rc != 0) {
        fprintf(stderr, "seed %016" PRIx64 ": create: %s\n", seed, zimp_last_detail());
        return 1;
    }
    pid_t pids[MAX_MEMBERS];
    for (int i = 0; i < members; i++)
        pids[i] = start(i, next(&r));
    int kills = 0, bad = 0;
    int64_t end = now_ns() + (int64_t)(secs * 1e9), next_kill = now_ns() + kill_every_us * 1000;
    while (now_ns() < end && !atomic_load(&sh->violation)) {
        struct timespec ts = { 0, 200000 };
        nanosleep(&ts, NULL);
        if (kill_every_us && now_ns() >= next_kill) {
            int v = (int)below(&r, (uint64_t)members);
            kill(pids[v], SIGKILL);
            waitpid(pids[v], NULL, 0);
            pids[v] = start(v, next(&r));
            kills++;
            next_kill = now_ns() + (int64_t)below(&r, (uint64_t)kill_every_us * 2) * 1000;
        }
        for (int i = 0; i < members; i++) {     /* nobody dies unless we kill it */
            int st;
            if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
                violation("member %d exited early: status 0x%x", i, st);
                pids[i] = start(i, next(&r));
            }
        }
    }
    atomic_store(&sh->stop, 1);
    for (int i = 0; i < members; i++) {
        int st = reap_child(pids[i], 10000);
        if (st != 0 && !atomic_load(&sh->violation))
            violation("member %d: %s 0x%x at the end", i, st < 0 ? "hung, killed" : "status", st);
    }
    zimp_heap *h;
    if ((rc = zimp_heap_open(sh->heap, &h)) != 0) {
        violation("final open: %d (%s)", rc, zimp_last_detail());
    } else {
        zimp_heap_reap(h);
        struct zimp_heap_stats st;
        zimp_heap_stats(h, &st);
        if (!atomic_load(&sh->violation) && (st.used || st.blocks || st.members != 1))
            violation("after every member exited: %llu bytes in %llu blocks, %u members",
                      (unsigned long long)st.used, (unsigned long long)st.blocks, st.members);
        long kept = kept_blocks(sh->heap);
        if (!atomic_load(&sh->violation) && kept != 0)
            violation("after every member exited: %ld blocks still kept for a member", kept);
        void *buf;
        struct zimp_ref ref;
        if (!atomic_load(&sh->violation) && (rc = zimp_heap_alloc(h, st.size, &buf, &ref)) != 0)
            violation("whole-heap allocation at the end: %d (%s)", rc, zimp_last_detail());
        else if (rc == 0)
            zimp_heap_release(h, &ref);
        zimp_heap_close(h);
    }
    zimp_heap_unlink(sh->heap);
    bad = atomic_load(&sh->violation);
    printf("seed %016" PRIx64 ": %d members, %llu KiB%s, %d kills, %llu allocs, %llu resolves (%llu stale), "
           "%llu checks: %s%s\n", seed, members, (unsigned long long)(c.size >> 10), zero ? " zeroed" : "",
           kills, (unsigned long long)sh->allocs, (unsigned long long)sh->resolves,
           (unsigned long long)sh->stale, (unsigned long long)sh->checks, bad ? "FAIL: " : "ok",
           bad ? sh->why : "");
    return bad;
}

int main(int argc, char **argv)
{
    uint64_t seed = 0, base = 0;
    long trials = 8;
    bool one = false;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 16), one = true;
        else if (!strcmp(argv[i], "--trials"))
            trials = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--base-seed"))
            base = strtoull(argv[i + 1], NULL, 16);
    }
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (one)
        return trial(seed);
    if (!base) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        base = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    }
    const char *soak = getenv("ZIMP_SOAK_S");
    int64_t until = soak ? now_ns() + (int64_t)(atof(soak) * 1e9) : 0;
    int failed = 0;
    for (long t = 0; soak ? now_ns() < until : t < trials; t++) {
        struct rng r = { base + (uint64_t)t };
        failed += trial(next(&r)) != 0;
    }
    printf("%d failed\n", failed);
    return failed != 0;
}
