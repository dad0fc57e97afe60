/*
 * The sending side: claim a position, wait for its slot, write, publish.
 *
 * Claim (several senders, one total order):
 *   S1  intent := t            (seq_cst store on the sender's own record)
 *   S2  CAS tail t -> t+1      (seq_cst; retry from S1 on failure)
 * A receiver that finds position p claimed (tail > p) but unpublished looks
 * for a live sender whose intent is p: S1 happens before S2, and the
 * receiver's acquire of tail reads S2 or a later RMW, so it sees the intent
 * (or a later value written only after p was published). No live sender
 * with intent p means the claimer died: the receiver skips p.
 *
 * Publish:
 *   P1  write data, len, crc
 *   P2  slot.seq := p + 1      (seq_cst store; its release pairs with the
 *                               receiver's acquire load of seq, R1)
 *   P3  intent := none          (release)
 *   P4  wake receivers if one set recv_waiting (Dekker with P2, see notify.c),
 *       and senders that wait for this slot to be vacated
 *
 * Reuse: the slot of p may be written once every live receiver's head is
 * past p - slots (the receiver's release store of head, R3, pairs with the
 * acquire loads in zimp__min_head).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core_int.h"

static struct zimp_header *hdr(zimp_sender *s) { return zimp__hdr(s->m.base); }
static struct zimp_wait *wait_page(zimp_sender *s) { return zimp__wait_page(s->m.base, &s->m.g); }

/* Frees a handle and everything it holds (also a half-opened one). */
static void sender_free(zimp_sender *s)
{
    for (uint32_t i = 0; s->peers && i < s->m.g.max_receivers; i++) {
        zimp__peer_reset(&s->peers[i]);
        if (s->pipes[i] >= 0)
            close(s->pipes[i]);
    }
    for (uint32_t i = 0; s->speers && i < s->m.g.max_senders; i++)
        zimp__peer_reset(&s->speers[i]);
    free(s->peers);
    free(s->speers);
    free(s->pipes);
    free(s->pipe_owner);
    zimp__map_close(&s->m);
    free(s);
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
    if ((r = zimp__map_open(name, ZIMP_ROLE_SENDER, &s->m)) != 0)
        goto fail;
    uint32_t n = s->m.g.max_receivers;
    s->pipes = malloc(n * sizeof *s->pipes);
    s->pipe_owner = calloc(n, sizeof *s->pipe_owner);
    s->speers = calloc(s->m.g.max_senders, sizeof *s->speers);
    s->peers = s->pipes && s->pipe_owner && s->speers ? calloc(n, sizeof *s->peers) : NULL;
    if (!s->peers) {
        r = zimp__fail(-ENOMEM, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++) {
        zimp__peer_init(&s->peers[i]);
        s->pipes[i] = -1;
    }
    for (uint32_t i = 0; i < s->m.g.max_senders; i++)
        zimp__peer_init(&s->speers[i]);
    if ((r = zimp__join(&s->m, ZIMP_ROLE_SENDER, &s->owner)) < 0)
        goto fail;
    s->index = (uint32_t)r;
    s->rec = zimp__srec(s->m.base, &s->m.g, s->index);
    zimp_store_release(&s->rec->intent, ZIMP_NO_INTENT);
    zimp_add_sc(&hdr(s)->sender_opens, 1);
    s->held = ZIMP_NO_INTENT;
    s->spin_ns = zimp__default_spin();
    s->joins_seen = zimp_load_sc(&wait_page(s)->joins);
    s->min_head = zimp__min_head(s, zimp_load_acquire(&hdr(s)->tail), false);
    zimp__handle_add(s);
    *out = s;
    return 0;
fail:
    sender_free(s);
    return r;
}

ZIMP_API void zimp_sender_close(zimp_sender *s)
{
    if (!s || !zimp__handle_remove(s))
        return;
    /* A held, unpublished position is skipped by receivers once we are gone. */
    zimp_store_release(&s->rec->intent, ZIMP_NO_INTENT);
    zimp__leave(&s->rec->owner, s->owner);
    /* Receivers may now be drained with no sender: let them look. */
    zimp_store_sc(&wait_page(s)->recv_waiting, 1);
    zimp__wake(&wait_page(s)->pub_futex, &wait_page(s)->recv_waiting);
    zimp_store_sc(&wait_page(s)->fd_waiting, 1);
    zimp__notify_fds(s);
    sender_free(s);
}

ZIMP_API int zimp_sender_set_spin(zimp_sender *s, uint64_t spin_ns)
{
    if (!s)
        return -EINVAL;
    s->spin_ns = spin_ns;
    return 0;
}

uint64_t zimp__min_head(zimp_sender *s, uint64_t tail, bool slow)
{
    const struct zimp_geometry *g = &s->m.g;
    uint64_t min = tail;
    for (uint32_t i = 0; i < g->max_receivers; i++) {
        struct zimp_receiver_rec *rr = zimp__rrec(s->m.base, g, i);
        /* seq_cst: ordered after the claim and the joins check (J1, J2) */
        uint64_t o = zimp_load_sc(&rr->owner);
        if (ZIMP_OWNER_STATE(o) != ZIMP_M_ACTIVE)
            continue;
        uint64_t h = zimp_load_sc(&rr->head);        /* pairs with R3 */
        if (h >= min)
            continue;          /* also a head beyond tail (joined after our tail read) */
        if (slow && !zimp__peer_alive(&s->peers[i], o, zimp__ident(&rr->ident, &rr->ident_of, o))) {
            /* Dead receiver: free its record; it no longer holds anything. */
            zimp_cas_sc(&rr->owner, &o, ZIMP_OWNER(ZIMP_OWNER_GEN(o), ZIMP_M_FREE, 0));
            continue;
        }
        min = h;
    }
    return min;
}

/*
 * Whether the slot's previous occupant, position p - slots, is out of the
 * way: published (receivers may still hold it: see min_head), or abandoned
 * by a claimer that died. Without this, with no receiver behind it, a fast
 * sender could write the slot while a slow one still writes p - slots.
 */
static bool slot_vacated(zimp_sender *s, uint64_t p, bool slow)
{
    uint32_t slots = s->m.g.slots;
    if (p < slots)
        return true;
    uint64_t prev = p - slots;
    if (zimp_load_acquire(&zimp__slot(s->m.base, &s->m.g, p)->seq) >= prev + 1)
        return true;
    return slow && !zimp__claim_live(&s->m, s->speers, prev);
}

/*
 * Condition: the slot of the held position is free: every live receiver is
 * past its previous occupant, and that occupant was published or abandoned.
 */
static int room_cond(void *ctx, bool slow)
{
    zimp_sender *s = ctx;
    uint64_t p = s->held;
    s->joins_seen = zimp_load_sc(&wait_page(s)->joins);
    s->min_head = zimp__min_head(s, p + 1, slow);
    if (p < s->min_head + s->m.g.slots && slot_vacated(s, p, slow))
        return 1;
    if (slow) {
        uint64_t now = zimp__now_ns();
        if (s->blocked_since == 0)
            s->blocked_since = now;
        else if (s->m.stall_timeout_ns && now - s->blocked_since >= s->m.stall_timeout_ns) {
            s->blocked_since = 0;      /* a retry waits one more stall period */
            return -ETIMEDOUT;
        }
        if (zimp_load_relaxed(&s->rec->owner) != s->owner)
            return zimp__fail(-EPROTO, "this sender's record was taken over");
    }
    return 0;
}

/* Claims a position (or keeps the one already held) and waits for its slot. */
static int claim(zimp_sender *s, uint64_t deadline)
{
    uint32_t slots = s->m.g.slots;
    if (s->held == ZIMP_NO_INTENT) {
        zimp_a64 *tail = &hdr(s)->tail;
        uint64_t t = zimp_load_relaxed(tail);
        if (deadline == 0 && t >= s->min_head + slots) {
            /* Non-blocking: do not take a position that has no room. */
            s->joins_seen = zimp_load_sc(&wait_page(s)->joins);
            s->min_head = zimp__min_head(s, t, true);
            if (t >= s->min_head + slots)
                return -EAGAIN;
        }
        for (;;) {
            zimp_store_sc(&s->rec->intent, t);                 /* S1 */
            if (zimp_cas_sc(tail, &t, t + 1))                   /* S2 */
                break;
        }
        s->held = t;
        s->blocked_since = 0;
    }
    /* The cache holds unless a receiver joined since (after slot_vacated: see J2). */
    if (s->held < s->min_head + slots && slot_vacated(s, s->held, false) &&
        zimp_load_sc(&wait_page(s)->joins) == s->joins_seen)
        return 0;
    /*
     * Ask to be woken when the slowest receiver crosses `need`: a quarter
     * ring past the exact room, so that one wake-up buys a batch of sends
     * instead of one wake-up per receiver per message. need <= held, and
     * every position below held is published or held by a sender that will
     * publish first, so receivers can reach it.
     */
    uint64_t need = s->held + 1 - slots + (slots >= 8 ? slots / 4 : 0);
    zimp_store_sc(&s->rec->need, need);
    int r = zimp__wait(&wait_page(s)->rel_futex, &wait_page(s)->send_waiting, room_cond, s,
                       s->spin_ns, deadline, &s->last_slow);
    return r > 0 ? 0 : r;
}

ZIMP_API int zimp_loan(zimp_sender *s, size_t len, void **buf, int64_t timeout_ns)
{
    if (!s || !buf)
        return -EINVAL;
    if (s->loan_buf)
        return -EBUSY;
    if (len > s->m.g.slot_size)
        return -EMSGSIZE;
    int r = claim(s, zimp__deadline(timeout_ns));
    if (r < 0)
        return r;
    s->loan_buf = zimp__slot_data(s->m.base, &s->m.g, s->held);
    s->loan_len = len;
    *buf = s->loan_buf;
    return 0;
}

ZIMP_API int zimp_publish(zimp_sender *s, void *buf, size_t len)
{
    if (!s)
        return -EINVAL;
    if (!s->loan_buf || buf != s->loan_buf)
        return -EINVAL;
    if (len > s->loan_len)
        return -EMSGSIZE;
    uint64_t p = s->held;
    struct zimp_slot *slot = zimp__slot(s->m.base, &s->m.g, p);
    slot->len = (uint32_t)len;                                      /* P1 */
    slot->sender = s->index;
    if (s->m.flags & ZIMP_CHECKSUM)
        slot->crc = zimp__crc32c(buf, len);
    zimp_store_sc(&slot->seq, p + 1);                               /* P2 */
    zimp_store_release(&s->rec->intent, ZIMP_NO_INTENT);            /* P3 */
    s->held = ZIMP_NO_INTENT;
    s->loan_buf = NULL;
    struct zimp_wait *w = wait_page(s);
    zimp__wake(&w->pub_futex, &w->recv_waiting);                    /* P4 */
    /* A sender may wait for this slot's next occupant to be vacated (slot_vacated). */
    zimp__wake(&w->rel_futex, &w->send_waiting);
    if (zimp_load_relaxed(&w->fd_waiting))
        zimp__notify_fds(s);
    return 0;
}

ZIMP_API int zimp_send(zimp_sender *s, const void *buf, size_t len, int64_t timeout_ns)
{
    void *slot;
    if (!s || (!buf && len))
        return -EINVAL;
    int r = zimp_loan(s, len, &slot, timeout_ns);
    if (r < 0)
        return r;
    memcpy(slot, buf, len);
    return zimp_publish(s, slot, len);
}

ZIMP_API int zimp_stalled(zimp_sender *s, unsigned *receivers, size_t cap)
{
    if (!s || (!receivers && cap))
        return -EINVAL;
    const struct zimp_geometry *g = &s->m.g;
    uint64_t p = s->held != ZIMP_NO_INTENT ? s->held : zimp_load_acquire(&hdr(s)->tail);
    if (p + 1 <= g->slots)
        return 0;
    uint64_t need = p + 1 - g->slots;      /* heads below this hold p's slot */
    int n = 0;
    for (uint32_t i = 0; i < g->max_receivers; i++) {
        struct zimp_receiver_rec *rr = zimp__rrec(s->m.base, g, i);
        uint64_t o = zimp_load_acquire(&rr->owner);
        if (ZIMP_OWNER_STATE(o) != ZIMP_M_ACTIVE || zimp_load_acquire(&rr->head) >= need)
            continue;
        if (!zimp__peer_alive(&s->peers[i], o, zimp__ident(&rr->ident, &rr->ident_of, o)))
            continue;
        if ((size_t)n < cap)
            receivers[n] = i;
        n++;
    }
    return n;
}

ZIMP_API int zimp_evict(zimp_sender *s, unsigned receiver_index)
{
    if (!s || receiver_index >= s->m.g.max_receivers)
        return -EINVAL;
    struct zimp_receiver_rec *rr = zimp__rrec(s->m.base, &s->m.g, receiver_index);
    uint64_t o = zimp_load_acquire(&rr->owner);
    if (ZIMP_OWNER_STATE(o) != ZIMP_M_ACTIVE)
        return -ENOENT;
    uint64_t ev = ZIMP_OWNER(ZIMP_OWNER_GEN(o), ZIMP_M_EVICTED, ZIMP_OWNER_PID(o));
    if (!zimp_cas_sc(&rr->owner, &o, ev))
        return -ENOENT;
    /* Wake the evicted receiver wherever it waits, so it learns at once. */
    struct zimp_wait *w = wait_page(s);
    zimp_store_sc(&w->recv_waiting, 1);
    zimp__wake(&w->pub_futex, &w->recv_waiting);
    zimp_store_sc(&rr->armed, 1);
    zimp_store_sc(&w->fd_waiting, 1);
    zimp__notify_fds(s);
    s->blocked_since = 0;
    return 0;
}

/* ---- notification pipes of receivers waiting in poll/epoll ---- */

/* dev_t of anonymous pipes: a receiver's notify fd must be one, nothing else. */
static dev_t pipefs_dev(void)
{
    static dev_t dev;
    static int known;
    if (!__atomic_load_n(&known, __ATOMIC_ACQUIRE)) {
        int p[2];
        struct stat st;
        if (pipe2(p, O_CLOEXEC) == 0) {
            if (fstat(p[0], &st) == 0)
                dev = st.st_dev;
            close(p[0]);
            close(p[1]);
        }
        __atomic_store_n(&known, 1, __ATOMIC_RELEASE);
    }
    return dev;
}

/* Opens the write end of receiver i's pipe through /proc, checking it is a pipe. */
static int open_pipe(zimp_sender *s, uint32_t i, uint64_t owner, int fdnum)
{
    if (s->pipes[i] >= 0 && s->pipe_owner[i] == owner)
        return s->pipes[i];
    if (s->pipes[i] >= 0)
        close(s->pipes[i]);
    s->pipes[i] = -1;
    if (fdnum < 0)
        return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", ZIMP_OWNER_PID(owner), fdnum);
    int opath = open(path, O_PATH | O_CLOEXEC);
    if (opath < 0)
        return -1;
    struct stat st;
    int fd = -1;
    if (fstat(opath, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_dev == pipefs_dev()) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", opath);
        fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    }
    close(opath);
    s->pipes[i] = fd;
    s->pipe_owner[i] = owner;
    return fd;
}

void zimp__notify_fds(zimp_sender *s)
{
    struct zimp_wait *w = wait_page(s);
    if (!zimp_xchg_sc(&w->fd_waiting, 0))
        return;
    for (uint32_t i = 0; i < s->m.g.max_receivers; i++) {
        struct zimp_receiver_rec *rr = zimp__rrec(s->m.base, &s->m.g, i);
        if (!zimp_load_relaxed(&rr->armed) || !zimp_xchg_sc(&rr->armed, 0))
            continue;
        uint64_t o = zimp_load_acquire(&rr->owner);
        int fd = open_pipe(s, i, o, rr->notify_fd);
        if (fd >= 0) {
            char b = 1;
            ssize_t n = write(fd, &b, 1);   /* a full pipe is readable already */
            (void)n;
        }
    }
}
