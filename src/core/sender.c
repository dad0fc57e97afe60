/*
 * The sending side: wait for room, claim a position, write, publish.
 * Step labels (S0, P2, E3, ...) and invariants (I1, ...) are those of
 * docs/protocol.md; model/zimp.pml checks them.
 *
 * Claim, only once the slot has room (so no claim waits, and abandoned
 * claims cannot pile up: I1):
 *   S0  room for t = tail: every live receiver's head > t - slots, and
 *       t - slots resolved (published, skipped, or no live claimer)
 *   S1  intent := t            (release store on the sender's own record;
 *       S2's seq_cst CAS orders it before the claim is visible)
 *   S2  CAS tail t -> t+1      (seq_cst; back to S0 on failure); a store
 *       on a channel with one sender record, which then fences at the end
 *       of each claim (abandon) instead
 *   S3  a receiver joined since the S0 view: re-check room, holding t
 *   S4  t skipped already (we were evicted): -ECONNRESET; t's slot
 *       quarantined while a live sender holds an earlier position there:
 *       skip t, back to S0
 * A receiver that finds position p claimed (tail > p) but unpublished looks
 * for a live sender whose intent is p: S1 happens before S2, and the
 * receiver's load of tail reads S2 or a later RMW, so it sees the intent
 * (or a later value written only after p was published or abandoned).
 *
 * Publish:
 *   P0  evicted: abandon the claim, -ECONNRESET
 *   P1  write len, crc (a message of up to 48 bytes: in the slot's line)
 *   P2  seq := p + 1 by CAS upward (its release pairs with the receiver's
 *       acquire load of seq, R1; it fails only if an evictor skipped p, E3);
 *       a release store on a channel with one sender record
 *   P3  intent := none          (release)
 *   P4  wake receivers (futex, sockets) and senders waiting on p's slot
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/core_int.h"
#include "trace/trace_hook.h"

static struct zimp_header *hdr(zimp_sender *s) { return zimp__hdr(s->m.base); }
static struct zimp_wait *wait_page(zimp_sender *s) { return zimp__wait_page(s->m.base, &s->m.g); }
static struct zimp_slot *slot_of(zimp_sender *s, uint64_t p) { return zimp__slot(s->m.base, &s->m.g, p); }

/* A handle inherited across fork() must not touch shared state. */
#define CHECK_SENDER(s)                                  \
    do {                                                 \
        if (!(s))                                        \
            return -EINVAL;                              \
        if (zimp__inherited((s)->fork_gen))              \
            return -EBADF;                               \
    } while (0)

/* Frees a handle and everything it holds in this process (also a half-opened one). */
static void sender_free(zimp_sender *s)
{
    for (uint32_t i = 0; s->peers && i < s->m.g.max_receivers; i++)
        zimp__peer_reset(&s->peers[i]);
    for (uint32_t i = 0; s->speers && i < s->m.g.max_senders; i++)
        zimp__peer_reset(&s->speers[i]);
    free(s->peers);
    free(s->speers);
    free(s->reclaim);
    zimp__fd_close(&s->sock, &s->sock_id);
    zimp__map_close(&s->m);
    free(s);
}

/* Our membership: 0, or -ECONNRESET once evicted (or the record was taken). */
static int membership(zimp_sender *s)
{
    return zimp_load_relaxed(&s->rec->owner) == s->owner ? 0 : -ECONNRESET;
}

/* Wakes receivers wherever they wait (futex and notification sockets). */
static void wake_receivers(zimp_sender *s)
{
    struct zimp_wait *w = wait_page(s);
    zimp_store_sc(&w->recv_waiting, 1);
    zimp__wake(&w->pub_futex, &w->recv_waiting);
    zimp_store_sc(&w->fd_waiting, 1);
    zimp__notify_fds(s);
}

/*
 * N4: a receiver waiting on a notification socket in another network
 * namespace cannot be reached by our datagrams: refuse to join rather than
 * leave it asleep. (Receivers that arm later see our netns and use a timer.)
 */
static int check_reachable(zimp_sender *s, uint64_t netns)
{
    for (uint32_t i = 0; i < s->m.g.max_receivers; i++) {
        struct zimp_receiver_rec *rr = zimp__rrec(s->m.base, &s->m.g, i);
        uint64_t o = zimp_load_sc(&rr->owner);
        uint64_t ns = zimp_load_sc(&rr->netns);
        uint32_t st = ZIMP_OWNER_STATE(o);
        if ((st != ZIMP_M_ACTIVE && st != ZIMP_M_LOSSY) || ns == 0 || ns == netns)
            continue;
        if (zimp__receiver_alive(&s->m, s->peers, i, o))
            return zimp__fail(-EXDEV, "receiver %u waits on a notification socket in another "
                              "network namespace, which this sender cannot reach", i);
    }
    return 0;
}

ZIMP_API int zimp_sender_open(const char *name, zimp_sender **out)
{
    int r;
    zimp__clear_detail();
    if (!out)
        return zimp__fail(-EINVAL, "output handle pointer is NULL");
    *out = NULL;
    zimp_sender *s = calloc(1, sizeof *s);
    if (!s)
        return zimp__fail(-ENOMEM, "out of memory");
    s->m.fd = -1;
    s->sock = -1;
    if ((r = zimp__map_open(name, ZIMP_ROLE_SENDER, &s->m)) != 0)
        goto fail;
    uint32_t n = s->m.g.max_receivers;
    s->speers = calloc(s->m.g.max_senders, sizeof *s->speers);
    s->peers = s->speers ? calloc(n, sizeof *s->peers) : NULL;
    if (!s->peers) {
        r = zimp__fail(-ENOMEM, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++)
        zimp__peer_init(&s->peers[i]);
    for (uint32_t i = 0; i < s->m.g.max_senders; i++)
        zimp__peer_init(&s->speers[i]);
    /* The socket first: a sender that could not wake epoll receivers must not join (N3). */
    s->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    zimp__fd_note(s->sock, &s->sock_id);
    if (s->sock < 0) {
        r = zimp__fail(-errno, "cannot create the notification socket: %s", strerror(errno));
        goto fail;
    }
    if ((r = zimp__join(&s->m, ZIMP_ROLE_SENDER, ZIMP_M_ACTIVE, &s->owner)) < 0)
        goto fail;
    s->index = (uint32_t)r;
    s->rec = zimp__srec(s->m.base, &s->m.g, s->index);
    s->fork_gen = zimp__fork_token();
    s->pid = getpid();
    uint64_t netns = zimp__netns();
    zimp_store_release(&s->rec->intent, ZIMP_NO_INTENT);
    zimp_store_sc(&s->rec->netns, netns);
    if ((r = check_reachable(s, netns)) != 0) {
        zimp__leave(&s->rec->owner, &s->rec->closed, s->owner);
        goto fail;
    }
    s->held = ZIMP_NO_INTENT;
    s->abandoned = ZIMP_NO_INTENT;
    /* One sender record: nobody else claims, and nobody can evict us (E1 is a sender's call). */
    s->solo = s->m.g.max_senders == 1;
    /*
     * ZIMP_F_MEMBARRIER: receivers make our stores visible (membarrier) when
     * they need to, once this process is a registered target, before our
     * first claim. Where it cannot register, it fences (F) as before.
     */
    if (s->solo && (s->m.flags & ZIMP_F_MEMBARRIER)) {
        int mb = zimp__membarrier_register();
        s->fenceless = mb == 0;
        if (mb != 0)
            ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_error(mb, "zimp_sender_open",
                       "membarrier registration refused: this sender fences after each message"));
        /* M3: fencing until publications find no sleeper (a predecessor's word may say either) */
        s->fencing = true;
        zimp_xchg_sc(&wait_page(s)->sender_fences, 1);
    }
    s->own_from = zimp_load_acquire(&hdr(s)->tail);   /* below: maybe a dead predecessor's claims */
    zimp__spin_init(&s->spin);
    s->spin.sleeps = &s->rec->sleeps;
    zimp_store_relaxed(&s->rec->sleeps, 0);
    s->joins_seen = zimp_load_sc(&wait_page(s)->joins);
    s->min_head = zimp__min_head(s, zimp_load_acquire(&hdr(s)->tail), false);
    /*
     * Wake armed epoll receivers before counting as opened, so that each
     * adds our pidfd to its set: if we die later, our pidfd wakes it; if we
     * die before the count, no receiver owes -EPIPE for us (N3).
     */
    zimp_store_sc(&wait_page(s)->fd_waiting, 1);
    zimp__notify_fds(s);
    zimp_add_sc(&hdr(s)->sender_opens, 1);
    ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_channel(ZIMP_EV_OPEN, ZIMP_TR_SENDER, name, hdr(s)->nonce, s->index,
               s->m.g.slots, s->m.g.slot_size, s->m.g.max_senders, s->m.g.max_receivers));
    *out = s;
    return 0;
