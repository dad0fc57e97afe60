/*
 * The receiving side: wait for position pos, read it, release it. Step
 * labels and invariants are those of docs/protocol.md.
 *
 *   R1  seq := load_acquire(slot.seq); published iff seq == pos + 1,
 *       skipped iff seq == (pos + 1) | SKIP (pairs with the sender's P2 and
 *       the evictor's E3: data, len and crc are visible)
 *   R2  copy out (zimp_recv) or lend in place (zimp_read)
 *   R3  head := pos + 1 (seq_cst store; its release pairs with the acquire
 *       in zimp__min_head, so the sender reuses the slot only after R2)
 *   R4  wake senders if one set send_waiting (Dekker with R3)
 *   R5  slow check: skip a position no live sender holds (abandoned); -EPIPE
 *
 * A receiver writes only its own record (its page is the only record page it
 * maps writable) and the wait page. Everything read from shared memory is
 * checked before use: a length beyond the slot, a slot holding a later
 * position (I3), or a tail behind us (I0) yields -EPROTO, never a wild
 * access. No distance from tail is checked: claims made by senders that
 * died or gave up are legitimately any number of positions behind it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/core_int.h"
#include "trace/trace_hook.h"

static struct zimp_header *hdr(zimp_receiver *r) { return zimp__hdr(r->m.base); }
static struct zimp_wait *wait_page(zimp_receiver *r) { return zimp__wait_page(r->m.base, &r->m.g); }

/* A handle inherited across fork() must not touch shared state. */
#define CHECK_RECEIVER(r)                                \
    do {                                                 \
        if (!(r))                                        \
            return -EINVAL;                              \
        if (zimp__inherited((r)->fork_gen))              \
            return -EBADF;                               \
    } while (0)

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/*
 * J3: where a new receiver starts. Every message published after the open
 * returns must reach it, including one whose position was claimed before
 * (a sender holding a loan). So: start = tail, and every position below it
 * that a live sender holds unpublished (at most one per sender, found by
 * intent as in the claim protocol, S1/S2) is pending; reading starts at the
 * lowest pending position and skips the others below start. I1: every
 * position below tail - slots is resolved, so only the last ring is looked
 * at (an intent further back is a stale S1 of a sender that lost its CAS).
 */
static int find_start(zimp_receiver *r)
{
    const struct zimp_geometry *g = &r->m.g;
    uint64_t t0 = zimp_load_sc(&hdr(r)->tail);
    r->start = r->pos = t0;
    r->npending = 0;
    r->pending = calloc(g->max_senders, sizeof *r->pending);
    if (!r->pending)
        return zimp__fail(-ENOMEM, "out of memory");
    for (uint32_t i = 0; i < g->max_senders; i++) {
        struct zimp_sender_rec *sr = zimp__srec(r->m.base, g, i);
        uint64_t o = zimp_load_acquire(&sr->owner);
        uint64_t q = zimp_load_acquire(&sr->intent);
        if (q >= t0 || t0 - q > g->slots)
            continue;
        /* seq_cst, after J1: a sender reclaiming q's heap block that reads a
         * publication we did not see also sees our head (H3) */
        if (zimp__seq_next(zimp_load_sc(&zimp__slot(r->m.base, g, q)->seq)) > q)
            continue;                   /* published or skipped before we joined */
        if (!zimp__sender_live(&r->m, sr, o, &r->peers[i]))
            continue;                   /* will never be published */
        bool dup = false;
        for (uint32_t k = 0; k < r->npending; k++)
            dup |= r->pending[k] == q;
        if (!dup)
            r->pending[r->npending++] = q;
    }
    qsort(r->pending, r->npending, sizeof *r->pending, cmp_u64);
    if (r->npending)
        r->pos = r->pending[0];
    return 0;
}

static void zero_passed(zimp_receiver *r, uint64_t q);

/* Below start, a position is read only if it was pending at join. */
static bool before_start_skip(const zimp_receiver *r, uint64_t pos)
{
    if (pos >= r->start)
        return false;
    for (uint32_t k = 0; k < r->npending; k++)
        if (r->pending[k] == pos)
            return false;
    return true;
}

