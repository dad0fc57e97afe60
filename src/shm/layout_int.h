/*
 * The shared-memory layout of a zimp channel: a file format.
 *
 * One segment per channel, /dev/shm/zimp.NAME, laid out as
 *
 *   0             +--------------------------------------+
 *                 | header           (1 page)            |  creator writes once; senders
 *                 |   line 0: identity and geometry      |  write only `tail` (line 1)
 *                 |   line 1: tail   line 2: opens/closes|  and the open/close counts (line 2)
 *   off_wait      +--------------------------------------+
 *                 | wait page        (1 page)            |  every member: futex words and
 *                 |                                      |  sleeper hints (damage = latency)
 *   off_senders   +--------------------------------------+
 *                 | sender records   (1 line each)       |  record i: its sender; a dead
 *                 |                                      |  one is reclaimed by anyone
 *   off_receivers +--------------------------------------+
 *                 | receiver records (1 page each)       |  record i: its receiver; senders
 *                 |                                      |  may evict or reclaim it
 *   off_slots     +--------------------------------------+
 *                 | slot headers     (1 line each)       |  slot of position p: the sender
 *   off_data      +--------------------------------------+  that claimed p, until it
 *                 | slot data  (data_stride bytes each;  |  publishes (on ZIMP_ZERO_ON_
 *                 |  page multiples from 2 KiB up)       |  RELEASE channels, the last
 *   segment_size  +--------------------------------------+  receiver zeroes the data)
 *
 * Data starts on a page and, for slots of 2 KiB and more, every slot's data
 * is whole pages: a zeroed message is a run of zero pages that a checkpointer
 * skips, and large messages start page-aligned.
 *
 * Positions: every message has a 64-bit position, handed out by `tail`
 * (claim = CAS tail t -> t+1, only once the slot has room: docs/protocol.md
 * S0-S2); its slot is position % slots. Position p is published when
 * slot.seq == p + 1, skipped when seq == (p + 1) | ZIMP_SEQ_SKIP. A
 * receiver's `head` is the position it reads next; every position below it
 * is released by that receiver. I2: a sender writes the slot of position p
 * only once every live receiver's head > p - slots and p - slots is
 * resolved (published, skipped or abandoned).
 *
 * Receivers map everything read-only except the wait page and their own
 * record page: a faulty receiver can damage only its record and the wait
 * hints. Senders map the segment read-write (they write message data).
 *
 * The geometry is a pure function of (slots, slot_size, max_senders,
 * max_receivers): an opener recomputes it and refuses any mismatch.
 */
#ifndef ZIMP_SHM_LAYOUT_INT_H
#define ZIMP_SHM_LAYOUT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "shm/atomic_int.h"
#include "zimp/zimp.h"

#define ZIMP_LINE 64u
#define ZIMP_PAGE 4096u
#define ZIMP_ALIGNED __attribute__((aligned(64)))

#define ZIMP_MAGIC        "ZIMPCHN"       /* 8 bytes with the NUL */
#define ZIMP_LAYOUT_MAJOR 4u              /* incompatible changes (4: sender records of two
                                             lines, every member record's `mapped` and `image`,
                                             the header's `pidns`) */
#define ZIMP_LAYOUT_MINOR 0u              /* compatible additions (in 3: 1: `closed` words,
                                             evict_pending; 2: large messages in a heap,
                                             ZIMP_F_HEAP; 3: sender_closes; 4: ZIMP_F_MEMBARRIER) */
#define ZIMP_READY        0x5a494d50u     /* "ZIMP": header complete */

/* Limits of the layout (beyond them create refuses with -EINVAL). */
#define ZIMP_SLOTS_MAX      (1u << 20)
#define ZIMP_SLOT_SIZE_MAX  (1u << 30)
#define ZIMP_SEGMENT_MAX    (1ull << 40)

/*
 * Header flag beyond the public ones: the channel carries messages longer
 * than a slot in a shared heap (a hold table follows the slot headers, and
 * the header names the heap). A library without it refuses the channel.
 */