fail:
    sender_free(s);
    return r;
}

static void pending_evictions(zimp_sender *s);

/*
 * ZIMP_ZERO_ON_RELEASE: what the loan at buf held beyond the `from` bytes
 * that go out is no message, and no receiver will zero it: the sender does
 * (a loan published short, given back, abandoned by a close or by an
 * eviction), so that no byte written into a slot or a block lingers once
 * its readers are done. The loan's position is still ours (or quarantined,
 * Q1) while this runs: nobody else reads or writes its memory.
 */
static void loan_zero(zimp_sender *s, void *buf, size_t from)
{
    if ((s->m.flags & ZIMP_ZERO_ON_RELEASE) && s->loan_len > from)
        memset((char *)buf + from, 0, s->loan_len - from);
}

ZIMP_API void zimp_sender_close(zimp_sender *s)
{
    if (!s)
        return;
    if (zimp__inherited(s->fork_gen) || s->pid != getpid()) {
        sender_free(s);               /* inherited across fork: the copy only */
        return;
    }
    ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_member(ZIMP_EV_CLOSE, ZIMP_TR_SENDER, hdr(s)->nonce, s->index, 0));
    /* A skip waiting for room (E3) may be possible now: retry it while we can. */
    if (membership(s) == 0)
        pending_evictions(s);
    if (s->loan_buf)
        loan_zero(s, s->loan_buf, 0);
    /* L1: a held, unpublished position is abandoned once we are gone. */
    zimp_store_release(&s->rec->intent, ZIMP_NO_INTENT);
    zimp__leave(&s->rec->owner, &s->rec->closed, s->owner);
    /* After the record is free: a poller that sees the count finds it free. */
    zimp_add_sc(&hdr(s)->sender_closes, 1);
    /* Receivers may now be drained with no sender, or past an abandoned claim. */
    wake_receivers(s);
    zimp__heap_channel_release(&s->m);
    sender_free(s);
}

ZIMP_API int zimp_sender_set_spin(zimp_sender *s, uint64_t spin_ns)
{
    CHECK_SENDER(s);
    zimp__spin_set(&s->spin, spin_ns);
    return 0;
}

ZIMP_API int zimp_sender_index(const zimp_sender *s)
{
    CHECK_SENDER(s);
    return (int)s->index;
}

/*
 * Min head over the live receivers of channel m, at most `tail`; `slow`
 * judges the liveness of those below it, through `peers` (a liveness cache,
 * one per receiver record) or, without, once each. `reap` (a sender) also
 * frees the records of dead receivers (D1); H5, from outside the channel,
 * leaves them to the senders. Either way a dead receiver holds nothing, nor
 * does an evicted one: if it may be zeroing a message it read (Z0),
 * *zeroing is set (when not NULL), and the claims that land on that slot
 * pass it by (Z3) instead of every sender waiting for it.
 */
uint64_t zimp__min_head_of(struct zimp_map *m, struct zimp_peer *peers, uint64_t tail, bool slow, bool reap,
                           bool *zeroing)
{
    const struct zimp_geometry *g = &m->g;
    uint64_t min = tail;
    for (uint32_t i = 0; i < g->max_receivers; i++) {
        struct zimp_receiver_rec *rr = zimp__rrec(m->base, g, i);
        /* seq_cst: ordered after the claim and the joins check (J1, J2) */
        uint64_t o = zimp_load_sc(&rr->owner);
        if (ZIMP_OWNER_STATE(o) != ZIMP_M_ACTIVE && ZIMP_OWNER_STATE(o) != ZIMP_M_EVICTED)
            continue;
        if (ZIMP_OWNER_STATE(o) == ZIMP_M_EVICTED) {
            /* Z3: seq_cst, after the owner: an evictor's CAS follows Z0's check. */
            if (zeroing && zimp_load_sc(&rr->zeroing) != 0)
                *zeroing = true;
            continue;
        }
        uint64_t h = zimp_load_sc(&rr->head);        /* pairs with R3 */
        if (h >= min)
            continue;          /* also a head beyond tail (joined after our tail read) */
        if (slow && !zimp__receiver_alive(m, peers, i, o)) {
            /* D1: a dead receiver's record is freed; it no longer holds anything.
             * Its pid stays in the free record: watchers tell a reaped death
             * from a clean close (which frees with pid 0). */
            if (reap)
                zimp_cas_sc(&rr->owner, &o, ZIMP_OWNER(ZIMP_OWNER_GEN(o), ZIMP_M_FREE, ZIMP_OWNER_PID(o)));
            continue;
        }
        min = h;
    }
    return min;
}

uint64_t zimp__min_head(zimp_sender *s, uint64_t tail, bool slow)
{
    bool zeroing = false;
    uint64_t min = zimp__min_head_of(&s->m, s->peers, tail, slow, slow, &zeroing);
    s->zero_watch |= zeroing;
    return min;
}

/*
 * Z3: whether an evicted receiver may still be zeroing the message that t's
 * slot held (zeroing = q + 1, q < t in the same slot). Then t is passed by
 * like a landing on a quarantined slot, and the ring goes on without that
 * slot until the receiver finished, died or closed: a receiver stopped
 * while it zeroes (SIGSTOP) holds one slot, not every sender. Looked at
 * only after a scan of the records saw such a receiver (zero_watch), until
 * a look finds none left: a receiver can only start zeroing a message
 * while it is active and its head holds that message, which sends every
 * claim landing on the slot through a scan first.
 */