static int receiver_open(const char *name, bool lossy, zimp_receiver **out)
{
    int rc;
    zimp__clear_detail();
    if (!out)
        return zimp__fail(-EINVAL, "output handle pointer is NULL");
    *out = NULL;
    zimp_receiver *r = calloc(1, sizeof *r);
    if (!r)
        return zimp__fail(-ENOMEM, "out of memory");
    r->m.fd = -1;
    r->sock = r->timer = r->epfd = -1;
    r->opens_seen = r->closes_seen = UINT64_MAX;     /* the first poll looks */
    if ((rc = zimp__map_open(name, ZIMP_ROLE_RECEIVER, &r->m)) != 0)
        goto fail;
    r->peers = calloc(r->m.g.max_senders, sizeof *r->peers);
    if (!r->peers) {
        rc = zimp__fail(-ENOMEM, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < r->m.g.max_senders; i++)
        zimp__peer_init(&r->peers[i]);
    if (lossy && (r->m.flags & ZIMP_ZERO_ON_RELEASE)) {
        /* The last lossless reader zeroes a message in place, seq unchanged: a
         * lossy reader could not tell zeros from the message. */
        rc = zimp__fail(-ENOTSUP, "channel '%s' zeroes released messages (ZIMP_ZERO_ON_RELEASE): "
                        "lossy receivers cannot read it", name);
        goto fail;
    }
    r->lossy = lossy;
    r->plain = !lossy && !(r->m.flags & (ZIMP_CHECKSUM | ZIMP_ZERO_ON_RELEASE));
    /*
     * The sender publishes with no fence after its messages: this process
     * must be able to order them for itself (membarrier) before it sleeps.
     */
    bool membarrier = (r->m.flags & ZIMP_F_MEMBARRIER) != 0;
    if (membarrier && (rc = zimp__membarrier_usable()) != 0) {
        rc = zimp__fail(-EPERM, "channel '%s' needs membarrier(2) in its receivers, which this process "
                        "cannot call (%s); its creator can pass ZIMP_NO_MEMBARRIER", name, strerror(-rc));
        goto fail;
    }
    if ((rc = zimp__join(&r->m, ZIMP_ROLE_RECEIVER, lossy ? ZIMP_M_LOSSY : ZIMP_M_ACTIVE,
                         &r->owner)) < 0)
        goto fail;
    r->index = (uint32_t)rc;
    r->rec = zimp__rrec(r->m.base, &r->m.g, r->index);
    r->fork_gen = zimp__fork_token();
    r->pid = getpid();
    zimp_store_relaxed(&r->rec->armed, 0);
    zimp_store_sc(&r->rec->netns, 0);
    zimp_store_sc(&r->rec->zeroing, 0);     /* a predecessor may have died zeroing */
    zimp_store_relaxed(&r->rec->missed, 0);
    zimp_store_relaxed(&r->rec->sleeps, 0);
    zimp_store_relaxed(&r->rec->wakeups, 0);
    /*
     * Start at the current tail. The record became ACTIVE (seq_cst CAS in
     * zimp__join) before this load, so a sender claiming any position >= t
     * sees the record when it checks for room, and waits for our head.
     */
    /*
     * Hold every slot until the start is known (J1: a reused record's old
     * head must not count), then announce the join (J2) before looking for
     * pending claims (J3, in find_start). A sender that later sees such a
     * claim published also sees J2 (seq_cst), rescans, and finds J1.
     */
    zimp_store_sc(&r->rec->head, 0);                                    /* J1 */
    zimp_add_sc(&wait_page(r)->joins, 1);                                /* J2 */
    if (membarrier && (rc = zimp__sender_fence(&wait_page(r)->sender_fences)) != 0) {   /* M2 */
        rc = zimp__fail(-EPERM, "membarrier(2) failed while joining channel '%s': %s", name, strerror(-rc));
        zimp__leave(&r->rec->owner, &r->rec->closed, r->owner);
        goto fail;
    }
    if (r->m.flags & ZIMP_ZERO_ON_RELEASE) {
        /* Raise the scan bound before reading tail (see zero_if_last). */
        zimp_a32 *hwm = &wait_page(r)->recv_hwm;
        uint32_t h = zimp_load_sc(hwm);
        while (h < r->index + 1 && !zimp_cas_sc(hwm, &h, r->index + 1))
            ;
    }
    if ((rc = find_start(r)) != 0) {
        zimp__leave(&r->rec->owner, &r->rec->closed, r->owner);
        goto fail;
    }
    if (r->m.flags & ZIMP_ZERO_ON_RELEASE)            /* Z5, before J4: our head 0 holds them */
        for (uint64_t q = r->start > r->m.g.slots ? r->start - r->m.g.slots : 0; q < r->pos; q++)
            zero_passed(r, q);
    zimp_store_sc(&r->rec->done, r->pos);
    zimp_store_sc(&r->rec->head, r->pos);
    zimp_store_sc(&wait_page(r)->send_waiting, 1);       /* senders held by head 0 */
    zimp__wake(&wait_page(r)->rel_futex, &wait_page(r)->send_waiting);
    /* From now on only our own record page stays writable. */
    char *b = r->m.base;
    if (mprotect(b + r->m.g.off_receivers, (size_t)r->m.g.max_receivers * r->m.g.receiver_stride,
                 PROT_READ) != 0 ||
        mprotect(r->rec, r->m.g.receiver_stride, PROT_READ | PROT_WRITE) != 0) {
        rc = zimp__fail(-errno, "mprotect: %s", strerror(errno));
        zimp__leave(&r->rec->owner, &r->rec->closed, r->owner);
        goto fail;
    }
    zimp__spin_init(&r->spin);
    r->spin.sender_fences = membarrier ? &wait_page(r)->sender_fences : NULL;
    r->spin.sleeps = &r->rec->sleeps;
    r->spin.wakeups = &r->rec->wakeups;
    ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_channel(ZIMP_EV_OPEN, ZIMP_TR_RECEIVER, name, hdr(r)->nonce, r->index,
               r->m.g.slots, r->m.g.slot_size, r->m.g.max_senders, r->m.g.max_receivers));
    *out = r;
    return 0;
fail:
    free(r->peers);
    free(r->pending);
    zimp__map_close(&r->m);
    free(r);
    return rc;
}

ZIMP_API int zimp_receiver_open(const char *name, zimp_receiver **out)
{
    return receiver_open(name, false, out);
}

ZIMP_API int zimp_receiver_open_lossy(const char *name, zimp_receiver **out)
{
    return receiver_open(name, true, out);
}

ZIMP_API int zimp_receiver_missed(zimp_receiver *r, uint64_t *count)
{
    CHECK_RECEIVER(r);
    if (!count)
        return -EINVAL;
    *count = r->missed;
    return 0;
}


