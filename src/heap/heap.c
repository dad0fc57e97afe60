/*
 * The shared heap: blocks written in place, named across processes by
 * handles, freed when the last reference in any live process goes.
 *
 * References are counted twice: per process in a private table (how many
 * times this process resolved or allocated a block), and across processes
 * by one bit per member in the block's `holders` word. A process that dies
 * loses its private counts with it, so clearing its bits is all the
 * cleaning a death needs; the last bit to go frees the block. Generations
 * make old handles fail: a block's generation changes before its units can
 * be allocated again, and a resolver re-checks it after taking its bit.
 *
 * Runs of units are found (next fit) and marked in the bitmap under one
 * lock, held for a few hundred nanoseconds and never across a wait. Its
 * word names the holder's membership; a waiter that finds the holder dead
 * takes the lock over and finishes or undoes the holder's recorded
 * operation (repair), which is why every bitmap change is recorded first.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "heap/heap_int.h"
#include "trace/trace_hook.h"

struct hold {                  /* private reference count of one block */
    uint64_t key;              /* unit + 1; 0: empty */
    uint64_t count;
    bool ours;                 /* allocated by this handle: kept for reuse when it frees it */
};

/* The blocks a handle keeps for its next allocations of their lengths (see cache_put). */
#define CACHE_MAX 8
#define RECENT    4            /* lengths of the last allocations: what is worth keeping */
#define CACHE_MIN_UNITS 16     /* shorter blocks (< 4 KiB) are not kept (see cache_put) */
struct cached {
    uint64_t unit, units;
};
#define FREE_WAIT_NS 1000000ull    /* a free waits this long for the lock, then is deferred */
#define CLOSE_WAIT_NS 100000000ull /* a close waits this long to free deferred blocks */
#define JOIN_WAIT_NS  100000000ull /* an open taking a dead member's record waits this long to clean it */
#define REAP_WAIT_NS  FREE_WAIT_NS /* the reaping inside other calls waits this long, then leaves it */

struct zimp_heap {
    int fd;
    struct zimp_fdid fd_id;    /* the program may close or dup2 over fd (zimp__fd_is) */
    unsigned fork_gen;
    const char *base;          /* whole segment, read-only but for the metadata */
    char *rw;                  /* writable view of the data, mapped at first need */
    uint64_t size;
    struct zimp_heap_hdr *hdr;
    struct zimp_heap_member *members;
    struct zimp_heap_desc *descs;
    zimp_a64 *bits;
    uint64_t units;
    uint32_t max_members, flags, id, index;
    uint64_t owner, bit;
    uint64_t last_reap;
    struct zimp_peer *peers;   /* liveness cache per member record */
    struct hold *holds;
    size_t cap, n;
    struct cached cache[CACHE_MAX];  /* blocks we keep (ZIMP_HEAP_CACHED | index), oldest first */
    int ncache;
    int cache_misses;          /* frees that found no room since the last reuse or eviction */
    uint64_t recent[RECENT];   /* units asked for by the last allocations */
    unsigned nrecent;
    uint64_t *deferred;        /* units of blocks we marked FREEING while the lock was held long */
    struct zimp_chan_hint *chans;  /* per channel record: its mapping, for H5 */
    int chans_missed, chans_err;   /* H5's last pass: channels it could not look at, and why */
    uint32_t own_chan;             /* the channel record this handle sends on, or max_members */
    size_t ndeferred, capdeferred;
    bool copied;               /* base is a private copy of the metadata (inspection) */
};

#define CHECK_HEAP(h)                                    \
    do {                                                 \
        if (!(h))                                        \
            return -EINVAL;                              \
        if (zimp__inherited((h)->fork_gen))              \
            return -EBADF;                               \
    } while (0)

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static uint64_t units_for(uint64_t len) { return (len + ZIMP_HEAP_UNIT - 1) / ZIMP_HEAP_UNIT; }
static const char *data_ro(zimp_heap *h) { return h->base + h->hdr->off_data; }

/* ---- private reference counts: open addressing, linear probing ---- */

static size_t hold_slot(const zimp_heap *h, uint64_t unit)
{
    size_t i = (size_t)((unit + 1) * 0x9e3779b97f4a7c15ull) & (h->cap - 1);
    while (h->holds[i].key != 0 && h->holds[i].key != unit + 1)
        i = (i + 1) & (h->cap - 1);
    return i;
}

static uint64_t hold_count(const zimp_heap *h, uint64_t unit)
{
    return h->cap ? h->holds[hold_slot(h, unit)].count : 0;
}

/* Room for one more entry (called before anything shared changes). */
static int hold_reserve(zimp_heap *h)
{
    if (2 * (h->n + 1) <= h->cap)
        return 0;
    size_t cap = h->cap ? 2 * h->cap : 64;
    struct hold *old = h->holds, *nh = calloc(cap, sizeof *nh);
    if (!nh)
        return zimp__fail(-ENOMEM, "out of memory for the reference table");
    size_t oldcap = h->cap;
    h->holds = nh;
    h->cap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].key)
            h->holds[hold_slot(h, old[i].key - 1)] = old[i];
    free(old);
    return 0;
}

static void hold_add(zimp_heap *h, uint64_t unit, bool ours)
{
    struct hold *e = &h->holds[hold_slot(h, unit)];
    if (!e->key) {
        e->key = unit + 1;
        e->ours = ours;
        h->n++;
    }
    e->count++;
}

/* Drops one count; true when it was the last (the entry is removed; *ours: its flag). */
static bool hold_drop(zimp_heap *h, uint64_t unit, bool *ours)
{
    size_t i = hold_slot(h, unit);
    *ours = h->holds[i].ours;
    if (--h->holds[i].count > 0)
        return false;
    /* Backward-shift deletion keeps every probe sequence unbroken. */
    size_t mask = h->cap - 1, j = i;
    h->holds[i] = (struct hold){ 0, 0, false };
    for (;;) {
        j = (j + 1) & mask;
        if (!h->holds[j].key)
            break;
        size_t home = (size_t)(h->holds[j].key * 0x9e3779b97f4a7c15ull) & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            h->holds[i] = h->holds[j];
            h->holds[j] = (struct hold){ 0, 0, false };
            i = j;
        }
    }
    h->n--;
    return true;
}

/* ---- create ---- */

struct heap_init {
    uint64_t units, off_members, off_descs, off_bits, off_data, size;
    uint32_t max_members, flags, mode;
    uint32_t id;                 /* out: the id heap_init chose */
};

/* The offsets and size of a heap of `units` units and `max_members` records (in range). */
static void heap_layout(uint64_t units, uint32_t max_members, struct heap_init *hi)
{
    long page = sysconf(_SC_PAGESIZE);
    hi->units = units;
    hi->max_members = max_members;
    hi->off_members = round_up(sizeof(struct zimp_heap_hdr), 64);
    hi->off_descs = hi->off_members + (uint64_t)max_members * sizeof(struct zimp_heap_member);
    hi->off_bits = hi->off_descs + units * sizeof(struct zimp_heap_desc);
    hi->off_data = round_up(hi->off_bits + round_up(units, 64) / 8, (uint64_t)page);
    hi->size = hi->off_data + units * ZIMP_HEAP_UNIT;
}

static void heap_init(void *base, uint64_t ino, void *ctx)
{
    struct heap_init *hi = ctx;
    struct zimp_heap_hdr *hd = base;
    uint32_t id = 0;
    if (getrandom(&id, sizeof id, GRND_NONBLOCK) != (ssize_t)sizeof id)
        id = (uint32_t)(zimp__now_ns() ^ (uint64_t)getpid());
    hd->magic = ZIMP_HEAP_MAGIC;
    hd->major = ZIMP_HEAP_MAJOR;
    hd->minor = ZIMP_HEAP_MINOR;
    hd->segment_size = hi->size;
    hd->units = hi->units;
    hd->off_members = hi->off_members;
    hd->off_descs = hi->off_descs;
    hd->off_bits = hi->off_bits;
    hd->off_data = hi->off_data;
    hd->max_members = hi->max_members;
    hd->flags = hi->flags;
    hd->id = id ? id : 1;
    hi->id = hd->id;
    hd->mode = hi->mode;
    hd->creator_pid = (int32_t)getpid();
    hd->creator_ident = zimp__self_ident();
    struct zimp_heap_desc *d = (struct zimp_heap_desc *)((char *)base + hi->off_descs);
    for (uint64_t u = 0; u < hi->units; u++)
        zimp_store_relaxed(&d[u].gen, 1);      /* 0 never names a block */
    /* Pairs with the acquire of `ready` when the segment is opened. */
    zimp_store_release(&hd->ready, ZIMP_HEAP_READY);
}

ZIMP_API int zimp_heap_create(const char *name, const struct zimp_heap_config *cfg)
{
    char path[512];
    struct zimp_heap_config c = { 0 };
    int r;
    zimp__clear_detail();
    if ((r = zimp__shm_path(ZIMP_HEAP_PREFIX, "heap", name, path, sizeof path)) != 0)
        return r;
    if (cfg)
        c = *cfg;
    if (c.size > ZIMP_HEAP_SIZE_MAX)
        return zimp__fail(-EINVAL, "heap size %llu exceeds %llu", (unsigned long long)c.size,
                          (unsigned long long)ZIMP_HEAP_SIZE_MAX);
    if (c.max_members > ZIMP_HEAP_MEMBERS_MAX)
        return zimp__fail(-EINVAL, "max_members %u exceeds %u", c.max_members, ZIMP_HEAP_MEMBERS_MAX);
    if (c.mode & ~0777u)
        return zimp__fail(-EINVAL, "mode 0%o has bits beyond 0777", c.mode);
    if (c.flags & ~ZIMP_ZERO_ON_RELEASE)
        return zimp__fail(-EINVAL, "unknown flags 0x%x", c.flags);
    struct heap_init hi = { 0 };
    heap_layout(units_for(c.size ? c.size : ZIMP_HEAP_DEFAULT_SIZE),
                c.max_members ? c.max_members : ZIMP_HEAP_DEFAULT_MEMBERS, &hi);
    hi.flags = c.flags;
    hi.mode = c.mode ? c.mode : 0600;
    r = zimp__segment_create(path, hi.size, hi.mode, heap_init, &hi);
    if (r == -EEXIST)
        return zimp__fail(-EEXIST, "heap '%s' exists", name);
    if (r == 0)
        ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_heap(ZIMP_EV_CREATE, hi.id, name, 0, 0, hi.units * ZIMP_HEAP_UNIT, 0));
    return r;
}

