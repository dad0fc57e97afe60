/*
 * What the library's layers call to trace themselves (src/trace). The only
 * trace header core includes: a level word and out-of-line hooks taking
 * plain values, so trace depends on nothing of core's.
 *
 * A hook site is one predictable branch while tracing is off:
 *     ZIMP_TRACE(ZIMP_TL_DEBUG, zimp__trace_msg(...));
 * reads one process-wide word (relaxed) and jumps over the call. Built with
 * -DZIMP_TRACE_HOOKS=OFF the sites compile to nothing (to measure them).
 */
#ifndef ZIMP_TRACE_HOOK_H
#define ZIMP_TRACE_HOOK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Levels: each one records its own events and those of the levels below. */
enum { ZIMP_TL_OFF, ZIMP_TL_ERROR, ZIMP_TL_INFO, ZIMP_TL_DEBUG, ZIMP_TL_TEST };

/* Event types (the region names of the OTF2 archive are in trace.c). */
enum zimp_trace_event {
    ZIMP_EV_START = 1,   /* info: tracing began in this process (libinit) */
    ZIMP_EV_STOP,        /* info: tracing ended: exit or level off (libfinalize) */
    ZIMP_EV_CREATE,      /* info: a channel was created, with its resources */
    ZIMP_EV_UNLINK,      /* info: a channel's name was removed */
    ZIMP_EV_OPEN,        /* info: a sender or receiver joined (register) */
    ZIMP_EV_CLOSE,       /* info: a sender or receiver left */
    ZIMP_EV_SEND,        /* debug: a message published */
    ZIMP_EV_RECV,        /* debug: a message received (copied or lent) */
    ZIMP_EV_ERROR,       /* error: an error returned, with its reason */
    ZIMP_EV_CRASH,       /* info: a member's process found dead */
    ZIMP_EV_STALL,       /* info: a sender held back past the stall timeout */
    ZIMP_EV_EVICT,       /* info: a member evicted */
    ZIMP_EV_SLEEP,       /* debug: a wait slept in the kernel (its duration) */
    ZIMP_EV_WAKE,        /* debug: sleepers woken */
    ZIMP_EV_SPIN,        /* test: a wait that ended while spinning (its duration) */
    ZIMP_EV_MARK,        /* any level: a note from the application (zimp_trace_mark) */
    ZIMP_EV_FLUSH,       /* test: a thread's buffer written out */
    ZIMP_EV_ALLOC,       /* debug: a heap block handed out (its offset and length) */
    ZIMP_EV_FREE,        /* debug: a heap block freed (its last reference dropped) */
    /* The MPI layer's events (zimp_trace_event): their fields are in the text. */
    ZIMP_EV_MPI_INIT,    /* info: MPI_Init done (rank, size) */
    ZIMP_EV_MPI_FINALIZE, /* info: MPI_Finalize (rank, size) */
    ZIMP_EV_MPI_SEND,    /* debug: a point-to-point send call */
    ZIMP_EV_MPI_RECV,    /* debug: a receive call */
    ZIMP_EV_MPI_COLL,    /* debug: a collective call */
    ZIMP_EV_MPI_ERROR,   /* error: an MPI call returned an error */
    ZIMP_EV_COUNT
};

/* Who an event is about: a channel's sender or receiver, or a heap's member. */
enum { ZIMP_TR_NONE = -1, ZIMP_TR_SENDER = 0, ZIMP_TR_RECEIVER = 1, ZIMP_TR_HEAP = 2 };

/* The process's level; written by zimp_trace_set and ZIMP_TRACE, read by every hook site. */
extern _Atomic int zimp__trace_level;

#if defined(ZIMP_NO_TRACE_HOOKS)
#define ZIMP_TRACE_ON(level) 0
#else
#define ZIMP_TRACE_ON(level) \
    __builtin_expect(atomic_load_explicit(&zimp__trace_level, memory_order_relaxed) >= (level), 0)
#endif
#define ZIMP_TRACE(level, call) \
    do {                        \
        if (ZIMP_TRACE_ON(level)) \
            call;               \
    } while (0)

/* The hooks are cold: the compiler keeps their calls out of the hot code's
 * layout and inlining decisions, so a site costs its load and branch only. */
#define ZIMP_TRACE_COLD __attribute__((cold))

/* CREATE, UNLINK, OPEN: a channel's name and resources (0 where unknown). */
ZIMP_TRACE_COLD void zimp__trace_channel(int ev, int role, const char *name, uint64_t chan, uint32_t index,
                         uint32_t slots, uint32_t slot_size, uint32_t max_senders,
                         uint32_t max_receivers);
/* CLOSE, EVICT, STALL, CRASH: a member (pid: the member's, 0 for ours). */
ZIMP_TRACE_COLD void zimp__trace_member(int ev, int role, uint64_t chan, uint32_t index, int32_t pid);
/* SEND, RECV: one message (its first bytes are kept). */
ZIMP_TRACE_COLD void zimp__trace_msg(int ev, uint64_t chan, uint32_t index, uint64_t pos, const void *data,
                     size_t len);
/* ERROR: err (negative errno) with the reason, and where (a function name or NULL). */
ZIMP_TRACE_COLD void zimp__trace_error(int err, const char *where, const char *reason);
/* SLEEP, SPIN: a wait of `ns` that began at `start`; WAKE: start 0. */
ZIMP_TRACE_COLD void zimp__trace_wait(int ev, uint64_t start, uint64_t ns);
/*
 * A heap's events, about its member record `member` (or pid's, for CRASH):
 * CREATE, OPEN with `name` and the heap's size in `n`; UNLINK with `name`;
 * CLOSE, CRASH; ALLOC, FREE with a block's offset `off` and length `n`.
 */
ZIMP_TRACE_COLD void zimp__trace_heap(int ev, uint32_t heap, const char *name, uint32_t member,
                                      uint64_t off, uint64_t n, int32_t pid);

#endif /* ZIMP_TRACE_HOOK_H */