/* Frees what the handle holds in this process: descriptors, mapping, memory. */
static void receiver_free(zimp_receiver *r)
{
    for (uint32_t i = 0; i < r->m.g.max_senders; i++)
        zimp__peer_reset(&r->peers[i]);
    free(r->peers);
    free(r->pending);
    zimp__fd_close(&r->epfd, &r->epfd_id);          /* unless the program took the number */
    zimp__fd_close(&r->sock, &r->sock_id);
    zimp__fd_close(&r->timer, &r->timer_id);
    zimp__map_close(&r->m);
    free(r);
}

ZIMP_API void zimp_receiver_close(zimp_receiver *r)
{
    if (!r)
        return;
    if (zimp__inherited(r->fork_gen) || r->pid != getpid()) {
        receiver_free(r);             /* inherited across fork: the copy only */
        return;
    }
    if (zimp_load_relaxed(&r->rec->owner) == r->owner) {
        zimp_store_relaxed(&r->rec->armed, 0);
        zimp_store_relaxed(&r->rec->netns, 0);
    }
    ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_member(ZIMP_EV_CLOSE, ZIMP_TR_RECEIVER, hdr(r)->nonce, r->index, 0));
    zimp__leave(&r->rec->owner, &r->rec->closed, r->owner);              /* L1 */
    /* Senders may be waiting for this receiver's slots. */
    zimp_store_sc(&wait_page(r)->send_waiting, 1);
    zimp__wake(&wait_page(r)->rel_futex, &wait_page(r)->send_waiting);
    zimp__heap_channel_release(&r->m);
    receiver_free(r);
}

ZIMP_API int zimp_receiver_set_spin(zimp_receiver *r, uint64_t spin_ns)
{
    CHECK_RECEIVER(r);
    zimp__spin_set(&r->spin, spin_ns);
    return 0;
}

ZIMP_API int zimp_receiver_index(const zimp_receiver *r)
{
    CHECK_RECEIVER(r);
    return (int)r->index;
}

/*
 * R4 for a release from `old` to `pos`: wakes the sleeping senders if it
 * crosses one's need. Receivers that were already past a sender's need do
 * not wake it again: only the laggards do.
 */
static void wake_senders(zimp_receiver *r, uint64_t old, uint64_t pos)
{
    struct zimp_wait *w = wait_page(r);
    for (uint32_t i = 0; i < r->m.g.max_senders; i++) {
        struct zimp_sender_rec *sr = zimp__srec(r->m.base, &r->m.g, i);
        uint64_t need = zimp_load_sc(&sr->need);
        if (old < need && need <= pos && ZIMP_OWNER_STATE(zimp_load_relaxed(&sr->owner)) == ZIMP_M_ACTIVE) {
            zimp__wake(&w->rel_futex, &w->send_waiting);
            return;
        }
    }
}

/* Releases every position below `pos` (R3), then R4 (one load unless a sender sleeps). */
static inline void release_to(zimp_receiver *r, uint64_t pos)
{
    uint64_t old = zimp_load_relaxed(&r->rec->head);
    zimp_store_sc(&r->rec->head, pos);                                  /* R3 */
    if (zimp_load_sc(&wait_page(r)->send_waiting))                      /* R4 */
        wake_senders(r, old, pos);
}

/*
 * LR2: a lossy receiver at pos lost positions [pos, to) to senders that
 * wrote past it: count them and go on at `to`.
 */
static int lossy_gap(zimp_receiver *r, uint64_t pos, uint64_t to)
{
    r->missed += to - pos;
    zimp_store_relaxed(&r->rec->missed, r->missed);
    r->pos = to;
    release_to(r, to);
    return -ENOBUFS;
}

/*
 * LR1: the slot of pos holds a later position: senders wrote over it. The
 * oldest position that may still be there is tail - slots, whose slot the
 * next claim takes: go on half a ring later, so that a reader slower than
 * its senders still gets messages between the losses.
 */
static int lossy_overrun(zimp_receiver *r, uint64_t pos)
{
    uint64_t tail = zimp_load_acquire(&hdr(r)->tail), half = r->m.g.slots / 2;
    uint64_t to = tail > half ? tail - half : 0;
    return lossy_gap(r, pos, to > pos ? to : pos + 1);
}

/* Our membership: 0, or -ECONNRESET once evicted (or the record was taken). */
static int membership(zimp_receiver *r)
{
    return zimp_load_relaxed(&r->rec->owner) == r->owner ? 0 : -ECONNRESET;
}

/*
 * We wait at pos for its claimer. An evicted claimer's position is skipped by
 * a sender once there is room (E3); if that skip is still waiting, ask every
 * sender's next call to retry it, and wake the blocked ones (slow path only).
 */
static void nudge_evicted(zimp_receiver *r, uint64_t pos)
{
    struct zimp_wait *w = wait_page(r);
    for (uint32_t i = 0; i < r->m.g.max_senders; i++) {
        struct zimp_sender_rec *sr = zimp__srec(r->m.base, &r->m.g, i);
        if (ZIMP_OWNER_STATE(zimp_load_acquire(&sr->owner)) != ZIMP_M_EVICTED ||
            zimp_load_acquire(&sr->intent) != pos)
            continue;
        if (!zimp_load_relaxed(&w->evict_pending))
            zimp_store_sc(&w->evict_pending, 1);
        zimp_store_sc(&w->send_waiting, 1);
        zimp__wake(&w->rel_futex, &w->send_waiting);
        return;
    }
}

