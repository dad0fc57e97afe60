/* Private interfaces of the channel core (src/core). */
#ifndef ZIMP_CORE_INT_H
#define ZIMP_CORE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

#include "zimp/zimp.h"

#include "shm/layout_int.h"

#define ZIMP_SHM_DIR     "/dev/shm"
#define ZIMP_SHM_PREFIX  "zimp."
#define ZIMP_CHECK_NS    10000000ull     /* liveness re-check period while blocked: 10 ms */
#define ZIMP_FENCE_QUIET 256u            /* M3: publications without a sleeper before F stops */
#define ZIMP_SPIN_DEFAULT_NS 5000ull     /* first budget of the adaptive policy */
#define ZIMP_SPIN_MIN_NS     500ull
#define ZIMP_SPIN_MAX_NS     20000ull    /* about four futex wake-ups: longer waits should sleep */
#define ZIMP_SPIN_CROWD_NS   1000000ull  /* oversubscribed: spin, yielding, this long before sleeping */

/* The general path behind a fast one: kept out of line, so that the fast
 * path's function saves no registers and sets up no frame for it. */
#define ZIMP_SLOW_PATH __attribute__((noinline))

/* A handle's waiting policy (zimp_*_set_spin) and what the adaptive one learned. */
struct zimp_spin {
    uint64_t setting;         /* ns, 0 (block), UINT64_MAX (busy-wait) or ZIMP_SPIN_ADAPTIVE */
    uint64_t budget;          /* adaptive: the current spin budget, ns */
    zimp_a64 *sleeps;         /* the member record's counters (one writer), or NULL */
    zimp_a64 *wakeups;
    /* ZIMP_F_MEMBARRIER: the waker may publish without a store-load fence; the
     * sleeper issues zimp__membarrier between announcing its sleep and its last
     * look unless this word (the wait page's sender_fences) says it fences. */
    zimp_a32 *sender_fences;
};
/* Counts one more in a member record's counter (its only writer). */
static inline void zimp__count(zimp_a64 *c)
{
    if (c)
        zimp_store_relaxed(c, zimp_load_relaxed(c) + 1);
}
/* The policy of a new handle: ZIMP_SPIN_NS if set, else adaptive. */
void zimp__spin_init(struct zimp_spin *sp);
/* Sets a handle's policy (zimp_*_set_spin). */
void zimp__spin_set(struct zimp_spin *sp, uint64_t spin_ns);

/* ---- util.c: errors, names, time ---- */

/* Sets the thread-local detail string and returns err (for `return zimp__fail(...)`). */
int zimp__fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void zimp__clear_detail(void);
/* Reads n bytes at off, all or nothing: false if the file ends first (cut short meanwhile). */
bool zimp__read_all(int fd, void *buf, size_t n, off_t off);
/* Sets the detail string of a call that succeeded with something to say (no error traced). */
void zimp__note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Validates a channel name and writes its segment path; 0 or negative errno. */
int zimp__path(const char *name, char *path, size_t cap);
/* Path of segment `name` under ZIMP_SHM_DIR with `prefix`; `kind` names it in errors. */
int zimp__shm_path(const char *prefix, const char *kind, const char *name, char *path, size_t cap);
/* Opens segment `path` (no symlink, a regular file of a trusted owner); fstat in *st. */
int zimp__segment_open(const char *path, const char *kind, const char *name, int flags,
                       struct stat *st, int *fd_out);
/* Calls fn(name, arg) for every segment named prefix + name in ZIMP_SHM_DIR (zimp_list). */
int zimp__list_segments(const char *prefix, int (*fn)(const char *name, void *arg), void *arg);
/* Builds, initialises (init writes its ready word last) and links a segment at path. */
int zimp__segment_create(const char *path, uint64_t size, uint32_t mode,
                         void (*init)(void *base, uint64_t ino, void *ctx), void *ctx);