static bool zeroing_holds(zimp_sender *s, uint64_t t)
{
    const struct zimp_geometry *g = &s->m.g;
    bool any = false;
    for (uint32_t i = 0; i < g->max_receivers; i++) {
        struct zimp_receiver_rec *rr = zimp__rrec(s->m.base, g, i);
        uint64_t o = zimp_load_sc(&rr->owner);
        if (ZIMP_OWNER_STATE(o) != ZIMP_M_EVICTED)
            continue;
        uint64_t z = zimp_load_sc(&rr->zeroing);
        if (z == 0)
            continue;
        if (z - 1 < t && (t - (z - 1)) % g->slots == 0) {
            if (zimp__receiver_alive(&s->m, s->peers, i, o))
                return true;
            continue;                   /* dead: it zeroes nothing more */
        }
        /* Judged (system calls) only when it is t's slot: once a ring, not per claim. */
        any |= !(s->peers[i].owner == o && s->peers[i].dead);
    }
    s->zero_watch = any;
    return false;
}

static bool receivers_room_scan(zimp_sender *s, uint64_t p, bool slow)
{
    /* Joins first: a joiner's J1 precedes its J2, so the scan sees its head. */
    s->joins_seen = zimp_load_sc(&wait_page(s)->joins);
    s->min_head = zimp__min_head(s, p, slow);
    return p < s->min_head + s->m.g.slots;
}

/* S0(a): every live receiver is past p - slots (from the cache unless a join happened). */
static inline bool receivers_room(zimp_sender *s, uint64_t p, bool rescan, bool slow)
{
    if (!rescan && p < s->min_head + s->m.g.slots &&
        zimp_load_sc(&wait_page(s)->joins) == s->joins_seen)
        return true;
    return receivers_room_scan(s, p, slow);
}

/*
 * S0(b): position p - slots, the previous occupant of p's slot, is resolved:
 * published or skipped (its seq says so), or, found by the slow check,
 * abandoned (no live sender holds it).
 */
static bool previous_abandoned(zimp_sender *s, uint64_t prev)
{
    if (zimp__claim_live(&s->m, s->speers, prev))
        return false;
    s->abandoned = prev;          /* resolved stays resolved: no second slow check for it */
    return true;
}

static inline bool previous_resolved(zimp_sender *s, uint64_t p, bool slow)
{
    uint32_t slots = s->m.g.slots;
    if (p < slots)
        return true;
    uint64_t prev = p - slots;
    if (zimp__seq_next(zimp_load_acquire(&slot_of(s, p)->seq)) > prev || prev == s->abandoned)
        return true;
    return slow && previous_abandoned(s, prev);
}

/*
 * Alone on the channel, p's slot last held a position this handle claimed
 * and then published or skipped (or none): S0(b) holds, and S4 has nothing
 * to find (only an evictor skips or quarantines, and a sender alone has
 * none), without reading the slot.
 */
static inline bool own_slot(zimp_sender *s, uint64_t p)
{
    return s->solo && (p < s->m.g.slots || p - s->m.g.slots >= s->own_from);
}

/*
 * P2, E3, S4: raises the seq of p's slot to (p + 1) | flags unless it is at p
 * or beyond already (I3: seq only moves up). True if this call raised it.
 * `cur` is a recent value of seq (a guess: the CAS corrects it).
 */
static bool seq_raise_from(struct zimp_slot *sl, uint64_t cur, uint64_t p, uint64_t flags)
{
    while (zimp__seq_next(cur) <= p)
        if (zimp_cas_sc(&sl->seq, &cur, (p + 1) | flags))
            return true;
    return false;
}

static bool seq_raise(struct zimp_slot *sl, uint64_t p, uint64_t flags)
{
    return seq_raise_from(sl, zimp_load_acquire(&sl->seq), p, flags);
}

/*
 * Q1: whether quarantined slot sl still keeps claim t off its data: some live
 * sender record (evicted or not) has an intent below t in the same slot. A
 * loan's writer keeps its intent until P0 or P3, so it is seen until it can
 * write no more; a stale intent (S1 before a failed S2) only makes the
 * quarantine last until that sender's next step.
 */
static bool quarantine_holds(zimp_sender *s, uint64_t t)
{
    const struct zimp_geometry *g = &s->m.g;
    for (uint32_t i = 0; i < g->max_senders; i++) {
        if (i == s->index)
            continue;
        struct zimp_sender_rec *sr = zimp__srec(s->m.base, g, i);
        uint64_t q = zimp_load_acquire(&sr->intent);
        if (q == ZIMP_NO_INTENT || q >= t || (t - q) % g->slots != 0)
            continue;
        uint64_t o = zimp_load_acquire(&sr->owner);
        uint32_t st = ZIMP_OWNER_STATE(o);
        if ((st == ZIMP_M_ACTIVE || st == ZIMP_M_EVICTED) && zimp__sender_live(&s->m, sr, o, &s->speers[i]))
            return true;
    }
    return false;
}

/*
 * E2-E3 for evicted sender record i (owner word o): skip the position it
 * holds, so that every receiver passes it and nobody waits for it, and
 * quarantine its slot's data, which the evicted process may still write.
 * Needs room for that position (the slot header changes: I2); without room,
 * the slow checks of blocked senders retry it (complete_evictions). Nothing
 * names the evicted sender in the slot: Q1 finds its loan by its intent.
 */
enum skip { SKIP_NONE, SKIP_DONE, SKIP_WAITS };

static enum skip skip_evicted(zimp_sender *s, uint32_t i, uint64_t o)
{
    const struct zimp_geometry *g = &s->m.g;
    struct zimp_sender_rec *sr = zimp__srec(s->m.base, g, i);
    uint64_t q = zimp_load_acquire(&sr->intent);                        /* E2 */
    /*
     * The intent is the evicted sender's only if the record is still its own
     * after the load: a new owner writes intent only after taking the record.
     */
    if (zimp_load_sc(&sr->owner) != o)
        return SKIP_NONE;
    if (q == ZIMP_NO_INTENT || q >= zimp_load_acquire(&hdr(s)->tail))
        return SKIP_NONE;
    struct zimp_slot *sl = slot_of(s, q);
    uint64_t seq = zimp_load_acquire(&sl->seq);
    if (zimp__seq_next(seq) > q)
        return SKIP_NONE;                     /* published or skipped already */
    /*
     * A live ACTIVE sender with intent q may be its real claimer (ours a stale
     * S1). Record i too: a new owner may have taken it since the re-read above
     * (its predecessor died) and claimed q; while the evicted one holds it, it
     * is not ACTIVE.
     */
    for (uint32_t k = 0; k < g->max_senders; k++) {
        struct zimp_sender_rec *other = zimp__srec(s->m.base, g, k);
        uint64_t ok = zimp_load_acquire(&other->owner);
        if (ZIMP_OWNER_STATE(ok) == ZIMP_M_ACTIVE &&
            zimp_load_acquire(&other->intent) == q && zimp__sender_live(&s->m, other, ok, &s->speers[k]))
            return SKIP_NONE;
    }
    /* A receiver still reads q - slots (or a joiner holds everything, J1): later. */
    if (q >= g->slots && zimp__min_head(s, q + 1, true) <= q - g->slots)
        return SKIP_WAITS;
    return seq_raise(sl, q, ZIMP_SEQ_SKIP | ZIMP_SEQ_QUAR) ? SKIP_DONE : SKIP_NONE;   /* E3 */
}

