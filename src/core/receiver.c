/*
 * The receiving side: wait for position pos, read it, release it.
 *
 *   R1  seq := load_acquire(slot.seq); published iff seq == pos + 1
 *       (pairs with the sender's P2: data, len and crc are visible)
 *   R2  copy out (zimp_recv) or lend in place (zimp_read)
 *   R3  head := pos + 1 (seq_cst store; its release pairs with the acquire
 *       in zimp__min_head, so the sender reuses the slot only after R2)
 *   R4  wake senders if one set send_waiting (Dekker with R3)
 *
 * A receiver writes only its own record (its page is the only record page it
 * maps writable) and the wait page. Everything read from shared memory is
 * checked before use: a length beyond the slot, a lapped slot, or a tail
 * beyond what senders can have claimed yields -EPROTO, never a wild access.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core_int.h"

static struct zimp_header *hdr(zimp_receiver *r) { return zimp__hdr(r->m.base); }
static struct zimp_wait *wait_page(zimp_receiver *r) { return zimp__wait_page(r->m.base, &r->m.g); }

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/*
 * Where a new receiver starts. Every message published after the open
 * returns must reach it, including one whose position was claimed before
 * (a sender holding a loan). So: start = tail, and every position below it
 * that a live sender holds unpublished (at most one per sender, found by
 * intent as in the claim protocol, S1/S2) is pending; reading starts at the
 * lowest pending position and skips the others below start.
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
        if (ZIMP_OWNER_STATE(o) != ZIMP_M_ACTIVE || q >= t0 ||
            t0 - q > (uint64_t)g->slots + g->max_senders)
            continue;
        if (zimp_load_acquire(&zimp__slot(r->m.base, g, q)->seq) == q + 1)
            continue;                   /* published before we joined */
        if (!zimp__peer_alive(&r->peers[i], o, zimp__ident(&sr->ident, &sr->ident_of, o)))
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

ZIMP_API int zimp_receiver_open(const char *name, zimp_receiver **out)
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
    r->pipe_r = r->pipe_w = r->epfd = -1;
    if ((rc = zimp__map_open(name, ZIMP_ROLE_RECEIVER, &r->m)) != 0)
        goto fail;
    r->peers = calloc(r->m.g.max_senders, sizeof *r->peers);
    if (!r->peers) {
        rc = zimp__fail(-ENOMEM, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < r->m.g.max_senders; i++)
        zimp__peer_init(&r->peers[i]);
    if ((rc = zimp__join(&r->m, ZIMP_ROLE_RECEIVER, &r->owner)) < 0)
        goto fail;
    r->index = (uint32_t)rc;
    r->rec = zimp__rrec(r->m.base, &r->m.g, r->index);
    zimp_store_relaxed(&r->rec->armed, 0);
    r->rec->notify_fd = -1;
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
    if (r->m.flags & ZIMP_ZERO_ON_RELEASE) {
        /* Raise the scan bound before reading tail (see zero_if_last). */
        zimp_a32 *hwm = &wait_page(r)->recv_hwm;
        uint32_t h = zimp_load_sc(hwm);
        while (h < r->index + 1 && !zimp_cas_sc(hwm, &h, r->index + 1))
            ;
    }
    if ((rc = find_start(r)) != 0) {
        zimp__leave(&r->rec->owner, r->owner);
        goto fail;
    }
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
        zimp__leave(&r->rec->owner, r->owner);
        goto fail;
    }
    r->spin_ns = zimp__default_spin();
    zimp__handle_add(r);
    *out = r;
    return 0;
fail:
    free(r->peers);
    free(r->pending);
    zimp__map_close(&r->m);
    free(r);
    return rc;
}

ZIMP_API void zimp_receiver_close(zimp_receiver *r)
{
    if (!r || !zimp__handle_remove(r))
        return;
    zimp_store_relaxed(&r->rec->armed, 0);
    r->rec->notify_fd = -1;
    zimp__leave(&r->rec->owner, r->owner);
    /* Senders may be waiting for this receiver's slots. */
    zimp_store_sc(&wait_page(r)->send_waiting, 1);
    zimp__wake(&wait_page(r)->rel_futex, &wait_page(r)->send_waiting);
    for (uint32_t i = 0; i < r->m.g.max_senders; i++)
        zimp__peer_reset(&r->peers[i]);
    free(r->peers);
    free(r->pending);
    if (r->epfd >= 0)
        close(r->epfd);
    if (r->pipe_r >= 0)
        close(r->pipe_r);
    if (r->pipe_w >= 0)
        close(r->pipe_w);
    zimp__map_close(&r->m);
    free(r);
}

