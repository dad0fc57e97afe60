/*
 * Channel segments: create, open, validate, join, leave, inspect, reap.
 *
 * A segment is built under a temporary name no channel can have
 * (/dev/shm/.zimp-tmp.PID.N), initialised, given its final mode, marked
 * ready, and only then linked to /dev/shm/zimp.NAME. So a name never shows
 * a half-made segment; a creator that crashes leaves only a temporary file,
 * which zimp_reap() removes once that creator is dead.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/core_int.h"
#include "trace/trace_hook.h"

#define TMP_PREFIX ".zimp-tmp."
#define RETIRED_PREFIX ".zimp-retired."
/* Freeing a removed channel's heap record waits this long for the heap's lock, then leaves it
 * to the heap's reaper (a live process holding the lock long, a stopped one, holds nobody up):
 * a millisecond when the reaper can find the channel by its retired name, else 100 ms. */
#define RETIRE_WAIT_NS 100000000ull
#define RETIRED_WAIT_NS 1000000ull

/* ---- create / unlink ---- */

static uint32_t pow2_at_least(uint32_t v)
{
    uint32_t p = 2;
    while (p < v && p < ZIMP_SLOTS_MAX)
        p <<= 1;
    return p;
}

/*
 * Builds a segment of `size` bytes under a temporary name, lets init() fill
 * it (its `ready` word last; it gets the file's inode too), gives it its
 * mode and links it to `path`: -EEXIST if the name is taken. Shared by
 * channels and heaps.
 */
int zimp__segment_create(const char *path, uint64_t size, uint32_t mode,
                         void (*init)(void *base, uint64_t ino, void *ctx), void *ctx)
{
    static atomic_uint counter;
    char tmp[512];
    int r;
    /* A temporary name may be left by a dead creator that had our pid: take the next. */
    int fd, tries = 0;
    do {
        snprintf(tmp, sizeof tmp, "%s/" TMP_PREFIX "%d.%u", ZIMP_SHM_DIR, (int)getpid(),
                 atomic_fetch_add(&counter, 1));
        fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    } while (fd < 0 && errno == EEXIST && ++tries < 64);
    if (fd < 0)
        return zimp__fail(-errno, "cannot create %s: %s", tmp, strerror(errno));
    /* Reserve the memory now: a sparse segment would raise SIGBUS on a full /dev/shm. */
    if ((r = posix_fallocate(fd, 0, (off_t)size)) != 0) {
        struct statvfs vfs;
        if (r == ENOSPC && statvfs(ZIMP_SHM_DIR, &vfs) == 0)
            zimp__fail(-r, "cannot reserve %llu bytes in %s: it holds %llu bytes, %llu free "
                       "(a container's default is 64 MiB: docker run --shm-size)",
                       (unsigned long long)size, ZIMP_SHM_DIR,
                       (unsigned long long)vfs.f_blocks * vfs.f_frsize,
                       (unsigned long long)vfs.f_bavail * vfs.f_frsize);
        else
            zimp__fail(-r, "cannot reserve %llu bytes in %s: %s", (unsigned long long)size,
                       ZIMP_SHM_DIR, strerror(r));
        r = -r;
        goto fail;
    }
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        r = zimp__fail(-errno, "mmap: %s", strerror(errno));
        goto fail;
    }
    struct stat st;
    init(base, fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0, ctx);
    munmap(base, size);
    if (fchmod(fd, mode) != 0) {
        r = zimp__fail(-errno, "fchmod: %s", strerror(errno));
        goto fail;
    }
    if (link(tmp, path) != 0) {
        r = errno == EEXIST ? zimp__fail(-EEXIST, "%s exists", path)
                            : zimp__fail(-errno, "cannot publish %s: %s", path, strerror(errno));
        goto fail;
    }
    unlink(tmp);
    close(fd);
    return 0;
fail:
    unlink(tmp);
    close(fd);
    return r;
}

struct channel_init {
    const struct zimp_geometry *g;
    const struct zimp_config *c;
    uint32_t mode;
    uint32_t heap_id, heap_member;  /* large messages: the heap and our record in it */
    uint64_t heap_owner;
    zimp_heap *heap;
    bool membarrier;                /* ZIMP_F_MEMBARRIER */
};

static void channel_init(void *base, uint64_t ino, void *ctx)
{
    const struct channel_init *ci = ctx;
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != (ssize_t)sizeof nonce)
        nonce = zimp__now_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)base;
    uint32_t flags = (ci->c->flags & ~ZIMP_NO_MEMBARRIER) | (ci->heap_id ? ZIMP_F_HEAP : 0) |
                     (ci->membarrier ? ZIMP_F_MEMBARRIER : 0);
    zimp__layout_init(base, ci->g, flags, ci->mode, ci->c->stall_timeout_ns, (int32_t)getpid(),
                      zimp__self_ident(), nonce);
    zimp__hdr(base)->pidns = zimp__pidns();
    if (ci->heap_id) {
        struct zimp_header *h = zimp__hdr(base);
        h->heap_id = ci->heap_id;
        h->heap_member = ci->heap_member;
        h->heap_owner = ci->heap_owner;
        snprintf(h->heap_name, sizeof h->heap_name, "%s", ci->c->heap);
        /* Before the channel has a name: H5 can find it from its first message on. */
        if (ino)
            zimp__heap_channel_locate(ci->heap, ci->heap_member, ci->heap_owner, ino);
    }
    /* Pairs with the acquire of `ready` in zimp__layout_validate. */
    zimp_store_release(&zimp__hdr(base)->ready, ZIMP_READY);
}