uint64_t zimp__now_ns(void);
/*
 * The same clock at the resolution of a scheduler tick (1-10 ms), read
 * without the time counter: a few ns instead of tens. For throttling checks
 * whose period (ZIMP_CHECK_NS) is longer than a tick; it may lag
 * zimp__now_ns by a tick or more (up to 6 ms measured here, in a VM), never
 * lead it: pace by it at half the period to keep within the period.
 */
uint64_t zimp__coarse_ns(void);
/* Absolute deadline for a contract timeout: UINT64_MAX for "forever". */
uint64_t zimp__deadline(int64_t timeout_ns);
uint32_t zimp__crc32c(const void *buf, size_t len);

/* ---- proc.c: process identity and liveness ---- */

/* Identity of a process: its start time in clock ticks since boot (0 if unknown). */
uint64_t zimp__self_ident(void);

/* Per-peer liveness cache: one per member record a handle watches. */
#include "core/fdid.h"     /* descriptors the program may take */

struct zimp_peer {
    uint64_t owner;      /* owner word the cache describes */
    int pidfd;           /* -1: none (yet) */
    struct zimp_fdid pidfd_id;       /* what pidfd was when opened (non-blocking: PIDFD_NONBLOCK) */
    bool verified;       /* identity checked against the record's ident */
    bool dead;
    bool polled;         /* pidfd is in the receiver's epoll set */
    uint64_t exec_at;    /* coarse clock of the last exec check, 0: none yet */
    uint64_t image;      /* the process image that check saw mapping the segment (exec_image) */
};
void zimp__peer_init(struct zimp_peer *p);
void zimp__peer_reset(struct zimp_peer *p);
/*
 * The exec check's facts of a member: the segment's file (dev, ino; ino 0:
 * no exec check), the address of the member's mapping and its process
 * image when it joined (0: unknown). A process that exec()s keeps its pid
 * and identity but gets another image and loses its mappings: a member
 * whose process image changed since its join is dead, or, with the image
 * unknown, one whose process no longer maps the segment there. Looked at
 * once per ZIMP_EXEC_CHECK_NS per peer.
 */
struct zimp_where { uint64_t dev, ino, addr, image; };
/* This process's image (zimp__member_alive's `image`), 0 if unknown. */
uint64_t zimp__self_image(void);
#define ZIMP_EXEC_CHECK_NS 1000000000ull
/*
 * Whether the member owning a record (owner word, ident) is alive. Dead
 * means exited, zombie, its pid now belongs to another process (or names a
 * thread of one), or, with `w`, it exec()ed (no longer maps the segment).
 */
bool zimp__member_alive(struct zimp_peer *p, uint64_t owner, uint64_t ident, const struct zimp_where *w);
bool zimp__peer_alive(struct zimp_peer *p, uint64_t owner, uint64_t ident);
/* One check without a cache (inspection and cleanup paths). */
bool zimp__alive_once(uint64_t owner, uint64_t ident);
bool zimp__member_alive_once(uint64_t owner, uint64_t ident, const struct zimp_where *w);

/* ---- notify.c: futex sleeping and waking ---- */

/*
 * Condition for zimp__wait: returns > 0 when satisfied, 0 to keep waiting,
 * < 0 for an error. `slow` asks it to also run its liveness checks.
 */
typedef int (*zimp_cond_fn)(void *ctx, bool slow);

/*
 * Waits until cond holds: spins as the policy says, then sleeps on `futex`
 * after setting `waiting`, waking at least every ZIMP_CHECK_NS for a slow
 * check. deadline is absolute (UINT64_MAX: forever). Returns cond's
 * positive value, its error, or -ETIMEDOUT / -EAGAIN (deadline 0).
 */
int zimp__wait(zimp_a32 *futex, zimp_a32 *waiting, zimp_cond_fn cond, void *ctx,
               struct zimp_spin *sp, uint64_t deadline, uint64_t *last_slow);