ZIMP_API int zimp_heap_unlink(const char *name)
{
    char path[512];
    int r;
    zimp__clear_detail();
    if ((r = zimp__shm_path(ZIMP_HEAP_PREFIX, "heap", name, path, sizeof path)) != 0)
        return r;
    if (unlink(path) != 0)
        return zimp__fail(-errno, "cannot unlink heap '%s': %s", name, strerror(errno));
    ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_heap(ZIMP_EV_UNLINK, 0, name, 0, 0, 0, 0));
    return 0;
}

/* ---- open / close ---- */

/* Checks a mapped header against the file; everything later trusts these fields. */
static int validate(const struct zimp_heap_hdr *hd, uint64_t size)
{
    if (zimp_load_acquire(&((struct zimp_heap_hdr *)hd)->ready) != ZIMP_HEAP_READY ||
        hd->magic != ZIMP_HEAP_MAGIC)
        return zimp__fail(-EPROTO, "not a zimp heap (bad magic or not ready)");
    if (hd->major != ZIMP_HEAP_MAJOR)
        return zimp__fail(-EPROTO, "heap layout %u.%u; this library reads %u.x", hd->major, hd->minor,
                          ZIMP_HEAP_MAJOR);
    /* Every offset is recomputed from the two sizes, which are bounded first:
     * no sum of shared values can wrap. */
    uint64_t units = hd->units;
    uint32_t members = hd->max_members;
    struct heap_init want;
    bool ok = units > 0 && units <= units_for(ZIMP_HEAP_SIZE_MAX) && members >= 1 &&
              members <= ZIMP_HEAP_MEMBERS_MAX;
    if (ok) {
        heap_layout(units, members, &want);
        ok = hd->segment_size == size && want.size == size && hd->off_members == want.off_members &&
             hd->off_descs == want.off_descs && hd->off_bits == want.off_bits &&
             hd->off_data == want.off_data && (hd->flags & ~ZIMP_ZERO_ON_RELEASE) == 0;
    }
    return ok ? 0 : zimp__fail(-EPROTO, "heap header fields do not fit a %llu-byte segment",
                               (unsigned long long)size);
}

/* The metadata's parts, at base (a mapping of the segment, or a copy). */
static void point_into(zimp_heap *h, const void *b)
{
    h->members = (struct zimp_heap_member *)((char *)b + h->hdr->off_members);
    h->descs = (struct zimp_heap_desc *)((char *)b + h->hdr->off_descs);
    h->bits = (zimp_a64 *)((char *)b + h->hdr->off_bits);
    h->units = h->hdr->units;
    h->max_members = h->hdr->max_members;
    h->own_chan = h->max_members;            /* none */
    h->flags = h->hdr->flags;
    h->id = h->hdr->id;
}

/* Maps a heap segment; the metadata writable for members, all read-only for inspection. */
static int map_heap(zimp_heap *h, int fd, uint64_t size, bool member)
{
    if (size < sizeof(struct zimp_heap_hdr) || size > ZIMP_HEAP_SIZE_MAX * 2)
        return zimp__fail(-EPROTO, "segment size %llu is not a zimp heap's", (unsigned long long)size);
    void *b = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (b == MAP_FAILED)
        return zimp__fail(-errno, "mmap: %s", strerror(errno));
    h->base = b;
    h->size = size;
    h->hdr = b;
    int r = validate(h->hdr, size);
    if (r != 0)
        return r;
    /* Metadata is writable by every member; the data only through h->rw. */
    if (member && mprotect(b, h->hdr->off_data, PROT_READ | PROT_WRITE) != 0)
        return zimp__fail(-errno, "mprotect: %s", strerror(errno));
    point_into(h, b);
    return 0;
}

/*
 * An inspector's copy of a heap's header, member records and bitmap, read
 * with pread: whoever may write the file may cut it short while we look,
 * and a mapping would answer with SIGBUS. The descriptors (16 bytes a unit,
 * most of the metadata) stay in the file: count_copied reads those it needs.
 */
static int copy_heap(zimp_heap *h, int fd, uint64_t size)
{
    struct zimp_heap_hdr hd;
    if (size < sizeof hd || size > ZIMP_HEAP_SIZE_MAX * 2 || !zimp__read_all(fd, &hd, sizeof hd, 0))
        return zimp__fail(-EPROTO, "segment size %llu is not a zimp heap's", (unsigned long long)size);
    int r = validate(&hd, size);
    if (r != 0)
        return r;
    /* Laid out as in the file; the descriptors' pages are never touched. */
    void *b = calloc(1, hd.off_data);
    if (!b)
        return zimp__fail(-ENOMEM, "out of memory for a copy of the heap's metadata");
    h->base = b;
    h->size = hd.off_data;
    h->hdr = b;
    h->copied = true;
    if (!zimp__read_all(fd, b, hd.off_descs, 0) ||
        !zimp__read_all(fd, (char *)b + hd.off_bits, hd.off_data - hd.off_bits, (off_t)hd.off_bits))
        return zimp__fail(-EPROTO, "heap segment cut short while it was read");
    /* The geometry is the one validated, which sized the buffer: a header
     * rewritten meanwhile with another geometry of the same file size would
     * point past it (an outside review's ASan run). Its records are then
     * nonsense, but nonsense within bounds. */
    memcpy(b, &hd, sizeof hd);
    point_into(h, b);
    return 0;
}


/* The writable view of the data (allocators, and freers that zero). */
static int map_rw(zimp_heap *h)
{
    if (h->rw)
        return 0;
    if (!zimp__fd_is(h->fd, &h->fd_id))
        return zimp__fail(-EBADF, "heap %08x: its descriptor %d was closed or replaced by the program "
                          "(needed to map the data writable at the first allocation)", h->id, h->fd);
    void *p = mmap(NULL, h->units * ZIMP_HEAP_UNIT, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd,
                   (off_t)h->hdr->off_data);
    if (p == MAP_FAILED)
        return zimp__fail(-errno, "mmap of the heap data: %s", strerror(errno));
    h->rw = p;
    return 0;
}

static void heap_free(zimp_heap *h)
{
    if (h->rw)
        munmap(h->rw, h->units * ZIMP_HEAP_UNIT);
    if (h->base)
        munmap((void *)h->base, h->size);
    zimp__fd_close(&h->fd, &h->fd_id);
    for (uint32_t i = 0; h->peers && i < h->max_members; i++)
        zimp__peer_reset(&h->peers[i]);
    free(h->peers);
    free(h->holds);
    free(h->deferred);
    zimp__channels_forget(h->chans, h->max_members);
    free(h);
}

static bool member_live(zimp_heap *h, uint32_t i, uint64_t o)
{
    struct zimp_heap_member *m = &h->members[i];
    return zimp__peer_alive(&h->peers[i], o, zimp__ident(&m->ident, &m->ident_of, o));
}

static void take_record(zimp_heap *h, uint32_t i, uint64_t mine)
{
    struct zimp_heap_member *m = &h->members[i];
    zimp_store_relaxed(&m->ident, zimp__self_ident());
    zimp_store_release(&m->ident_of, mine);
    h->owner = mine;
    h->index = i;
    h->bit = 1ull << i;
}

static void lock(zimp_heap *h);
static int lock_until(zimp_heap *h, uint64_t deadline);
static void unlock(zimp_heap *h);
static void repair(zimp_heap *h, uint32_t i);
static void clean_member(zimp_heap *h, uint32_t i, uint64_t o);

/*
 * Takes a member record: a free one, else the record of a dead member,
 * whose references are then dropped (we hold none yet, so every bit of our
 * index is its) and whose interrupted operation is finished. 0 or -EUSERS.
 */
static int join(zimp_heap *h, uint64_t wait_ns)
{
    int32_t pid = (int32_t)getpid();
    /*
     * Free records first, then those of dead members. A record can turn
     * free (a reaper) or change hands while we look: scan again as long as
     * some record was not a live member's.
     */
    for (bool again = true; again;) {
        again = false;
        for (int pass = 0; pass < 2; pass++) {
            for (uint32_t i = 0; i < h->max_members; i++) {
                struct zimp_heap_member *m = &h->members[i];
                uint64_t o = zimp_load_acquire(&m->owner);
                bool free_rec = ZIMP_OWNER_STATE(o) == ZIMP_M_FREE;
                if (ZIMP_OWNER_STATE(o) == ZIMP_HEAP_M_CHANNEL)
                    continue;               /* a channel's: never a dead member's */
                /* pass 0: free records only; pass 1: free (a reaper may just
                 * have freed one) or a dead member's */
                if (pass == 0 ? !free_rec : !free_rec && member_live(h, i, o))
                    continue;
                uint64_t mine = ZIMP_OWNER(ZIMP_OWNER_GEN(o) + 1, ZIMP_M_ACTIVE, pid);
                if (!zimp_cas_sc(&m->owner, &o, mine)) {
                    again = true;
                    continue;
                }
                uint64_t ident = zimp_load_relaxed(&m->ident), ident_of = zimp_load_relaxed(&m->ident_of);
                take_record(h, i, mine);
                /*
                 * A free record keeps no blocks (a close gives its kept blocks
                 * back first, the reaper frees a dead member's): a count left
                 * over is stale. A dead member's count stays until its kept
                 * blocks are freed (clean_member), so that a full allocator
                 * meanwhile still looks for them.
                 */
                if (free_rec)
                    zimp_store_relaxed(&m->cached, 0);
                if (!free_rec) {
                    /*
                     * Its predecessor's step and references: we hold none
                     * yet. Cleaning needs the lock: a live process holding
                     * it long (stopped) must not hold this open up, so the
                     * record goes back to its dead owner for later.
                     */
                    if (lock_until(h, zimp__now_ns() + wait_ns) != 0) {
                        zimp_store_relaxed(&m->ident, ident);
                        zimp_store_release(&m->ident_of, ident_of);
                        zimp_cas_sc(&m->owner, &mine, o);
                        return zimp__fail(-EUSERS, "the free records are dead members', which cannot be "
                                          "cleaned while pid %d, a live process, holds the heap's lock",
                                          (int)ZIMP_OWNER_PID(zimp_load_relaxed(&h->hdr->lock)));
                    }
                    repair(h, i);
                    clean_member(h, i, 0);
                    unlock(h);
                }
                return 0;
            }
        }
    }
    return zimp__fail(-EUSERS, "all %u member records of the heap are taken by live processes",
                      h->max_members);
}