ZIMP_API int zimp_create(const char *name, const struct zimp_config *cfg)
{
    char path[512];
    struct zimp_config c = { 0 };
    struct zimp_geometry g;
    int r;

    zimp__clear_detail();
    if ((r = zimp__path(name, path, sizeof path)) != 0)
        return r;
    if (cfg)
        c = *cfg;
    if (c.slots > ZIMP_SLOTS_MAX)
        return zimp__fail(-EINVAL, "slots %u exceeds the limit %u", c.slots, ZIMP_SLOTS_MAX);
    if (c.slot_size > ZIMP_SLOT_SIZE_MAX)
        return zimp__fail(-EINVAL, "slot_size %u exceeds the limit %u", c.slot_size, ZIMP_SLOT_SIZE_MAX);
    if (c.max_senders > ZIMP_MAX_SENDERS)
        return zimp__fail(-EINVAL, "max_senders %u exceeds %u", c.max_senders, ZIMP_MAX_SENDERS);
    if (c.max_receivers > ZIMP_MAX_RECEIVERS)
        return zimp__fail(-EINVAL, "max_receivers %u exceeds %u", c.max_receivers, ZIMP_MAX_RECEIVERS);
    if (c.mode & ~0777u)
        return zimp__fail(-EINVAL, "mode 0%o has bits beyond 0777", c.mode);
    if (c.flags & ~(ZIMP_CHECKSUM | ZIMP_ZERO_ON_RELEASE | ZIMP_NO_MEMBARRIER))
        return zimp__fail(-EINVAL, "unknown flags 0x%x", c.flags);
    uint32_t slots = pow2_at_least(c.slots ? c.slots : ZIMP_DEFAULT_SLOTS);
    uint32_t slot_size = c.slot_size ? c.slot_size : ZIMP_DEFAULT_SLOT_SIZE;
    uint32_t senders = c.max_senders ? c.max_senders : ZIMP_DEFAULT_MAX_SENDERS;
    uint32_t receivers = c.max_receivers ? c.max_receivers : ZIMP_DEFAULT_MAX_RECEIVERS;
    uint32_t mode = c.mode ? c.mode : 0600;
    if (zimp__geometry(slots, slot_size, senders, receivers, c.heap != NULL, &g) != 0)
        return zimp__fail(-EINVAL, "segment for %u slots of %u bytes is too large", slots, slot_size);
    /*
     * One sender: it fences nothing after its messages when receivers can
     * make its stores visible with membarrier(2) instead; asked here of the
     * creator's process, and of each receiver at its open.
     */
    bool membarrier = senders == 1 && !(c.flags & ZIMP_NO_MEMBARRIER) && zimp__membarrier_usable() == 0;
    struct channel_init ci = { &g, &c, mode, 0, 0, 0, NULL, membarrier };
    /* Large messages: the channel takes a record of its own in the heap, which
     * holds the blocks in flight (they outlive their senders). */
    zimp_heap *heap = NULL;
    if (c.heap) {
        if ((r = zimp_heap_open(c.heap, &heap)) != 0)
            return r;
        if ((r = zimp__heap_channel_take(heap, &ci.heap_member, &ci.heap_owner)) != 0) {
            zimp_heap_close(heap);
            return r;
        }
        ci.heap_id = zimp__heap_id(heap);
        ci.heap = heap;
    }
    r = zimp__segment_create(path, g.segment_size, mode, channel_init, &ci);
    if (heap) {
        if (r != 0)
            zimp__heap_channel_free(heap, ci.heap_member, ci.heap_owner, zimp__now_ns() + RETIRE_WAIT_NS);
        zimp_heap_close(heap);
    }
    if (r == -EEXIST)
        return zimp__fail(-EEXIST, "channel '%s' exists", name);
    if (r == 0)
        ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_channel(ZIMP_EV_CREATE, ZIMP_TR_NONE, name, 0, 0, g.slots,
                                                     g.slot_size, g.max_senders, g.max_receivers));
    return r;
}

static bool count_live(struct zimp_map *m, uint32_t *senders, uint32_t *receivers);
static int map_validated(int fd, uint64_t size, int prot, struct zimp_map *m);

/*
 * Frees the channel's record in heap h, with the blocks it still holds, if
 * no live member uses the channel: marked first, then the count, so that a
 * member joining meanwhile either is counted or finds the mark and leaves
 * (zimp__join). True when the record is gone (freed now or before, or the
 * heap is another one than the channel's): nothing of the channel is left
 * in the heap.
 */
static bool retire_record(zimp_heap *h, struct zimp_map *m, uint64_t deadline)
{
    uint32_t ns, nr;
    uint64_t marked = zimp__heap_channel_marked(m->heap_owner);
    if (zimp__heap_id(h) != m->heap_id)
        return true;
    if (!zimp__heap_channel_mark(h, m->heap_member, m->heap_owner, true))
        return !zimp__heap_channel_ours(h, m->heap_member, m->heap_owner);   /* marked: another retirer's */
    if (count_live(m, &ns, &nr)) {
        zimp__heap_channel_mark(h, m->heap_member, m->heap_owner, false);
        return false;
    }
    if (zimp__heap_channel_free(h, m->heap_member, marked, deadline))
        return true;
    zimp__heap_channel_mark(h, m->heap_member, m->heap_owner, false);   /* lock busy: later */
    return false;
}

/*
 * retire_record in the channel's heap, opened by name, waiting `wait_ns` at
 * most for its lock; true if the heap is gone too. A heap that cannot be
 * opened now (every record taken, say) keeps the record for its own reaper.
 */
static bool free_heap_record(struct zimp_map *m, uint64_t wait_ns)
{
    zimp_heap *h;
    int r = zimp__heap_open_wait(m->heap_name, &h, wait_ns);
    if (r != 0)
        return r == -ENOENT;        /* the heap is gone, and its blocks with it */
    uint64_t deadline = zimp__now_ns() + wait_ns;
    bool gone = retire_record(h, m, deadline);
    if (gone)
        zimp__heap_reap_until(h, deadline); /* and what its dead senders still held */
    zimp_heap_close(h);
    return gone;
}

/*
 * The name a large-message channel's file takes when it is removed while
 * members still use it: hidden, and named after its record in the heap, so
 * that the heap's reaper can find it and free the record once those
 * members are all gone, even if they all died (zimp__channel_reap_retired).
 */
static void retired_path(uint32_t heap_id, uint32_t index, uint64_t owner, char *path, size_t cap)
{
    snprintf(path, cap, "%s/" RETIRED_PREFIX "%08x.%u.%u", ZIMP_SHM_DIR, heap_id, index,
             (unsigned)ZIMP_OWNER_GEN(owner));
}

