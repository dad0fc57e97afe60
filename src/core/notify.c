/*
 * Waiting without burning a core: spin briefly, then sleep on a futex.
 *
 * How long to spin (the adaptive policy, the default): a futex sleep and
 * wake-up costs microseconds, so spinning pays only for waits shorter than
 * a few wake-ups. Each handle keeps a budget, moved a quarter of the way
 * towards twice the length of each wait it had (waits longer than
 * ZIMP_SPIN_MAX_NS pull it towards the minimum: sleeping was right). While
 * runnable processes outnumber the CPUs this process may use and the thread
 * waits for its CPU (crowded), a wait's
 * length says more about the scheduler than about the peer: the budget is
 * left as it is, and a waiter polls for up to ZIMP_SPIN_CROWD_NS, yielding
 * the CPU between polls (busy-wait mode too), so that the peer waited for
 * runs and is seen within its time slice, without a futex wake-up. The
 * limit keeps waiters that crowd each other from spinning for ever on an
 * idle channel.
 *
 * Sleeper:  read futex value v -> set `waiting` (seq_cst) -> re-check cond
 *           -> futex_wait(futex, v)
 * Waker:    make cond true (seq_cst) -> if `waiting`: clear it, bump futex,
 *           wake all
 * Either the waker sees `waiting`, or the sleeper's re-check sees the
 * condition (both sides order a store before a load with seq_cst; a waker
 * that publishes with plain stores, the one sender of a ZIMP_F_MEMBARRIER
 * channel, has the sleeper order them with membarrier(2)). Sleeps are
 * bounded by ZIMP_CHECK_NS so that a peer that died without waking anybody
 * is noticed by the slow check.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "core/runnable.h"

#include "core/core_int.h"
#include "trace/trace_hook.h"

void zimp__spin_init(struct zimp_spin *sp)
{
    const char *e = getenv("ZIMP_SPIN_NS");
    char *end;
    bool digits = e && *e >= '0' && *e <= '9';       /* strtoull would take a sign */
    unsigned long long v = digits ? strtoull(e, &end, 10) : 0;
    zimp__spin_set(sp, digits && *end == '\0' ? v : ZIMP_SPIN_ADAPTIVE);
}

void zimp__spin_set(struct zimp_spin *sp, uint64_t spin_ns)
{
    sp->setting = spin_ns;
    sp->budget = ZIMP_SPIN_DEFAULT_NS;
}

/*
 * Nanoseconds this thread has spent runnable but waiting for a CPU
 * (/proc/thread-self/schedstat, second field), or -1 if unknown.
 */
static int64_t run_delay_ns(void)
{
    char buf[96];
    int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    unsigned long long on, delay;
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return sscanf(buf, "%llu %llu", &on, &delay) == 2 ? (int64_t)delay : -1;
}

/*
 * Whether this thread competes for its CPU, asked at most once per
 * ZIMP_CHECK_NS per thread: runnable tasks outnumber the CPUs it may run on
 * (zimp__runnable_exceeds_cpus), and since the last look it waited for a
 * CPU at least 1/16 of the time. The count alone is machine-wide: a process
 * pinned to one CPU beside a peer pinned to the other counted as crowded and
 * yielded on every poll, though nobody else wanted its CPU. Where the
 * thread's scheduling delay is unknown, the count decides. Inside a
 * container the count may be the host's: then spinning stops early, which
 * costs wake-ups, never correctness.
 */
static bool crowded(uint64_t now)
{
    static __thread uint64_t checked_at, delay_seen;
    static __thread bool answer;
    if (checked_at != 0 && (int64_t)(now - checked_at) < (int64_t)ZIMP_CHECK_NS)   /* also a `now` older */
        return answer;
    uint64_t elapsed = checked_at != 0 ? now - checked_at : 0;
    checked_at = now;
    int64_t d = run_delay_ns();
    bool waited = d < 0 || elapsed == 0 || (uint64_t)d - delay_seen >= elapsed / 16;
    if (d >= 0)
        delay_seen = (uint64_t)d;
    answer = waited && zimp__runnable_exceeds_cpus();
    return answer;
}

/* The adaptive policy learns from a wait of `ns` that had to wait and succeeded (r > 0). */
static void learn(struct zimp_spin *sp, uint64_t ns, int r)
{
    if (sp->setting != ZIMP_SPIN_ADAPTIVE || r <= 0)
        return;
    uint64_t target = ns > ZIMP_SPIN_MAX_NS ? ZIMP_SPIN_MIN_NS : 2 * ns;
    if (target < ZIMP_SPIN_MIN_NS)
        target = ZIMP_SPIN_MIN_NS;
    if (target > ZIMP_SPIN_MAX_NS)
        target = ZIMP_SPIN_MAX_NS;
    sp->budget = (3 * sp->budget + target) / 4;
}