ZIMP_API int zimp_heap_open(const char *name, zimp_heap **out)
{
    return zimp__heap_open_wait(name, out, JOIN_WAIT_NS);
}

/* zimp_heap_open, waiting `join_wait_ns` at most to clean a dead member's record it takes. */
int zimp__heap_open_wait(const char *name, zimp_heap **out, uint64_t join_wait_ns)
{
    char path[512];
    struct stat st;
    int fd, r;
    zimp__clear_detail();
    if (!out)
        return zimp__fail(-EINVAL, "out is NULL");
    *out = NULL;
    if ((r = zimp__shm_path(ZIMP_HEAP_PREFIX, "heap", name, path, sizeof path)) != 0)
        return r;
    if ((r = zimp__segment_open(path, "heap", name, O_RDWR, &st, &fd)) != 0)
        return r;
    zimp_heap *h = calloc(1, sizeof *h);
    if (!h) {
        close(fd);
        return zimp__fail(-ENOMEM, "out of memory");
    }
    h->fd = fd;
    zimp__fd_note(fd, &h->fd_id);
    h->fork_gen = zimp__fork_token();
    if ((r = map_heap(h, fd, (uint64_t)st.st_size, true)) != 0)
        goto fail;
    h->peers = calloc(h->max_members, sizeof *h->peers);
    if (!h->peers) {
        r = zimp__fail(-ENOMEM, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < h->max_members; i++)
        zimp__peer_init(&h->peers[i]);
    if ((r = join(h, join_wait_ns)) != 0)
        goto fail;
    ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_heap(ZIMP_EV_OPEN, h->id, name, h->index, 0, h->units * ZIMP_HEAP_UNIT, 0));
    *out = h;
    return 0;
fail:
    heap_free(h);
    return r;
}

/* ---- the lock, and repair of a dead holder's operation ---- */

/*
 * Marks units [u, u + n) used or free. Only the lock holder writes the
 * bitmap, so plain loads and stores do; the lock's acquire and release
 * order them for the next holder.
 */
static void mark_bits(zimp_heap *h, uint64_t u, uint64_t n, bool used)
{
    while (n > 0) {
        uint64_t off = u % 64, take = 64 - off < n ? 64 - off : n;
        zimp_a64 *w = &h->bits[u / 64];
        if (take == 64) {
            zimp_store_relaxed(w, used ? ~0ull : 0);      /* a whole word: no need to read it */
        } else {
            uint64_t mask = ((1ull << take) - 1) << off;
            uint64_t v = zimp_load_relaxed(w);
            zimp_store_relaxed(w, used ? v | mask : v & ~mask);
        }
        u += take;
        n -= take;
    }
}

/* The run of a block from its descriptor, or 0 if the descriptor is damaged. */
static uint64_t block_units(zimp_heap *h, uint64_t u)
{
    uint64_t n = units_for(zimp_load_relaxed(&h->descs[u].len));
    return n > 0 && u + n <= h->units ? n : 0;
}

/* ZIMP_ZERO_ON_RELEASE: zeroes the units of a block nobody can take any more. */
static void zero_block(zimp_heap *h, uint64_t u, uint64_t n)
{
    if ((h->flags & ZIMP_ZERO_ON_RELEASE) && n > 0 && map_rw(h) == 0)
        memset(h->rw + u * ZIMP_HEAP_UNIT, 0, n * ZIMP_HEAP_UNIT);
}

/*
 * Frees block u under the lock, recording the step in member rec's op (ours,
 * or a dead member's whose step we finish): new generation first, so no
 * resolver can take a reference to the units once they are free again.
 *
 * The op record is read only by whoever takes the lock after our death,
 * when every store we made is visible, and a process stops between two
 * instructions: it sees a prefix of these steps. Relaxed stores suffice.
 */
static void free_locked(zimp_heap *h, struct zimp_heap_member *rec, uint64_t u, uint64_t n, uint32_t gen,
                        bool zero)
{
    struct zimp_heap_desc *d = &h->descs[u];
    zimp_store_relaxed(&rec->op_unit, u);
    zimp_store_relaxed(&rec->op_units, n);
    zimp_store_relaxed(&rec->op_gen, gen);
    zimp_store_relaxed(&rec->op, ZIMP_HEAP_OP_FREE);
    /* A resolver that reads the holders a later allocation releases sees this. */
    zimp_store_relaxed(&d->gen, gen);
    if (zero)
        zero_block(h, u, n);
    mark_bits(h, u, n, false);
    zimp_store_release(&d->holders, 0);
    zimp_store_relaxed(&rec->op, ZIMP_HEAP_OP_NONE);
    /* The next search starts here: its units are warm in this cache. */
    zimp_store_relaxed(&h->hdr->cursor, u);
}

static uint32_t next_gen(uint32_t g) { return g + 1 ? g + 1 : 1; }

static void channel_dropped(zimp_heap *h, uint32_t index);
static bool drop_bit(zimp_heap *h, uint64_t u, uint64_t bit, bool locked, bool keep);

/*
 * Finishes or undoes what dead member i was doing under the lock, or the
 * channel hold it was dropping (ZIMP_HEAP_OP_DROP: it won the hold's entry
 * and died before the block's bit went; the generation tells that bit is
 * still that hold's).
 */
static void repair(zimp_heap *h, uint32_t i)
{
    struct zimp_heap_member *m = &h->members[i];
    uint64_t op = zimp_load_sc(&m->op);
    uint64_t u = zimp_load_relaxed(&m->op_unit), n = zimp_load_relaxed(&m->op_units);
    if (op == ZIMP_HEAP_OP_DROP) {
        uint64_t g = zimp_load_relaxed(&m->op_gen);
        uint32_t index = (uint32_t)(g >> 32);
        if (u < h->units && index < h->max_members && zimp_load_acquire(&h->descs[u].gen) == (uint32_t)g &&
            drop_bit(h, u, 1ull << index, true, false))
            channel_dropped(h, index);
        zimp_store_sc(&m->op, ZIMP_HEAP_OP_NONE);
        return;
    }
    if (op == ZIMP_HEAP_OP_NONE || u >= h->units || n == 0 || n > h->units - u) {
        zimp_store_sc(&m->op, ZIMP_HEAP_OP_NONE);
        return;
    }
    if (op == ZIMP_HEAP_OP_ALLOC) {
        /* Bits set under the lock were its own; a block not yet handed out is undone. */
        if (zimp_load_acquire(&h->descs[u].holders) == 0)
            mark_bits(h, u, n, false);
        zimp_store_sc(&m->op, ZIMP_HEAP_OP_NONE);
    } else {
        free_locked(h, m, u, n, (uint32_t)zimp_load_relaxed(&m->op_gen), true);
    }
}

/*
 * The lock word names its holder: its owner word with the record's index
 * + 1 in place of the state byte. A record changes hands only after its
 * owner died (a reaper, or a joiner taking it over) or closed, and nobody
 * closes holding the lock: if the named record no longer holds that owner,
 * the holder is dead, and its recorded step is still in the record's op
 * fields (whoever takes a record over repairs only under the lock).
 */
static uint64_t lock_word(const zimp_heap *h)
{
    return ZIMP_HEAP_LOCK_WORD(h->owner, h->index);
}

/* Whether the holder named by lock word cur is dead; *rec: its record, *o: that record's owner now. */
static bool holder_dead(zimp_heap *h, uint64_t cur, uint32_t *rec, uint64_t *o)
{
    uint32_t i = ZIMP_HEAP_LOCK_INDEX(cur);
    *rec = i;
    if (i >= h->max_members)
        return true;                        /* damaged word: nobody can release it */
    uint64_t holder = ZIMP_OWNER(ZIMP_OWNER_GEN(cur), ZIMP_M_ACTIVE, ZIMP_OWNER_PID(cur));
    *o = zimp_load_acquire(&h->members[i].owner);
    return *o != holder || !member_live(h, i, holder);
}

/*
 * Takes the lock by `deadline` (zimp__deadline's clock: 0 tries, UINT64_MAX
 * waits for ever): 0, or -EAGAIN / -ETIMEDOUT while a live process holds it
 * (stopped, say: it never waits while holding it, so that is the only way
 * to hold it long). A dead holder's lock is taken over and its step
 * finished; a lock word naming this very handle is damage (we are not
 * holding it) and is taken over as it stands.
 */
