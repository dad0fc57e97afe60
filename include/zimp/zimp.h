/*
 * zimp — robust, zero-copy, one-to-many message passing between processes
 * on one machine, over shared memory.
 *
 * A channel is a named ring of fixed-size slots in shared memory. Senders
 * write messages in place (zimp_loan/zimp_publish) or by copy (zimp_send);
 * every receiver of the channel reads every message published after it
 * joined, exactly once, in one total order across senders.
 *
 * Conventions: every function returns 0 or a non-negative count on success
 * and a negative errno value on failure (zimp_strerror() turns it into
 * text; zimp_last_detail() adds context for open/create failures). The
 * library never prints, exits or aborts.
 *
 * Timeouts (int64_t, nanoseconds): 0 = do not block (-EAGAIN when it
 * would), negative = wait forever, positive = wait at most that long
 * (-ETIMEDOUT).
 *
 * Handles: a zimp_sender or zimp_receiver is used by one thread at a time.
 * A handle is not carried across fork(): the child opens its own, and the
 * parent's stays valid. In the child, calls on an inherited handle return
 * -EBADF and closing it only frees the child's copy: nothing shared changes.
 * Full documentation: docs/api.md.
 */
#ifndef ZIMP_ZIMP_H
#define ZIMP_ZIMP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ZIMP_API __attribute__((visibility("default")))
#else
#define ZIMP_API
#endif

#define ZIMP_VERSION_MAJOR 0
#define ZIMP_VERSION_MINOR 1
#define ZIMP_VERSION_PATCH 0

/* Longest channel name accepted (bytes, without the terminating NUL). */
#define ZIMP_NAME_MAX 200

/* Channel flags (struct zimp_config.flags). */
#define ZIMP_CHECKSUM        0x1u  /* CRC32C per message, checked on receive */
#define ZIMP_ZERO_ON_RELEASE 0x2u  /* zero a slot once every receiver released it */
/*
 * A channel with one sender (max_senders = 1) publishes with plain stores,
 * and its receivers, when they go to sleep or join, make the sender's
 * stores visible with membarrier(2) (MEMBARRIER_CMD_GLOBAL_EXPEDITED) in
 * place of a fence after each message. A receiver that cannot call it (a
 * seccomp profile that denies it) cannot open such a channel (-EPERM). This
 * flag makes the sender fence each message instead, so that any process
 * can receive. Without it, a one-sender channel uses membarrier when its
 * creator can call it. zimp_info reports the flag on every one-sender
 * channel that does not use membarrier.
 */
#define ZIMP_NO_MEMBARRIER   0x4u

/* Defaults used when a config field is 0. */
#define ZIMP_DEFAULT_SLOTS         256u
#define ZIMP_DEFAULT_SLOT_SIZE     4096u
#define ZIMP_DEFAULT_MAX_SENDERS   16u
#define ZIMP_DEFAULT_MAX_RECEIVERS 64u
#define ZIMP_MAX_SENDERS           1024u  /* hard limit of the layout */
#define ZIMP_MAX_RECEIVERS         4096u  /* hard limit of the layout */

struct zimp_config {            /* zero-initialise, then set what you need */
    uint32_t slots;             /* ring entries, rounded up to a power of two (0: default) */
    uint32_t slot_size;         /* max message bytes per slot (0: default) */
    uint32_t max_senders;       /* 0: default */
    uint32_t max_receivers;     /* 0: default; at least 64 are supported */
    uint32_t mode;              /* permission bits of the segment, 0: 0600 */
    uint64_t stall_timeout_ns;  /* unresponsive-receiver timeout, 0: none */
    uint32_t flags;             /* ZIMP_CHECKSUM, ZIMP_ZERO_ON_RELEASE, ZIMP_NO_MEMBARRIER */
    /*
     * Large messages: the name of a heap (zimp_heap_create) in which
     * zimp_loan/zimp_send put messages longer than slot_size, up to the
     * heap's size (and 2 GiB - 1); the slot carries the handle, receivers
     * read the block in place. NULL: messages are at most slot_size bytes.
     * The heap must exist; it needs a member record for the channel and
     * one per sender. See docs/heap.md.
     */
    const char *heap;
};

