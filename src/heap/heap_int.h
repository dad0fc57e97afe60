/*
 * Layout of a heap segment (/dev/shm/zimpheap.NAME), major version 2.
 *
 *   header        one line of constants, then the lock and the cursor
 *   members       max_members records of one line: owner, identity, and
 *                 the operation in progress under the lock (for repair)
 *   descriptors   one per unit: holders, generation, length
 *   bitmap        one bit per unit: in use
 *   data          units of ZIMP_HEAP_UNIT bytes (page aligned)
 *
 * A block is a run of units; its descriptor is the first unit's. `holders`
 * is the set of members holding a reference (bit i: member i), or
 * ZIMP_HEAP_FREEING | i while member i frees it, or ZIMP_HEAP_CACHED | i
 * while member i keeps it, referenced by nobody, for its own next block
 * of that length (anyone may take it back to free it, by CAS). Allocation,
 * freeing and repair change the bitmap only under the lock; references
 * come and go by CAS on `holders` without it. docs/heap.md states the
 * invariants.
 */
#ifndef ZIMP_HEAP_INT_H
#define ZIMP_HEAP_INT_H

#include "core/core_int.h"

#define ZIMP_HEAP_PREFIX      "zimpheap."
#define ZIMP_HEAP_MAGIC       0x3170616568706d7aull      /* "zmpheap1" */
#define ZIMP_HEAP_MAJOR       2u
#define ZIMP_HEAP_MINOR       1u                          /* 1: creator_ident */
#define ZIMP_HEAP_READY       0x52454459u
#define ZIMP_HEAP_UNIT        256u
#define ZIMP_HEAP_MEMBERS_MAX 63u
#define ZIMP_HEAP_DEFAULT_SIZE    (64ull << 20)
#define ZIMP_HEAP_DEFAULT_MEMBERS 32u
#define ZIMP_HEAP_SIZE_MAX    (1ull << 40)
#define ZIMP_HEAP_FREEING     (1ull << 63)               /* holders: being freed by member (low bits) */
#define ZIMP_HEAP_CACHED      (ZIMP_HEAP_FREEING | 1ull << 62)  /* holders: kept by member (low bits) */
#define ZIMP_HEAP_INDEX(x)    ((x) & 63u)                /* the member of a FREEING or CACHED word */
#define ZIMP_HEAP_IS_CACHED(x) (((x) & ~(uint64_t)63u) == ZIMP_HEAP_CACHED)

/*
 * The lock word: the holder's owner word with its record index + 1 in place
 * of the state byte, so that a waiter finds the holder's record (and its op)
 * even after the record changed hands.
 */
#define ZIMP_HEAP_LOCK_WORD(owner, index) \
    ZIMP_OWNER(ZIMP_OWNER_GEN(owner), (index) + 1, ZIMP_OWNER_PID(owner))
#define ZIMP_HEAP_LOCK_INDEX(word) (ZIMP_OWNER_STATE(word) - 1)

/*
 * Member state of a record held by a channel (large messages): it holds the
 * blocks in flight on that channel, belongs to no process, is never reaped
 * by liveness, and is freed when the channel is removed.
 */
#define ZIMP_HEAP_M_CHANNEL 3u

/*
 * DROP (not under the lock): dropping a channel's hold on block op_unit of
 * generation op_gen & 0xffffffff, channel record op_gen >> 32, op_units 0.
 */
enum zimp_heap_op { ZIMP_HEAP_OP_NONE = 0, ZIMP_HEAP_OP_ALLOC = 1, ZIMP_HEAP_OP_FREE = 2, ZIMP_HEAP_OP_DROP = 3 };

struct zimp_heap_hdr {
    /* written once by the creator before `ready` */
    uint64_t magic;
    uint32_t major, minor;
    uint64_t segment_size;
    uint64_t units;
    uint64_t off_members, off_descs, off_bits, off_data;
    uint32_t max_members, flags, id, mode;
    int32_t creator_pid;
    uint32_t reserved;
    zimp_a32 ready;
    uint32_t reserved2;
    uint64_t creator_ident;        /* process identity of the creator, 0: unknown (layout 2.1) */
    /* the allocation lock: ZIMP_HEAP_LOCK_WORD of the member holding it, or 0 */
    ZIMP_ALIGNED zimp_a64 lock;
    zimp_a64 cursor;               /* next-fit: where the next search starts */
};

struct zimp_heap_member {
    zimp_a64 owner;                /* ZIMP_OWNER(gen, state, pid) */
    zimp_a64 ident;                /* process identity of ident_of's owner; of a channel
                                    * record: the inode of the channel's file (H5) */
    zimp_a64 ident_of;
    /* what this member does under the lock, so that whoever takes the lock
     * from it after its death can finish or undo it */
    zimp_a64 op;                   /* enum zimp_heap_op */
    zimp_a64 op_unit, op_units;    /* the run; of a channel record, op_units counts the
                                    * blocks it holds, or more (H5 skips channels at 0) */
    zimp_a64 op_gen;               /* FREE: the block's next generation */
    /* units of the blocks this member keeps (ZIMP_HEAP_CACHED), or more: a
     * hint that tells a full allocator whether taking them back can help */
    zimp_a64 cached;
} ZIMP_ALIGNED;

struct zimp_heap_desc {
    zimp_a64 holders;              /* member bits, or ZIMP_HEAP_FREEING | member */
    zimp_a32 gen;                  /* changes (never to 0) each time the block is freed */
    zimp_a32 len;                  /* bytes asked for */
};

_Static_assert(sizeof(struct zimp_heap_desc) == 16, "descriptor layout");
_Static_assert(sizeof(struct zimp_heap_member) == 64, "member layout");

#endif /* ZIMP_HEAP_INT_H */