static int lock_until(zimp_heap *h, uint64_t deadline)
{
    uint64_t mine = lock_word(h);
    for (uint64_t spins = 1;; spins++) {
        uint64_t cur = 0;
        if (zimp_cas_sc(&h->hdr->lock, &cur, mine) || cur == mine)
            return 0;
        bool late = spins % 16 == 0 && deadline != UINT64_MAX && zimp__now_ns() >= deadline;
        if (spins % 1024 == 0 || late) {
            /* Held long: the holder may be dead. */
            uint32_t i;
            uint64_t o = 0;
            if (holder_dead(h, cur, &i, &o) && zimp_cas_sc(&h->hdr->lock, &cur, mine)) {
                if (i < h->max_members) {
                    repair(h, i);           /* finish or undo its step (once: op is reset) */
                    /* Still its record: drop what it held. (A record taken over is
                     * cleaned by its new owner, a freed one was cleaned already.) */
                    if (o == ZIMP_OWNER(ZIMP_OWNER_GEN(cur), ZIMP_M_ACTIVE, ZIMP_OWNER_PID(cur)))
                        clean_member(h, i, o);
                }
                return 0;
            }
            if (late)
                return deadline == 0 ? -EAGAIN : -ETIMEDOUT;
            struct timespec ts = { 0, 50000 };
            nanosleep(&ts, NULL);
        } else if (spins % 16 == 0) {
            sched_yield();
        } else {
            zimp_cpu_relax();
        }
    }
}

/* The lock if it is free now (no clock read: the common case of a free that takes it). */
static bool lock_try(zimp_heap *h)
{
    uint64_t cur = 0;
    return zimp_cas_sc(&h->hdr->lock, &cur, lock_word(h));
}

static void lock(zimp_heap *h)
{
    lock_until(h, UINT64_MAX);
}

/* lock_until's error, said: who holds the lock. */
static int lock_busy(zimp_heap *h, int err)
{
    return zimp__fail(err, "the heap's lock is held by pid %d, a live process",
                      (int)ZIMP_OWNER_PID(zimp_load_relaxed(&h->hdr->lock)));
}

/* Pairs with the acquire of the next holder's CAS: our bitmap and op stores go first. */
static void unlock(zimp_heap *h)
{
    zimp_store_release(&h->hdr->lock, 0);
}

/* ---- references ---- */

/*
 * A block this handle marked FREEING (zeroed if the heap zeroes), to free
 * when the lock is free again: at this handle's next call, or, if the
 * process dies first, by the reaper (clean_member frees FREEING blocks of a
 * dead member). False if out of memory: the caller waits for the lock.
 */
static bool defer_free(zimp_heap *h, uint64_t u)
{
    if (h->ndeferred == h->capdeferred) {
        size_t cap = h->capdeferred ? 2 * h->capdeferred : 16;
        uint64_t *v = realloc(h->deferred, cap * sizeof *v);
        if (!v)
            return false;
        h->deferred = v;
        h->capdeferred = cap;
    }
    h->deferred[h->ndeferred++] = u;
    return true;
}

/* Frees the deferred blocks (the lock is held). */
static void free_deferred_locked(zimp_heap *h)
{
    for (size_t k = 0; k < h->ndeferred; k++) {
        uint64_t u = h->deferred[k];
        struct zimp_heap_desc *d = &h->descs[u];
        if (zimp_load_acquire(&d->holders) != (ZIMP_HEAP_FREEING | h->index))
            continue;                       /* damaged meanwhile: leave it */
        uint32_t len = zimp_load_relaxed(&d->len);
        free_locked(h, &h->members[h->index], u, block_units(h, u), next_gen(zimp_load_relaxed(&d->gen)), false);
        ZIMP_TRACE(ZIMP_TL_DEBUG, zimp__trace_heap(ZIMP_EV_FREE, h->id, NULL, h->index, u * ZIMP_HEAP_UNIT, len, 0));
    }
    h->ndeferred = 0;
}

/*
 * Frees block u of n units, which this handle marked FREEING (and zeroed if
 * the heap zeroes): takes the lock, or defers the free while a live process
 * holds the lock long.
 */
static void free_won(zimp_heap *h, uint64_t u, uint64_t n)
{
    struct zimp_heap_desc *d = &h->descs[u];
    uint32_t len = zimp_load_relaxed(&d->len);
    if (!lock_try(h) && lock_until(h, zimp__now_ns() + FREE_WAIT_NS) != 0) {
        if (defer_free(h, u))
            return;                         /* a live process holds the lock long: later */
        lock(h);
    }
    free_deferred_locked(h);
    free_locked(h, &h->members[h->index], u, n, next_gen(zimp_load_relaxed(&d->gen)), false);
    unlock(h);
    ZIMP_TRACE(ZIMP_TL_DEBUG, zimp__trace_heap(ZIMP_EV_FREE, h->id, NULL, h->index, u * ZIMP_HEAP_UNIT, len, 0));
}

/*
 * The cache. A handle that frees a block it allocated itself (or a
 * channel's sender that drops a block's last hold) keeps it for its next
 * allocation of the same length in units, up to CACHE_MAX blocks and half
 * the heap: no lock, no bitmap, one compare-and-swap each way. A kept block
 * is free to everyone else: its generation changed when it was kept (old
 * handles: -ESTALE), its holders word is ZIMP_HEAP_CACHED | our index (no
 * resolver can take it), and it counts as free in the stats. Whoever needs
 * the room takes it back by compare-and-swap (an allocation that finds no
 * run: steal_locked), and so does the reaper when we die (clean_member) and
 * our close. The record's `cached` word tells a full allocator whether any
 * member keeps anything, so it searches only then.
 */
static void cache_forget(zimp_heap *h, int i)
{
    for (int k = i + 1; k < h->ncache; k++)
        h->cache[k - 1] = h->cache[k];
    h->ncache--;
}

/* Takes kept block `i` back for ourselves (holders := `to`); false if another member took it. */
static bool cache_claim(zimp_heap *h, int i, uint64_t to)
{
    struct cached c = h->cache[i];
    cache_forget(h, i);
    uint64_t x = ZIMP_HEAP_CACHED | h->index;
    if (!zimp_cas_sc(&h->descs[c.unit].holders, &x, to))
        return false;                       /* taken back by a full allocator: its units are gone */
    zimp_sub_sc(&h->members[h->index].cached, c.units);
    return true;
}

/* Frees the oldest kept block. */
static void cache_free_oldest(zimp_heap *h)
{
    struct cached c = h->cache[0];
    if (cache_claim(h, 0, ZIMP_HEAP_FREEING | h->index))
        free_won(h, c.unit, c.units);
}

/* Frees every block we keep (the lock is held: our close). */
static void cache_free_locked(zimp_heap *h)
{
    while (h->ncache > 0) {
        struct cached c = h->cache[0];
        if (cache_claim(h, 0, ZIMP_HEAP_FREEING | h->index))
            free_locked(h, &h->members[h->index], c.unit, c.units,
                        next_gen(zimp_load_relaxed(&h->descs[c.unit].gen)), false);
    }
}

/* Whether we may keep n more units: CACHE_MAX blocks and half the heap at most. */
static bool cache_room(const zimp_heap *h, uint64_t n)
{
    uint64_t kept = 0;
    for (int i = 0; i < h->ncache; i++)
        kept += h->cache[i].units;
    return h->ncache < CACHE_MAX && kept + n <= h->units / 2;
}

/* Whether one of our last RECENT allocations asked for n units. */
static bool asked_lately(const zimp_heap *h, uint64_t n)
{
    for (int i = 0; i < RECENT; i++)
        if (h->recent[i] == n)
            return true;
    return false;
}

/*
 * Keeps block u of n units, which we marked FREEING | index (zeroed); false
 * if it is not worth keeping or there is no room. Only lengths that one of
 * our last allocations asked for are kept: a block kept is a hole the next
 * allocations cannot use, so keeping lengths that do not come back would
 * push them into memory no cache holds. A full cache makes room (frees its
 * oldest block) only every CACHE_MAX-th time it is refused a block without
 * having been used meanwhile.
 */
static bool cache_put(zimp_heap *h, uint64_t u, uint64_t n)
{
    for (int i = 0; i < h->ncache; i++)
        if (h->cache[i].unit == u) {        /* an entry others took back: the block came to us again */
            cache_forget(h, i);
            break;
        }
    if (n < CACHE_MIN_UNITS || n > h->units / 2 || !asked_lately(h, n))
        return false;
    if (!cache_room(h, n)) {
        if (++h->cache_misses < CACHE_MAX)
            return false;
        h->cache_misses = 0;
        while (h->ncache > 0 && !cache_room(h, n))
            cache_free_oldest(h);
    }
    struct zimp_heap_desc *d = &h->descs[u];
    /* The hint first: a full allocator that reads it 0 finds nothing kept. */
    zimp_add_sc(&h->members[h->index].cached, n);
    /* A resolver that takes a reference after our next allocation re-checks the
     * generation, and the release below orders this store before that. */
    zimp_store_relaxed(&d->gen, next_gen(zimp_load_relaxed(&d->gen)));
    zimp_store_release(&d->holders, ZIMP_HEAP_CACHED | h->index);
    h->cache[h->ncache++] = (struct cached){ u, n };
    return true;
}

/* A kept block of exactly n units, handed out as a new block of len bytes. */
static bool cache_take(zimp_heap *h, uint64_t n, size_t len, void **buf, struct zimp_ref *ref)
{
    for (int i = h->ncache - 1; i >= 0; i--) {
        if (h->cache[i].units != n)
            continue;
        uint64_t u = h->cache[i].unit;
        if (!cache_claim(h, i, h->bit))
            continue;
        h->cache_misses = 0;
        zimp_store_relaxed(&h->descs[u].len, (uint32_t)len);
        hold_add(h, u, true);
        *buf = h->rw + u * ZIMP_HEAP_UNIT;
        *ref = (struct zimp_ref){ h->id, zimp_load_relaxed(&h->descs[u].gen), u * ZIMP_HEAP_UNIT };
        return true;
    }
    return false;
}

/*
 * Removes `bit` from block u's holders; the last holder frees the block, or
 * keeps it when `keep` (the cache). Called with the lock when `locked` (the
 * reaper, which frees under it), else it takes the lock to free, or defers
 * the free while a live process holds the lock long.
 */