#define ZIMP_F_HEAP      0x100u
/*
 * Header flag: the channel's one sender makes no store-load fence after its
 * messages; its receivers issue membarrier(2) before they sleep or read the
 * tail as joiners (docs/protocol.md, "membarrier"). A library without it
 * would sleep without it: it refuses the channel.
 */
#define ZIMP_F_MEMBARRIER 0x200u
/* Slot len flag: the message lives in the heap block of the slot's hold. */
#define ZIMP_LEN_HEAP    (1u << 31)
#define ZIMP_HEAP_MSG_MAX (ZIMP_LEN_HEAP - 1u)   /* longest large message: 2 GiB - 1 */

/* Member record ownership word: gen:24 | state:8 | pid:32. */
enum zimp_member_state {
    ZIMP_M_FREE = 0,
    ZIMP_M_ACTIVE = 1,
    ZIMP_M_EVICTED = 2,   /* removed by a sender (zimp_evict, zimp_evict_sender) */
    ZIMP_M_LOSSY = 3,     /* a receiver that holds no sender back (zimp_receiver_open_lossy) */
};
/* Whether a record in state st is a member's (live or dead): not free. */
static inline bool zimp__member_state(uint32_t st)
{
    return st == ZIMP_M_ACTIVE || st == ZIMP_M_LOSSY || st == ZIMP_M_EVICTED;
}
#define ZIMP_OWNER(gen, state, pid) \
    (((uint64_t)((gen) & 0xffffffu) << 40) | ((uint64_t)((state) & 0xffu) << 32) | (uint32_t)(pid))
#define ZIMP_OWNER_GEN(o)   ((uint32_t)((o) >> 40))
/*
 * A record's `closed` word (L1): which generations of its members closed
 * cleanly, written only by leaving members (one CAS loop each). Bits 63-40:
 * G, the generation of the newest clean close; bit 39: G is valid; bits
 * 38-0: bit j set when generation G - j - 1 closed cleanly. Generations
 * further back are not known (a watcher then asks whether the process runs).
 */
#define ZIMP_CLOSED_SPAN  39u
#define ZIMP_CLOSED_VALID (1ull << 39)
#define ZIMP_CLOSED_BITS  (ZIMP_CLOSED_VALID - 1)
static inline uint64_t zimp__closed_add(uint64_t w, uint32_t g)
{
    g &= 0xffffffu;
    uint64_t fresh = ZIMP_CLOSED_VALID | ((uint64_t)g << 40);
    if (!(w & ZIMP_CLOSED_VALID))
        return fresh;
    uint32_t top = (uint32_t)(w >> 40);
    uint32_t newer = (g - top) & 0xffffffu, older = (top - g) & 0xffffffu;
    if (newer == 0)
        return w;
    if (newer < (1u << 23)) {       /* g after G: shift the history, G joins it */
        uint64_t bits = newer > ZIMP_CLOSED_SPAN ? 0 : ((w & ZIMP_CLOSED_BITS) << newer) & ZIMP_CLOSED_BITS;
        if (newer - 1 < ZIMP_CLOSED_SPAN)
            bits |= 1ull << (newer - 1);
        return fresh | bits;
    }
    return older - 1 < ZIMP_CLOSED_SPAN ? w | (1ull << (older - 1)) : w;
}
/* Whether `closed` word w says generation g closed cleanly. */
static inline bool zimp__closed_has(uint64_t w, uint32_t g)
{
    if (!(w & ZIMP_CLOSED_VALID))
        return false;
    uint32_t older = ((uint32_t)(w >> 40) - (g & 0xffffffu)) & 0xffffffu;
    return older == 0 || (older - 1 < ZIMP_CLOSED_SPAN && (w & (1ull << (older - 1))));
}
#define ZIMP_OWNER_STATE(o) ((uint32_t)(((o) >> 32) & 0xffu))
#define ZIMP_OWNER_PID(o)   ((int32_t)(uint32_t)(o))

#define ZIMP_NO_INTENT UINT64_MAX

/*
 * Slot seq word: (position + 1) | flags. I3: it only moves up in position
 * (publish P2 and eviction E3 both CAS upward), so a publication and a skip
 * of one position exclude each other.
 */