/* Wakes every sleeper of (futex, waiting) if the waiting flag is set. */
void zimp__wake_sleepers(zimp_a32 *futex, zimp_a32 *waiting);
/* The waker's side: one load while nobody sleeps (the common case, inline). */
static inline void zimp__wake(zimp_a32 *futex, zimp_a32 *waiting)
{
    if (zimp_load_sc(waiting))
        zimp__wake_sleepers(futex, waiting);
}

/* ---- large messages: the heap side (src/heap/heap.c implements these) ---- */

/* Takes a member record for a channel (never reaped by liveness). */
int zimp__heap_channel_take(zimp_heap *h, uint32_t *index, uint64_t *owner);
/* Frees channel record `index` (if still `owner`) and every block it holds, if the
 * heap's lock is had by `deadline`: true if the record is no longer `owner`. */
bool zimp__heap_channel_free(zimp_heap *h, uint32_t index, uint64_t owner, uint64_t deadline);
/* Retiring a channel's record safely against joiners (see heap.c). */
bool zimp__heap_channel_mark(zimp_heap *h, uint32_t index, uint64_t owner, bool on);
uint64_t zimp__heap_channel_marked(uint64_t owner);
bool zimp__heap_channel_current(const zimp_heap *h, uint32_t index, uint64_t owner);
bool zimp__heap_channel_ours(const zimp_heap *h, uint32_t index, uint64_t owner);
/* Adds the channel record's bit to a block this process holds: 0 or negative errno. */
int zimp__heap_channel_hold(zimp_heap *h, const struct zimp_ref *ref, uint32_t index);
/* Drops the channel record's bit from the block `ref` names (same generation only). */
bool zimp__heap_channel_drop(zimp_heap *h, const struct zimp_ref *ref, uint32_t index, uint64_t owner, bool keep);
/* H5: record `index` is the channel this handle sends on (its own H3 drops its holds). */
void zimp__heap_own_channel(zimp_heap *h, uint32_t index);
/* H5: the heap's lock around drops from outside a channel (false: not had; try later). */
bool zimp__heap_drops_begin(zimp_heap *h);
void zimp__heap_drops_end(zimp_heap *h);
/* Records the inode of channel record `index`'s file, for H5. */
void zimp__heap_channel_locate(zimp_heap *h, uint32_t index, uint64_t owner, uint64_t ino);
/* H5: whether record i is a channel's with an inode (*owner unmarked, *ino) that may hold blocks (*held). */
bool zimp__heap_channel_record(zimp_heap *h, uint32_t i, uint64_t *owner, uint64_t *ino, uint64_t *held);
/* Member records of the heap. */
uint32_t zimp__heap_records(const zimp_heap *h);
/* The data of a held block, without a reference; NULL if ref names no block. */
const void *zimp__heap_block(zimp_heap *h, const struct zimp_ref *ref, size_t *len);
/* zimp_heap_open, waiting `join_wait_ns` at most to clean a dead member's record it takes. */
int zimp__heap_open_wait(const char *name, zimp_heap **out, uint64_t join_wait_ns);
/* zimp_heap_reap, leaving what needs the heap's lock if it is not had by `deadline`. */
int zimp__heap_reap_until(zimp_heap *h, uint64_t deadline);
/* zimp_heap_alloc, waiting for the heap's lock until `deadline` (zimp__deadline's clock). */
int zimp__heap_alloc(zimp_heap *h, size_t len, void **buf, struct zimp_ref *ref, uint64_t deadline);
/* Maps heap `name` read-only without a member record; zimp__heap_unmap undoes it. */
int zimp__heap_map(const char *name, zimp_heap **out);
void zimp__heap_unmap(zimp_heap *h);
uint32_t zimp__heap_id(const zimp_heap *h);
/* Bytes of the largest block the heap could hold. */
uint64_t zimp__heap_max_block(const zimp_heap *h);

/* ---- channel.c: segment files and mappings ---- */