/* Whether the file mapped by m is the one at path. */
static bool same_file(const struct zimp_map *m, const char *path)
{
    struct stat a, b;
    return fstat(m->fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

/*
 * A retired channel file at path: if no live member uses it, its heap
 * record goes (retire_record, in heap h by `deadline` if given, else in the
 * heap it names) and so does the file. 1 removed, 0 still in use or not a channel,
 * or negative errno.
 */
static int reap_retired(const char *path, zimp_heap *h, uint64_t deadline)
{
    struct zimp_map m;
    struct stat st;
    int fd = -1, r;
    uint32_t ns, nr;
    if ((r = zimp__segment_open(path, "retired channel", path, O_RDONLY, &st, &fd)) != 0)
        return r;
    if ((r = map_validated(fd, (uint64_t)st.st_size, PROT_READ, &m)) != 0) {
        close(fd);
        return r == -EPROTO ? 0 : r;        /* not a channel: not ours to remove */
    }
    bool gone = !count_live(&m, &ns, &nr) && (!(m.flags & ZIMP_F_HEAP) || (h ? retire_record(h, &m, deadline)
                                                                            : free_heap_record(&m, RETIRED_WAIT_NS)));
    if (gone && same_file(&m, path))
        unlink(path);
    zimp__map_close(&m);
    return gone;
}

/* The heap's reaper: the retired file of channel record `index` (owner word o), if any. */
void zimp__channel_reap_retired(zimp_heap *h, uint32_t index, uint64_t o, uint64_t deadline)
{
    char path[512];
    retired_path(zimp__heap_id(h), index, o, path, sizeof path);
    if (access(path, F_OK) == 0)
        reap_retired(path, h, deadline);
}

/* ---- H5: a member of the heap takes back what a channel holds for nobody ---- */

#define FIND_RETRY_NS (100 * 1000000ull)      /* a channel's file not found: first wait */
#define FIND_RETRY_MAX_NS (10000 * 1000000ull) /* ... doubling up to this */

/* What a heap handle keeps about one channel record between H5 passes. */
struct zimp_chan_hint {
    uint64_t owner;                /* the record's unmarked owner word the rest is about (0: none) */
    uint64_t ino;                  /* its file's inode */
    uint64_t retry_ns, wait_ns;    /* not found or not usable: no new look before retry_ns */
    int err;                       /* why not, or 0 */
    bool mapped;
    struct zimp_map m;
    uint64_t *scratch;             /* a word per slot */
};

static void hint_reset(struct zimp_chan_hint *c, uint64_t owner, uint64_t ino)
{
    if (c->mapped)
        zimp__map_close(&c->m);
    free(c->scratch);
    *c = (struct zimp_chan_hint){ .owner = owner, .ino = ino, .wait_ns = FIND_RETRY_NS };
}

void zimp__channels_forget(struct zimp_chan_hint *cache, uint32_t n)
{
    for (uint32_t i = 0; cache && i < n; i++)
        hint_reset(&cache[i], 0, 0);
    free(cache);
}

/*
 * Opens `name` in ZIMP_SHM_DIR if it is c's file and maps it, validated, if
 * it is the channel of heap h's record `index`. Writable: dropping a hold
 * is a compare-and-swap on its entry. 0 or a negative errno.
 */
static int map_record_file(zimp_heap *h, uint32_t index, struct zimp_chan_hint *c, const char *name)
{
    char path[512];
    struct stat st;
    int fd, r;
    if (snprintf(path, sizeof path, "%s/%s", ZIMP_SHM_DIR, name) >= (int)sizeof path)
        return -ENAMETOOLONG;
    if ((r = zimp__segment_open(path, "channel", name, O_RDWR, &st, &fd)) != 0)
        return r;
    if ((uint64_t)st.st_ino != c->ino) {
        close(fd);
        return -ENOENT;             /* replaced since the directory was read */
    }
    if ((r = map_validated(fd, (uint64_t)st.st_size, PROT_READ | PROT_WRITE, &c->m)) != 0) {
        close(fd);
        return r;
    }
    if (!(c->m.flags & ZIMP_F_HEAP) || c->m.heap_id != zimp__heap_id(h) || c->m.heap_member != index ||
        c->m.heap_owner != c->owner) {
        zimp__map_close(&c->m);
        return -EPROTO;
    }
    c->mapped = true;
    if (!(c->scratch = calloc(c->m.g.slots, sizeof *c->scratch))) {
        hint_reset(c, c->owner, c->ino);
        return -ENOMEM;
    }
    return 0;
}

/*
 * One look through the directory for the files of the records in `want`
 * (by inode: under a channel's name or its retired name); a record whose
 * file is not found, or cannot be used, is looked for again after a wait
 * that doubles each time (a channel still being made, or being removed, or
 * one this process may not write).
 */
static void find_files(zimp_heap *h, struct zimp_chan_hint *c, uint64_t want, uint64_t now)
{
    DIR *d = opendir(ZIMP_SHM_DIR);
    struct dirent *e;
    int derr = d ? 0 : -errno;
    uint64_t left = want;
    while (d && left && (e = readdir(d)) != NULL)
        for (uint64_t b = left; b; b &= b - 1) {
            uint32_t i = (uint32_t)__builtin_ctzll(b);
            if (e->d_ino != c[i].ino)
                continue;
            c[i].err = map_record_file(h, i, &c[i], e->d_name);
            if (c[i].err == 0)
                left &= ~(1ull << i);
            break;
        }
    if (d)
        closedir(d);
    for (uint64_t b = left; b; b &= b - 1) {
        struct zimp_chan_hint *x = &c[__builtin_ctzll(b)];
        if (x->err == 0)
            x->err = derr ? derr : -ENOENT;
        x->retry_ns = now + x->wait_ns;
        x->wait_ns = x->wait_ns * 2 < FIND_RETRY_MAX_NS ? x->wait_ns * 2 : FIND_RETRY_MAX_NS;
    }
}

/* Whether a channel mapped earlier is still whole (a file cut short would fault). */
static bool still_whole(struct zimp_chan_hint *c)
{
    struct stat st;
    return zimp__fd_is(c->m.fd, &c->m.fd_id) && fstat(c->m.fd, &st) == 0 && (uint64_t)st.st_size >= c->m.size;
}

/*
 * Forgets what the handle keeps about records that changed hands since (a
 * channel removed: its mapping would keep its memory), and returns the
 * records of channels that may hold blocks now, but for `own` (a sender's
 * own channel, whose holds its H3 drops).
 */
static uint64_t hints_refresh(zimp_heap *h, struct zimp_chan_hint *c, uint32_t own)
{
    uint64_t busy = 0;
    for (uint32_t i = 0; i < zimp__heap_records(h); i++) {
        uint64_t owner = 0, ino = 0, held = 0;
        if (i == own || !zimp__heap_channel_record(h, i, &owner, &ino, &held))
            owner = ino = held = 0;
        if (c[i].owner != owner || c[i].ino != ino || (c[i].mapped && !still_whole(&c[i])))
            hint_reset(&c[i], owner, ino);
        if (owner != 0 && held != 0)
            busy |= 1ull << i;
    }
    return busy;
}

void zimp__channels_prune(zimp_heap *h, struct zimp_chan_hint *cache, uint32_t own)
{
    if (cache)
        hints_refresh(h, cache, own);
}

/*
 * H5. Only records that may hold blocks are looked at (the heap counts
 * them). A channel is found by the inode its creator recorded
 * (zimp__heap_channel_locate) and stays mapped until its record changes
 * hands (looked at by every pass and by the heap's periodic reaping check)
 * or the heap handle closes. Its holds are then dropped as a sender's H3
 * drops them, except that nothing here frees a dead receiver's record or
 * keeps pidfds (each liveness is judged once), each drop checks under the
 * heap's lock that the record is still the channel's, and a block whose
 * last hold goes is freed, not kept.
 */
int zimp__channels_reclaim(zimp_heap *h, struct zimp_chan_hint **cache, uint32_t own, int *missed, int *err)
{
    uint32_t nrec = zimp__heap_records(h);
    *missed = 0;
    *err = 0;
    if (!*cache && !(*cache = calloc(nrec, sizeof **cache)))
        return 0;
    struct zimp_chan_hint *c = *cache;
    uint64_t now = zimp__now_ns(), want = 0, busy = hints_refresh(h, c, own);
    for (uint64_t b = busy; b; b &= b - 1) {
        uint32_t i = (uint32_t)__builtin_ctzll(b);
        if (!c[i].mapped && now >= c[i].retry_ns)
            want |= 1ull << i;
    }
    if (want)
        find_files(h, c, want, now);
    int n = 0;
    for (uint64_t b = busy; b; b &= b - 1) {
        struct zimp_chan_hint *x = &c[__builtin_ctzll(b)];
        if (x->mapped) {
            n += zimp__reclaim_holds(&x->m, NULL, h, x->scratch, x->owner, false, NULL);
        } else {
            (*missed)++;
            *err = x->err;
        }
    }
    return n;
}

/*
 * Gives the mapped large-message channel m its retired name (in `retired`;
 * empty if it cannot have one: then it is unlinked as before, and its blocks
 * wait for the heap if its members all die). The name is linked to the file
 * mapped, not to whatever `name` names by now, and never replaces another
 * file: a second unlinker of the same channel finds it taken and gets
 * -ENOENT (the channel is being removed) instead of retiring, under the same
 * name, a channel created there meanwhile. A file left there by an older
 * record of the same number and generation (its retirer died between freeing
 * the record and removing the file) is removed first.
 */
static int retire_name(struct zimp_map *m, const char *name, char *retired, size_t cap)
{
    char self[64];
    retired_path(m->heap_id, m->heap_member, m->heap_owner, retired, cap);
    snprintf(self, sizeof self, "/proc/self/fd/%d", m->fd);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (linkat(AT_FDCWD, self, AT_FDCWD, retired, AT_SYMLINK_FOLLOW) == 0)
            return 0;
        if (errno != EEXIST)
            break;
        if (same_file(m, retired))
            return zimp__fail(-ENOENT, "channel '%s' is being removed by another process", name);
        unlink(retired);
    }
    retired[0] = '\0';
    return 0;
}

/*
 * A large-message channel's blocks in flight go with it: at zimp_unlink when
 * no live member uses it, else at the close of the last one
 * (zimp__heap_channel_release), or, if they all die, at the next check of
 * the heap's reaper: the file keeps a retired name until then (retire_name).
 */
ZIMP_API int zimp_unlink(const char *name)
{
    char path[512];
    struct zimp_map m;
    int r;
    zimp__clear_detail();
    if ((r = zimp__path(name, path, sizeof path)) != 0)
        return r;
    /* Mapped before the name goes: the heap record is found through it. */
    bool heap = false;
    if (zimp__map_open_readonly(name, &m) == 0) {
        heap = (m.flags & ZIMP_F_HEAP) != 0;
        if (!heap)
            zimp__map_close(&m);
    }
    zimp__clear_detail();
    char retired[512] = "";
    if (heap && (r = retire_name(&m, name, retired, sizeof retired)) != 0) {
        zimp__map_close(&m);
        return r;
    }
    /* A retired channel's name goes only if it is still the channel mapped (nobody
     * else can remove it meanwhile: a second unlinker finds the retired name taken). */
    if ((!heap || !retired[0] || same_file(&m, path)) && unlink(path) != 0) {
        r = zimp__fail(-errno, "cannot unlink '%s': %s", name, strerror(errno));
        if (heap)
            zimp__map_close(&m);
        return r;
    }
    if (heap) {
        if (free_heap_record(&m, retired[0] ? RETIRED_WAIT_NS : RETIRE_WAIT_NS) && retired[0] &&
            same_file(&m, retired))
            unlink(retired);
        zimp__map_close(&m);
    }
    ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_channel(ZIMP_EV_UNLINK, ZIMP_TR_NONE, name, 0, 0, 0, 0, 0, 0));
    return 0;
}