#define ZIMP_SEQ_SKIP     (1ull << 63)    /* position skipped: no message */
#define ZIMP_SEQ_QUAR     (1ull << 62)    /* slot data quarantined (Q1) */
#define ZIMP_SEQ_FLAGS    (ZIMP_SEQ_SKIP | ZIMP_SEQ_QUAR)
#define ZIMP_POS_LIMIT    (1ull << 61)    /* positions stay below (146 years at 5e8/s) */
/* Position + 1 that a seq word is about (0: the slot was never used). */
static inline uint64_t zimp__seq_next(uint64_t seq) { return seq & ~ZIMP_SEQ_FLAGS; }

/*
 * Process identity (`ident` of a record). With pidfs (Linux 6.9+) it is the
 * inode of a pidfd for the process, unique for the boot: exact. Without, it
 * is the start time in clock ticks, which a pid reused within the same tick
 * shares (docs/robustness.md).
 */
#define ZIMP_IDENT_PIDFS  (1ull << 63)

/*
 * Member identity. A joiner takes a record by CAS on `owner`, then writes
 * `ident` and releases `ident_of` = owner. A reader trusts ident only while
 * ident_of names the same member as the owner word it loaded (checked before
 * and after), so a new owner is never judged by its predecessor's start
 * time: 0 = unknown. Same member = same generation and pid: an eviction
 * changes the state byte, not the member (else an evicted member would be
 * judged by its pid alone, and a reused pid would keep it "alive").
 */
#define ZIMP_OWNER_MEMBER(o) ((o) & ~(0xffull << 32))
static inline uint64_t zimp__ident(zimp_a64 *ident, zimp_a64 *ident_of, uint64_t owner)
{
    uint64_t who = ZIMP_OWNER_MEMBER(owner);
    if (ZIMP_OWNER_MEMBER(atomic_load_explicit(ident_of, memory_order_acquire)) != who)
        return 0;
    /* acquire: the re-check of ident_of below cannot move before this load */
    uint64_t id = atomic_load_explicit(ident, memory_order_acquire);
    return ZIMP_OWNER_MEMBER(atomic_load_explicit(ident_of, memory_order_relaxed)) == who ? id : 0;
}

/* ---- header: page 0 ---- */
struct zimp_header {
    /* line 0: written once by the creator before `ready`; never after. */
    char magic[8];
    uint16_t layout_major;
    uint16_t layout_minor;
    uint32_t header_size;          /* sizeof(struct zimp_header) */
    uint64_t segment_size;
    uint32_t slots;                /* power of two */
    uint32_t slot_size;            /* max message bytes */
    uint32_t max_senders;
    uint32_t max_receivers;
    uint32_t flags;
    uint32_t mode;
    uint64_t stall_timeout_ns;
    int32_t creator_pid;
    zimp_a32 ready;                /* ZIMP_READY, stored last with release */

    /* line 1: next position to claim; CAS by senders. */
    ZIMP_ALIGNED zimp_a64 tail;
    /* line 2: number of sender opens ever (the -EPIPE rule needs "ever"), and of
     * clean sender closes: a polling receiver looks for the end of the stream
     * only when one of them moved (libraries of layout 3.2 do not count closes:
     * their last close is then found by the throttled check). */
    ZIMP_ALIGNED zimp_a64 sender_opens;
    zimp_a64 sender_closes;

    /* line 3: derived geometry, written once; openers recompute and compare. */
    ZIMP_ALIGNED uint64_t off_wait;
    uint64_t off_senders;
    uint64_t off_receivers;
    uint64_t off_slots;            /* slot headers */
    uint64_t off_data;             /* slot data */
    uint32_t data_stride;
    uint32_t receiver_stride;
    uint64_t creator_ident;        /* process identity of the creator */
    uint64_t nonce;                /* random: names the receivers' notification sockets (N1) */

    /* lines 4-7: large messages (ZIMP_F_HEAP), written once; 0 otherwise. */
    ZIMP_ALIGNED uint64_t off_holds;   /* the hold table: one struct zimp_hold per slot */
    uint32_t heap_id;              /* the heap's id (its handles carry it) */
    uint32_t heap_member;          /* the channel's member record in the heap */
    uint64_t heap_owner;           /* that record's owner word */
    char heap_name[ZIMP_NAME_MAX + 1];