struct zimp_map {
    void *base;
    uint64_t size;
    struct zimp_geometry g;
    uint32_t flags;                /* the header's: public flags, ZIMP_F_HEAP */
    zimp_heap *heap;               /* ZIMP_F_HEAP: senders' membership, receivers' read-only map */
    uint32_t heap_id;              /* as the validated header says */
    uint32_t heap_member;          /* the channel's record in the heap */
    uint64_t heap_owner;
    int heap_role;                 /* enum zimp_role the heap was opened for */
    char heap_name[ZIMP_NAME_MAX + 1];
    uint32_t inline_max;           /* messages up to this length travel in the slot line */
    uint64_t stall_timeout_ns;
    int fd;
    struct zimp_fdid fd_id;
    bool snapshot;                 /* base is a private copy of the control part (zimp__map_snapshot) */
};
enum zimp_role { ZIMP_ROLE_SENDER, ZIMP_ROLE_RECEIVER };
/* Opens and validates channel `name`, mapped for `role` (receivers: read-only). */
int zimp__map_open(const char *name, enum zimp_role role, struct zimp_map *m);
/* Opens and validates channel `name` for inspection: all read-only, no membership. */
int zimp__map_open_readonly(const char *name, struct zimp_map *m);
/*
 * A private copy of channel `name`'s header, wait page and member records
 * (not its slots), read with pread: an inspector's look, which a segment
 * truncated meanwhile cannot turn into SIGBUS. m->base is the copy;
 * zimp__map_close frees it.
 */
int zimp__map_snapshot(const char *name, struct zimp_map *m);
void zimp__map_close(struct zimp_map *m);
/* After a member left: frees an unlinked large-message channel's heap record if nobody uses it. */
void zimp__heap_channel_release(struct zimp_map *m);
/*
 * H5: for each channel record of heap h that may hold blocks, finds and maps
 * its channel (kept in *cache, one entry per record, between calls) and drops,
 * through h, its holds of messages all its live receivers have passed; how
 * many. *missed: channels that could not be looked at, *err: why (the last).
 */
struct zimp_chan_hint;
int zimp__channels_reclaim(zimp_heap *h, struct zimp_chan_hint **cache, uint32_t own, int *missed, int *err);
/* Forgets the channels whose records changed hands since (their mappings); `own`: a record to leave out. */
void zimp__channels_prune(zimp_heap *h, struct zimp_chan_hint *cache, uint32_t own);
/* Unmaps and frees what zimp__channels_reclaim keeps for heap handle h's n records. */
void zimp__channels_forget(struct zimp_chan_hint *cache, uint32_t n);
/* The heap's reaper: frees channel record `index` (owner word o) if its channel was removed and nobody uses it. */
void zimp__channel_reap_retired(zimp_heap *h, uint32_t index, uint64_t o, uint64_t deadline);
/* Finds a free (or dead member's) record and takes it; index or negative errno. */
int zimp__join(struct zimp_map *m, enum zimp_role role, uint32_t state, uint64_t *owner_out);
/* Makes a record free again if it still holds `owner`. */
void zimp__leave(zimp_a64 *owner_word, zimp_a64 *closed, uint64_t owner);

/*
 * Whether a live sender record (ACTIVE, or EVICTED: it may still publish
 * until E3 skips its claim) has intent p, or with p == ZIMP_ANY_SENDER
 * whether any live sender is an ACTIVE member. peers is the caller's
 * liveness cache, one entry per sender record.
 */
#define ZIMP_ANY_SENDER (UINT64_MAX - 1)
bool zimp__claim_live(struct zimp_map *m, struct zimp_peer *peers, uint64_t p);
/* Whether receiver record i of m, now owner word o, is alive: through peers[i], or (NULL) a look of its own. */
bool zimp__receiver_alive(const struct zimp_map *m, struct zimp_peer *peers, uint32_t i, uint64_t o);
/* Whether sender record sr of m, now owner word o, is an active or evicted member alive (peer: its cache). */
bool zimp__sender_live(const struct zimp_map *m, struct zimp_sender_rec *sr, uint64_t o, struct zimp_peer *peer);
/* The exec check's facts of the member owning `o` of channel m, from its record's words (0 while it joins). */
static inline struct zimp_where zimp__where(const struct zimp_map *m, zimp_a64 *mapped, zimp_a64 *image,
                                            zimp_a64 *ident_of, uint64_t o)
{
    return (struct zimp_where){ m->fd_id.dev, m->fd_id.ino, zimp__ident(mapped, ident_of, o),
                                zimp__ident(image, ident_of, o) };
}