void zimp__heap_channel_release(struct zimp_map *m)
{
    struct stat st;
    char retired[512];
    /* A descriptor the program took would be linked or judged in place of ours. */
    if (!(m->flags & ZIMP_F_HEAP) || !zimp__fd_is(m->fd, &m->fd_id) || fstat(m->fd, &st) != 0)
        return;
    retired_path(m->heap_id, m->heap_member, m->heap_owner, retired, sizeof retired);
    bool is_retired = same_file(m, retired);
    if ((st.st_nlink == 0 || is_retired) && free_heap_record(m, is_retired ? RETIRED_WAIT_NS : RETIRE_WAIT_NS) &&
        is_retired)
        unlink(retired);
}

/* ---- open / map ---- */

/* Whether a segment owner is trusted: the caller, root, or ZIMP_TRUSTED_UIDS. */
static bool owner_trusted(uid_t uid)
{
    if (uid == geteuid() || uid == 0)
        return true;
    const char *e = getenv("ZIMP_TRUSTED_UIDS");
    while (e && *e) {
        char *end;
        unsigned long v = strtoul(e, &end, 10);
        if (end == e)
            break;
        if (v == uid)
            return true;
        e = *end ? end + 1 : end;
    }
    return false;
}

static int open_segment(const char *name, int flags, struct stat *st, int *fd_out)
{
    char path[512];
    int r;
    if ((r = zimp__path(name, path, sizeof path)) != 0)
        return r;
    return zimp__segment_open(path, "channel", name, flags, st, fd_out);
}