    /* line 8: the creator's pid namespace (inode of /proc/self/ns/pid, 0: unknown), written
     * once. Liveness goes by pid: members must share it (an opener from another: -EXDEV). */
    ZIMP_ALIGNED uint64_t pidns;

    uint8_t reserved[ZIMP_PAGE - 9 * ZIMP_LINE];   /* room to grow: align to a page */
};
_Static_assert(sizeof(struct zimp_header) == ZIMP_PAGE, "header is one page");
_Static_assert(offsetof(struct zimp_header, ready) < ZIMP_LINE, "identity fits line 0");
_Static_assert(offsetof(struct zimp_header, tail) == 1 * ZIMP_LINE, "tail on its own line");
_Static_assert(offsetof(struct zimp_header, sender_opens) == 2 * ZIMP_LINE, "opens on its own line");
_Static_assert(offsetof(struct zimp_header, off_wait) == 3 * ZIMP_LINE, "geometry line");
_Static_assert(offsetof(struct zimp_header, nonce) + 8 <= 4 * ZIMP_LINE, "geometry fits line 3");
_Static_assert(offsetof(struct zimp_header, pidns) == 8 * ZIMP_LINE, "heap fields fit lines 4-7");

/* ---- wait page: futex words and sleeper hints, writable by every member ---- */
struct zimp_wait {
    /*
     * Receivers sleep on pub_futex after setting recv_waiting; a sender that
     * finds recv_waiting set clears it, bumps pub_futex and wakes all. The
     * waker clears the flag, so a sleeper that died leaves no lasting cost.
     */
    ZIMP_ALIGNED zimp_a32 pub_futex;
    zimp_a32 recv_waiting;
    zimp_a32 fd_waiting;           /* some receiver's notification pipe is armed */
    /*
     * An eviction's skip (E3) waits for room: set by the evictor, or by a
     * receiver that finds an evicted claimer at its position; every sender
     * call then retries the skip (clears it, sets it again if still waiting).
     */
    zimp_a32 evict_pending;
    /*
     * Senders sleep on rel_futex after setting send_waiting and their record's
     * `need`; a receiver whose head crosses a sleeping sender's need wakes them.
     */
    ZIMP_ALIGNED zimp_a32 rel_futex;
    zimp_a32 send_waiting;
    /*
     * ZIMP_ZERO_ON_RELEASE only: 1 + the highest receiver index ever joined,
     * raised by joiners before they read `tail`; bounds the last-reader scan.
     * Never used for room: a receiver damaging it can only mis-zero data it
     * could already write on such channels.
     */
    ZIMP_ALIGNED zimp_a32 recv_hwm;
    /*
     * Bumped by a joining receiver before it looks for pending claims below
     * tail (claimed before its open, published after): a sender whose cached
     * minimum head predates the bump rescans. Damage only adds rescans.
     */
    ZIMP_ALIGNED zimp_a64 joins;
    /*
     * ZIMP_F_MEMBARRIER only: 1 while the one sender fences after each
     * message (M3: it does while receivers go to sleep), so that a receiver
     * about to sleep or a joiner need not issue membarrier. Written only by
     * the sender, with an exchange (a full fence). Damage delays wake-ups by
     * up to the 10 ms check, as clearing recv_waiting already could.
     */
    ZIMP_ALIGNED zimp_a32 sender_fences;
    uint8_t reserved[ZIMP_PAGE - 5 * ZIMP_LINE];
};
_Static_assert(sizeof(struct zimp_wait) == ZIMP_PAGE, "wait area is one page");
_Static_assert(offsetof(struct zimp_wait, rel_futex) == ZIMP_LINE, "sender wake word on its own line");