static bool drop_bit(zimp_heap *h, uint64_t u, uint64_t bit, bool locked, bool keep)
{
    struct zimp_heap_desc *d = &h->descs[u];
    uint64_t x = zimp_load_acquire(&d->holders);
    for (;;) {
        if (!(x & bit) || (x & ZIMP_HEAP_FREEING))
            return false;                   /* not ours (damaged): leave it */
        uint64_t next = x == bit ? ZIMP_HEAP_FREEING | h->index : x & ~bit;
        if (zimp_cas_sc(&d->holders, &x, next))
            break;
    }
    if (x != bit)
        return true;
    uint64_t n = block_units(h, u);
    if (locked) {
        free_locked(h, &h->members[h->index], u, n, next_gen(zimp_load_relaxed(&d->gen)), true);
        ZIMP_TRACE(ZIMP_TL_DEBUG, zimp__trace_heap(ZIMP_EV_FREE, h->id, NULL, h->index, u * ZIMP_HEAP_UNIT,
                                                   zimp_load_relaxed(&d->len), 0));
        return true;
    }
    /* FREEING: nobody can reference it now, so the zeroing needs no lock. */
    zero_block(h, u, n);
    if (!(keep && cache_put(h, u, n)))
        free_won(h, u, n);
    return true;
}

/* Unit of a handle of this heap, or -EINVAL. */
static int64_t ref_unit(zimp_heap *h, const struct zimp_ref *ref)
{
    if (!ref)
        return zimp__fail(-EINVAL, "handle is NULL");
    if (ref->heap != h->id)
        return zimp__fail(-EINVAL, "handle of heap %08x, not of this heap (%08x)", ref->heap, h->id);
    if (ref->off % ZIMP_HEAP_UNIT || ref->off / ZIMP_HEAP_UNIT >= h->units || ref->gen == 0)
        return zimp__fail(-EINVAL, "handle names no block (offset %llu, generation %u)",
                          (unsigned long long)ref->off, ref->gen);
    return (int64_t)(ref->off / ZIMP_HEAP_UNIT);
}

static int reap_until(zimp_heap *h, uint64_t deadline);
static uint64_t unmark_stale(zimp_heap *h, uint32_t index, uint64_t o);

/*
 * Frees what dead members hold, at most once per ZIMP_HEAP_REAP_NS, waiting
 * for the lock REAP_WAIT_NS at most: a live process holding it long (a
 * stopped one) leaves the cleaning to a later call, never holds this one up.
 */
static void maybe_reap(zimp_heap *h)
{
    uint64_t now = zimp__coarse_ns();       /* a jiffy's precision is plenty, and no clock read */
    if (now - h->last_reap >= ZIMP_HEAP_REAP_NS) {
        h->last_reap = now;
        reap_until(h, zimp__now_ns() + REAP_WAIT_NS);
        zimp__channels_prune(h, h->chans, h->own_chan);  /* removed channels' mappings go */
    }
}

/* First unit of a free run of n units, searching from `from` and wrapping; units if none. */
static uint64_t find_run(zimp_heap *h, uint64_t from, uint64_t n)
{
    uint64_t units = h->units, u = from < units ? from : 0, scanned = 0;
    while (scanned < units + n) {
        if (u + n > units) {            /* no room before the end: wrap */
            scanned += units - u;
            u = 0;
            continue;
        }
        /* Skip used units a word at a time. */
        uint64_t w = zimp_load_relaxed(&h->bits[u / 64]) >> (u % 64);
        if (w & 1) {
            /* Zeros shifted in from the top end the count at the word's end. */
            uint64_t skip = ~w ? (uint64_t)__builtin_ctzll(~w) : 64;
            u += skip;
            scanned += skip;
            continue;
        }
        /* u is free: is the whole run? */
        uint64_t k = 0;
        while (k < n) {
            uint64_t p = u + k;
            if (p % 64 == 0) {              /* aligned: whole free words at a time */
                while (k + 64 <= n && zimp_load_relaxed(&h->bits[(u + k) / 64]) == 0)
                    k += 64;
                if (k >= n)
                    break;
                p = u + k;
            }
            uint64_t rest = zimp_load_relaxed(&h->bits[p / 64]) >> (p % 64);
            uint64_t avail = 64 - p % 64;
            uint64_t freebits = rest ? (uint64_t)__builtin_ctzll(rest) : avail;
            if (freebits > avail)
                freebits = avail;
            k += freebits;
            if (freebits < avail)
                break;                      /* hit a used unit */
        }
        if (k >= n)
            return u;
        u += k;
        scanned += k;
    }
    return units;
}

/*
 * The first unit at or after u whose holders word is set (a block starts
 * there: units inside a block have holders 0), skipping free words of the
 * bitmap 64 units at a time; h->units if none. *x: that holders word.
 */
static uint64_t next_block(zimp_heap *h, uint64_t u, uint64_t *x)
{
    for (; u < h->units; u++) {
        if (u % 64 == 0 && zimp_load_relaxed(&h->bits[u / 64]) == 0) {
            u += 63;
            continue;
        }
        if ((*x = zimp_load_acquire(&h->descs[u].holders)) != 0)
            return u;
    }
    return h->units;
}

/*
 * Takes back, under the lock, every block a member keeps (the cache): an
 * allocation found no run, and their units may make one. Only when some
 * member's hint says it keeps anything; free words of the bitmap are
 * skipped 64 units at a time. True if it freed any.
 */
static bool steal_locked(zimp_heap *h)
{
    bool any = false;
    for (uint32_t i = 0; i < h->max_members && !any; i++)
        any = zimp_load_sc(&h->members[i].cached) != 0;
    if (!any)
        return false;
    bool freed = false;
    uint64_t x;
    for (uint64_t u = 0; (u = next_block(h, u, &x)) < h->units;) {
        struct zimp_heap_desc *d = &h->descs[u];
        uint64_t n = block_units(h, u);
        if (ZIMP_HEAP_IS_CACHED(x) && ZIMP_HEAP_INDEX(x) < h->max_members && n > 0 &&
            zimp_cas_sc(&d->holders, &x, ZIMP_HEAP_FREEING | h->index)) {
            zimp_sub_sc(&h->members[ZIMP_HEAP_INDEX(x)].cached, n);
            free_locked(h, &h->members[h->index], u, n, next_gen(zimp_load_relaxed(&d->gen)), false);
            freed = true;
        }
        u += n ? n : 1;
    }
    return freed;
}

static int reclaim_channels(zimp_heap *h);

/* A new block of n units for len bytes from the free runs, the lock taken by `deadline`. */
static int alloc_run(zimp_heap *h, uint64_t n, size_t len, void **buf, struct zimp_ref *ref, uint64_t deadline)
{
    maybe_reap(h);
    struct zimp_heap_member *me = &h->members[h->index];
    uint64_t u = h->units;
    h->chans_missed = 0;
    for (int attempt = 0; attempt < 3 && u == h->units; attempt++) {
        if (attempt == 1)
            reap_until(h, deadline);        /* full: what dead members hold goes back */
        if (attempt == 2 && reclaim_channels(h) == 0)
            break;                          /* and what channels hold for nobody (H5) */
        int r = lock_until(h, deadline);
        if (r != 0)
            return lock_busy(h, r);
        free_deferred_locked(h);
        u = find_run(h, zimp_load_relaxed(&h->hdr->cursor), n);
        if (u == h->units && steal_locked(h))   /* and what members keep for themselves */
            u = find_run(h, zimp_load_relaxed(&h->hdr->cursor), n);
        if (u < h->units) {
            /* recorded first, for repair (see free_locked on the orders) */
            zimp_store_relaxed(&me->op_unit, u);
            zimp_store_relaxed(&me->op_units, n);
            zimp_store_relaxed(&me->op, ZIMP_HEAP_OP_ALLOC);
            mark_bits(h, u, n, true);
            zimp_store_relaxed(&h->descs[u].len, (uint32_t)len);
            zimp_store_release(&h->descs[u].holders, h->bit);   /* handed out: done */
            zimp_store_relaxed(&h->hdr->cursor, u + n < h->units ? u + n : 0);
            zimp_store_relaxed(&me->op, ZIMP_HEAP_OP_NONE);
        }
        unlock(h);
    }
    if (u == h->units && h->chans_missed)
        return zimp__fail(-ENOMEM, "no free run of %llu bytes in the heap; %d of its channels could not be "
                          "looked at for blocks of released messages: %s",
                          (unsigned long long)(n * ZIMP_HEAP_UNIT), h->chans_missed, strerror(-h->chans_err));
    if (u == h->units)
        return zimp__fail(-ENOMEM, "no free run of %llu bytes in the heap",
                          (unsigned long long)(n * ZIMP_HEAP_UNIT));
    hold_add(h, u, true);
    *buf = h->rw + u * ZIMP_HEAP_UNIT;
    *ref = (struct zimp_ref){ h->id, zimp_load_relaxed(&h->descs[u].gen), u * ZIMP_HEAP_UNIT };
    return 0;
}

ZIMP_API int zimp_heap_alloc(zimp_heap *h, size_t len, void **buf, struct zimp_ref *ref)
{
    return zimp__heap_alloc(h, len, buf, ref, UINT64_MAX);
}

/* zimp_heap_alloc, waiting for the heap's lock until `deadline` at most. */
int zimp__heap_alloc(zimp_heap *h, size_t len, void **buf, struct zimp_ref *ref, uint64_t deadline)
{
    CHECK_HEAP(h);
    zimp__clear_detail();
    if (!buf || !ref)
        return zimp__fail(-EINVAL, "buf or ref is NULL");
    if (len == 0)
        return zimp__fail(-EINVAL, "a block has at least one byte");
    if (len > UINT32_MAX)
        return zimp__fail(-EMSGSIZE, "a block holds at most %u bytes", UINT32_MAX);
    uint64_t n = units_for(len);
    if (n > h->units)
        return zimp__fail(-ENOMEM, "%zu bytes exceed the heap's %llu", len,
                          (unsigned long long)(h->units * ZIMP_HEAP_UNIT));
    int r;
    if ((r = map_rw(h)) != 0 || (r = hold_reserve(h)) != 0)
        return r;
    h->recent[h->nrecent++ % RECENT] = n;
    if (!cache_take(h, n, len, buf, ref) && (r = alloc_run(h, n, len, buf, ref, deadline)) != 0)
        return r;
    ZIMP_TRACE(ZIMP_TL_DEBUG, zimp__trace_heap(ZIMP_EV_ALLOC, h->id, NULL, h->index, ref->off, len, 0));
    return 0;
}

