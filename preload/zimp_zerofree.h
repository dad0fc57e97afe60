/* zimp_zerofree.h - control interface of libzimp-zerofree.so, the LD_PRELOAD
 * library that zeroes freed heap memory so checkpoints shrink.
 *
 * The library works without any call from the application (mode from the
 * environment, ZIMP_ZEROFREE=eager|pages|lazy|off). Applications that know
 * when a checkpoint is imminent may call zimp_zerofree_prepare(). The symbols
 * are declared weak: a program built against this header runs unchanged when
 * the library is not preloaded; use the *_if_loaded() helpers or test the
 * function pointer before calling. See docs/zerofree.md.
 */
#ifndef ZIMP_ZEROFREE_H
#define ZIMP_ZEROFREE_H

#include <errno.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef ZIMP_ZEROFREE_BUILD
#define ZIMP_ZEROFREE_WEAK __attribute__((visibility("default")))
#else
#define ZIMP_ZEROFREE_WEAK __attribute__((weak))
#endif

/* sigqueue() value asking the library to answer once prepare is done; the
 * answer is the same signal, sent back to the requester with value
 * ZIMP_ZEROFREE_ACK_DONE. A plain kill() gets no answer. */
#define ZIMP_ZEROFREE_ACK_REQUEST 0x5a460001
#define ZIMP_ZEROFREE_ACK_DONE    0x5a460002

struct zimp_zerofree_stats {
    uint64_t frees;          /* free/realloc calls that released a block */
    uint64_t bytes_zeroed;   /* bytes cleared with memset */
    uint64_t bytes_dropped;  /* bytes given back with madvise(MADV_DONTNEED) */
    uint64_t prepares;       /* completed zimp_zerofree_prepare() runs */
    uint64_t deferred_bytes; /* lazy mode: bytes queued now, not yet zeroed */
};

/* Zero what is free right now, before a checkpoint: in lazy mode zero and
 * release every queued block; in every mode then malloc_trim(0), which gives
 * each free whole page of every arena back to the kernel. Thread-safe, may
 * block briefly on other threads' frees; not async-signal-safe (send the
 * signal instead). Returns 0, or -ENOTSUP when zeroing is inactive (mode off,
 * or the program's malloc is not glibc's). */
int zimp_zerofree_prepare(void) ZIMP_ZEROFREE_WEAK;

/* Active mode: "eager", "pages", "lazy" or "off". Never NULL. */
const char *zimp_zerofree_mode(void) ZIMP_ZEROFREE_WEAK;

/* Copies the process-wide counters (counted only when ZIMP_ZEROFREE_STATS=1,
 * except deferred_bytes and prepares). Returns 0. */
int zimp_zerofree_stats(struct zimp_zerofree_stats *out) ZIMP_ZEROFREE_WEAK;

#ifndef ZIMP_ZEROFREE_BUILD
/* prepare() when the library is loaded, else -ENOSYS. */
static inline int zimp_zerofree_prepare_if_loaded(void)
{
    return zimp_zerofree_prepare ? zimp_zerofree_prepare() : -ENOSYS;
}
#endif

#ifdef __cplusplus
}
#endif
#endif /* ZIMP_ZEROFREE_H */