int zimp__segment_open(const char *path, const char *kind, const char *name, int flags,
                       struct stat *st, int *fd_out)
{
    /* O_NONBLOCK: a FIFO (anyone may make one in /dev/shm) would block the
     * open until a writer came; it does nothing to a regular file. */
    int fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return zimp__fail(-ENOENT, "no %s '%s'", kind, name);
        if (e == ELOOP)
            return zimp__fail(-EPERM, "%s is a symbolic link: refused", path);
        return zimp__fail(-e, "cannot open %s: %s", path, strerror(e));
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        return zimp__fail(-EPROTO, "%s is not a regular file", path);
    }
    if (!owner_trusted(st->st_uid)) {
        close(fd);
        return zimp__fail(-EPERM, "%s is owned by uid %u, not by this user or root "
                          "(list trusted owners in ZIMP_TRUSTED_UIDS)", path, (unsigned)st->st_uid);
    }
    *fd_out = fd;
    return 0;
}

/* What a validated header says, into the map. */
static void map_from_header(struct zimp_map *m, const struct zimp_header *copy)
{
    m->flags = copy->flags;
    m->heap = NULL;
    m->heap_id = copy->heap_id;
    m->heap_member = copy->heap_member;
    m->heap_owner = copy->heap_owner;
    memcpy(m->heap_name, copy->heap_name, sizeof m->heap_name);
    m->inline_max = (m->flags & ZIMP_ZERO_ON_RELEASE) ? 0 : ZIMP_INLINE_MAX;
    m->stall_timeout_ns = copy->stall_timeout_ns;
}

/*
 * Maps and validates. A segment is linked under its name only once ready,
 * so a header that is not ready is as invalid as one with a bad magic.
 */