ZIMP_API int zimp_heap_resolve(zimp_heap *h, const struct zimp_ref *ref, const void **buf, size_t *len)
{
    CHECK_HEAP(h);
    zimp__clear_detail();
    int64_t su = ref_unit(h, ref);
    if (su < 0)
        return (int)su;
    if (!buf)
        return zimp__fail(-EINVAL, "buf is NULL");
    uint64_t u = (uint64_t)su;
    struct zimp_heap_desc *d = &h->descs[u];
    int r = hold_reserve(h);
    if (r != 0)
        return r;
    maybe_reap(h);
    if (zimp_load_acquire(&d->gen) != ref->gen)
        return zimp__fail(-ESTALE, "block at offset %llu was freed (generation %u, handle has %u)",
                          (unsigned long long)ref->off, zimp_load_relaxed(&d->gen), ref->gen);
    if (hold_count(h, u) == 0) {
        uint64_t x = zimp_load_acquire(&d->holders);
        do {
            if (x == 0 || (x & ZIMP_HEAP_FREEING))
                return zimp__fail(-ESTALE, "block at offset %llu is free", (unsigned long long)ref->off);
        } while (!zimp_cas_sc(&d->holders, &x, x | h->bit));
        /* The block may have been freed and handed out again before our CAS. */
        if (zimp_load_sc(&d->gen) != ref->gen) {
            drop_bit(h, u, h->bit, false, false);
            return zimp__fail(-ESTALE, "block at offset %llu was freed", (unsigned long long)ref->off);
        }
    }
    uint64_t n = block_units(h, u);
    if (n == 0) {
        if (hold_count(h, u) == 0)
            drop_bit(h, u, h->bit, false, false);
        return zimp__fail(-EPROTO, "block at offset %llu has a damaged length", (unsigned long long)ref->off);
    }
    hold_add(h, u, false);
    *buf = data_ro(h) + u * ZIMP_HEAP_UNIT;
    if (len)
        *len = zimp_load_relaxed(&d->len);
    return 0;
}

ZIMP_API int zimp_heap_release(zimp_heap *h, const struct zimp_ref *ref)
{
    CHECK_HEAP(h);
    zimp__clear_detail();
    int64_t su = ref_unit(h, ref);
    if (su < 0)
        return (int)su;
    uint64_t u = (uint64_t)su;
    maybe_reap(h);
    if (hold_count(h, u) == 0)
        return zimp__fail(-EINVAL, "this process holds no reference to the block at offset %llu",
                          (unsigned long long)ref->off);
    if (zimp_load_acquire(&h->descs[u].gen) != ref->gen)
        return zimp__fail(-ESTALE, "the block at offset %llu has generation %u, the handle %u",
                          (unsigned long long)ref->off, zimp_load_relaxed(&h->descs[u].gen), ref->gen);
    bool ours;
    if (hold_drop(h, u, &ours))
        drop_bit(h, u, h->bit, false, ours);
    return 0;
}

/* ---- death of members ---- */

/* Clears dead member i's references and frees its record o (the lock is held). */
static void clean_member(zimp_heap *h, uint32_t i, uint64_t o)
{
    uint64_t bit = 1ull << i;
    for (uint64_t u = 0; u < h->units; u++) {
        uint64_t x = zimp_load_relaxed(&h->descs[u].holders);
        if (x == (ZIMP_HEAP_FREEING | i) || x == (ZIMP_HEAP_CACHED | i)) {
            /* It died between winning the last reference and taking the lock, or kept the block. */
            struct zimp_heap_desc *d = &h->descs[u];
            free_locked(h, &h->members[h->index], u, block_units(h, u), next_gen(zimp_load_relaxed(&d->gen)),
                        true);
        } else if (!(x & ZIMP_HEAP_FREEING) && (x & bit)) {
            drop_bit(h, u, bit, true, false);
        }
    }
    zimp_store_relaxed(&h->members[i].cached, 0);
    if (o != 0)               /* 0: the record was taken over, keep it */
        zimp_cas_sc(&h->members[i].owner, &o, ZIMP_OWNER(ZIMP_OWNER_GEN(o), ZIMP_M_FREE, 0));
}

ZIMP_API int zimp_heap_reap(zimp_heap *h)
{
    CHECK_HEAP(h);
    return reap_until(h, UINT64_MAX);
}

int zimp__heap_reap_until(zimp_heap *h, uint64_t deadline)
{
    CHECK_HEAP(h);
    return reap_until(h, deadline);
}

/* zimp_heap_reap, giving up on what needs the lock if it is not had by `deadline`. */
/*
 * Whether channel record i (owner word o) still names its creator (the
 * channel had no file yet: zimp__heap_channel_take) and that creator is
 * dead: then no file of the channel will ever exist.
 */
static bool creator_died(zimp_heap *h, uint32_t i, uint64_t o)
{
    struct zimp_heap_member *m = &h->members[i];
    uint64_t of = zimp_load_acquire(&m->ident_of);
    return ZIMP_OWNER_STATE(o) == ZIMP_HEAP_M_CHANNEL && ZIMP_OWNER_PID(o) == 0 &&
           ZIMP_OWNER_STATE(of) == ZIMP_HEAP_M_CHANNEL && ZIMP_OWNER_GEN(of) == ZIMP_OWNER_GEN(o) &&
           ZIMP_OWNER_PID(of) != 0 && !zimp__alive_once(of, zimp_load_relaxed(&m->ident));
}

static int reap_until(zimp_heap *h, uint64_t deadline)
{
    int cleaned = 0;
    bool locked = false;
    for (uint32_t i = 0; i < h->max_members; i++) {
        uint64_t o = zimp_load_acquire(&h->members[i].owner);
        if (i == h->index || ZIMP_OWNER_STATE(o) != ZIMP_M_ACTIVE || member_live(h, i, o))
            continue;
        if (!locked) {
            if (lock_until(h, deadline) != 0)
                return cleaned;             /* a live process holds it long: later */
            locked = true;
        }
        if (zimp_load_acquire(&h->members[i].owner) != o)
            continue;                       /* another reaper was first */
        repair(h, i);
        clean_member(h, i, o);
        cleaned++;
        ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_heap(ZIMP_EV_CRASH, h->id, NULL, i, 0, 0, ZIMP_OWNER_PID(o)));
    }
    if (locked)
        unlock(h);
    /* Channels removed while members used them, whose members have all gone since;
     * and records of channels whose creator died before the channel had a file. */
    for (uint32_t i = 0; i < h->max_members; i++) {
        uint64_t o = zimp_load_acquire(&h->members[i].owner);
        if (ZIMP_OWNER_STATE(o) != ZIMP_HEAP_M_CHANNEL)
            continue;
        if (creator_died(h, i, o)) {
            zimp__heap_channel_free(h, i, o, deadline);
            continue;
        }
        o = unmark_stale(h, i, o);
        if (ZIMP_OWNER_STATE(o) == ZIMP_HEAP_M_CHANNEL && ZIMP_OWNER_PID(o) == 0)
            zimp__channel_reap_retired(h, i, o, deadline);
    }
    return cleaned;
}

/* ---- close, stats ---- */

ZIMP_API void zimp_heap_close(zimp_heap *h)
{
    if (!h)
        return;
    if (!zimp__inherited(h->fork_gen)) {
        for (size_t i = 0; i < h->cap; i++)
            if (h->holds[i].key)
                drop_bit(h, h->holds[i].key - 1, h->bit, false, false);
        /*
         * Deferred frees and kept blocks go back under the lock. If a live
         * process holds it long, the record stays: once this process is gone
         * the reaper frees both with it (clean_member), and meanwhile the
         * kept blocks stay kept, which a full allocator can take back.
         */
        uint64_t o = h->owner;
        if ((h->ndeferred == 0 && h->ncache == 0) || lock_until(h, zimp__now_ns() + CLOSE_WAIT_NS) == 0) {
            if (h->ndeferred || h->ncache) {
                free_deferred_locked(h);
                cache_free_locked(h);
                unlock(h);
            }
            zimp_cas_sc(&h->members[h->index].owner, &o, ZIMP_OWNER(ZIMP_OWNER_GEN(o), ZIMP_M_FREE, 0));
        }
        ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_heap(ZIMP_EV_CLOSE, h->id, NULL, h->index, 0, 0, 0));
    }
    heap_free(h);
}

/* Counts what a mapped heap holds; members: taken records, or live ones only. */
/*
 * count's walk over the blocks of a copy (copy_heap): the descriptors come
 * from the file, a window of them at a time, so a look at a heap reads what
 * a mapping would touch (a descriptor per block, the bitmap), not all of
 * them. false if the file was cut short meanwhile.
 */
static bool count_copied(zimp_heap *h, struct zimp_heap_stats *out)
{
    enum { WIN = 256 };                         /* descriptors per read: 4 KiB */
    struct zimp_heap_desc win[WIN];
    uint64_t win_at = UINT64_MAX;
    for (uint64_t u = 0; u < h->units;) {
        if (u % 64 == 0 && zimp_load_relaxed(&h->bits[u / 64]) == 0) {
            u += 64;
            continue;
        }
        if (u / WIN != win_at) {
            win_at = u / WIN;
            uint64_t first = win_at * WIN, n = h->units - first < WIN ? h->units - first : WIN;
            if (!zimp__read_all(h->fd, win, n * sizeof *win, (off_t)(h->hdr->off_descs + first * sizeof *win)))
                return false;
        }
        struct zimp_heap_desc *d = &win[u % WIN];           /* our copy: nobody else writes it */
        uint64_t x = zimp_load_relaxed(&d->holders);
        if (x == 0) {
            u++;
            continue;
        }
        uint64_t n = units_for(zimp_load_relaxed(&d->len));
        n = n > 0 && u + n <= h->units ? n : 0;
        if (!ZIMP_HEAP_IS_CACHED(x)) {
            out->used += n * ZIMP_HEAP_UNIT;
            out->blocks++;
        }
        u += n ? n : 1;
    }
    return true;
}