ZIMP_API int zimp_receiver_set_spin(zimp_receiver *r, uint64_t spin_ns)
{
    if (!r)
        return -EINVAL;
    r->spin_ns = spin_ns;
    return 0;
}

ZIMP_API int zimp_receiver_index(const zimp_receiver *r)
{
    return r ? (int)r->index : -EINVAL;
}

/*
 * Releases every position below `pos` (R3) and wakes sleeping senders whose
 * need this release crosses (R4). Receivers that were already past a
 * sender's need do not wake it again: only the laggards do.
 */
static void release_to(zimp_receiver *r, uint64_t pos)
{
    uint64_t old = zimp_load_relaxed(&r->rec->head);
    zimp_store_sc(&r->rec->head, pos);                                  /* R3 */
    struct zimp_wait *w = wait_page(r);
    if (!zimp_load_sc(&w->send_waiting))                                /* R4 */
        return;
    for (uint32_t i = 0; i < r->m.g.max_senders; i++) {
        struct zimp_sender_rec *sr = zimp__srec(r->m.base, &r->m.g, i);
        uint64_t need = zimp_load_sc(&sr->need);
        if (old < need && need <= pos && ZIMP_OWNER_STATE(zimp_load_relaxed(&sr->owner)) == ZIMP_M_ACTIVE) {
            zimp__wake(&w->rel_futex, &w->send_waiting);
            return;
        }
    }
}

/* Our membership: 0, or -ECONNRESET once evicted (or the record was taken). */
static int membership(zimp_receiver *r)
{
    return zimp_load_relaxed(&r->rec->owner) == r->owner ? 0 : -ECONNRESET;
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
            r->pos = pos + 1;
            release_to(r, r->pos);
            continue;
        }
        uint64_t seq = zimp_load_acquire(&zimp__slot(r->m.base, g, pos)->seq);   /* R1 */
        if (seq == pos + 1)
            return 1;
        if ((rc = membership(r)) != 0)
            return rc;
        if (seq > pos + 1)
            return zimp__fail(-EPROTO, "slot of position %llu holds position %llu",
                              (unsigned long long)pos, (unsigned long long)(seq - 1));
        if (!slow)
            return 0;
        uint64_t tail = zimp_load_sc(&hdr(r)->tail);
        if (tail < pos || tail - pos > (uint64_t)g->slots + g->max_senders + 1)
            return zimp__fail(-EPROTO, "tail %llu is impossible at position %llu",
                              (unsigned long long)tail, (unsigned long long)pos);
        if (tail == pos) {
            if (!zimp_load_acquire(&hdr(r)->sender_opens) ||
                zimp__claim_live(&r->m, r->peers, ZIMP_ANY_SENDER))
                return 0;
            /*
             * No live sender now, but `tail` was read before that check: a
             * sender may have claimed and published more, then closed or
             * died, in between. Drained only if tail is still pos. A sender
             * claims before it leaves (its seq_cst CAS on owner pairs with
             * our acquire of owner in claim_live) or before it dies (seen
             * through its pidfd), so this load sees every claim it made.
             */
            if (zimp_load_sc(&hdr(r)->tail) == pos)
                return -EPIPE;
            continue;
        }
        if (zimp__claim_live(&r->m, r->peers, pos))
            return 0;
        /* Re-read: the claimer may have published and then cleared its intent. */
        if (zimp_load_acquire(&zimp__slot(r->m.base, g, pos)->seq) == pos + 1)
            return 1;
        r->pos = pos + 1;                  /* its sender died before publishing: skip */
        release_to(r, r->pos);
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
static void zero_if_last(zimp_receiver *r, uint64_t q, uint32_t len)
{
    const struct zimp_geometry *g = &r->m.g;
    zimp_store_sc(&r->rec->done, q + 1);                                  /* Z1 */
    uint32_t n = zimp_load_sc(&wait_page(r)->recv_hwm);
    if (n > g->max_receivers)
        n = g->max_receivers;           /* damaged hint: scan everything */
    for (uint32_t i = 0; i < n; i++) {                                    /* Z2 */
        if (i == r->index)
            continue;
        struct zimp_receiver_rec *o = zimp__rrec(r->m.base, g, i);
        if (ZIMP_OWNER_STATE(zimp_load_acquire(&o->owner)) != ZIMP_M_ACTIVE)
            continue;
        if (zimp_load_sc(&o->head) <= q && zimp_load_sc(&o->done) <= q)
            return;            /* still reading it: the last one zeroes */
    }
    memset(zimp__slot_data(r->m.base, g, q), 0, len);
}