static int map_validated(int fd, uint64_t size, int prot, struct zimp_map *m)
{
    char why[160];
    struct zimp_header copy;
    if (size < sizeof(struct zimp_header) || size > ZIMP_SEGMENT_MAX)
        return zimp__fail(-EPROTO, "segment size %llu is not a zimp channel's", (unsigned long long)size);
    void *base = mmap(NULL, size, prot, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        return zimp__fail(-errno, "mmap: %s", strerror(errno));
    if (zimp__layout_validate(base, size, &m->g, &copy, why, sizeof why) != 0) {
        munmap(base, size);
        return zimp__fail(-EPROTO, "invalid channel segment: %s", why);
    }
    m->base = base;
    m->size = size;
    map_from_header(m, &copy);
    m->fd = fd;
    zimp__fd_note(fd, &m->fd_id);
    m->snapshot = false;
    return 0;
}

int zimp__map_open(const char *name, enum zimp_role role, struct zimp_map *m)
{
    struct stat st;
    int fd = -1, r;
    if ((r = open_segment(name, O_RDWR, &st, &fd)) != 0)
        return r;
    int prot = role == ZIMP_ROLE_SENDER ? PROT_READ | PROT_WRITE : PROT_READ;
    if ((r = map_validated(fd, (uint64_t)st.st_size, prot, m)) != 0) {
        close(fd);
        return r;
    }
    /* Members are told apart by pid: one in another pid namespace would judge the others dead. */
    uint64_t ns = zimp__hdr(m->base)->pidns, mine = zimp__pidns();
    if (ns != 0 && mine != 0 && ns != mine) {
        zimp__map_close(m);
        return zimp__fail(-EXDEV, "channel '%s' was made in another pid namespace (pid:[%llu], this "
                          "process is in pid:[%llu]): members must share one", name,
                          (unsigned long long)ns, (unsigned long long)mine);
    }
    if (role == ZIMP_ROLE_RECEIVER) {
        /*
         * Writable for a receiver: the wait page, the record table while
         * joining, and on ZIMP_ZERO_ON_RELEASE channels the slots (the last
         * receiver to finish a message zeroes it).
         */
        char *b = m->base;
        bool zero = m->flags & ZIMP_ZERO_ON_RELEASE;
        if (mprotect(b + m->g.off_wait, sizeof(struct zimp_wait), PROT_READ | PROT_WRITE) != 0 ||
            mprotect(b + m->g.off_receivers, (size_t)m->g.max_receivers * m->g.receiver_stride,
                     PROT_READ | PROT_WRITE) != 0 ||
            (zero && mprotect(b + m->g.off_data, m->g.segment_size - m->g.off_data,
                              PROT_READ | PROT_WRITE) != 0)) {
            r = zimp__fail(-errno, "mprotect: %s", strerror(errno));
            zimp__map_close(m);
            return r;
        }
    }
    /* Large messages: senders allocate in the heap, receivers only read it. */
    if (m->flags & ZIMP_F_HEAP) {
        r = role == ZIMP_ROLE_SENDER ? zimp_heap_open(m->heap_name, &m->heap)
                                     : zimp__heap_map(m->heap_name, &m->heap);
        if (r == 0 && zimp__heap_id(m->heap) != m->heap_id)
            r = zimp__fail(-EPROTO, "heap '%s' is not the one channel '%s' was made with",
                           m->heap_name, name);
        else if (r != 0) {
            char why[256];
            snprintf(why, sizeof why, "%s", zimp_last_detail());
            r = zimp__fail(r, "channel '%s' carries large messages in heap '%s': %s", name,
                           m->heap_name, why);
        }
        if (r != 0) {
            zimp__map_close(m);
            return r;
        }
        m->heap_role = role;
        if (role == ZIMP_ROLE_SENDER)
            zimp__heap_own_channel(m->heap, m->heap_member);   /* its own H3 drops our holds */
    }
    return 0;
}

void zimp__map_close(struct zimp_map *m)
{
    if (m->heap) {
        if (m->heap_role == ZIMP_ROLE_SENDER)
            zimp_heap_close(m->heap);
        else
            zimp__heap_unmap(m->heap);
        m->heap = NULL;
    }
    if (m->base && m->snapshot)
        free(m->base);
    else if (m->base)
        munmap(m->base, m->size);
    zimp__fd_close(&m->fd, &m->fd_id);             /* unless the program took the number */
    m->base = NULL;
}

/* ---- membership ---- */

struct member_words { zimp_a64 *owner, *ident, *ident_of, *closed, *mapped, *image; };

static struct member_words member(struct zimp_map *m, enum zimp_role role, uint32_t i)
{
    if (role == ZIMP_ROLE_SENDER) {
        struct zimp_sender_rec *r = zimp__srec(m->base, &m->g, i);
        return (struct member_words){ &r->owner, &r->ident, &r->ident_of, &r->closed, &r->mapped, &r->image };
    }
    struct zimp_receiver_rec *r = zimp__rrec(m->base, &m->g, i);
    return (struct member_words){ &r->owner, &r->ident, &r->ident_of, &r->closed, &r->mapped, &r->image };
}

/* Whether the member now holding owner word `o` of record w of channel m is alive. */
static bool member_alive(const struct zimp_map *m, struct member_words w, uint64_t o)
{
    struct zimp_where at = zimp__where(m, w.mapped, w.image, w.ident_of, o);
    return zimp__member_alive_once(o, zimp__ident(w.ident, w.ident_of, o), &at);
}

int zimp__join(struct zimp_map *m, enum zimp_role role, uint32_t state, uint64_t *owner_out)
{
    uint32_t n = role == ZIMP_ROLE_SENDER ? m->g.max_senders : m->g.max_receivers;
    int32_t pid = (int32_t)getpid();
    uint64_t ident = zimp__self_ident();

    /* Pass 0 takes a free record; pass 1 takes over the record of a dead member. */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < n; i++) {
            struct member_words w = member(m, role, i);
            uint64_t o = zimp_load_acquire(w.owner);
            if (pass == 0 && ZIMP_OWNER_STATE(o) != ZIMP_M_FREE)
                continue;
            if (pass == 1 && (member_alive(m, w, o) || zimp_load_acquire(w.owner) != o))
                continue;
            uint64_t mine = ZIMP_OWNER(ZIMP_OWNER_GEN(o) + 1, state, pid);
            if (zimp_cas_sc(w.owner, &o, mine)) {
                zimp_store_relaxed(w.ident, ident);
                zimp_store_relaxed(w.mapped, (uint64_t)(uintptr_t)m->base);
                zimp_store_relaxed(w.image, zimp__self_image());
                zimp_store_release(w.ident_of, mine);
                /* A large-message channel removed while we joined: its heap
                 * record is marked, or gone with the blocks (free_heap_record). */
                if ((m->flags & ZIMP_F_HEAP) &&
                    !zimp__heap_channel_current(m->heap, m->heap_member, m->heap_owner)) {
                    zimp_cas_sc(w.owner, &mine, ZIMP_OWNER(ZIMP_OWNER_GEN(mine), ZIMP_M_FREE, 0));
                    return zimp__fail(-ENOENT, "the channel was removed while this member joined");
                }
                *owner_out = mine;
                return (int)i;
            }
        }
    }
    return zimp__fail(-EUSERS, "all %u %s records are taken by live members", n,
                      role == ZIMP_ROLE_SENDER ? "sender" : "receiver");
}

void zimp__leave(zimp_a64 *owner_word_p, zimp_a64 *closed, uint64_t owner)
{
    uint64_t o = owner;
    /* Before the record is free: a watcher tells this close from a death (L1). */
    uint64_t w = zimp_load_acquire(closed);
    while (!atomic_compare_exchange_weak_explicit(closed, &w, zimp__closed_add(w, ZIMP_OWNER_GEN(owner)),
                                                  memory_order_release, memory_order_acquire))
        ;
    if (!zimp_cas_sc(owner_word_p, &o, ZIMP_OWNER(ZIMP_OWNER_GEN(owner), ZIMP_M_FREE, 0))) {
        /* Evicted meanwhile: free the evicted record too (same generation). */
        uint64_t ev = ZIMP_OWNER(ZIMP_OWNER_GEN(owner), ZIMP_M_EVICTED, ZIMP_OWNER_PID(owner));
        zimp_cas_sc(owner_word_p, &ev, ZIMP_OWNER(ZIMP_OWNER_GEN(owner), ZIMP_M_FREE, 0));
    }
}

bool zimp__receiver_alive(const struct zimp_map *m, struct zimp_peer *peers, uint32_t i, uint64_t o)
{
    struct zimp_receiver_rec *rr = zimp__rrec(m->base, &m->g, i);
    uint64_t ident = zimp__ident(&rr->ident, &rr->ident_of, o);
    struct zimp_where w = zimp__where(m, &rr->mapped, &rr->image, &rr->ident_of, o);
    return peers ? zimp__member_alive(&peers[i], o, ident, &w) : zimp__member_alive_once(o, ident, &w);
}

bool zimp__sender_live(const struct zimp_map *m, struct zimp_sender_rec *sr, uint64_t o, struct zimp_peer *peer)
{
    uint32_t st = ZIMP_OWNER_STATE(o);
    if (st != ZIMP_M_ACTIVE && st != ZIMP_M_EVICTED)
        return false;
    struct zimp_where w = zimp__where(m, &sr->mapped, &sr->image, &sr->ident_of, o);
    return zimp__member_alive(peer, o, zimp__ident(&sr->ident, &sr->ident_of, o), &w);
}