typedef struct zimp_sender zimp_sender;
typedef struct zimp_receiver zimp_receiver;

/*
 * Creates channel `name` (1..ZIMP_NAME_MAX characters of [A-Za-z0-9._-], not
 * starting with '.'). The segment is created exclusively with cfg->mode.
 * cfg may be NULL for all defaults. -EEXIST if the name is taken by a live
 * or valid channel; a segment left half-made by a crashed creator is
 * removed and the name reused.
 */
ZIMP_API int zimp_create(const char *name, const struct zimp_config *cfg);

/*
 * Removes the name. Members that have the channel open keep using it; its
 * memory is freed by the kernel when the last of them closes or dies.
 */
ZIMP_API int zimp_unlink(const char *name);

/*
 * Joins channel `name` as a sender or a receiver. A receiver gets every
 * message published after this call returned (also one whose place in the
 * order was claimed before, such as a loan held across the open), exactly
 * once, in the channel's total order. -ENOENT if no
 * such channel, -EUSERS if the table is full, -EPROTO if the segment fails
 * validation, -EACCES/-EPERM on permission or ownership problems.
 */
ZIMP_API int zimp_sender_open(const char *name, zimp_sender **out);
ZIMP_API int zimp_receiver_open(const char *name, zimp_receiver **out);

/*
 * Joins as a lossy receiver: it never holds a sender back. When it falls a
 * ring behind, senders write over what it has not read; its next
 * zimp_recv/zimp_read returns -ENOBUFS once (as netlink sockets do after an
 * overflow), zimp_receiver_missed says how many positions it lost, and the
 * call after that returns the next message still there. It never returns a
 * message that was overwritten while it copied it (zimp_recv re-checks after
 * the copy); a message read in place is valid only if its zimp_release
 * returns 0 (-ENOBUFS: it was overwritten meanwhile). Lossless receivers of
 * the same channel keep every guarantee. -ENOTSUP on ZIMP_ZERO_ON_RELEASE
 * channels (zeroing would go unnoticed). Otherwise as zimp_receiver_open.
 */
ZIMP_API int zimp_receiver_open_lossy(const char *name, zimp_receiver **out);
/* Positions a lossy receiver lost to senders since it opened (0 for others). */
ZIMP_API int zimp_receiver_missed(zimp_receiver *r, uint64_t *count);

/*
 * Leaves the channel and frees the handle. NULL is ignored. Like free(), a
 * handle must be closed once: its address may belong to a newer handle
 * afterwards. In a forked child an inherited handle's close frees only the
 * child's copy.
 */
ZIMP_API void zimp_sender_close(zimp_sender *s);
ZIMP_API void zimp_receiver_close(zimp_receiver *r);

/*
 * Zero-copy send. zimp_loan claims the next slot (waiting for room up to
 * timeout_ns while the slowest live receiver holds it) and points *buf at
 * slot memory for len bytes; write the message there, then zimp_publish
 * (buf, len) with len no larger than the loan. One loan at a time per
 * sender (-EBUSY otherwise). The message's place in the total order is
 * fixed at the loan.
 */
ZIMP_API int zimp_loan(zimp_sender *s, size_t len, void **buf, int64_t timeout_ns);
ZIMP_API int zimp_publish(zimp_sender *s, void *buf, size_t len);
/*
 * Gives a loan back without publishing (an error while writing it): its
 * position is skipped, receivers pass it at once, and buf must not be
 * written any more. -EINVAL without that loan; -ECONNRESET if this sender
 * was evicted meanwhile (the position was skipped for it).
 */
ZIMP_API int zimp_unloan(zimp_sender *s, void *buf);

/* Copying send: loan, copy, publish. */
ZIMP_API int zimp_send(zimp_sender *s, const void *buf, size_t len, int64_t timeout_ns);

/*
 * Copying receive: copies the next message into buf and returns its length.
 * -EMSGSIZE (message stays queued) if cap is too small; -EPIPE once drained
 * and every sender that had opened the channel has left; -ECONNRESET once
 * evicted.
 */
ZIMP_API ssize_t zimp_recv(zimp_receiver *r, void *buf, size_t cap, int64_t timeout_ns);