/* Writes a byte to our own pipe so that the epoll descriptor reads ready. */
static void self_notify(zimp_receiver *r)
{
    char b = 1;
    ssize_t n = write(r->pipe_w, &b, 1);
    (void)n;
}

/*
 * Arms the notification descriptor before reporting "nothing to read":
 * drains the pipe, refreshes the senders' pidfds in the epoll set (a dead
 * sender makes it readable), asks senders for a byte, then re-checks.
 */
static void arm(zimp_receiver *r)
{
    char buf[64];
    while (read(r->pipe_r, buf, sizeof buf) > 0)
        ;
    for (uint32_t i = 0; i < r->m.g.max_senders; i++) {
        struct zimp_sender_rec *sr = zimp__srec(r->m.base, &r->m.g, i);
        struct zimp_peer *p = &r->peers[i];
        uint64_t o = zimp_load_acquire(&sr->owner);
        if (ZIMP_OWNER_STATE(o) != ZIMP_M_ACTIVE) {
            zimp__peer_reset(p);        /* closing the pidfd drops it from the set */
            continue;
        }
        /* The cache is shared with claim_live: "in the set" is tracked on its own. */
        if (!zimp__peer_alive(p, o, zimp__ident(&sr->ident, &sr->ident_of, o))) {
            if (p->polled)
                epoll_ctl(r->epfd, EPOLL_CTL_DEL, p->pidfd, NULL);
            p->polled = false;
            continue;
        }
        if (!p->polled && p->pidfd >= 0) {
            struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i + 1 };
            p->polled = epoll_ctl(r->epfd, EPOLL_CTL_ADD, p->pidfd, &ev) == 0;
        }
    }
    zimp_store_sc(&r->rec->armed, 1);
    zimp_store_sc(&wait_page(r)->fd_waiting, 1);
    if (ready_cond(r, true) != 0)      /* a message, -EPIPE or eviction: ready now */
        self_notify(r);
}

/* Whether any sender record is taken, alive or not (plain loads, no system call). */
static bool sender_recorded(zimp_receiver *r)
{
    for (uint32_t i = 0; i < r->m.g.max_senders; i++)
        if (ZIMP_OWNER_STATE(zimp_load_acquire(&zimp__srec(r->m.base, &r->m.g, i)->owner)) != ZIMP_M_FREE)
            return true;
    return false;
}

/* Waits for the next message; arms the descriptor when returning empty-handed. */
static int next(zimp_receiver *r, int64_t timeout_ns)
{
    if (r->borrowed)
        return -EBUSY;
    int rc = membership(r);
    if (rc != 0)
        return rc;
    /*
     * A poll answers -EPIPE at once after the last sender closed (its record
     * is free: plain loads tell) or after the descriptor fired; a crash is
     * found by the throttled check, within ZIMP_CHECK_NS, without a system
     * call on every empty poll.
     */
    if (timeout_ns == 0 && (r->epfd >= 0 || !sender_recorded(r)))
        r->last_slow = 0;
    struct zimp_wait *w = wait_page(r);
    rc = zimp__wait(&w->pub_futex, &w->recv_waiting, ready_cond, r, r->spin_ns,
                    zimp__deadline(timeout_ns), &r->last_slow);
    if (rc > 0)
        return 0;
    if (r->epfd >= 0 && (rc == -EAGAIN || rc == -ETIMEDOUT))
        arm(r);
    return rc;
}