/* ---- sender record: two lines, written by its sender (line 0 the hot one) ---- */
struct zimp_sender_rec {
    zimp_a64 owner;                /* ZIMP_OWNER(gen, state, pid) */
    zimp_a64 ident;                /* process identity (start time) of ident_of's owner */
    zimp_a64 ident_of;             /* owner word that `ident` describes (release) */
    zimp_a64 intent;               /* position being claimed or held, ZIMP_NO_INTENT */
    zimp_a64 need;                 /* while it sleeps: the head that gives it room */
    zimp_a64 netns;                /* inode of its network namespace (N4), 0: unknown */
    zimp_a64 closed;               /* clean closes by generation (L1, zimp__closed_add) */
    zimp_a64 sleeps;               /* waits for room that went to sleep (zimp stat) */
    /* line 1: written at join only. */
    ZIMP_ALIGNED zimp_a64 mapped;  /* where ident_of's owner maps the segment (the exec check) */
    zimp_a64 image;                /* ident_of's owner's process image at join, 0: unknown (the exec check) */
    uint8_t reserved[ZIMP_LINE - 16];
} ZIMP_ALIGNED;
_Static_assert(sizeof(struct zimp_sender_rec) == 2 * ZIMP_LINE, "sender record is two lines");

/* ---- receiver record: one page, written by its receiver ---- */
struct zimp_receiver_rec {
    /* line 0: progress, the only words a sender polls. */
    zimp_a64 head;                 /* next position this receiver reads */
    zimp_a64 done;                 /* ZIMP_ZERO_ON_RELEASE: finished reading below this */
    zimp_a64 zeroing;              /* ZIMP_ZERO_ON_RELEASE: q + 1 while zeroing q (Z0), else 0 */
    /* line 1: membership and notification. */
    ZIMP_ALIGNED zimp_a64 owner;   /* ZIMP_OWNER(gen, state, pid) */
    zimp_a64 ident;                /* process identity (start time) of ident_of's owner */
    zimp_a64 ident_of;             /* owner word that `ident` describes (release) */
    zimp_a64 netns;                /* while it has a notification socket: its netns inode (N4) */
    zimp_a32 armed;                /* 1: send a byte to its socket on the next publish (N2, N3) */
    uint32_t pad;
    zimp_a64 closed;               /* clean closes by generation (L1, zimp__closed_add) */
    zimp_a64 missed;               /* lossy receivers: positions lost to senders so far (LR2) */
    zimp_a64 mapped;               /* where ident_of's owner maps the segment (the exec check) */
    /* line 2: counters for inspection (zimp stat), written on slow paths only. */
    ZIMP_ALIGNED zimp_a64 sleeps;  /* waits that went to sleep (futex, or an armed descriptor) */
    zimp_a64 wakeups;              /* of those, the ones that ended with a message */
    zimp_a64 image;                /* ident_of's owner's process image at join, 0: unknown (the exec check) */
    uint8_t reserved2[ZIMP_LINE - 24];  /* the rest of the page is unused */
} ZIMP_ALIGNED;
_Static_assert(offsetof(struct zimp_receiver_rec, owner) == ZIMP_LINE, "owner off the head line");
_Static_assert(offsetof(struct zimp_receiver_rec, sleeps) == 2 * ZIMP_LINE, "counters on their own line");
_Static_assert(sizeof(struct zimp_receiver_rec) == 3 * ZIMP_LINE, "receiver record: three lines of its page");

/*
 * ---- slot header: one line per slot ----
 * A message of at most ZIMP_INLINE_MAX bytes travels in the line itself, so
 * that sender and receivers touch one line per message; a longer one lives in
 * the slot's data area. ZIMP_ZERO_ON_RELEASE channels keep every message in
 * the data area (receivers zero it there and may not write the slot lines).
 */
#define ZIMP_INLINE_MAX 48u
struct zimp_slot {
    zimp_a64 seq;                  /* (position + 1) | flags, CAS upward (I3) */
    uint32_t len;                  /* message bytes, <= slot_size */
    uint32_t crc;                  /* CRC32C of the data (ZIMP_CHECKSUM channels) */
    unsigned char data[ZIMP_INLINE_MAX] __attribute__((aligned(16)));   /* inline message */
} ZIMP_ALIGNED;
_Static_assert(sizeof(struct zimp_slot) == ZIMP_LINE, "slot header is one line");
_Static_assert(offsetof(struct zimp_slot, data) == 16, "inline data is 16-byte aligned");