/*
 * Retries E3 for every live evicted sender: on the slow path of blocked
 * senders, and on any sender call while `evict_pending` says a skip waits
 * for room (an evictor or a receiver found it waiting). Receivers waiting
 * at a position now skipped are woken.
 */
static void complete_evictions(zimp_sender *s)
{
    zimp_a32 *pending = &wait_page(s)->evict_pending;
    zimp_store_sc(pending, 0);
    bool woke = false, waits = false;
    for (uint32_t i = 0; i < s->m.g.max_senders; i++) {
        struct zimp_sender_rec *sr = zimp__srec(s->m.base, &s->m.g, i);
        uint64_t o = zimp_load_acquire(&sr->owner);
        if (ZIMP_OWNER_STATE(o) != ZIMP_M_EVICTED || !zimp__sender_live(&s->m, sr, o, &s->speers[i]))
            continue;
        enum skip r = skip_evicted(s, i, o);
        woke |= r == SKIP_DONE;
        waits |= r == SKIP_WAITS;
    }
    if (waits)
        zimp_store_sc(pending, 1);
    if (woke)
        wake_receivers(s);
}

/* A skip waits for room: retry it now (one relaxed load while none does). */
static void pending_evictions(zimp_sender *s)
{
    if (zimp_load_relaxed(&wait_page(s)->evict_pending))
        complete_evictions(s);
}

/* Publishes the head that gives room for p, for receivers to wake us (R4). */
static void set_need(zimp_sender *s, uint64_t p, uint64_t extra)
{
    uint32_t slots = s->m.g.slots;
    uint64_t need = p + 1 > slots ? p + 1 - slots + extra : 0;
    if (zimp_load_relaxed(&s->rec->need) != need)
        zimp_store_sc(&s->rec->need, need);
}

/* Slow-path duties of a blocked sender: stall timer, membership, evictions. */
static int blocked_slow(zimp_sender *s)
{
    uint64_t now = zimp__now_ns();
    if (s->blocked_since == 0)
        s->blocked_since = now;
    else if (s->m.stall_timeout_ns && now - s->blocked_since >= s->m.stall_timeout_ns) {
        s->blocked_since = 0;      /* a retry waits one more stall period */
        ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_member(ZIMP_EV_STALL, ZIMP_TR_SENDER, hdr(s)->nonce, s->index, 0));
        return -ETIMEDOUT;
    }
    int rc = membership(s);
    if (rc == 0)
        complete_evictions(s);
    return rc;
}

/*
 * Condition for S0: room for the current tail. While there is none, asks to
 * be woken when the slowest receiver crosses `need`: a quarter ring past the
 * exact room, so that one wake-up buys a batch of sends instead of one
 * wake-up per receiver per message. need <= tail, and every position below
 * tail is published, held by a sender that will publish, or abandoned, so
 * receivers can reach it.
 */
static int room_cond(void *ctx, bool slow)
{
    zimp_sender *s = ctx;
    uint32_t slots = s->m.g.slots;
    uint64_t t = zimp_load_acquire(&hdr(s)->tail);
    if (receivers_room(s, t, true, slow) && previous_resolved(s, t, slow)) {
        s->room_for = t;
        return 1;
    }
    set_need(s, t, slots >= 8 ? slots / 4 : 0);
    return slow ? blocked_slow(s) : 0;
}

/* Condition for S3: room for the held position among receivers, joiners included. */
static int held_cond(void *ctx, bool slow)
{
    zimp_sender *s = ctx;
    if (receivers_room(s, s->held, true, slow))
        return 1;
    set_need(s, s->held, 0);
    return slow ? blocked_slow(s) : 0;
}

static int wait_for(zimp_sender *s, zimp_cond_fn cond, uint64_t deadline)
{
    struct zimp_wait *w = wait_page(s);
    int r = zimp__wait(&w->rel_futex, &w->send_waiting, cond, s, &s->spin, deadline, &s->last_slow);
    return r > 0 ? 0 : r;
}

/*
 * Gives up the held position (P3 after a publication; else receivers skip
 * it as abandoned, R5). A sender alone on its channel (S2 and P2 are plain
 * stores) fences here, at the end of every claim: P4's loads of the waiting
 * flags then follow P2 (Dekker with a receiver going to sleep), and the next
 * claim's loads of `joins` (S0, S3) follow every store of this one (a joiner
 * that those loads miss reads a tail at least this claim's: docs/protocol.md S2).
 * On a ZIMP_F_MEMBARRIER channel the other side issues that order instead:
 * a receiver's membarrier between announcing its sleep (or its join) and
 * its last look acts as this fence wherever this thread is.
 */
static void abandon(zimp_sender *s)
{
    zimp_store_release(&s->rec->intent, ZIMP_NO_INTENT);
    s->held = ZIMP_NO_INTENT;
    if (s->solo && (!s->fenceless || s->fencing))
        zimp_fence_sc();                                                /* F */
}

/*
 * M3 (ZIMP_F_MEMBARRIER): a sender that finds receivers asleep when it
 * publishes (on the futex, or armed for poll/epoll) fences after each message from then on, and says so in
 * sender_fences, so that they stop issuing membarrier (an interrupt of this
 * thread each, a receiver's every sleep: 16 blocking receivers made 16 per
 * message). After ZIMP_FENCE_QUIET publications in a row that found none,
 * it stops. Each change is an exchange: a full fence, which orders every
 * store before it, fenced or not, before every load after it.
 */
static void fence_adapt(zimp_sender *s, bool sleepers)
{
    if (sleepers) {
        s->quiet = 0;
        if (!s->fencing) {
            s->fencing = true;
            zimp_xchg_sc(&wait_page(s)->sender_fences, 1);
        }
    } else if (s->fencing && ++s->quiet >= ZIMP_FENCE_QUIET) {
        s->fencing = false;
        zimp_xchg_sc(&wait_page(s)->sender_fences, 0);
    }
}

/* Abandons the held position unresolved (an error): receivers skip it as abandoned (R5). */
static void give_up(zimp_sender *s)
{
    s->own_from = s->held + 1;      /* its slot's next claim must look for itself */
    abandon(s);
}

/*
 * Skips the held position t (S4 on a quarantined slot, with QUAR; W1 when
 * the loan is given back, without: its owner writes no more) and gives it
 * up. True if this call skipped it (false: an evictor did first).
 */
static bool skip_held(zimp_sender *s, uint64_t t, uint64_t flags)
{
    bool skipped = seq_raise(slot_of(s, t), t, ZIMP_SEQ_SKIP | flags);
    abandon(s);
    /* t is resolved: receivers pass it, and a sender waiting for t's slot (S0(b)) may go on. */
    zimp__wake(&wait_page(s)->pub_futex, &wait_page(s)->recv_waiting);
    zimp__wake(&wait_page(s)->rel_futex, &wait_page(s)->send_waiting);
    return skipped;
}

/* ---- large messages: heap blocks held by the channel (docs/heap.md H1-H5) ---- */