/* Validates the published slot at r->pos; its length on success. */
static ssize_t slot_len(zimp_receiver *r, struct zimp_slot *slot)
{
    uint32_t len = slot->len;
    if (len > r->m.g.slot_size) {
        r->pos++;
        release_to(r, r->pos);
        return zimp__fail(-EPROTO, "message length %u exceeds the slot size %u", len, r->m.g.slot_size);
    }
    return len;
}

/* After reading in place: still the same message, still a member? */
static int still_valid(zimp_receiver *r, struct zimp_slot *slot, uint64_t pos)
{
    if (zimp_load_acquire(&slot->seq) != pos + 1)
        return membership(r) ? -ECONNRESET : -EPROTO;
    return membership(r);
}

/* Waits for the next message; its slot and validated length, or an error. */
static ssize_t next_slot(zimp_receiver *r, int64_t timeout_ns, struct zimp_slot **slot)
{
    int rc = next(r, timeout_ns);
    if (rc < 0)
        return rc;
    *slot = zimp__slot(r->m.base, &r->m.g, r->pos);
    return slot_len(r, *slot);
}

ZIMP_API ssize_t zimp_recv(zimp_receiver *r, void *buf, size_t cap, int64_t timeout_ns)
{
    if (!r || (!buf && cap))
        return -EINVAL;
    struct zimp_slot *slot;
    ssize_t len = next_slot(r, timeout_ns, &slot);
    if (len < 0)
        return len;
    int rc;
    uint64_t pos = r->pos;
    if ((size_t)len > cap)
        return -EMSGSIZE;                      /* stays queued */
    const void *data = zimp__slot_data(r->m.base, &r->m.g, pos);
    memcpy(buf, data, (size_t)len);                                     /* R2 */
    uint32_t crc = slot->crc;
    if ((rc = still_valid(r, slot, pos)) != 0)
        return rc;
    if (r->m.flags & ZIMP_ZERO_ON_RELEASE)
        zero_if_last(r, pos, (uint32_t)len);
    r->pos = pos + 1;
    release_to(r, r->pos);
    if ((r->m.flags & ZIMP_CHECKSUM) && zimp__crc32c(buf, (size_t)len) != crc)
        return -EBADMSG;
    return len;
}

ZIMP_API int zimp_read(zimp_receiver *r, const void **buf, size_t *len, int64_t timeout_ns)
{
    if (!r || !buf || !len)
        return -EINVAL;
    struct zimp_slot *slot;
    ssize_t n = next_slot(r, timeout_ns, &slot);
    if (n < 0)
        return (int)n;
    uint64_t pos = r->pos;
    const void *data = zimp__slot_data(r->m.base, &r->m.g, pos);
    if ((r->m.flags & ZIMP_CHECKSUM) && zimp__crc32c(data, (size_t)n) != slot->crc) {
        r->pos = pos + 1;
        release_to(r, r->pos);
        return -EBADMSG;
    }
    r->pos = pos + 1;              /* head stays at pos until zimp_release */
    r->borrowed = true;
    r->borrow_len = (uint32_t)n;
    *buf = data;
    *len = (size_t)n;
    return 0;
}

ZIMP_API int zimp_release(zimp_receiver *r)
{
    if (!r)
        return -EINVAL;
    if (!r->borrowed)
        return -EINVAL;
    r->borrowed = false;
    struct zimp_slot *slot = zimp__slot(r->m.base, &r->m.g, r->pos - 1);
    int rc = still_valid(r, slot, r->pos - 1);
    if (rc == 0 && (r->m.flags & ZIMP_ZERO_ON_RELEASE))
        zero_if_last(r, r->pos - 1, r->borrow_len);
    release_to(r, r->pos);
    return rc;
}

ZIMP_API int zimp_receiver_fd(zimp_receiver *r)
{
    if (!r)
        return -EINVAL;
    if (r->epfd >= 0)
        return r->epfd;
    int p[2];
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
        return -errno;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return -e;
    }
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 0 };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) != 0) {
        int e = errno;
        close(ep);
        close(p[0]);
        close(p[1]);
        return -e;
    }
    r->pipe_r = p[0];
    r->pipe_w = p[1];
    r->epfd = ep;
    r->rec->notify_fd = p[1];
    arm(r);
    return ep;
}