/* Whether any sender record is taken, alive or not (plain loads, no system call). */
static bool sender_recorded(zimp_receiver *r)
{
    for (uint32_t i = 0; i < r->m.g.max_senders; i++)
        if (ZIMP_OWNER_STATE(zimp_load_acquire(&zimp__srec(r->m.base, &r->m.g, i)->owner)) != ZIMP_M_FREE)
            return true;
    return false;
}

/*
 * Whether a sender closed since this receiver last looked: then R5 runs
 * at once, not at the next 10 ms check, so that the last sender's close
 * ends every wait with -EPIPE at once, those already asleep (the close
 * wakes them) and those that start after it, whatever the records still
 * taken (dead senders', which only their pidfds tell). One load of a line
 * that changes only when senders come and go.
 */
static bool close_counted(zimp_receiver *r)
{
    /* acquire: a close is counted after its record is freed (a walk sees it free) */
    uint64_t closes = zimp_load_acquire(&hdr(r)->sender_closes);
    if (closes == r->closes_seen)
        return false;
    r->closes_seen = closes;
    r->senderless = !sender_recorded(r);
    return true;
}

/*
 * Condition: position r->pos is published. Slow checks skip positions whose
 * claimer died and report -EPIPE once drained with no sender left.
 */
static int ready_cond(void *ctx, bool slow)
{
    zimp_receiver *r = ctx;
    const struct zimp_geometry *g = &r->m.g;
    int rc;
    /* Bounded: at most one ring plus one claim per sender can be skipped per call. */
    for (uint32_t skips = 0; skips <= 2 * (g->slots + g->max_senders); skips++) {
        uint64_t pos = r->pos;
        if (before_start_skip(r, pos)) {     /* published before we joined */
            if (r->m.flags & ZIMP_ZERO_ON_RELEASE)
                zero_passed(r, pos);
            r->pos = pos + 1;
            release_to(r, r->pos);
            continue;
        }
        uint64_t seq = zimp_load_acquire(&zimp__slot(r->m.base, g, pos)->seq);   /* R1 */
        if (seq == pos + 1)
            return 1;
        if ((rc = membership(r)) != 0)
            return rc;
        if (zimp__seq_next(seq) == pos + 1 && (seq & ZIMP_SEQ_SKIP)) {
            r->pos = pos + 1;                  /* skipped: an evicted sender's or a quarantined slot's */
            release_to(r, r->pos);
            continue;
        }
        if (zimp__seq_next(seq) > pos + 1) {   /* I3: impossible while we hold pos */
            if (r->lossy)
                return lossy_overrun(r, pos);                             /* LR1 */
            return zimp__fail(-EPROTO, "slot of position %llu holds position %llu",
                              (unsigned long long)pos, (unsigned long long)(zimp__seq_next(seq) - 1));
        }
        /* Ended here before, and no sender opened since: nobody can publish. */
        if (r->ended_at == pos + 1 && zimp_load_acquire(&hdr(r)->sender_opens) == r->ended_opens &&
            zimp_load_acquire(&hdr(r)->tail) == pos)
            return -EPIPE;
        if (!slow && !close_counted(r))
            return 0;
        uint64_t tail = zimp_load_sc(&hdr(r)->tail);                    /* R5 */
        if (tail < pos)                        /* I0 */
            return zimp__fail(-EPROTO, "tail %llu is behind position %llu",
                              (unsigned long long)tail, (unsigned long long)pos);
        if (tail == pos) {
            /* loaded before the liveness check: a sender opening during it moves it */
            uint64_t opens = zimp_load_acquire(&hdr(r)->sender_opens);
            if (!opens || zimp__claim_live(&r->m, r->peers, ZIMP_ANY_SENDER))
                return 0;
            /*
             * No live sender now, but `tail` was read before that check: a
             * sender may have claimed and published more, then closed or
             * died, in between. Drained only if tail is still pos. A sender
             * claims before it leaves (its seq_cst CAS on owner pairs with
             * our acquire of owner in claim_live) or before it dies (seen
             * through its pidfd), so this load sees every claim it made.
             */
            if (zimp_load_sc(&hdr(r)->tail) == pos) {
                r->ended_at = pos + 1;
                r->ended_opens = opens;
                return -EPIPE;
            }
            continue;
        }
        if (zimp__claim_live(&r->m, r->peers, pos)) {
            nudge_evicted(r, pos);
            return 0;
        }
        /* Re-read: the claimer may have published (or been skipped) and then cleared its intent. */
        if (zimp__seq_next(zimp_load_acquire(&zimp__slot(r->m.base, g, pos)->seq)) > pos)
            continue;
        r->pos = pos + 1;                  /* abandoned: its sender died or gave up: skip */
        release_to(r, r->pos);
        /*
         * Abandoned positions come in bursts (a dead or closed sender's
         * claims, messages of others between them): the next wait checks at
         * once again instead of passing one of them per ZIMP_CHECK_NS.
         */
        r->last_slow = 0;
    }
    return 0;
}

/*
 * ZIMP_ZERO_ON_RELEASE: called after reading position q, before releasing
 * it. Announces "done with q" (Z1, seq_cst), then looks at every other live
 * receiver (Z2): if each is past q or done with it, this receiver is one of
 * the last and zeroes the message. It still holds q, so no sender can be
 * writing the slot. Two receivers finishing together both see each other's
 * Z1 in at least one direction: at least one of them zeroes.
 * Only records below recv_hwm are looked at: a joiner raises it before it
 * reads tail, so one this scan misses reads tail after q was published and
 * starts past q.
 */