/* Fills *out; false only for a copy whose file was cut short meanwhile. */
static bool count(zimp_heap *h, struct zimp_heap_stats *out, bool live_only)
{
    memset(out, 0, sizeof *out);
    out->size = h->units * ZIMP_HEAP_UNIT;
    out->unit = ZIMP_HEAP_UNIT;
    if (h->copied && !count_copied(h, out))
        return false;
    /*
     * Block by block from the descriptors (a unit inside a block has holders
     * 0), so that each block counts whole or not at all while others
     * allocate and free: a block in use counts its units, a kept one (free
     * to the others) nothing.
     */
    uint64_t x;
    for (uint64_t u = 0; !h->copied && (u = next_block(h, u, &x)) < h->units;) {
        uint64_t n = block_units(h, u);
        if (!ZIMP_HEAP_IS_CACHED(x)) {
            out->used += n * ZIMP_HEAP_UNIT;
            out->blocks++;
        }
        u += n ? n : 1;
    }
    for (uint32_t i = 0; i < h->max_members; i++) {
        struct zimp_heap_member *m = &h->members[i];
        uint64_t o = zimp_load_acquire(&m->owner);
        if (ZIMP_OWNER_STATE(o) == ZIMP_M_FREE)
            continue;
        if (!live_only ||
            (ZIMP_OWNER_STATE(o) == ZIMP_HEAP_M_CHANNEL ? !creator_died(h, i, o)
                                                        : zimp__alive_once(o, zimp__ident(&m->ident, &m->ident_of, o))))
            out->members++;
    }
    return true;
}

ZIMP_API int zimp_heap_stats(zimp_heap *h, struct zimp_heap_stats *out)
{
    CHECK_HEAP(h);
    if (!out)
        return -EINVAL;
    maybe_reap(h);
    count(h, out, false);
    return 0;
}

/*
 * Heap `name` without a member record, into *h: a copy of its metadata
 * (copy: a look at it, SIGBUS-proof), or mapped read-only (a channel's
 * receivers, who read its blocks). 0 or negative errno.
 */
static int inspect(const char *name, zimp_heap *h, bool copy)
{
    char path[512];
    struct stat st;
    int r;
    memset(h, 0, sizeof *h);
    h->fd = -1;
    if ((r = zimp__shm_path(ZIMP_HEAP_PREFIX, "heap", name, path, sizeof path)) != 0)
        return r;
    if ((r = zimp__segment_open(path, "heap", name, O_RDONLY, &st, &h->fd)) != 0)
        return r;
    return copy ? copy_heap(h, h->fd, (uint64_t)st.st_size) : map_heap(h, h->fd, (uint64_t)st.st_size, false);
}

static void inspect_done(zimp_heap *h)
{
    if (h->base && h->copied)
        free((void *)h->base);
    else if (h->base)
        munmap((void *)h->base, h->size);
    if (h->fd >= 0)
        close(h->fd);
}

ZIMP_API int zimp_heap_info(const char *name, struct zimp_heap_stats *out)
{
    zimp_heap h;
    zimp__clear_detail();
    if (!out)
        return zimp__fail(-EINVAL, "info output is NULL");
    int r = inspect(name, &h, true);
    if (r == 0 && !count(&h, out, true))
        r = zimp__fail(-EPROTO, "heap segment cut short while it was read");
    inspect_done(&h);
    return r;
}

ZIMP_API int zimp_heap_list(int (*fn)(const char *name, void *arg), void *arg)
{
    return zimp__list_segments(ZIMP_HEAP_PREFIX, fn, arg);
}

/* The layout major of heap `name` if it has a heap's magic and is ready, else 0. */
static unsigned heap_major_of(const char *name)
{
    char path[512];
    struct stat st;
    int fd;
    struct zimp_heap_hdr hd;
    if (zimp__shm_path(ZIMP_HEAP_PREFIX, "heap", name, path, sizeof path) != 0 ||
        zimp__segment_open(path, "heap", name, O_RDONLY, &st, &fd) != 0)
        return 0;
    bool read = zimp__read_all(fd, &hd, sizeof hd, 0);
    close(fd);
    return read && hd.magic == ZIMP_HEAP_MAGIC && hd.ready == ZIMP_HEAP_READY ? hd.major : 0;
}

/*
 * 1 if heap `name` was unlinked (no live member, its creator gone; an
 * invalid segment too, but not another layout's heap, which may be in use),
 * 0 if in use.
 */
static int gc_one(const char *name, void *unused)
{
    (void)unused;
    zimp_heap h;
    int r = inspect(name, &h, true);
    bool used = false;
    struct zimp_heap_stats st;
    if (r == 0 && !count(&h, &st, true))
        r = zimp__fail(-EPROTO, "heap segment cut short while it was read");
    if (r == 0)
        used = st.members > 0 ||
               zimp__alive_once(ZIMP_OWNER(0, ZIMP_M_ACTIVE, h.hdr->creator_pid), h.hdr->creator_ident);
    inspect_done(&h);
    if (r == -EPROTO) {
        unsigned major = heap_major_of(name);
        if (major != 0 && major != ZIMP_HEAP_MAJOR)
            return zimp__fail(-EPROTO, "heap '%s' has layout %u, this library reads %u: its members cannot "
                              "be judged here (zimp_heap_unlink removes it)", name, major, ZIMP_HEAP_MAJOR);
    }
    if (r != 0 && r != -EPROTO)
        return r == -ENOENT ? 0 : r;
    if (used)
        return 0;
    r = zimp_heap_unlink(name);
    return r == 0 ? 1 : r == -ENOENT ? 0 : r;
}

struct sweep { int removed; };

static int gc_each(const char *name, void *arg)
{
    int r = gc_one(name, NULL);
    if (r > 0)
        ((struct sweep *)arg)->removed++;
    return 0;
}

ZIMP_API int zimp_heap_gc(const char *name)
{
    zimp__clear_detail();
    if (name)
        return gc_one(name, NULL);
    struct sweep sw = { 0 };
    int r = zimp_heap_list(gc_each, &sw);
    return r < 0 ? r : sw.removed;
}

/* ---- blocks held by channels (large messages; src/core calls these) ---- */

/*
 * A channel created with a heap holds every block in flight on it through a
 * record of its own (ZIMP_HEAP_M_CHANNEL): a published block outlives its
 * sender. The channel's senders add that record's bit to a block before
 * they publish it and drop it once no receiver can read it any more.
 */
int zimp__heap_channel_take(zimp_heap *h, uint32_t *index, uint64_t *owner)
{
    CHECK_HEAP(h);
    for (uint32_t i = 0; i < h->max_members; i++) {
        struct zimp_heap_member *m = &h->members[i];
        uint64_t o = zimp_load_acquire(&m->owner);
        if (ZIMP_OWNER_STATE(o) != ZIMP_M_FREE)
            continue;
        uint64_t mine = ZIMP_OWNER(ZIMP_OWNER_GEN(o) + 1, ZIMP_HEAP_M_CHANNEL, 0);
        if (zimp_cas_sc(&m->owner, &o, mine)) {
            zimp_store_relaxed(&m->op_units, 0);     /* blocks it holds: none yet */
            /* Its creator, until the channel's inode replaces it: a creator that
             * dies before that leaves no file, and the reaper frees the record. */
            zimp_store_relaxed(&m->ident, zimp__self_ident());
            zimp_store_release(&m->ident_of, ZIMP_OWNER(ZIMP_OWNER_GEN(mine), ZIMP_HEAP_M_CHANNEL, (uint32_t)getpid()));
            *index = i;
            *owner = mine;
            return 0;
        }
    }
    return zimp__fail(-EUSERS, "no free member record in the heap for the channel (%u in all)",
                      h->max_members);
}

/*
 * Frees channel record `index` if it is still `owner`, with every block it
 * holds, if the lock is had by `deadline`. True if the record is not
 * `owner` any more (freed now or before).
 */
bool zimp__heap_channel_free(zimp_heap *h, uint32_t index, uint64_t owner, uint64_t deadline)
{
    if (!h || zimp__inherited(h->fork_gen) || index >= h->max_members ||
        ZIMP_OWNER_STATE(owner) != ZIMP_HEAP_M_CHANNEL)
        return false;
    if (zimp_load_acquire(&h->members[index].owner) != owner)
        return true;
    if (map_rw(h) != 0 || lock_until(h, deadline) != 0)
        return false;                       /* zeroing frees need the data mapped */
    if (zimp_load_acquire(&h->members[index].owner) == owner)
        clean_member(h, index, owner);
    unlock(h);
    return true;
}

/*
 * Retiring a channel's record: the retirer marks it (pid field: its pid)
 * before it counts the channel's live members, and a member checks the record after
 * it joined (zimp__heap_channel_current): either the count sees the member,
 * or the member sees the mark and leaves. Marks (on) or unmarks record
 * `index` if it is `owner` (unmarked); true if it changed.
 */
bool zimp__heap_channel_mark(zimp_heap *h, uint32_t index, uint64_t owner, bool on)
{
    if (!h || index >= h->max_members || ZIMP_OWNER_STATE(owner) != ZIMP_HEAP_M_CHANNEL)
        return false;
    uint64_t marked = zimp__heap_channel_marked(owner);
    uint64_t from = on ? owner : marked;
    return zimp_cas_sc(&h->members[index].owner, &from, on ? marked : owner);
}

/*
 * The owner word of channel record `owner` once this process marked it for
 * retirement: the pid field names the retirer, so that a retirer that dies
 * between its mark and its verdict leaves a mark the reaper can see is
 * stale (unmark_stale), not a record nobody can retire any more.
 */