/*
 * Fork token of this process: a handle takes it at open (zimp__fork_token);
 * in a child of any kind of fork the word reads 0 until the child's first
 * open arms it anew, so an inherited handle holds a token that is no longer
 * the process's and must not touch shared state (calls return -EBADF).
 */
extern zimp_a32 *zimp__fork_word;
unsigned zimp__fork_token(void);
static inline bool zimp__inherited(unsigned token) { return token != zimp_load_relaxed(zimp__fork_word); }

/* ---- asymmetric fences (ZIMP_F_MEMBARRIER) ---- */

/* membarrier(2) GLOBAL_EXPEDITED: 0 or -errno. */
int zimp__membarrier(void);
/* Whether the kernel offers it and this process may call it: 0 or -errno. */
int zimp__membarrier_usable(void);
/*
 * M1, M2: the sender's fence, issued by a receiver about to sleep, arm or
 * join, unless `sender_fences` (NULL: not a ZIMP_F_MEMBARRIER channel) says
 * the sender fences now. 0, or -errno when the barrier was needed and failed.
 */
static inline int zimp__sender_fence(zimp_a32 *sender_fences)
{
    if (!sender_fences || zimp_load_sc(sender_fences))
        return 0;
    return zimp__membarrier();
}
/* Registers this process as a target of zimp__membarrier: 0 or -errno. */
int zimp__membarrier_register(void);

/* ---- notification sockets (N1-N4) ---- */

/* Abstract socket address of receiver `index` with owner generation `gen`. */
socklen_t zimp__notify_addr(uint64_t nonce, uint32_t index, uint32_t gen, struct sockaddr_un *a);
/* Inode of this process's network namespace, 0 if unknown. */
uint64_t zimp__netns(void);
/* Inode of this process's pid namespace, 0 if unknown (no /proc of our own: /proc/self then names nothing). */
uint64_t zimp__pidns(void);

/* ---- the handles ---- */

struct zimp_sender {
    struct zimp_map m;
    unsigned fork_gen;        /* zimp__fork_token() at open */
    pid_t pid;                /* the opener */
    uint32_t index;
    uint64_t owner;
    struct zimp_sender_rec *rec;
    uint64_t min_head;        /* cached minimum head of live receivers */
    uint64_t joins_seen;      /* wait.joins when min_head was computed */
    uint64_t held;            /* claimed, unpublished position, or ZIMP_NO_INTENT */
    void *loan_buf;           /* non-NULL while a loan is out */
    uint64_t held_seq;        /* seq of the held position's slot as S4 read it */
    bool solo;                /* the channel has one sender record: S2, P2 are stores */
    bool fenceless;           /* solo on a ZIMP_F_MEMBARRIER channel, registered: F only while fencing */
    bool fencing;             /* ZIMP_F_MEMBARRIER: F now, as sender_fences says (M3); for good unless fenceless */
    uint32_t quiet;           /* fencing: publications in a row that found no sleeper */
    bool zero_watch;          /* a scan saw an evicted receiver zeroing: claims look (Z3) */
    bool loan_heap;           /* the loan is a heap block (large message), loan_ref names it */
    struct zimp_ref loan_ref;
    size_t loan_len;
    struct zimp_spin spin;
    uint64_t last_slow;
    uint64_t blocked_since;   /* when the held position started waiting (stall timer) */
    uint64_t room_for;        /* the tail for which room_cond found room */
    uint64_t abandoned;       /* a position found abandoned (resolved for good) */
    uint64_t own_from;        /* alone: every position from here on was claimed by this handle, */
                              /* and, once it claims the next, published or skipped by it */
    uint64_t *reclaim;        /* per slot: a hold reclaim_holds may drop (H3), or 0 */
    uint64_t heap_need;       /* waiting for heap room: receivers below it hold it (H3), or 0 */
    struct zimp_peer *peers;  /* per receiver record */
    struct zimp_peer *speers; /* per sender record */
    int sock;                 /* datagram socket for notifications (N3), -1 */
    struct zimp_fdid sock_id;
};