static void zero_if_last(zimp_receiver *r, uint64_t q, uint32_t len, bool judge)
{
    if (len == 0)
        return;                 /* nothing of it in the slot (or a heap block: the heap's flag) */
    const struct zimp_geometry *g = &r->m.g;
    zimp_store_sc(&r->rec->done, q + 1);                                  /* Z1 */
    uint32_t n = zimp_load_sc(&wait_page(r)->recv_hwm);
    if (n > g->max_receivers)
        n = g->max_receivers;           /* damaged hint: scan everything */
    for (uint32_t i = 0; i < n; i++) {                                    /* Z2 */
        if (i == r->index)
            continue;
        struct zimp_receiver_rec *o = zimp__rrec(r->m.base, g, i);
        uint64_t ow = zimp_load_acquire(&o->owner);
        if (ZIMP_OWNER_STATE(ow) != ZIMP_M_ACTIVE)
            continue;
        if (zimp_load_sc(&o->head) <= q && zimp_load_sc(&o->done) <= q &&
            (!judge || zimp__receiver_alive(&r->m, NULL, i, ow)))
            return;            /* still reading it: the last one zeroes (Z5: if alive) */
    }
    /*
     * Z0: announce the zeroing, then check we are still a member. An evictor's
     * CAS on our owner comes after that check, so every sender scan that sees
     * us evicted also sees `zeroing` and keeps off the slot until it is 0 (Z3).
     */
    zimp_store_sc(&r->rec->zeroing, q + 1);
    if (zimp_load_sc(&r->rec->owner) == r->owner &&
        zimp_load_acquire(&zimp__slot(r->m.base, g, q)->seq) == q + 1)
        memset(zimp__slot_data(r->m.base, g, q), 0, len);
    zimp_store_release(&r->rec->zeroing, 0);
}

/*
 * Z5: a joining receiver is the last reader of the positions q >= t0 - slots
 * it passes without reading them (below its first position, or published
 * before its start): from J1 until it had a position it counted as a reader
 * of every q, so the others may have left q's zeroing to it. It holds q
 * while it zeroes (its head is 0 until J4, then at most q), and no sender
 * writes q's slot for q + slots: a claim made after J2 waits for our head
 * (S3), and one made before it is below the tail t0 that J3 read, so
 * q + slots < t0 puts q out of the range. Its Z2 judges the liveness of a
 * record that would stop it (a dead reader's stays ACTIVE until a sender's
 * D1): a system call per such record, at a join only.
 */
static void zero_passed(zimp_receiver *r, uint64_t q)
{
    struct zimp_slot *slot = zimp__slot(r->m.base, &r->m.g, q);
    if (zimp_load_acquire(&slot->seq) != q + 1)
        return;                                  /* skipped, abandoned or written over */
    /* The whole slot: a message left unzeroed may have been written over by a
     * shorter one since, whose last reader zeroed only its own length. */
    if (slot->len <= r->m.g.slot_size)           /* a heap block (ZIMP_LEN_HEAP): the heap's */
        zero_if_last(r, q, r->m.g.slot_size, true);
}

/* Sends a byte to our own socket so that the epoll descriptor reads ready. */
static void self_notify(zimp_receiver *r)
{
    struct sockaddr_un a;
    socklen_t alen = zimp__notify_addr(hdr(r)->nonce, r->index, ZIMP_OWNER_GEN(r->owner), &a);
    char b = 1;
    ssize_t n = sendto(r->sock, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&a, alen);
    (void)n;
}

#define TIMER_ID UINT32_MAX       /* epoll data of the timer; pidfds are index + 1, the socket 0 */

/* N4: a 10 ms tick while a live sender cannot reach our socket (another netns). */
static void set_timer(zimp_receiver *r, bool on)
{
    if (on == r->timer_on)
        return;
    if (on && r->timer < 0) {
        r->timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        zimp__fd_note(r->timer, &r->timer_id);
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = TIMER_ID };
        if (r->timer < 0 || epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->timer, &ev) != 0) {
            /* No timer: stay readable rather than sleep past the bound. */
            self_notify(r);
            return;
        }
    }
    struct itimerspec its = { 0 };
    if (on)
        its.it_value.tv_nsec = its.it_interval.tv_nsec = (long)ZIMP_CHECK_NS;
    r->timer_on = timerfd_settime(r->timer, 0, &its, NULL) == 0 && on;
}

/*
 * N2: arms the notification descriptor before reporting "nothing to read".
 * Drains it, asks senders for a byte (armed, then fd_waiting: a sender that
 * joins after this sees them and wakes us, N3), refreshes the senders'
 * pidfds in the epoll set (a dead sender makes it readable), then
 * re-checks, so nothing that happened before the arming is missed.
 */
