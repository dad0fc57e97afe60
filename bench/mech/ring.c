/* The floor: a minimal lock-free single-producer single-consumer ring in
 * shared memory, one per receiver. For one receiver it is zero-copy (the
 * message is written in its slot); for N it is copied into N-1 more rings.
 * "ring" waits by spinning (yield when oversubscribed); "futex" sleeps in
 * the kernel at once when it must wait: for ping-pong that is the raw futex
 * wake-up latency, the floor of any blocking mechanism. */
#define _GNU_SOURCE
#include "../mech.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct side {                       /* written by its owner only */
    alignas(64) _Atomic uint64_t pos;      /* producer: published; consumer: consumed */
    _Atomic uint32_t fut;                  /* bumped after each pos change (futex word) */
    _Atomic uint32_t sleeping;             /* the other side waits on fut */
};
struct ring {
    struct side prod, cons;
    uint64_t nslots, stride;               /* set before fork, read-only */
};
#define SLOT(r, i) ((char *)(r) + sizeof(struct ring) + ((i) % (r)->nslots) * (r)->stride)

struct ring_set { size_t ring_bytes; size_t total; };

static struct ring *ring_at(const struct mech_chan *c, unsigned i)
{
    struct ring_set *rs = c->shared;
    return (struct ring *)((char *)rs + 4096 + i * rs->ring_bytes);
}

/* Waits until side->pos != seen. Pairs the release in advance(). */
static void wait_change(const struct mech_chan *c, struct side *s, uint64_t seen)
{
    while (atomic_load_explicit(&s->pos, memory_order_acquire) == seen) {
        if (!c->m->variant) {
            mech_relax(c);
            continue;
        }
        uint32_t f = atomic_load(&s->fut);
        atomic_store(&s->sleeping, 1);
        if (atomic_load(&s->pos) == seen)  /* seq_cst: pairs the check in advance() */
            syscall(SYS_futex, &s->fut, FUTEX_WAIT, f, NULL, NULL, 0);
        atomic_store(&s->sleeping, 0);
    }
}

static void advance(const struct mech_chan *c, struct side *s, uint64_t v)
{
    atomic_store_explicit(&s->pos, v, memory_order_release);
    if (c->m->variant) {
        atomic_fetch_add(&s->fut, 1);
        if (atomic_load(&s->sleeping))
            syscall(SYS_futex, &s->fut, FUTEX_WAKE, 1, NULL, NULL, 0);
    }
}

static int ring_setup(struct mech_chan *c)
{
    uint64_t stride = (c->max_len + 8 + 63) & ~(uint64_t)63;
    uint64_t n = (8u << 20) / stride;
    n = n < 4 ? 4 : n > 256 ? 256 : n;
    size_t ring_bytes = (sizeof(struct ring) + n * stride + 4095) & ~(size_t)4095;
    size_t total = 4096 + c->nrecv * ring_bytes;
    struct ring_set *rs = mech_map_shared(total);
    if (!rs)
        return -ENOMEM;
    rs->ring_bytes = ring_bytes;
    rs->total = total;
    c->shared = rs;
    for (unsigned i = 0; i < c->nrecv; i++) {
        ring_at(c, i)->nslots = n;
        ring_at(c, i)->stride = stride;
    }
    return 0;
}

/* Each side's cached copy of the other side's position, refreshed only
 * when the ring looks full (producer) or empty (consumer). */
struct ring_local { uint64_t cache[MECH_MAX_RECV]; };

static int ring_sender_attach(struct mech_chan *c)
{
    c->local = mech_alloc_local(sizeof(struct ring_local));
    return c->local ? 0 : -ENOMEM;
}

static int ring_receiver_attach(struct mech_chan *c, unsigned idx)
{
    c->idx = (int)idx;
    c->local = mech_alloc_local(sizeof(struct ring_local));
    return c->local ? 0 : -ENOMEM;
}