/*
 * H2/H3/H5: drops the channel's hold on the heap block of the message at p's
 * slot if the hold still names position q1 - 1. Exactly once: whoever moves
 * the hold's pos from q1 to 0. The handle is read before that CAS: the
 * slot's next publisher writes it only after its own attempt, so a winning
 * CAS proves it was the handle of q1 - 1. `owner`: H5 checks that the
 * channel's heap record is still the channel's (0: a member of the channel,
 * which keeps it). `keep`: a sender that drops the last hold keeps the block
 * for its next message. True if this call dropped it.
 */
static bool drop_hold_of(struct zimp_map *m, zimp_heap *heap, uint64_t p, uint64_t q1, uint64_t owner, bool keep)
{
    struct zimp_hold *h = zimp__hold(m->base, &m->g, p);
    struct zimp_ref ref = h->ref;
    if (!zimp_cas_sc(&h->pos, &q1, 0))
        return false;
    return zimp__heap_channel_drop(heap, &ref, m->heap_member, owner, keep);
}

/* H2: the claimer of p frees its slot's hold (room for p: every receiver is past p - slots). */
static void drop_hold(zimp_sender *s, uint64_t p)
{
    uint64_t q1 = zimp_load_acquire(&zimp__hold(s->m.base, &s->m.g, p)->pos);
    if (q1 != 0 && q1 - 1 < p)
        drop_hold_of(&s->m, s->m.heap, p, q1, 0, true);
}

/*
 * H3 (a sender of channel m) and H5 (any other member of the heap, from
 * outside the channel, with no `peers`): drops every hold of a message all
 * live receivers have passed, through `heap`; how many. A hold qualifies
 * only if its position was resolved (published or skipped) before the
 * receivers were scanned: a receiver that joins later then finds it
 * resolved and starts past it, while one that joined before, with the
 * position pending (J3), is in the scan with a head at or below it (its J1
 * precedes its look at the slot, which precedes P2). Only receivers below
 * the newest such hold can keep any of them: the liveness of the others is
 * not looked at. `scratch` holds a word per slot.
 */
int zimp__reclaim_holds(struct zimp_map *m, struct zimp_peer *peers, zimp_heap *heap, uint64_t *scratch,
                        uint64_t owner, bool keep, bool *held)
{
    uint32_t slots = m->g.slots;
    uint64_t newest = 0;
    bool any_held = false;
    for (uint32_t i = 0; i < slots; i++) {
        uint64_t q1 = zimp_load_acquire(&zimp__hold(m->base, &m->g, i)->pos);
        any_held |= q1 != 0;
        bool resolved = q1 != 0 && zimp__seq_next(zimp_load_sc(&zimp__slot(m->base, &m->g, i)->seq)) >= q1;
        scratch[i] = resolved ? q1 : 0;
        if (scratch[i] > newest)
            newest = scratch[i];
    }
    if (held)
        *held = any_held;
    if (newest == 0)
        return 0;
    uint64_t tail = zimp_load_acquire(&zimp__hdr(m->base)->tail);
    uint64_t min = zimp__min_head_of(m, peers, newest < tail ? newest : tail, true, owner == 0, NULL);
    int n = 0;
    bool any = false;
    for (uint32_t i = 0; i < slots; i++)
        any |= scratch[i] != 0 && scratch[i] - 1 < min;
    if (!any || (owner && !zimp__heap_drops_begin(heap)))
        return 0;                     /* H5 drops under the heap's lock */
    for (uint32_t i = 0; i < slots; i++)
        if (scratch[i] != 0 && scratch[i] - 1 < min)
            n += drop_hold_of(m, heap, i, scratch[i], owner, keep);
    if (owner)
        zimp__heap_drops_end(heap);
    return n;
}

/* H3; *held: whether the channel held any block when it looked (before its drops). */
static int reclaim_holds(zimp_sender *s, bool *held)
{
    *held = true;                     /* unknown: assume so */
    if (!s->reclaim && !(s->reclaim = calloc(s->m.g.slots, sizeof *s->reclaim)))
        return 0;
    return zimp__reclaim_holds(&s->m, s->peers, s->m.heap, s->reclaim, 0, true, held);
}

/*
 * The head below which receivers keep the channel's blocks (the oldest held
 * position + 1), or 0 if the channel holds none (waiting would free nothing).
 */
static uint64_t oldest_hold_need(zimp_sender *s)
{
    uint64_t need = 0;
    for (uint32_t i = 0; i < s->m.g.slots; i++) {
        uint64_t q1 = zimp_load_relaxed(&zimp__hold(s->m.base, &s->m.g, i)->pos);
        if (q1 != 0 && (need == 0 || q1 < need))
            need = q1;
    }
    return need;
}

/*
 * H1: a block for a large loan. First the channel gives back what it holds
 * for messages every receiver has passed (H3: the sender keeps those blocks
 * for itself, so a stream of equal messages allocates nothing); a full heap
 * then waits while the channel holds blocks receivers still read, like a
 * full ring (polling every millisecond, as receivers do not wake senders
 * for this).
 */
static int heap_loan(zimp_sender *s, size_t len, uint64_t deadline, void **buf, struct zimp_ref *ref)
{
    bool had, seen;                   /* a hold was there before this attempt; before the next */
    reclaim_holds(s, &had);
    s->blocked_since = 0;
    unsigned retries = 0;
    for (;;) {
        int r = zimp__heap_alloc(s->m.heap, len, buf, ref, deadline);
        if (r != -ENOMEM) {
            if (r == 0)
                s->heap_need = 0;
            return r;
        }
        if (reclaim_holds(s, &seen) > 0) {
            had = seen;
            continue;
        }
        /* Receivers below the oldest hold keep the room: zimp_stalled names them. */
        if ((s->heap_need = oldest_hold_need(s)) == 0) {
            /* Holds that went after our look (H5, another sender's H3) may have
             * left room (model/README.md, finding 8): only senders make holds,
             * so each retry needs one more that was there and went; at least
             * one retry, more while the deadline allows. */
            if (had && (retries++ == 0 || zimp__now_ns() < deadline)) {
                had = seen;
                continue;
            }
            return r;                 /* nothing of ours to wait for: really full */
        }
        uint64_t now = zimp__now_ns();
        if (deadline <= now)
            return zimp__fail(deadline == 0 ? -EAGAIN : -ETIMEDOUT,
                              "the heap has no room for %zu bytes until receivers release messages", len);
        if (s->m.stall_timeout_ns && s->blocked_since && now - s->blocked_since >= s->m.stall_timeout_ns) {
            ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_member(ZIMP_EV_STALL, ZIMP_TR_SENDER, hdr(s)->nonce, s->index, 0));
            return zimp__fail(-ETIMEDOUT, "receivers kept the heap's room for %zu bytes past the stall timeout",
                              len);
        }
        if (!s->blocked_since)
            s->blocked_since = now;
        uint64_t nap = deadline - now < 1000000 ? deadline - now : 1000000;
        struct timespec ts = { 0, (long)nap };
        nanosleep(&ts, NULL);
        int rc = membership(s);
        if (rc != 0)
            return rc;
        had = seen;
    }
}

/*
 * S3 and S4 for position t, claimed by S2 and held: 0 if the slot is ours
 * to write, 1 if t was skipped and the caller claims again, or an error
 * (t given up).
 */