static void arm(zimp_receiver *r)
{
    char buf[64];
    uint64_t expirations;
    zimp__count(r->spin.sleeps);        /* the caller sleeps in poll/epoll now */
    while (recv(r->sock, buf, sizeof buf, MSG_DONTWAIT) > 0)
        ;
    if (r->timer_on && read(r->timer, &expirations, sizeof expirations) < 0)
        expirations = 0;
    zimp_store_sc(&r->rec->armed, 1);
    zimp_store_sc(&wait_page(r)->fd_waiting, 1);
    uint64_t netns = zimp_load_relaxed(&r->rec->netns);
    /* M1: the sender's F, issued here (ZIMP_F_MEMBARRIER); without it, the 10 ms tick. */
    bool unreachable = zimp__sender_fence(r->spin.sender_fences) != 0;
    for (uint32_t i = 0; i < r->m.g.max_senders; i++) {
        struct zimp_sender_rec *sr = zimp__srec(r->m.base, &r->m.g, i);
        struct zimp_peer *p = &r->peers[i];
        uint64_t o = zimp_load_sc(&sr->owner);
        uint32_t st = ZIMP_OWNER_STATE(o);
        if (st != ZIMP_M_ACTIVE && st != ZIMP_M_EVICTED) {
            zimp__peer_reset(p);        /* closing the pidfd drops it from the set */
            continue;
        }
        /* The cache is shared with claim_live: "in the set" is tracked on its own. */
        if (!zimp__sender_live(&r->m, sr, o, p)) {
            if (p->polled)
                epoll_ctl(r->epfd, EPOLL_CTL_DEL, p->pidfd, NULL);
            p->polled = false;
            continue;
        }
        if (!p->polled && p->pidfd >= 0) {
            struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i + 1 };
            p->polled = epoll_ctl(r->epfd, EPOLL_CTL_ADD, p->pidfd, &ev) == 0;
        }
        if (!p->polled)
            unreachable = true;         /* no pidfd in the set: its death would not wake us */
        uint64_t ns = zimp_load_relaxed(&sr->netns);
        if (ns != netns || ns == 0)
            unreachable = true;
    }
    set_timer(r, unreachable);
    int rc = ready_cond(r, true);
    if (rc == -ENOBUFS)
        r->gap_untold = true;          /* LR2: the next call says so, before any message */
    if (rc != 0)                       /* a message, -EPIPE, a gap or eviction: ready now */
        self_notify(r);
}

/* Waits for the next message; arms the descriptor when returning empty-handed. */
static int next(zimp_receiver *r, int64_t timeout_ns)
{
    if (r->borrowed)
        return -EBUSY;
    int rc = membership(r);
    if (rc != 0)
        return rc;
    if (r->gap_untold) {
        r->gap_untold = false;
        return -ENOBUFS;
    }
    /* R1 without the waiting machinery: the next message is there (streaming). */
    uint64_t pos = r->pos;
    if (pos >= r->start && zimp_load_acquire(&zimp__slot(r->m.base, &r->m.g, pos)->seq) == pos + 1)
        return 0;
    /*
     * A poll answers -EPIPE at once after the last sender closed or after
     * the descriptor fired; a crash is found by the throttled check, within
     * ZIMP_CHECK_NS, without a system call on every empty poll. The sender
     * records are walked only when the open or close count moved: a sender
     * writes its record on every claim, so walking them on every empty poll
     * would miss the cache each time. After a close, R5 runs at once
     * (close_counted, in ready_cond).
     */
    if (timeout_ns == 0) {
        uint64_t opens = zimp_load_acquire(&hdr(r)->sender_opens);
        if (opens != r->opens_seen) {
            r->opens_seen = opens;
            r->senderless = !sender_recorded(r);
        }
        if (r->epfd >= 0 || r->senderless)
            r->last_slow = 0;
    }
    struct zimp_wait *w = wait_page(r);
    rc = zimp__wait(&w->pub_futex, &w->recv_waiting, ready_cond, r, &r->spin,
                    zimp__deadline(timeout_ns), &r->last_slow);
    if (rc > 0)
        return 0;
    if (r->epfd >= 0 && (rc == -EAGAIN || rc == -ETIMEDOUT))
        arm(r);
    return rc;
}

/* A message that cannot be read: pass it, and say why. */
static ssize_t bad_message(zimp_receiver *r)
{
    r->pos++;
    release_to(r, r->pos);
    return -EPROTO;
}

/*
 * Validates the published message at r->pos: its length, and in *data where
 * its bytes are (in the slot, or a heap block the channel holds while our
 * head is at pos: docs/heap.md H4). *zero_len: bytes zero_if_last may clear.
 */
static ssize_t msg_at(zimp_receiver *r, struct zimp_slot *slot, const void **data, uint32_t *zero_len)
{
    uint64_t pos = r->pos;
    uint32_t len = slot->len;
    r->cur_heap = false;
    if ((len & ZIMP_LEN_HEAP) && r->m.heap) {
        len &= ~ZIMP_LEN_HEAP;
        struct zimp_hold *h = zimp__hold(r->m.base, &r->m.g, pos);
        const void *block = NULL;
        size_t blen = 0;
        uint64_t held = zimp_load_acquire(&h->pos);
        struct zimp_ref ref = { 0 };
        if (held == pos + 1) {                               /* written before P2 */
            ref = h->ref;
            block = zimp__heap_block(r->m.heap, &ref, &blen);
        }
        if (!block || blen < len) {
            /* Evicted, our head no longer holds it: its hold may be gone (H2, H3). */
            if (membership(r) != 0)
                return -ECONNRESET;
            if (r->lossy)
                return lossy_gap(r, pos, pos + 1);                        /* LR3 */
            bad_message(r);
            if (held != pos + 1)
                return zimp__fail(-EPROTO, "large message at position %llu: its slot's hold names %s %llu",
                                  (unsigned long long)pos, held ? "position" : "no message",
                                  (unsigned long long)(held ? held - 1 : 0));
            return zimp__fail(-EPROTO, "large message at position %llu names no block of %u bytes "
                              "(offset %llu, generation %u)", (unsigned long long)pos, len,
                              (unsigned long long)ref.off, ref.gen);
        }
        *data = block;
        *zero_len = 0;           /* the heap zeroes its blocks (its own flag) */
        r->cur_heap = true;
        return len;
    }
    if (len > r->m.g.slot_size) {
        if (r->lossy && zimp_load_acquire(&slot->seq) != pos + 1)
            return lossy_gap(r, pos, pos + 1);   /* a torn length: written over (LR3) */
        bad_message(r);
        return zimp__fail(-EPROTO, "message length %u exceeds the slot size %u", len, r->m.g.slot_size);
    }
    *data = zimp__msg_data(r->m.base, &r->m.g, pos, len, r->m.inline_max);
    *zero_len = len;
    return len;
}