uint64_t zimp__heap_channel_marked(uint64_t owner)
{
    return ZIMP_OWNER(ZIMP_OWNER_GEN(owner), ZIMP_HEAP_M_CHANNEL, (uint32_t)getpid());
}

/* Whether channel record `index` still belongs to the channel of `owner` (marked or not). */
bool zimp__heap_channel_ours(const zimp_heap *h, uint32_t index, uint64_t owner)
{
    if (!h || index >= h->max_members)
        return false;
    uint64_t o = zimp_load_sc(&h->members[index].owner);
    return ZIMP_OWNER_STATE(o) == ZIMP_HEAP_M_CHANNEL && ZIMP_OWNER_GEN(o) == ZIMP_OWNER_GEN(owner);
}

/*
 * A channel record marked by a retirer that died before it decided (its
 * pid no longer runs): unmarked, as if its count had found a member, so
 * that the next retirer decides. Returns the record's owner word now.
 */
static uint64_t unmark_stale(zimp_heap *h, uint32_t index, uint64_t o)
{
    int32_t pid = (int32_t)ZIMP_OWNER_PID(o);
    if (pid == 0 || zimp__alive_once(ZIMP_OWNER(0, ZIMP_M_ACTIVE, pid), 0))
        return o;
    uint64_t clean = ZIMP_OWNER(ZIMP_OWNER_GEN(o), ZIMP_HEAP_M_CHANNEL, 0);
    zimp_cas_sc(&h->members[index].owner, &o, clean);
    return zimp_load_acquire(&h->members[index].owner);
}

/* Whether channel record `index` is still `owner`, unmarked (seq_cst: see zimp__heap_channel_mark). */
bool zimp__heap_channel_current(const zimp_heap *h, uint32_t index, uint64_t owner)
{
    return h && index < h->max_members && zimp_load_sc(&h->members[index].owner) == owner;
}

/* Whether `ref` names a block of this heap whose generation it has, and its unit. */
static bool chan_block(zimp_heap *h, const struct zimp_ref *ref, uint64_t *u)
{
    if (ref->heap != h->id || ref->off % ZIMP_HEAP_UNIT || ref->off / ZIMP_HEAP_UNIT >= h->units ||
        ref->gen == 0)
        return false;
    *u = ref->off / ZIMP_HEAP_UNIT;
    return zimp_load_acquire(&h->descs[*u].gen) == ref->gen;
}

/*
 * Adds channel record `index` to the holders of a block this process holds
 * (so it cannot be freed meanwhile): 0, or -ESTALE / -EINVAL.
 */
int zimp__heap_channel_hold(zimp_heap *h, const struct zimp_ref *ref, uint32_t index)
{
    uint64_t u;
    if (index >= h->max_members || !chan_block(h, ref, &u) || hold_count(h, u) == 0)
        return zimp__fail(-EINVAL, "no block of this process at offset %llu", (unsigned long long)ref->off);
    zimp_a64 *x = &h->descs[u].holders;
    uint64_t cur = zimp_load_acquire(x);
    /* Counted before the bit is set, uncounted after it goes: never below the truth. */
    zimp_add_sc(&h->members[index].op_units, 1);
    do {
        if (cur == 0 || (cur & ZIMP_HEAP_FREEING)) {
            channel_dropped(h, index);
            return zimp__fail(-ESTALE, "block at offset %llu is being freed", (unsigned long long)ref->off);
        }
    } while (!zimp_cas_sc(x, &cur, cur | (1ull << index)));
    return 0;
}

/* One block fewer held by channel record `index` (a hint: never below the truth). */
static void channel_dropped(zimp_heap *h, uint32_t index)
{
    zimp_a64 *held = &h->members[index].op_units;
    uint64_t n = zimp_load_relaxed(held);
    while (n > 0 && !zimp_cas_sc(held, &n, n - 1))
        ;
}

/*
 * Drops channel record `index`'s hold on a block (the caller won the right
 * to, once per publication). A block of another generation is not touched.
 * Returns whether a hold was dropped.
 */
bool zimp__heap_channel_drop(zimp_heap *h, const struct zimp_ref *ref, uint32_t index, uint64_t owner, bool keep)
{
    uint64_t u;
    if (index >= h->max_members || !chan_block(h, ref, &u) || map_rw(h) != 0)
        return false;
    uint64_t bit = 1ull << index, x = zimp_load_acquire(&h->descs[u].holders);
    if (!(x & bit) || (x & ZIMP_HEAP_FREEING))
        return false;
    /*
     * From outside the channel (H5, under the lock: zimp__heap_drops_begin):
     * the record must still be the channel's (a retirement frees its blocks
     * under the lock, and a new channel may then take the record and the
     * block, with the same bit), and the block still of the handle's
     * generation. Under the lock neither can change before our CAS: the
     * record is freed only under it, and the block, holding our bit, cannot
     * be freed or kept by anyone else.
     */
    bool outside = owner != 0;
    if (outside && (!zimp__heap_channel_ours(h, index, owner) || zimp_load_acquire(&h->descs[u].gen) != ref->gen))
        return false;
    /* Whoever reaps us if we die now finishes the drop (repair). */
    struct zimp_heap_member *me = &h->members[h->index];
    zimp_store_relaxed(&me->op_unit, u);
    zimp_store_relaxed(&me->op_units, 0);            /* older reapers leave an op of no units alone */
    zimp_store_relaxed(&me->op_gen, (uint64_t)index << 32 | ref->gen);
    zimp_store_release(&me->op, ZIMP_HEAP_OP_DROP);
    /* The last hold: kept for our next message if `keep`; from outside, freed under the lock. */
    bool dropped = drop_bit(h, u, bit, outside, keep && !outside);
    zimp_store_release(&me->op, ZIMP_HEAP_OP_NONE);
    if (dropped)
        channel_dropped(h, index);
    return dropped;
}

/*
 * H5's drops from outside a channel run under the heap's lock (see
 * zimp__heap_channel_drop). False if a live process holds it long: the
 * channel is left for a later pass.
 */
bool zimp__heap_drops_begin(zimp_heap *h)
{
    return map_rw(h) == 0 && lock_until(h, zimp__now_ns() + FREE_WAIT_NS) == 0;
}

void zimp__heap_drops_end(zimp_heap *h) { unlock(h); }

/*
 * Records the inode of channel record `index`'s file (if the record is
 * still `owner`), so that any member whose allocation finds the heap full
 * can find the channel and take back the blocks it holds for messages
 * every receiver has passed (H5). `ident_of` says whose inode `ident` is,
 * as for process members.
 */
void zimp__heap_channel_locate(zimp_heap *h, uint32_t index, uint64_t owner, uint64_t ino)
{
    if (!h || index >= h->max_members || zimp_load_acquire(&h->members[index].owner) != owner)
        return;
    zimp_store_relaxed(&h->members[index].ident, ino);
    zimp_store_release(&h->members[index].ident_of, owner);
}

/* H5: whether record i is a channel's with a recorded inode, and how many blocks it may hold. */
bool zimp__heap_channel_record(zimp_heap *h, uint32_t i, uint64_t *owner, uint64_t *ino, uint64_t *held)
{
    struct zimp_heap_member *m = &h->members[i];
    uint64_t o = zimp_load_acquire(&m->owner);
    if (ZIMP_OWNER_STATE(o) != ZIMP_HEAP_M_CHANNEL)
        return false;
    *owner = ZIMP_OWNER(ZIMP_OWNER_GEN(o), ZIMP_HEAP_M_CHANNEL, 0);   /* unmarked */
    if (zimp_load_acquire(&m->ident_of) != *owner)
        return false;               /* no inode: made by an older library, or being made */
    *ino = zimp_load_relaxed(&m->ident);
    *held = zimp_load_relaxed(&m->op_units);
    return true;
}

uint32_t zimp__heap_records(const zimp_heap *h) { return h->max_members; }

void zimp__heap_own_channel(zimp_heap *h, uint32_t index) { h->own_chan = index; }

/*
 * H5: a full heap takes back what channels hold for messages all their
 * live receivers have passed (a channel's hold otherwise goes only when its
 * own senders reuse the slot or need room, so a channel whose sender is
 * idle would keep released blocks from everyone else). Called without the
 * lock; returns how many holds were dropped.
 */
static int reclaim_channels(zimp_heap *h)
{
    int n = zimp__channels_reclaim(h, &h->chans, h->own_chan, &h->chans_missed, &h->chans_err);
    zimp__clear_detail();
    return n;
}

/*
 * The data of a block named by a handle, without a reference: the caller
 * knows the block is held (a channel holds it while a receiver reads it).
 * NULL if the handle names no whole block of this heap.
 */
const void *zimp__heap_block(zimp_heap *h, const struct zimp_ref *ref, size_t *len)
{
    uint64_t u;
    if (!chan_block(h, ref, &u))
        return NULL;
    uint64_t n = block_units(h, u);
    uint32_t l = zimp_load_relaxed(&h->descs[u].len);
    if (n == 0 || l == 0 || l > n * ZIMP_HEAP_UNIT)
        return NULL;
    *len = l;
    return data_ro(h) + u * ZIMP_HEAP_UNIT;
}

/* Maps heap `name` read-only, without a member record (receivers of a channel). */
int zimp__heap_map(const char *name, zimp_heap **out)
{
    zimp_heap *h = calloc(1, sizeof *h);
    if (!h)
        return zimp__fail(-ENOMEM, "out of memory");
    int r = inspect(name, h, false);
    if (r != 0) {
        inspect_done(h);
        free(h);
        return r;
    }
    h->fork_gen = zimp__fork_token();
    *out = h;
    return 0;
}

/* Unmaps what zimp__heap_map mapped. */
void zimp__heap_unmap(zimp_heap *h)
{
    if (!h)
        return;
    inspect_done(h);
    free(h);
}

uint32_t zimp__heap_id(const zimp_heap *h) { return h->id; }
uint64_t zimp__heap_max_block(const zimp_heap *h) { return h->units * ZIMP_HEAP_UNIT; }