/*
 * Zero-copy receive: points *buf at the next message in place (read-only
 * memory) and *len at its length. The slot stays reserved until
 * zimp_release. One borrow at a time per receiver (-EBUSY otherwise).
 */
ZIMP_API int zimp_read(zimp_receiver *r, const void **buf, size_t *len, int64_t timeout_ns);
ZIMP_API int zimp_release(zimp_receiver *r);

/*
 * A descriptor that poll/epoll/select report readable while a message
 * waits (or the channel's state changed: drained with no sender, eviction).
 * Owned by the handle: do not close it. Readiness may be spurious: after
 * it fires, receive with timeout 0 until -EAGAIN.
 */
ZIMP_API int zimp_receiver_fd(zimp_receiver *r);
ZIMP_API int zimp_receiver_index(const zimp_receiver *r);

/*
 * Receivers holding back this sender: live receivers a full ring behind the
 * position this sender claims next (or holds) that have a message to read.
 * A receiver waiting for a message another sender has not yet published is
 * not counted (see zimp_stalled_senders). Fills up to cap indices, returns
 * how many there are.
 */
ZIMP_API int zimp_stalled(zimp_sender *s, unsigned *receivers, size_t cap);
/* Removes receiver `receiver_index`; its calls then return -ECONNRESET. */
ZIMP_API int zimp_evict(zimp_sender *s, unsigned receiver_index);

/*
 * Other senders holding back this sender: live senders whose claimed,
 * unpublished position is a full ring (or more) behind the position this
 * sender claims next, so that everyone waits for it (total order). Fills up
 * to cap sender indices, returns how many there are.
 */
ZIMP_API int zimp_stalled_senders(zimp_sender *s, unsigned *senders, size_t cap);
/*
 * Removes sender `sender_index` (not the caller itself: -EINVAL). A position
 * it claimed and did not publish is skipped by every receiver, as if it had
 * crashed; its slot is kept out of use while the evicted process may still
 * write its loan. Its calls then return -ECONNRESET; it should close.
 * -ENOENT if no live sender has that index.
 */
ZIMP_API int zimp_evict_sender(zimp_sender *s, unsigned sender_index);
/* This sender's index in the channel's table (what zimp_stalled_senders reports). */
ZIMP_API int zimp_sender_index(const zimp_sender *s);

/* Text for a negative errno value returned by zimp (or any errno). */
ZIMP_API const char *zimp_strerror(int err);
/* Thread-local detail of the last open/create failure ("" if none). */
ZIMP_API const char *zimp_last_detail(void);

/* ---- beyond the contract: tuning and inspection ---- */

/*
 * How a blocked call waits. A spin budget in nanoseconds before sleeping in
 * the kernel; 0: sleep at once (blocking mode); UINT64_MAX: spin until the
 * timeout (busy-wait mode; it yields the CPU between polls while runnable
 * processes outnumber the CPUs it may run on, and never sleeps);
 * ZIMP_SPIN_ADAPTIVE, the default: a budget learned from this handle's
 * recent waits (between 0.5 and 20 us); while runnable processes
 * outnumber the CPUs, up to 1 ms of polling that yields the CPU between
 * polls, then sleep. The ZIMP_SPIN_NS environment
 * variable, when set, gives every new handle a fixed budget instead.
 */
#define ZIMP_SPIN_ADAPTIVE (UINT64_MAX - 1)
ZIMP_API int zimp_sender_set_spin(zimp_sender *s, uint64_t spin_ns);
ZIMP_API int zimp_receiver_set_spin(zimp_receiver *r, uint64_t spin_ns);

struct zimp_info {
    uint32_t slots, slot_size, max_senders, max_receivers, flags, mode;
    uint64_t stall_timeout_ns;
    uint64_t segment_size;
    uint32_t senders, receivers;    /* live members now */
    int32_t creator_pid;            /* the creator's pid while it runs, 0 once it exited */
    uint32_t layout_major, layout_minor;
    uint64_t published;             /* positions claimed so far (messages sent, with abandoned claims) */
    uint64_t lag;                   /* published minus the slowest live receiver's position */
};
/* Describes channel `name` without joining it (live members are counted). */
ZIMP_API int zimp_info(const char *name, struct zimp_info *out);