/*
 * After reading position pos (a copy, or in place until now): still the same
 * message, still a member? A lossy receiver's message may have been written
 * over (LR3: -ENOBUFS): a sender writes a slot after it claimed the slot's
 * next position (tail past pos + slots), before its seq changes, so the
 * check is on tail too; a large message's block is gone once its hold is
 * (H2, H3: the hold goes before the block is freed).
 */
static int still_valid(zimp_receiver *r, struct zimp_slot *slot, uint64_t pos)
{
    zimp_fence_acquire();      /* the data reads before this re-check (R2), on any CPU */
    bool same = zimp_load_acquire(&slot->seq) == pos + 1 &&
                (!r->cur_heap || zimp_load_acquire(&zimp__hold(r->m.base, &r->m.g, pos)->pos) == pos + 1) &&
                (!r->lossy || zimp_load_acquire(&hdr(r)->tail) <= pos + r->m.g.slots);
    int rc = membership(r);
    if (same || rc != 0)
        return rc;
    return r->lossy ? -ENOBUFS : -EPROTO;
}

/* Waits for the next message: its slot, data and validated length, or an error. */
static ssize_t next_msg(zimp_receiver *r, int64_t timeout_ns, struct zimp_slot **slot,
                        const void **data, uint32_t *zero_len)
{
    int rc = next(r, timeout_ns);
    if (rc < 0)
        return rc;
    *slot = zimp__slot(r->m.base, &r->m.g, r->pos);
    return msg_at(r, *slot, data, zero_len);
}

/*
 * The streaming case of zimp_recv, zimp_read and zimp_release in a few loads
 * and stores: a plain receiver (lossless, no checksum, no zeroing) whose next
 * message is published in its slot, with no gap to tell and no trace of
 * messages asked for. It is what next() and msg_at() conclude then; every
 * other case, an error included, takes the general path, which decides it
 * from the start (the fast path changes nothing before it succeeds).
 */
static inline struct zimp_slot *ready_plain(zimp_receiver *r, uint32_t *len)
{
    uint64_t pos = r->pos;
    if (!r->plain || r->borrowed || r->gap_untold || pos < r->start ||
        zimp__inherited(r->fork_gen) || ZIMP_TRACE_ON(ZIMP_TL_DEBUG))
        return NULL;
    struct zimp_slot *slot = zimp__slot(r->m.base, &r->m.g, pos);
    if (zimp_load_acquire(&slot->seq) != pos + 1 || membership(r) != 0)      /* R1 */
        return NULL;
    *len = slot->len;              /* a heap block's flag or a bad length: not here */
    return *len <= r->m.g.slot_size ? slot : NULL;
}

/* R2's re-check for a plain receiver's slot message (still_valid's case). */
static inline bool still_plain(zimp_receiver *r, struct zimp_slot *slot, uint64_t pos)
{
    zimp_fence_acquire();
    return zimp_load_acquire(&slot->seq) == pos + 1 && membership(r) == 0;
}

ZIMP_SLOW_PATH static ssize_t recv_general(zimp_receiver *r, void *buf, size_t cap, int64_t timeout_ns);

ZIMP_API ssize_t zimp_recv(zimp_receiver *r, void *buf, size_t cap, int64_t timeout_ns)
{
    struct zimp_slot *slot;
    uint32_t len;
    if (r && (buf || !cap) && (slot = ready_plain(r, &len)) && len <= cap) {
        uint64_t pos = r->pos;
        if (len)                                                       /* buf may be NULL */
            memcpy(buf, zimp__msg_data(r->m.base, &r->m.g, pos, len, r->m.inline_max), len);   /* R2 */
        if (still_plain(r, slot, pos)) {
            r->pos = pos + 1;
            release_to(r, r->pos);
            return len;
        }
    }
    return recv_general(r, buf, cap, timeout_ns);
}

static ssize_t recv_general(zimp_receiver *r, void *buf, size_t cap, int64_t timeout_ns)
{
    CHECK_RECEIVER(r);
    if (!buf && cap)
        return -EINVAL;
    struct zimp_slot *slot;
    const void *data = NULL;
    uint32_t zero_len = 0;
    ssize_t len = next_msg(r, timeout_ns, &slot, &data, &zero_len);
    if (len < 0) {
        ZIMP_TRACE(ZIMP_TL_ERROR, zimp__trace_error((int)len, "zimp_recv", NULL));
        return len;
    }
    int rc;
    uint64_t pos = r->pos;
    if ((size_t)len > cap) {
        if ((rc = still_valid(r, slot, pos)) == -ENOBUFS)
            return lossy_gap(r, pos, pos + 1);  /* the length read was torn (LR3) */
        return rc != 0 ? rc : -EMSGSIZE;       /* stays queued */
    }
    if (len)                                                           /* buf may be NULL */
        memcpy(buf, data, (size_t)len);                                 /* R2 */
    uint32_t crc = slot->crc;
    if ((rc = still_valid(r, slot, pos)) != 0)
        return rc == -ENOBUFS ? lossy_gap(r, pos, pos + 1) : rc;      /* LR3 */
    ZIMP_TRACE(ZIMP_TL_DEBUG, zimp__trace_msg(ZIMP_EV_RECV, hdr(r)->nonce, r->index, pos, buf, (size_t)len));
    if (r->m.flags & ZIMP_ZERO_ON_RELEASE)
        zero_if_last(r, pos, zero_len, false);
    r->pos = pos + 1;
    release_to(r, r->pos);
    if ((r->m.flags & ZIMP_CHECKSUM) && zimp__crc32c(buf, (size_t)len) != crc)
        return -EBADMSG;
    return len;
}