static void futex_wait(zimp_a32 *addr, uint32_t val, uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull) };
    uint64_t t0 = ZIMP_TRACE_ON(ZIMP_TL_DEBUG) ? zimp__now_ns() : 0;
    /* Shared futex (no FUTEX_PRIVATE_FLAG): the word lives in a shared mapping. */
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, &ts, NULL, 0);
    if (t0)
        zimp__trace_wait(ZIMP_EV_SLEEP, t0, zimp__now_ns() - t0);
}

void zimp__wake_sleepers(zimp_a32 *futex, zimp_a32 *waiting)
{
    if (zimp_xchg_sc(waiting, 0)) {
        zimp_add_sc(futex, 1);
        syscall(SYS_futex, (uint32_t *)futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        ZIMP_TRACE(ZIMP_TL_DEBUG, zimp__trace_wait(ZIMP_EV_WAKE, 0, 0));
    }
}

int zimp__wait(zimp_a32 *futex, zimp_a32 *waiting, zimp_cond_fn cond, void *ctx,
               struct zimp_spin *sp, uint64_t deadline, uint64_t *last_slow)
{
    int r = cond(ctx, false);
    if (r != 0)
        return r;
    if (deadline == 0) {
        /* A poll: the coarse clock paces its slow check (signed: it may lag the
         * fine clock that set last_slow), at half the period so that a clock
         * lagging a few ms still checks within it. Pollers call this in a loop. */
        uint64_t now = zimp__coarse_ns();
        if ((int64_t)(now - *last_slow) >= (int64_t)(ZIMP_CHECK_NS / 2)) {
            *last_slow = now;
            if ((r = cond(ctx, true)) != 0)
                return r;
        }
        return -EAGAIN;
    }
    uint64_t now = zimp__now_ns(), start = now;
    if (now - *last_slow >= ZIMP_CHECK_NS) {
        *last_slow = now;
        if ((r = cond(ctx, true)) != 0)
            return r;
    }

    /*
     * Spin phase: poll the condition, reading the clock every 64 polls; while
     * crowded, yield after every poll: a waiter that kept the CPU for 64
     * polls kept the peer it waited for off it (docs/benchmarks.md, "Waiting
     * on a crowded machine").
     */
    bool busy = sp->setting == UINT64_MAX;
    bool crowd = sp->setting != 0 && crowded(now);
    uint64_t spin_ns = sp->setting != ZIMP_SPIN_ADAPTIVE ? sp->setting
                       : crowd ? ZIMP_SPIN_CROWD_NS : sp->budget;
    uint64_t spin_end = spin_ns >= UINT64_MAX - now ? UINT64_MAX : now + spin_ns;
    if (spin_end > deadline)
        spin_end = deadline;
    while (now < spin_end) {
        for (int i = 0, polls = crowd ? 1 : 64; i < polls; i++) {
            zimp_cpu_relax();
            if ((r = cond(ctx, false)) != 0) {
                /*
                 * The clock as of the last block of polls, not read again:
                 * a clock read (~25 ns) here would delay every message a
                 * spinning waiter takes. The wait learned is short by less
                 * than one block, and the spin always runs its first block
                 * whatever the budget, so twice it still covers this wait.
                 */
                if (!crowd)
                    learn(sp, now - start, r);
                ZIMP_TRACE(ZIMP_TL_TEST, zimp__trace_wait(ZIMP_EV_SPIN, start, zimp__now_ns() - start));
                return r;
            }
        }
        /* Spinning, not busy-waiting: let a preempted peer run (a sender
         * publishes a batch instead of one message per receiver wake-up).
         * Busy-waiting yields only when the CPUs are oversubscribed. */
        if (!busy || crowd)
            sched_yield();
        now = zimp__now_ns();
        if (now - *last_slow >= ZIMP_CHECK_NS) {
            *last_slow = now;
            if ((r = cond(ctx, true)) != 0) {
                /* also a wait that ended while spinning */
                ZIMP_TRACE(ZIMP_TL_TEST, zimp__trace_wait(ZIMP_EV_SPIN, start, zimp__now_ns() - start));
                return r;
            }
            crowd = sp->setting != 0 && crowded(now);   /* a busy-wait may last */
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
        /*
         * The futex value before the flag: a wake-up from now on, even one
         * meant for an earlier condition that clears the flag, makes the
         * futex_wait return at once (read after the flag, that wake-up was
         * lost and the next one not sent: model/fence.pml, BUG_LATE_V).
         */
        uint32_t v = zimp_load_sc(futex);
        zimp_store_sc(waiting, 1);
        /* The waker's fence, issued here (ZIMP_F_MEMBARRIER); failing that, short naps. */
        if (zimp__sender_fence(sp->sender_fences) != 0 && nap > ZIMP_CHECK_NS / 10)
            nap = ZIMP_CHECK_NS / 10;
        if ((r = cond(ctx, false)) == 0) {
            zimp__count(sp->sleeps);
            futex_wait(futex, v, nap);
            r = cond(ctx, false);
            if (r > 0)
                zimp__count(sp->wakeups);
        }
        if (r != 0) {
            if (!crowd)
                learn(sp, zimp__now_ns() - start, r);
            return r;
        }
    }
}