struct zimp_receiver {
    struct zimp_map m;
    unsigned fork_gen;        /* zimp__fork_token() at open */
    pid_t pid;                /* the opener */
    uint32_t index;
    uint64_t owner;
    struct zimp_receiver_rec *rec;
    uint64_t pos;             /* next position to read */
    uint64_t start;           /* tail when it joined: below it, only `pending` is read */
    uint64_t *pending;        /* claims below start unpublished at join (sorted) */
    uint32_t npending;
    bool borrowed;            /* zimp_read outstanding on position pos - 1 */
    bool lossy;               /* joined as ZIMP_M_LOSSY: senders write past it (LR1-LR3) */
    bool cur_heap;            /* the message at pos (or borrowed) is a heap block (H4) */
    bool plain;               /* lossless, no checksum, no zeroing: the fast paths may serve it */
    uint64_t missed;          /* lossy: positions lost so far (mirrored in the record) */
    bool gap_untold;          /* lossy: a gap found while arming, -ENOBUFS not yet returned */
    uint32_t borrow_len;      /* bytes zero_if_last clears at its release (0: a heap block) */
    struct zimp_spin spin;
    uint64_t last_slow;
    /* Polls (timeout 0): the sender open and close counts last seen, and
     * whether no sender record was taken then (the end of the stream is near). */
    uint64_t opens_seen, closes_seen;
    bool senderless;
    /* The stream ended (R5 said -EPIPE) at position ended_at - 1 (0: not ended)
     * with sender_opens at ended_opens: -EPIPE again until a sender opens. */
    uint64_t ended_at, ended_opens;
    struct zimp_peer *peers;  /* per sender record */
    int sock;                 /* bound notification socket (N1), -1 */
    int timer;                /* 10 ms timer while a sender cannot notify (N4), -1 */
    struct zimp_fdid sock_id, timer_id, epfd_id;
    bool timer_on;
    int epfd;                 /* what zimp_receiver_fd returns, -1 until asked */
};

/* Min head over live receivers; reclaims dead ones when `slow`. Sender side. */
uint64_t zimp__min_head(zimp_sender *s, uint64_t tail, bool slow);
/* The same over channel m (peers: a liveness cache, or NULL); `reap` frees dead receivers' records;
 * *zeroing (if not NULL) is set when an evicted receiver may be zeroing (Z3). */
uint64_t zimp__min_head_of(struct zimp_map *m, struct zimp_peer *peers, uint64_t tail, bool slow, bool reap,
                           bool *zeroing);
/*
 * H3/H5: drops, through `heap`, every hold of channel m on a message all its
 * live receivers have passed; how many. `scratch`: a word per slot. `owner`:
 * the channel's heap record's owner word, checked before each drop (H5), or
 * 0 (a member of the channel). `keep`: a last hold's block is kept for the
 * caller's next message of its length. *held (if not NULL): whether any hold
 * was there when it looked.
 */
int zimp__reclaim_holds(struct zimp_map *m, struct zimp_peer *peers, zimp_heap *heap, uint64_t *scratch,
                        uint64_t owner, bool keep, bool *held);
/* Sends a byte to each armed receiver's socket (sender side, N3). */
void zimp__notify_fds(zimp_sender *s);

#endif /* ZIMP_CORE_INT_H */
