/*
 * Every memory-ordering decision of zimp is spelled out here (C11 atomics).
 * Call sites name the pairing they rely on ("A pairs with B"); this header
 * only gives the operations short, explicit names.
 */
#ifndef ZIMP_SHM_ATOMIC_INT_H
#define ZIMP_SHM_ATOMIC_INT_H

#include <stdatomic.h>
#include <stdint.h>

typedef _Atomic uint64_t zimp_a64;
typedef _Atomic uint32_t zimp_a32;

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free across processes");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "32-bit atomics must be lock-free across processes");
_Static_assert(sizeof(zimp_a64) == 8 && sizeof(zimp_a32) == 4, "atomics have plain layout");

/* Plain, unordered access to a shared word (counters read as hints). */
#define zimp_load_relaxed(p)      atomic_load_explicit((p), memory_order_relaxed)
#define zimp_store_relaxed(p, v)  atomic_store_explicit((p), (v), memory_order_relaxed)

/* Consumer side of a publication: sees everything written before the release. */
#define zimp_load_acquire(p)      atomic_load_explicit((p), memory_order_acquire)
/* Producer side of a publication: everything written before is visible first. */
#define zimp_store_release(p, v)  atomic_store_explicit((p), (v), memory_order_release)

/*
 * Sequentially consistent operations, used where a store must be ordered
 * before a later load of another word (Dekker-style sleeper checks and the
 * sender's intent-then-claim protocol). On x86 a seq_cst store is an xchg.
 */
#define zimp_load_sc(p)           atomic_load_explicit((p), memory_order_seq_cst)
#define zimp_store_sc(p, v)       atomic_store_explicit((p), (v), memory_order_seq_cst)
#define zimp_xchg_sc(p, v)        atomic_exchange_explicit((p), (v), memory_order_seq_cst)
#define zimp_add_sc(p, v)         atomic_fetch_add_explicit((p), (v), memory_order_seq_cst)
#define zimp_sub_sc(p, v)         atomic_fetch_sub_explicit((p), (v), memory_order_seq_cst)
#define zimp_cas_sc(p, expp, v) \
    atomic_compare_exchange_strong_explicit((p), (expp), (v), memory_order_seq_cst, memory_order_relaxed)

/*
 * Orders plain reads before a later atomic load (the read side of a seqlock:
 * read the data, then re-check the version word). A compiler barrier on x86;
 * a real fence on weakly ordered CPUs. TSan does not model fences (and
 * warns), so its builds leave it out: it never runs on a weakly ordered CPU.
 */
static inline void zimp_fence_acquire(void)
{
#if defined(__SANITIZE_THREAD__)
    atomic_signal_fence(memory_order_seq_cst);
#else
    atomic_thread_fence(memory_order_acquire);
#endif
}

/*
 * Orders earlier stores before later stores (the write side of a seqlock:
 * announce, then write the data). A compiler barrier on x86; TSan builds,
 * which do not model fences, keep only that.
 */
static inline void zimp_fence_release(void)
{
#if defined(__SANITIZE_THREAD__)
    atomic_signal_fence(memory_order_seq_cst);
#else
    atomic_thread_fence(memory_order_release);
#endif
}

/*
 * Orders every earlier store before every later load (the store-load order
 * that a seq_cst read-modify-write gives as a side effect), for a writer that
 * publishes with plain stores. On x86-64 a locked add of zero to the stack
 * (the value is unchanged), which costs a fraction of MFENCE on AMD CPUs and
 * is how the Linux kernel spells smp_mb(). TSan does not model fences: its
 * builds use a seq_cst read-modify-write of a private word instead.
 */
static inline void zimp_fence_sc(void)
{
#if defined(__SANITIZE_THREAD__)
    static _Atomic unsigned private_word;
    atomic_fetch_add_explicit(&private_word, 0, memory_order_seq_cst);
#elif defined(__x86_64__)
    __asm__ __volatile__("lock; addl $0, -8(%%rsp)" ::: "memory", "cc");
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

static inline void zimp_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

#endif /* ZIMP_SHM_ATOMIC_INT_H */