static int settle(zimp_sender *s, uint64_t t, uint64_t deadline)
{
    int rc;
    if ((rc = membership(s)) != 0) {      /* evicted between the checks: never ours */
        give_up(s);
        return rc;
    }
    /* S3: the view of S0 may predate a receiver's join (J2): check again. */
    if (zimp_load_sc(&wait_page(s)->joins) != s->joins_seen &&
        !receivers_room(s, t, true, false) && (rc = wait_for(s, held_cond, deadline)) != 0) {
        give_up(s);
        return rc;
    }
    if (s->zero_watch && zeroing_holds(s, t)) {
        skip_held(s, t, 0);     /* Z3: an evicted receiver may still zero t's slot */
        return 1;
    }
    /* S4 alone, past our own claims: nobody else wrote t's slot since we
     * published its last message (no evictor, no quarantine), so the slot's
     * line is only written, never read first (one transfer, not two). */
    if (own_slot(s, t)) {
        if (s->m.heap)
            drop_hold(s, t);
        return 0;
    }
    /* S4: t itself was skipped (E3): we were evicted after the check above. */
    uint64_t seq = zimp_load_acquire(&slot_of(s, t)->seq);
    if (zimp__seq_next(seq) > t) {
        give_up(s);
        return -ECONNRESET;
    }
    /* S4: a quarantined slot's data may still be written by an evicted sender. */
    if (!(seq & ZIMP_SEQ_QUAR) || !quarantine_holds(s, t)) {
        s->held_seq = seq;  /* P2's first guess: saves a load of a line receivers poll */
        if (s->m.heap)
            drop_hold(s, t);    /* H2: every receiver is past the slot's old message */
        return 0;
    }
    skip_held(s, t, ZIMP_SEQ_QUAR);
    return 1;
}

/* S1, S2 for a lone sender: a store claims t (nobody else writes tail). */
static inline void claim_alone_at(zimp_sender *s, uint64_t t)
{
    /* S1. Release suffices: S2 (a release store or a seq_cst CAS) orders it
     * before the claim is visible, and whoever reads tail >= t + 1 (acquire)
     * then sees it. */
    zimp_store_release(&s->rec->intent, t);                                 /* S1 */
    zimp_store_release(&hdr(s)->tail, t + 1);                               /* S2, alone */
    /* Before any write into t's slot: a lossy reader of t - slots that sees
     * our data then sees this claim (LR3). Free on x86. */
    zimp_fence_release();
    s->held = t;
}

/* Claims a position with room for it (S0-S4): 0 with s->held set, or an error. */
static int claim(zimp_sender *s, uint64_t deadline)
{
    zimp_a64 *tail = &hdr(s)->tail;
    uint32_t landings = 0;
    int rc;
    s->blocked_since = 0;
    pending_evictions(s);
    for (;;) {
        if ((rc = membership(s)) != 0)
            return rc;
        uint64_t t = zimp_load_acquire(tail);
        if (!receivers_room(s, t, false, false) || (!own_slot(s, t) && !previous_resolved(s, t, false))) {   /* S0 */
            if ((rc = wait_for(s, room_cond, deadline)) != 0)
                return rc;
            t = s->room_for;          /* the position the condition found room for */
        }
        if (t >= ZIMP_POS_LIMIT)
            return zimp__fail(-EPROTO, "tail %llu is beyond any position", (unsigned long long)t);
        if (s->solo) {
            claim_alone_at(s, t);                                           /* S1, S2 */
        } else {
            zimp_store_release(&s->rec->intent, t);                         /* S1 */
            if (!zimp_cas_sc(tail, &t, t + 1)) {                            /* S2 */
                zimp_store_release(&s->rec->intent, ZIMP_NO_INTENT);
                continue;
            }
            s->held = t;
        }
        if ((rc = settle(s, t, deadline)) <= 0)                             /* S3, S4 */
            return rc;
        if (++landings >= s->m.g.slots) {
            /* Every slot is quarantined: wait for an evicted sender to go. */
            uint64_t now = zimp__now_ns();
            if (deadline <= now)
                return deadline == 0 ? -EAGAIN : -ETIMEDOUT;
            uint64_t nap = deadline - now < ZIMP_CHECK_NS ? deadline - now : ZIMP_CHECK_NS;
            struct timespec ts = { 0, (long)nap };
            nanosleep(&ts, NULL);
            landings = 0;
        }
    }
}

/*
 * claim() for a lone sender in the streaming case, in a few loads and
 * stores: no eviction pending, no zeroing watched, no heap, and S0 holds by
 * what the handle knows (the minimum head it cached, no join since, and a
 * slot that last held one of its own positions). It takes the steps claim()
 * takes then. 1: not that case, and nothing claimed (the general path
 * decides it); otherwise claim()'s answer (when S3 finds a join, or the
 * membership check an eviction, claim()'s own code goes on from there, with
 * one deadline for the whole claim).
 */
static inline int claim_streaming(zimp_sender *s, int64_t timeout_ns)
{
    if (!s->solo || s->m.heap || s->zero_watch)
        return 1;
    struct zimp_wait *w = wait_page(s);
    uint64_t t = zimp_load_acquire(&hdr(s)->tail);
    if (zimp_load_relaxed(&w->evict_pending) || membership(s) != 0 || !own_slot(s, t) ||   /* S0 */
        t >= s->min_head + s->m.g.slots || zimp_load_sc(&w->joins) != s->joins_seen || t >= ZIMP_POS_LIMIT)
        return 1;
    s->blocked_since = 0;
    claim_alone_at(s, t);                                                   /* S1, S2 */
    if (membership(s) == 0 && zimp_load_sc(&w->joins) == s->joins_seen)   /* S3 */
        return 0;                                                           /* S4: own_slot */
    uint64_t deadline = zimp__deadline(timeout_ns);
    int rc = settle(s, t, deadline);
    return rc == 1 ? claim(s, deadline) : rc;     /* t was skipped: claim the next */
}

ZIMP_SLOW_PATH static int loan_general(zimp_sender *s, size_t len, void **buf, int64_t timeout_ns);

ZIMP_API int zimp_loan(zimp_sender *s, size_t len, void **buf, int64_t timeout_ns)
{
    if (s && buf && !s->loan_buf && len <= s->m.g.slot_size && !zimp__inherited(s->fork_gen)) {
        int rc = claim_streaming(s, timeout_ns);
        if (rc < 0) {
            ZIMP_TRACE(ZIMP_TL_ERROR, zimp__trace_error(rc, "zimp_loan", NULL));
            return rc;
        }
        if (rc == 0) {
            /* A small loan is the slot line's inline area (one line for the whole message). */
            s->loan_buf = zimp__msg_data(s->m.base, &s->m.g, s->held, len, s->m.inline_max);
            s->loan_heap = false;
            s->loan_len = len;
            *buf = s->loan_buf;
            return 0;
        }
    }
    return loan_general(s, len, buf, timeout_ns);
}