/*
 * ---- hold table (ZIMP_F_HEAP channels): one entry per slot ----
 * `pos` is position + 1 of the publication whose heap block the channel
 * holds (0: none), `ref` its handle. Only senders write it: the publisher
 * (ref, then pos, after the channel's bit is on the block) and whoever drops
 * the hold once no receiver can read that position (CAS pos -> 0: exactly
 * once). See docs/heap.md.
 */
struct zimp_hold {
    zimp_a64 pos;
    struct zimp_ref ref;
    uint64_t pad;
};
_Static_assert(sizeof(struct zimp_hold) == 32, "two holds per line");

/* Geometry derived from the four sizes (and whether there is a hold table). */
struct zimp_geometry {
    uint32_t slots, slot_size, max_senders, max_receivers;
    uint64_t off_wait, off_senders, off_receivers, off_slots, off_holds, off_data;
    uint32_t data_stride, receiver_stride;
    uint64_t segment_size;
};

/* Computes the geometry; -EINVAL if a size is out of the layout's range. */
int zimp__geometry(uint32_t slots, uint32_t slot_size, uint32_t max_senders,
                   uint32_t max_receivers, bool heap, struct zimp_geometry *g);

/* Writes a fresh header (all but `ready`) into a zeroed segment. */
void zimp__layout_init(void *base, const struct zimp_geometry *g, uint32_t flags,
                       uint32_t mode, uint64_t stall_timeout_ns, int32_t pid, uint64_t ident,
                       uint64_t nonce);

/*
 * Validates a segment of `size` bytes as read from shared memory. Pure: reads
 * each field once into a private copy and never trusts it. Fills *g (and
 * *hdr_copy) on success; -EPROTO with a detail string otherwise.
 */
int zimp__layout_validate(const void *base, uint64_t size, struct zimp_geometry *g,
                          struct zimp_header *hdr_copy, char *detail, size_t detail_cap);

static inline struct zimp_header *zimp__hdr(void *base) { return (struct zimp_header *)base; }
static inline struct zimp_wait *zimp__wait_page(void *base, const struct zimp_geometry *g)
{
    return (struct zimp_wait *)((char *)base + g->off_wait);
}
static inline struct zimp_sender_rec *zimp__srec(void *base, const struct zimp_geometry *g, uint32_t i)
{
    return (struct zimp_sender_rec *)((char *)base + g->off_senders) + i;
}
static inline struct zimp_receiver_rec *zimp__rrec(void *base, const struct zimp_geometry *g, uint32_t i)
{
    return (struct zimp_receiver_rec *)((char *)base + g->off_receivers + (uint64_t)i * g->receiver_stride);
}
static inline struct zimp_slot *zimp__slot(void *base, const struct zimp_geometry *g, uint64_t pos)
{
    return (struct zimp_slot *)((char *)base + g->off_slots) + (pos & (g->slots - 1));
}
/* The hold table entry of position pos's slot (ZIMP_F_HEAP channels). */
static inline struct zimp_hold *zimp__hold(void *base, const struct zimp_geometry *g, uint64_t pos)
{
    return (struct zimp_hold *)((char *)base + g->off_holds) + (pos & (g->slots - 1));
}
/* The slot's data area (page- or line-aligned, slot_size bytes). */
static inline void *zimp__slot_data(void *base, const struct zimp_geometry *g, uint64_t pos)
{
    return (char *)base + g->off_data + (pos & (g->slots - 1)) * (uint64_t)g->data_stride;
}
/* Where a message of `len` bytes at `pos` lives: inline up to `inline_max`, else the data area. */
static inline void *zimp__msg_data(void *base, const struct zimp_geometry *g, uint64_t pos,
                                   uint64_t len, uint32_t inline_max)
{
    return len <= inline_max && inline_max ? (void *)zimp__slot(base, g, pos)->data
                                           : zimp__slot_data(base, g, pos);
}

#endif /* ZIMP_SHM_LAYOUT_INT_H */