static char *claim(const struct mech_chan *c, unsigned i)
{
    struct ring *r = ring_at(c, i);
    uint64_t *tail = &((struct ring_local *)c->local)->cache[i];
    uint64_t head = atomic_load_explicit(&r->prod.pos, memory_order_relaxed);
    while (head - *tail >= r->nslots) {
        /* acquire pairs the consumer's release in ring_recv_end: slot is free */
        *tail = atomic_load_explicit(&r->cons.pos, memory_order_acquire);
        if (head - *tail >= r->nslots)
            wait_change(c, &r->cons, *tail);
    }
    return SLOT(r, head);
}

static int ring_send_begin(struct mech_chan *c, size_t len, void **buf)
{
    if (len > c->max_len)
        return -EMSGSIZE;
    *buf = claim(c, 0) + 8;
    return 0;
}

static void put(const struct mech_chan *c, unsigned i, const void *buf, size_t len)
{
    struct ring *r = ring_at(c, i);
    char *slot = claim(c, i);
    if (slot + 8 != buf)
        memcpy(slot + 8, buf, len);
    memcpy(slot, &(uint64_t){ len }, 8);
    advance(c, &r->prod, atomic_load_explicit(&r->prod.pos, memory_order_relaxed) + 1);
}

static int ring_send_end(struct mech_chan *c, int dst, void *buf, size_t len)
{
    if (dst >= (int)c->nrecv)
        return -EINVAL;
    for (unsigned i = 1; i < c->nrecv; i++)       /* copies first: buf lives in ring 0 */
        if (dst < 0 || dst == (int)i)
            put(c, i, buf, len);
    if (dst <= 0)
        put(c, 0, buf, len);
    return 0;
}

static int ring_recv_begin(struct mech_chan *c, size_t len, const void **buf, size_t *got)
{
    struct ring *r = ring_at(c, (unsigned)c->idx);
    uint64_t *head = &((struct ring_local *)c->local)->cache[0];
    uint64_t tail = atomic_load_explicit(&r->cons.pos, memory_order_relaxed);
    (void)len;
    if (*head == tail) {
        /* acquire pairs the producer's release in put(): the slot is written */
        wait_change(c, &r->prod, tail);
        *head = atomic_load_explicit(&r->prod.pos, memory_order_acquire);
    }
    char *slot = SLOT(r, tail);
    uint64_t l;
    memcpy(&l, slot, 8);
    if (l > c->max_len)
        return -EPROTO;
    *got = l;
    *buf = slot + 8;
    return 0;
}

static void ring_recv_end(struct mech_chan *c)
{
    struct ring *r = ring_at(c, (unsigned)c->idx);
    advance(c, &r->cons, atomic_load_explicit(&r->cons.pos, memory_order_relaxed) + 1);
}

static void ring_detach(struct mech_chan *c)
{
    free(c->local);
    c->local = NULL;
}

static void ring_teardown(struct mech_chan *c)
{
    struct ring_set *rs = c->shared;
    if (rs)
        mech_unmap(rs, rs->total);
    c->shared = NULL;
}

const struct mech mech_ring = {
    .name = "ring", .label = "SPSC ring (busy-wait floor)",
    .flags = MECH_SPINS | MECH_ZEROCOPY, .variant = 0,
    .setup = ring_setup,
    .sender_attach = ring_sender_attach, .receiver_attach = ring_receiver_attach,
    .send_begin = ring_send_begin, .send_end = ring_send_end,
    .recv_begin = ring_recv_begin, .recv_end = ring_recv_end,
    .detach = ring_detach, .teardown = ring_teardown,
};

const struct mech mech_futex = {
    .name = "futex", .label = "SPSC ring + raw futex (blocking floor)",
    .flags = MECH_ZEROCOPY, .variant = 1,
    .setup = ring_setup,
    .sender_attach = ring_sender_attach, .receiver_attach = ring_receiver_attach,
    .send_begin = ring_send_begin, .send_end = ring_send_end,
    .recv_begin = ring_recv_begin, .recv_end = ring_recv_end,
    .detach = ring_detach, .teardown = ring_teardown,
};