bool zimp__claim_live(struct zimp_map *m, struct zimp_peer *peers, uint64_t p)
{
    for (uint32_t i = 0; i < m->g.max_senders; i++) {
        struct zimp_sender_rec *sr = zimp__srec(m->base, &m->g, i);
        uint64_t o = zimp_load_acquire(&sr->owner);
        if (p == ZIMP_ANY_SENDER ? ZIMP_OWNER_STATE(o) != ZIMP_M_ACTIVE
                                 : zimp_load_acquire(&sr->intent) != p)
            continue;
        if (zimp__sender_live(m, sr, o, &peers[i]))
            return true;
    }
    return false;
}

/* ---- inspection and cleanup ---- */

/* Counts live members of a mapped segment; returns whether any process is live. */
static bool count_live(struct zimp_map *m, uint32_t *senders, uint32_t *receivers)
{
    *senders = *receivers = 0;
    for (int role = 0; role < 2; role++) {
        uint32_t n = role == ZIMP_ROLE_SENDER ? m->g.max_senders : m->g.max_receivers;
        for (uint32_t i = 0; i < n; i++) {
            struct member_words w = member(m, (enum zimp_role)role, i);
            uint64_t o = zimp_load_acquire(w.owner);
            if (ZIMP_OWNER_STATE(o) != ZIMP_M_FREE && member_alive(m, w, o))
                ++*(role == ZIMP_ROLE_SENDER ? senders : receivers);
        }
    }
    return *senders + *receivers > 0;
}

/* Whether the channel's creator still runs: it may not have opened its handles yet. */
static bool creator_alive(struct zimp_map *m)
{
    const struct zimp_header *h = m->base;
    return zimp__alive_once(ZIMP_OWNER(0, ZIMP_M_ACTIVE, h->creator_pid), h->creator_ident);
}

int zimp__map_open_readonly(const char *name, struct zimp_map *m)
{
    struct stat st;
    int fd = -1, r;
    if ((r = open_segment(name, O_RDONLY, &st, &fd)) != 0)
        return r;
    if ((r = map_validated(fd, (uint64_t)st.st_size, PROT_READ, m)) != 0)
        close(fd);
    return r;
}

/*
 * An inspector is no member: whoever can write the file may truncate it
 * while we look, and a mapping would answer with SIGBUS (an outside review
 * crashed `zimp stat` 15 times in 300 so). pread answers with a short read.
 */
int zimp__map_snapshot(const char *name, struct zimp_map *m)
{
    struct stat st;
    int fd = -1, r;
    if ((r = open_segment(name, O_RDONLY, &st, &fd)) != 0)
        return r;
    char why[160];
    struct zimp_header hdr, copy;
    void *buf = NULL;
    if ((uint64_t)st.st_size < sizeof hdr || !zimp__read_all(fd, &hdr, sizeof hdr, 0)) {
        r = zimp__fail(-EPROTO, "segment of %llu bytes is not a zimp channel's", (unsigned long long)st.st_size);
    } else if (zimp__layout_validate(&hdr, (uint64_t)st.st_size, &m->g, &copy, why, sizeof why) != 0) {
        r = zimp__fail(-EPROTO, "invalid channel segment: %s", why);
    } else if (!(buf = aligned_alloc(ZIMP_PAGE, (m->g.off_slots + ZIMP_PAGE - 1) & ~(uint64_t)(ZIMP_PAGE - 1)))) {
        r = zimp__fail(-ENOMEM, "out of memory");
    } else if (!zimp__read_all(fd, buf, m->g.off_slots, 0)) {
        r = zimp__fail(-EPROTO, "channel segment cut short while it was read");
    }
    close(fd);
    if (r != 0) {
        free(buf);
        return r;
    }
    m->base = buf;
    m->size = m->g.off_slots;
    map_from_header(m, &copy);
    m->fd = -1;
    m->fd_id = (struct zimp_fdid){ (uint64_t)st.st_dev, (uint64_t)st.st_ino, -1 };   /* the file, for exec checks */
    m->snapshot = true;
    return 0;
}

ZIMP_API int zimp_info(const char *name, struct zimp_info *out)
{
    struct zimp_map m;
    int r;
    zimp__clear_detail();
    if (!out)
        return zimp__fail(-EINVAL, "info output is NULL");
    if ((r = zimp__map_snapshot(name, &m)) != 0)
        return r;
    const struct zimp_header *h = m.base;
    memset(out, 0, sizeof *out);
    out->slots = m.g.slots;
    out->slot_size = m.g.slot_size;
    out->max_senders = m.g.max_senders;
    out->max_receivers = m.g.max_receivers;
    out->flags = m.flags & (ZIMP_CHECKSUM | ZIMP_ZERO_ON_RELEASE);
    if (m.g.max_senders == 1 && !(m.flags & ZIMP_F_MEMBARRIER))
        out->flags |= ZIMP_NO_MEMBARRIER;
    out->mode = h->mode & 0777u;
    out->stall_timeout_ns = m.stall_timeout_ns;
    out->segment_size = m.g.segment_size;
    out->layout_major = h->layout_major;
    out->layout_minor = h->layout_minor;
    out->creator_pid = creator_alive(&m) ? h->creator_pid : 0;
    count_live(&m, &out->senders, &out->receivers);
    out->published = zimp_load_acquire(&((struct zimp_header *)m.base)->tail);
    uint64_t slowest = out->published;
    for (uint32_t i = 0; i < m.g.max_receivers; i++) {
        struct zimp_receiver_rec *rr = zimp__rrec(m.base, &m.g, i);
        uint64_t o = zimp_load_acquire(&rr->owner), head = zimp_load_acquire(&rr->head);
        if (ZIMP_OWNER_STATE(o) == ZIMP_M_ACTIVE && head < slowest &&
            member_alive(&m, member(&m, ZIMP_ROLE_RECEIVER, i), o))
            slowest = head;
    }
    out->lag = out->published - slowest;
    zimp__map_close(&m);
    return 0;
}