#define ZIMP_MEMBER_SENDER   0u
#define ZIMP_MEMBER_RECEIVER 1u
#define ZIMP_MEMBER_LIVE     0u     /* the process runs */
#define ZIMP_MEMBER_DEAD     1u     /* exited or crashed; the record is not reclaimed yet */
#define ZIMP_MEMBER_EVICTED  2u     /* removed by zimp_evict / zimp_evict_sender, still running */
struct zimp_member_info {
    uint32_t role;                  /* ZIMP_MEMBER_SENDER or ZIMP_MEMBER_RECEIVER */
    uint32_t index;                 /* its record (zimp_receiver_index, zimp_sender_index) */
    int32_t pid;
    uint32_t state;                 /* ZIMP_MEMBER_LIVE, _DEAD or _EVICTED */
    uint64_t position;              /* receiver: next position it reads; sender: the one it
                                       holds, or UINT64_MAX */
    uint32_t flags;                 /* ZIMP_MEMBER_LOSSY: a lossy receiver */
    uint32_t reserved;
    uint64_t missed;                /* lossy receivers: positions lost to senders */
    uint64_t sleeps;                /* waits that went to sleep: a receiver for a message
                                       (futex, or an armed descriptor), a sender for room */
    uint64_t wakeups;               /* receivers: sleeps that ended with a message */
};
#define ZIMP_MEMBER_LOSSY    1u
/*
 * Lists the members of channel `name` without joining it: fills up to cap
 * entries (senders first) and returns how many records are taken.
 */
ZIMP_API int zimp_members(const char *name, struct zimp_member_info *out, size_t cap);

/*
 * Calls fn(name, arg) for every zimp channel on the machine (names without
 * the segment prefix); stops early and returns fn's value if it is non-zero.
 */
ZIMP_API int zimp_list(int (*fn)(const char *name, void *arg), void *arg);

/*
 * Unlinks `name` if no live process is a member of it and its creator has
 * exited (a creator may not have opened its handles yet):
 * returns 1 if removed, 0 if in use, negative errno on failure. Pass NULL
 * to sweep every channel; returns how many were removed.
 */
ZIMP_API int zimp_reap(const char *name);

/* ---- supervision: told when members come, go or die (LINX hunt and attach) ---- */

/*
 * Watches channel `name` without joining it; the name need not exist yet.
 * zimp_watch_fd is a descriptor (an epoll instance owned by the handle)
 * that poll/epoll/select report readable when something may have happened;
 * zimp_watch_read then returns what did, oldest first (0: nothing; readiness
 * may be spurious). Deaths, and the name's creation and removal, are seen
 * at once; joins and clean closes within ZIMP_WATCH_POLL_NS. Members present
 * at zimp_watch_open are not reported as joining.
 */
typedef struct zimp_watch zimp_watch;

#define ZIMP_WATCH_JOINED    1u     /* a member opened the channel */
#define ZIMP_WATCH_LEFT      2u     /* a member closed its handle */
#define ZIMP_WATCH_DIED      3u     /* a member's process died (crash, kill -9, exit without close) */
#define ZIMP_WATCH_EVICTED   4u     /* a member was evicted (zimp_evict, zimp_evict_sender) */
#define ZIMP_WATCH_NO_SENDER 5u     /* the last live sender left or died */
#define ZIMP_WATCH_CREATED   6u     /* a channel of that name appeared (it is watched from now on) */
#define ZIMP_WATCH_REMOVED   7u     /* the name was unlinked (members may still use the channel) */
#define ZIMP_WATCH_POLL_NS   100000000ull   /* 100 ms */

struct zimp_watch_event {
    uint32_t what;                  /* ZIMP_WATCH_* */
    uint32_t role;                  /* member events: ZIMP_MEMBER_SENDER or ZIMP_MEMBER_RECEIVER */
    uint32_t index;                 /* member events: its record */
    int32_t pid;                    /* member events: its process */
};