static int loan_general(zimp_sender *s, size_t len, void **buf, int64_t timeout_ns)
{
    CHECK_SENDER(s);
    if (!buf)
        return -EINVAL;
    if (s->loan_buf)
        return -EBUSY;
    bool big = len > s->m.g.slot_size;
    if (big && (!s->m.heap || len > ZIMP_HEAP_MSG_MAX))
        return -EMSGSIZE;
    uint64_t deadline = zimp__deadline(timeout_ns);
    void *block = NULL;
    struct zimp_ref ref;
    s->heap_need = 0;
    int r = big ? heap_loan(s, len, deadline, &block, &ref) : 0;       /* H1: before the claim */
    if (r == 0 && (r = claim(s, deadline)) < 0 && big)
        zimp_heap_release(s->m.heap, &ref);
    if (r < 0) {
        ZIMP_TRACE(ZIMP_TL_ERROR, zimp__trace_error(r, "zimp_loan", NULL));
        return r;
    }
    /* A small loan is the slot line's inline area (one line for the whole message). */
    s->loan_buf = big ? block : zimp__msg_data(s->m.base, &s->m.g, s->held, len, s->m.inline_max);
    s->loan_heap = big;
    if (big)
        s->loan_ref = ref;
    s->loan_len = len;
    *buf = s->loan_buf;
    return 0;
}

/*
 * H1 at publish: the channel holds the block first (so a crash leaks it at
 * worst, never frees what receivers read), then the hold names it, then P2
 * publishes the position with the flagged length.
 */
static int publish_heap(zimp_sender *s, struct zimp_slot *slot, uint64_t p, size_t len)
{
    struct zimp_hold *h = zimp__hold(s->m.base, &s->m.g, p);
    int r = zimp__heap_channel_hold(s->m.heap, &s->loan_ref, s->m.heap_member);
    if (r != 0)
        return r;
    h->ref = s->loan_ref;
    zimp_store_release(&h->pos, p + 1);
    slot->len = (uint32_t)len | ZIMP_LEN_HEAP;
    return 0;
}

/* P3's fence aside, what follows a publication: M3, P4, the notifications, a pending skip. */
static inline void after_publish(zimp_sender *s)
{
    struct zimp_wait *w = wait_page(s);
    if (s->fenceless)                                                   /* M3 */
        fence_adapt(s, zimp_load_relaxed(&w->recv_waiting) || zimp_load_relaxed(&w->fd_waiting));
    zimp__wake(&w->pub_futex, &w->recv_waiting);                        /* P4 */
    /* Senders may wait for this slot's next occupant to be resolved (S0(b)). */
    zimp__wake(&w->rel_futex, &w->send_waiting);
    if (zimp_load_relaxed(&w->fd_waiting))
        zimp__notify_fds(s);
    pending_evictions(s);
}

ZIMP_SLOW_PATH static int publish_general(zimp_sender *s, void *buf, size_t len);

/*
 * A lone sender's small message, with no checksum, zeroing or trace of
 * messages: P0-P4 as publish_general takes them then. Anything else, an
 * error included, goes the general way.
 */
ZIMP_API int zimp_publish(zimp_sender *s, void *buf, size_t len)
{
    if (s && s->solo && buf && buf == s->loan_buf && !s->loan_heap && len <= s->loan_len &&
        !(s->m.flags & (ZIMP_CHECKSUM | ZIMP_ZERO_ON_RELEASE)) && !zimp__inherited(s->fork_gen) &&
        !ZIMP_TRACE_ON(ZIMP_TL_DEBUG) && membership(s) == 0) {                 /* P0 */
        uint64_t p = s->held;
        struct zimp_slot *slot = slot_of(s, p);
        /* A large loan published short moves inline, where receivers look for it. */
        void *data = zimp__msg_data(s->m.base, &s->m.g, p, len, s->m.inline_max);
        if (data != buf)
            memcpy(data, buf, len);
        s->loan_buf = NULL;
        slot->len = (uint32_t)len;                                      /* P1 */
        zimp_store_release(&slot->seq, p + 1);                          /* P2 alone */
        abandon(s);                                                     /* P3 */
        after_publish(s);
        return 0;
    }
    return publish_general(s, buf, len);
}

static int publish_general(zimp_sender *s, void *buf, size_t len)
{
    CHECK_SENDER(s);
    if (!s->loan_buf || buf != s->loan_buf)
        return -EINVAL;
    if (len > s->loan_len)
        return -EMSGSIZE;
    uint64_t p = s->held;
    bool big = s->loan_heap;
    s->loan_buf = NULL;
    s->loan_heap = false;
    if (membership(s) != 0) {                                           /* P0 */
        loan_zero(s, buf, 0);
        give_up(s);
        if (big)
            zimp_heap_release(s->m.heap, &s->loan_ref);
        return -ECONNRESET;
    }
    struct zimp_slot *slot = slot_of(s, p);
    void *data = buf;
    if (big) {
        loan_zero(s, buf, len);
        int r = publish_heap(s, slot, p, len);                          /* P1, H1 */
        if (r != 0) {
            give_up(s);
            zimp_heap_release(s->m.heap, &s->loan_ref);
            return r;
        }
    } else {
        /* A large loan published short moves inline, where receivers look for it. */
        data = zimp__msg_data(s->m.base, &s->m.g, p, len, s->m.inline_max);
        if (data != buf)
            memcpy(data, buf, len);
        loan_zero(s, buf, data != buf ? 0 : len);
        slot->len = (uint32_t)len;                                      /* P1 */
    }
    ZIMP_TRACE(ZIMP_TL_DEBUG, zimp__trace_msg(ZIMP_EV_SEND, hdr(s)->nonce, s->index, p, data, len));
    if (s->m.flags & ZIMP_CHECKSUM)
        slot->crc = zimp__crc32c(data, len);
    bool published = true;
    if (s->solo)
        zimp_store_release(&slot->seq, p + 1);      /* P2 alone: nobody else writes it */
    else
        published = seq_raise_from(slot, s->held_seq, p, 0);            /* P2 */
    abandon(s);                                                         /* P3 */
    after_publish(s);
    if (big)
        zimp_heap_release(s->m.heap, &s->loan_ref);    /* the channel holds it now */
    return published ? 0 : -ECONNRESET;
}

ZIMP_API int zimp_unloan(zimp_sender *s, void *buf)
{
    CHECK_SENDER(s);
    if (!s->loan_buf || buf != s->loan_buf)
        return -EINVAL;
    s->loan_buf = NULL;
    loan_zero(s, buf, 0);
    if (s->loan_heap) {
        s->loan_heap = false;
        zimp_heap_release(s->m.heap, &s->loan_ref);
    }
    /* W1-W3: receivers pass the position at once; -ECONNRESET: we were evicted. */
    return skip_held(s, s->held, 0) ? 0 : -ECONNRESET;
}

ZIMP_API int zimp_send(zimp_sender *s, const void *buf, size_t len, int64_t timeout_ns)
{
    void *slot;
    CHECK_SENDER(s);
    if (!buf && len)
        return -EINVAL;
    int r = zimp_loan(s, len, &slot, timeout_ns);
    if (r < 0)
        return r;
    if (len)                                    /* buf may be NULL */
        memcpy(slot, buf, len);
    return zimp_publish(s, slot, len);
}

