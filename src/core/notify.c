/*
 * Waiting without burning a core: spin briefly, then sleep on a futex.
 *
 * Sleeper:  set `waiting` (seq_cst)  -> read futex value v -> re-check cond
 *           -> futex_wait(futex, v)
 * Waker:    make cond true (seq_cst) -> if `waiting`: clear it, bump futex,
 *           wake all
 * Either the waker sees `waiting`, or the sleeper's re-check sees the
 * condition (both sides order a store before a load with seq_cst). Sleeps are
 * bounded by ZIMP_CHECK_NS so that a peer that died without waking anybody
 * is noticed by the slow check.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "core/core_int.h"

static void futex_wait(zimp_a32 *addr, uint32_t val, uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull) };
    /* Shared futex (no FUTEX_PRIVATE_FLAG): the word lives in a shared mapping. */
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

void zimp__wake(zimp_a32 *futex, zimp_a32 *waiting)
{
    if (zimp_load_sc(waiting) && zimp_xchg_sc(waiting, 0)) {
        zimp_add_sc(futex, 1);
        syscall(SYS_futex, (uint32_t *)futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
}

int zimp__wait(zimp_a32 *futex, zimp_a32 *waiting, zimp_cond_fn cond, void *ctx,
               uint64_t spin_ns, uint64_t deadline, uint64_t *last_slow)
{
    int r = cond(ctx, false);
    if (r != 0)
        return r;
    uint64_t now = zimp__now_ns();
    if (now - *last_slow >= ZIMP_CHECK_NS) {
        *last_slow = now;
        if ((r = cond(ctx, true)) != 0)
            return r;
    }
    if (deadline == 0)
        return -EAGAIN;

    /* Spin phase: poll the condition, reading the clock every 64 rounds. */
    uint64_t spin_end = spin_ns >= UINT64_MAX - now ? UINT64_MAX : now + spin_ns;
    if (spin_end > deadline)
        spin_end = deadline;
    while (now < spin_end) {
        for (int i = 0; i < 64; i++) {
            zimp_cpu_relax();
            if ((r = cond(ctx, false)) != 0)
                return r;
        }
        /* Spinning, not busy-waiting: let a preempted peer run (a sender
         * publishes a batch instead of one message per receiver wake-up). */
        if (spin_ns != UINT64_MAX)
            sched_yield();
        now = zimp__now_ns();
        if (now - *last_slow >= ZIMP_CHECK_NS) {
            *last_slow = now;
            if ((r = cond(ctx, true)) != 0)
                return r;
        }
    }

    /* Sleep phase. */
    for (;;) {
        now = zimp__now_ns();
        if (now - *last_slow >= ZIMP_CHECK_NS) {
            *last_slow = now;
            if ((r = cond(ctx, true)) != 0)
                return r;
        }
        if (now >= deadline)
            return -ETIMEDOUT;
        uint64_t nap = deadline - now;
        uint64_t to_check = *last_slow + ZIMP_CHECK_NS - now;
        if (nap > to_check)
            nap = to_check;
        zimp_store_sc(waiting, 1);
        uint32_t v = zimp_load_sc(futex);
        if ((r = cond(ctx, false)) != 0)
            return r;
        futex_wait(futex, v, nap);
        if ((r = cond(ctx, false)) != 0)
            return r;
    }
}