ZIMP_API int zimp_watch_open(const char *name, zimp_watch **out);
ZIMP_API int zimp_watch_fd(zimp_watch *w);
/* Fills up to cap events and returns how many happened (more than cap: the rest are lost). */
ZIMP_API int zimp_watch_read(zimp_watch *w, struct zimp_watch_event *ev, size_t cap);
ZIMP_API void zimp_watch_close(zimp_watch *w);

/* ---- shared heap: blocks of any size, passed between processes as handles ---- */

/*
 * A heap is a named segment of blocks. zimp_heap_alloc hands out a block
 * the caller writes in place, and a handle (struct zimp_ref) that names it
 * in any process: send the 16 bytes through a channel, pipe or socket, and
 * zimp_heap_resolve maps the block there (read-only). Each process holds
 * references (an allocation is one, each resolve one more); a block is
 * freed when the last reference in any process is released, and a process
 * that dies holds none: live members free what it held within
 * ZIMP_HEAP_REAP_NS of their next heap call, or at zimp_heap_reap. A
 * handle to a freed block is refused (-ESTALE), never resolved to another
 * block's data. See docs/heap.md.
 */
typedef struct zimp_heap zimp_heap;

struct zimp_heap_config {       /* zero-initialise, then set what you need */
    uint64_t size;              /* bytes for blocks (0: 64 MiB) */
    uint32_t max_members;       /* processes attached at once (0: 32; at most 63) */
    uint32_t mode;              /* permission bits of the segment, 0: 0600 */
    uint32_t flags;             /* ZIMP_ZERO_ON_RELEASE: zero each block when it is freed */
};

struct zimp_ref {               /* position independent: valid in every process */
    uint32_t heap;              /* the heap's id */
    uint32_t gen;               /* the block's generation: changes when it is freed */
    uint64_t off;               /* the block's offset in the heap's data */
};

#define ZIMP_HEAP_REAP_NS 10000000ull    /* 10 ms */

ZIMP_API int zimp_heap_create(const char *name, const struct zimp_heap_config *cfg);
ZIMP_API int zimp_heap_unlink(const char *name);
/* Attaches this process (one member record, -EUSERS when all are taken). */
ZIMP_API int zimp_heap_open(const char *name, zimp_heap **out);
/* Releases every reference this handle still holds, then detaches. */
ZIMP_API void zimp_heap_close(zimp_heap *h);
/* A writable block of len bytes (len > 0) and its handle: one reference. -ENOMEM when full. */
ZIMP_API int zimp_heap_alloc(zimp_heap *h, size_t len, void **buf, struct zimp_ref *ref);
/* Takes a reference and maps the block read-only: -ESTALE if freed, -EINVAL if no block. */
ZIMP_API int zimp_heap_resolve(zimp_heap *h, const struct zimp_ref *ref, const void **buf, size_t *len);
/* Drops one reference this process holds (-EINVAL if it holds none); the last one frees. */
ZIMP_API int zimp_heap_release(zimp_heap *h, const struct zimp_ref *ref);
/* Frees what dead members held now; returns how many members were cleaned. */
ZIMP_API int zimp_heap_reap(zimp_heap *h);

struct zimp_heap_stats {
    uint64_t size;              /* bytes for blocks */
    uint64_t used;              /* bytes in allocated blocks (whole units) */
    uint64_t blocks;            /* allocated blocks */
    uint32_t members;           /* attached processes (live or not yet reaped) */
    uint32_t unit;              /* allocation granularity in bytes */
};
ZIMP_API int zimp_heap_stats(zimp_heap *h, struct zimp_heap_stats *out);
/* The same for heap `name` without attaching to it (members: live ones). */
ZIMP_API int zimp_heap_info(const char *name, struct zimp_heap_stats *out);
/* Calls fn(name, arg) for every heap on the machine; stops at fn's first non-zero value. */
ZIMP_API int zimp_heap_list(int (*fn)(const char *name, void *arg), void *arg);
/*
 * Unlinks heap `name` if no live process is attached to it: 1 if removed, 0
 * if in use, negative errno on failure. NULL sweeps every heap and returns
 * how many were removed. (Its blocks go with it.)
 */
ZIMP_API int zimp_heap_gc(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* ZIMP_ZIMP_H */