ZIMP_API int zimp_members(const char *name, struct zimp_member_info *out, size_t cap)
{
    struct zimp_map m;
    int r;
    zimp__clear_detail();
    if (!out && cap)
        return zimp__fail(-EINVAL, "members output is NULL");
    if ((r = zimp__map_snapshot(name, &m)) != 0)
        return r;
    int n = 0;
    for (int role = 0; role < 2; role++) {
        uint32_t count = role == ZIMP_ROLE_SENDER ? m.g.max_senders : m.g.max_receivers;
        for (uint32_t i = 0; i < count; i++) {
            struct member_words w = member(&m, (enum zimp_role)role, i);
            uint64_t o = zimp_load_acquire(w.owner);
            uint32_t st = ZIMP_OWNER_STATE(o);
            if (st == ZIMP_M_FREE)
                continue;
            if ((size_t)n < cap) {
                struct zimp_member_info *e = &out[n];
                e->role = role == ZIMP_ROLE_SENDER ? ZIMP_MEMBER_SENDER : ZIMP_MEMBER_RECEIVER;
                e->index = i;
                e->pid = ZIMP_OWNER_PID(o);
                e->state = !member_alive(&m, w, o) ? ZIMP_MEMBER_DEAD
                           : st == ZIMP_M_EVICTED ? ZIMP_MEMBER_EVICTED : ZIMP_MEMBER_LIVE;
                e->flags = st == ZIMP_M_LOSSY ? ZIMP_MEMBER_LOSSY : 0;
                e->reserved = 0;
                e->missed = e->wakeups = 0;
                if (role == ZIMP_ROLE_SENDER) {
                    struct zimp_sender_rec *sr = zimp__srec(m.base, &m.g, i);
                    uint64_t q = zimp_load_acquire(&sr->intent);
                    e->position = q == ZIMP_NO_INTENT ? UINT64_MAX : q;
                    e->sleeps = zimp_load_relaxed(&sr->sleeps);
                } else {
                    struct zimp_receiver_rec *rr = zimp__rrec(m.base, &m.g, i);
                    e->position = zimp_load_acquire(&rr->head);
                    e->missed = zimp_load_relaxed(&rr->missed);
                    e->sleeps = zimp_load_relaxed(&rr->sleeps);
                    e->wakeups = zimp_load_relaxed(&rr->wakeups);
                }
            }
            n++;
        }
    }
    zimp__map_close(&m);
    return n;
}

int zimp__list_segments(const char *prefix, int (*fn)(const char *name, void *arg), void *arg)
{
    zimp__clear_detail();
    if (!fn)
        return zimp__fail(-EINVAL, "list callback is NULL");
    DIR *d = opendir(ZIMP_SHM_DIR);
    if (!d)
        return zimp__fail(-errno, "cannot read %s: %s", ZIMP_SHM_DIR, strerror(errno));
    struct dirent *e;
    int r = 0;
    size_t plen = strlen(prefix);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, plen) != 0 || e->d_name[plen] == '\0')
            continue;
        if ((r = fn(e->d_name + plen, arg)) != 0)
            break;
    }
    closedir(d);
    return r;
}

ZIMP_API int zimp_list(int (*fn)(const char *name, void *arg), void *arg)
{
    return zimp__list_segments(ZIMP_SHM_PREFIX, fn, arg);
}

/* Removes a creator's leftover temporary file if that creator is dead. */
static int reap_tmp(const char *file)
{
    int pid = atoi(file + strlen(TMP_PREFIX));
    if (pid <= 0)
        return 0;
    if (zimp__alive_once(ZIMP_OWNER(0, ZIMP_M_ACTIVE, pid), 0))
        return 0;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", ZIMP_SHM_DIR, file);
    return unlink(path) == 0;
}

/*
 * The layout major of a channel segment that has zimp's magic, or 0: one
 * of another major is another library's channel (it may be in use), not
 * damage.
 */
static unsigned layout_major_of(const char *name)
{
    struct stat st;
    int fd;
    struct zimp_header h;
    if (open_segment(name, O_RDONLY, &st, &fd) != 0)
        return 0;
    bool read = zimp__read_all(fd, &h, offsetof(struct zimp_header, header_size), 0);
    close(fd);
    return read && memcmp(h.magic, ZIMP_MAGIC, sizeof h.magic) == 0 ? h.layout_major : 0;
}

static int reap_one(const char *name, bool named)
{
    struct zimp_map m;
    uint32_t s, r;
    int rc = zimp__map_snapshot(name, &m);
    if (rc == -EPROTO && named) {        /* asked by name: an invalid segment goes too */
        unsigned major = layout_major_of(name);
        if (major != 0 && major != ZIMP_LAYOUT_MAJOR)
            return zimp__fail(-EPROTO, "channel '%s' has layout %u, this library knows %u: its members "
                              "cannot be judged here (zimp_unlink removes it)", name, major, ZIMP_LAYOUT_MAJOR);
        rc = zimp_unlink(name);
        return rc == 0 ? 1 : rc;
    }
    if (rc != 0)
        return rc;
    bool live = count_live(&m, &s, &r) || creator_alive(&m);
    zimp__map_close(&m);
    if (live)
        return 0;
    rc = zimp_unlink(name);
    return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

ZIMP_API int zimp_reap(const char *name)
{
    zimp__clear_detail();
    if (name)
        return reap_one(name, true);
    DIR *d = opendir(ZIMP_SHM_DIR);
    if (!d)
        return zimp__fail(-errno, "cannot read %s: %s", ZIMP_SHM_DIR, strerror(errno));
    struct dirent *e;
    int removed = 0;
    size_t plen = strlen(ZIMP_SHM_PREFIX);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0) {
            removed += reap_tmp(e->d_name);
        } else if (strncmp(e->d_name, RETIRED_PREFIX, strlen(RETIRED_PREFIX)) == 0) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s", ZIMP_SHM_DIR, e->d_name);
            removed += reap_retired(path, NULL, 0) == 1;
        } else if (strncmp(e->d_name, ZIMP_SHM_PREFIX, plen) == 0 && e->d_name[plen] != '\0') {
            removed += reap_one(e->d_name + plen, false) == 1;
        }
    }
    closedir(d);
    return removed;
}