/* The head below which a member holds back this sender's next (or held) position. */
static uint64_t held_back_below(zimp_sender *s)
{
    uint64_t p = s->held != ZIMP_NO_INTENT ? s->held : zimp_load_acquire(&hdr(s)->tail);
    uint64_t ring = p + 1 > s->m.g.slots ? p + 1 - s->m.g.slots : 0;
    /* A large loan that found the heap full waits for the oldest hold's readers. */
    return s->heap_need > ring ? s->heap_need : ring;
}

/*
 * Whether a receiver whose head is h is at fault for not moving: position h
 * is published or skipped (it has something to do), or abandoned (it would
 * skip it). Waiting for a live sender's claim is not its fault.
 */
static bool receiver_at_fault(zimp_sender *s, uint64_t h)
{
    if (zimp__seq_next(zimp_load_acquire(&slot_of(s, h)->seq)) > h)
        return true;
    return h < zimp_load_acquire(&hdr(s)->tail) && !zimp__claim_live(&s->m, s->speers, h);
}

ZIMP_API int zimp_stalled(zimp_sender *s, unsigned *receivers, size_t cap)
{
    CHECK_SENDER(s);
    if (!receivers && cap)
        return -EINVAL;
    const struct zimp_geometry *g = &s->m.g;
    uint64_t need = held_back_below(s);
    int n = 0;
    for (uint32_t i = 0; i < g->max_receivers; i++) {
        struct zimp_receiver_rec *rr = zimp__rrec(s->m.base, g, i);
        uint64_t o = zimp_load_acquire(&rr->owner);
        uint64_t h = zimp_load_acquire(&rr->head);
        if (ZIMP_OWNER_STATE(o) != ZIMP_M_ACTIVE || h >= need)
            continue;
        if (!zimp__receiver_alive(&s->m, s->peers, i, o) || !receiver_at_fault(s, h))
            continue;
        if ((size_t)n < cap)
            receivers[n] = i;
        n++;
    }
    return n;
}

ZIMP_API int zimp_stalled_senders(zimp_sender *s, unsigned *senders, size_t cap)
{
    CHECK_SENDER(s);
    if (!senders && cap)
        return -EINVAL;
    const struct zimp_geometry *g = &s->m.g;
    uint64_t need = held_back_below(s);
    int n = 0;
    for (uint32_t i = 0; i < g->max_senders; i++) {
        struct zimp_sender_rec *sr = zimp__srec(s->m.base, g, i);
        uint64_t o = zimp_load_acquire(&sr->owner);
        uint64_t q = zimp_load_acquire(&sr->intent);
        if (i == s->index || q == ZIMP_NO_INTENT || q >= need)
            continue;
        if (zimp__seq_next(zimp_load_acquire(&slot_of(s, q)->seq)) > q)
            continue;                           /* published or skipped */
        if (!zimp__sender_live(&s->m, sr, o, &s->speers[i]))
            continue;
        if ((size_t)n < cap)
            senders[n] = i;
        n++;
    }
    return n;
}

ZIMP_API int zimp_evict(zimp_sender *s, unsigned receiver_index)
{
    CHECK_SENDER(s);
    if (receiver_index >= s->m.g.max_receivers)
        return -EINVAL;
    struct zimp_receiver_rec *rr = zimp__rrec(s->m.base, &s->m.g, receiver_index);
    uint64_t o = zimp_load_acquire(&rr->owner);
    if (ZIMP_OWNER_STATE(o) != ZIMP_M_ACTIVE && ZIMP_OWNER_STATE(o) != ZIMP_M_LOSSY)
        return -ENOENT;
    uint64_t ev = ZIMP_OWNER(ZIMP_OWNER_GEN(o), ZIMP_M_EVICTED, ZIMP_OWNER_PID(o));
    if (!zimp_cas_sc(&rr->owner, &o, ev))                               /* ER */
        return -ENOENT;
    ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_member(ZIMP_EV_EVICT, ZIMP_TR_RECEIVER, hdr(s)->nonce, receiver_index,
                                                 ZIMP_OWNER_PID(o)));
    /* Wake the evicted receiver wherever it waits, so it learns at once. */
    zimp_store_sc(&rr->armed, 1);
    wake_receivers(s);
    s->blocked_since = 0;
    /* Its head no longer counts: a skip that waited for it (E3) may go now. */
    pending_evictions(s);
    return 0;
}

ZIMP_API int zimp_evict_sender(zimp_sender *s, unsigned sender_index)
{
    CHECK_SENDER(s);
    if (sender_index >= s->m.g.max_senders || sender_index == s->index)
        return -EINVAL;
    struct zimp_sender_rec *sr = zimp__srec(s->m.base, &s->m.g, sender_index);
    uint64_t o = zimp_load_acquire(&sr->owner);
    /*
     * Dead (or exec'd: it maps the channel no more) before the eviction, or
     * not a sender: nothing to evict, its claim is abandoned anyway. Judged
     * first: a member that closes right after E1 saw itself evicted.
     */
    if (!zimp__sender_live(&s->m, sr, o, &s->speers[sender_index]))
        return -ENOENT;
    if (ZIMP_OWNER_STATE(o) == ZIMP_M_ACTIVE) {
        uint64_t ev = ZIMP_OWNER(ZIMP_OWNER_GEN(o), ZIMP_M_EVICTED, ZIMP_OWNER_PID(o));
        if (!zimp_cas_sc(&sr->owner, &o, ev))                           /* E1 */
            return -ENOENT;
        o = ev;
    }
    ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_member(ZIMP_EV_EVICT, ZIMP_TR_SENDER, hdr(s)->nonce, sender_index,
                                                 ZIMP_OWNER_PID(o)));
    if (skip_evicted(s, sender_index, o) == SKIP_WAITS)                 /* E2, E3 */
        zimp_store_sc(&wait_page(s)->evict_pending, 1);  /* every sender call retries it */
    /* Receivers waiting for its claim can move on; its own waits end too. */
    wake_receivers(s);
    zimp_store_sc(&wait_page(s)->send_waiting, 1);
    zimp__wake(&wait_page(s)->rel_futex, &wait_page(s)->send_waiting);
    s->blocked_since = 0;
    return 0;
}

/* ---- notification sockets of receivers waiting in poll/epoll (N3) ---- */

void zimp__notify_fds(zimp_sender *s)
{
    struct zimp_wait *w = wait_page(s);
    if (!zimp_xchg_sc(&w->fd_waiting, 0))
        return;
    uint64_t nonce = hdr(s)->nonce;
    for (uint32_t i = 0; i < s->m.g.max_receivers; i++) {
        struct zimp_receiver_rec *rr = zimp__rrec(s->m.base, &s->m.g, i);
        if (!zimp_load_relaxed(&rr->armed) || !zimp_xchg_sc(&rr->armed, 0))
            continue;
        uint64_t o = zimp_load_acquire(&rr->owner);
        if (!zimp__member_state(ZIMP_OWNER_STATE(o)))
            continue;
        /* The address is ours to compute: a record cannot aim this write elsewhere. */
        struct sockaddr_un a;
        socklen_t alen = zimp__notify_addr(nonce, i, ZIMP_OWNER_GEN(o), &a);
        char b = 1;
        /* Datagram, never blocking, never a signal; a full queue is readable already. */
        ssize_t n = sendto(s->sock, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&a, alen);
        (void)n;
    }
}