ZIMP_SLOW_PATH static int read_general(zimp_receiver *r, const void **buf, size_t *len, int64_t timeout_ns);

ZIMP_API int zimp_read(zimp_receiver *r, const void **buf, size_t *len, int64_t timeout_ns)
{
    struct zimp_slot *slot;
    uint32_t n;
    if (r && buf && len && (slot = ready_plain(r, &n))) {
        *buf = zimp__msg_data(r->m.base, &r->m.g, r->pos, n, r->m.inline_max);
        *len = n;
        r->pos++;                  /* head stays at pos until zimp_release */
        r->borrowed = true;
        r->borrow_len = n;
        r->cur_heap = false;
        return 0;
    }
    return read_general(r, buf, len, timeout_ns);
}

static int read_general(zimp_receiver *r, const void **buf, size_t *len, int64_t timeout_ns)
{
    CHECK_RECEIVER(r);
    if (!buf || !len)
        return -EINVAL;
    struct zimp_slot *slot;
    const void *data = NULL;
    uint32_t zero_len = 0;
    ssize_t n = next_msg(r, timeout_ns, &slot, &data, &zero_len);
    if (n < 0) {
        ZIMP_TRACE(ZIMP_TL_ERROR, zimp__trace_error((int)n, "zimp_read", NULL));
        return (int)n;
    }
    uint64_t pos = r->pos;
    if ((r->m.flags & ZIMP_CHECKSUM) && zimp__crc32c(data, (size_t)n) != slot->crc) {
        /* Changed under us because we were evicted (and the slot reused)? Say so. */
        int rc = still_valid(r, slot, pos);
        if (rc == -ENOBUFS)
            return lossy_gap(r, pos, pos + 1);                            /* LR3 */
        r->pos = pos + 1;
        release_to(r, r->pos);
        return rc != 0 ? rc : -EBADMSG;
    }
    r->pos = pos + 1;              /* head stays at pos until zimp_release */
    r->borrowed = true;
    r->borrow_len = zero_len;
    ZIMP_TRACE(ZIMP_TL_DEBUG, zimp__trace_msg(ZIMP_EV_RECV, hdr(r)->nonce, r->index, pos, data, (size_t)n));
    *buf = data;
    *len = (size_t)n;
    return 0;
}

ZIMP_SLOW_PATH static int release_general(zimp_receiver *r);

ZIMP_API int zimp_release(zimp_receiver *r)
{
    if (r && r->plain && r->borrowed && !r->cur_heap && !zimp__inherited(r->fork_gen) &&
        still_plain(r, zimp__slot(r->m.base, &r->m.g, r->pos - 1), r->pos - 1)) {
        r->borrowed = false;
        release_to(r, r->pos);
        return 0;
    }
    return release_general(r);
}

static int release_general(zimp_receiver *r)
{
    CHECK_RECEIVER(r);
    if (!r->borrowed)
        return -EINVAL;
    r->borrowed = false;
    struct zimp_slot *slot = zimp__slot(r->m.base, &r->m.g, r->pos - 1);
    int rc = still_valid(r, slot, r->pos - 1);
    if (rc == -ENOBUFS)                        /* written over while borrowed (LR3) */
        return lossy_gap(r, r->pos - 1, r->pos);
    if (rc == 0 && (r->m.flags & ZIMP_ZERO_ON_RELEASE))
        zero_if_last(r, r->pos - 1, r->borrow_len, false);
    release_to(r, r->pos);
    return rc;
}

ZIMP_API int zimp_receiver_fd(zimp_receiver *r)
{
    CHECK_RECEIVER(r);
    if (r->epfd >= 0)
        return r->epfd;
    /* N1: a datagram socket at an address senders compute themselves. */
    struct sockaddr_un a;
    socklen_t alen = zimp__notify_addr(hdr(r)->nonce, r->index, ZIMP_OWNER_GEN(r->owner), &a);
    int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sock < 0)
        return zimp__fail(-errno, "cannot create the notification socket: %s", strerror(errno));
    if (bind(sock, (struct sockaddr *)&a, alen) != 0) {
        int e = errno;
        close(sock);
        return zimp__fail(-e, "cannot bind the notification socket: %s", strerror(e));
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 0 };
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sock, &ev) != 0) {
        int e = errno;
        if (ep >= 0)
            close(ep);
        close(sock);
        return zimp__fail(-e, "epoll: %s", strerror(e));
    }
    r->sock = sock;
    r->epfd = ep;
    zimp__fd_note(sock, &r->sock_id);
    zimp__fd_note(ep, &r->epfd_id);
    /* Senders that join from now on compare their netns with ours (N4). */
    zimp_store_sc(&r->rec->netns, zimp__netns());
    arm(r);
    return ep;
}
