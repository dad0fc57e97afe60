/* Barrelfish-MP-style user-level channel (after the Barrelfish UMP design):
 * per sender/receiver pair, a ring of S cache-line messages from sender to
 * receiver and a ring of acknowledgements back. A line carries 56 payload
 * bytes and, last, a control word holding the line's sequence number + 1,
 * written with release; the receiver spins on it. The sender may be at most
 * S lines ahead of the last acknowledged line; the receiver acknowledges
 * every S/2 lines. A message is split into lines (its first 4 payload bytes
 * hold its length). Sending to N receivers is N copies; receiving is one.
 * As in the original, waiting only spins (with sched_yield when there are
 * more processes than cores). */
#define _GNU_SOURCE
#include "../mech.h"

#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define BMP_S       256         /* lines per direction */
#define BMP_PAYLOAD 56

struct line {
    alignas(64) unsigned char payload[BMP_PAYLOAD];
    _Atomic uint64_t ctrl;      /* sequence + 1, written last */
};
_Static_assert(sizeof(struct line) == 64, "one message per cache line");

struct bmp_pair {
    struct line data[BMP_S];    /* sender -> receiver */
    struct line ack[BMP_S];     /* receiver -> sender: payload = consumed lines */
};

/* staging bytes: length word + message + slack for the last line's copy */
#define STAGE(c) (((c)->max_len + 4 + BMP_PAYLOAD + 63) & ~(size_t)63)

struct bmp_send_local {          /* per receiver: sender's view */
    uint64_t next;               /* next data line sequence */
    uint64_t acked;              /* lines the receiver has consumed */
    uint64_t next_ack;           /* next ack line to read */
};
struct bmp_recv_local {
    uint64_t next;               /* next data line to read */
    uint64_t since_ack, acks;
    unsigned char *msg;          /* reassembled message */
};

static struct bmp_pair *pair_at(const struct mech_chan *c, unsigned i)
{
    return (struct bmp_pair *)c->shared + i;
}

static int bmp_setup(struct mech_chan *c)
{
    c->shared = mech_map_shared(c->nrecv * sizeof(struct bmp_pair));
    return c->shared ? 0 : -ENOMEM;
}

static int bmp_sender_attach(struct mech_chan *c)
{
    /* local: staging buffer, then per-receiver state */
    size_t stage = STAGE(c);
    c->local = mech_alloc_local(stage + c->nrecv * sizeof(struct bmp_send_local));
    return c->local ? 0 : -ENOMEM;
}

static int bmp_receiver_attach(struct mech_chan *c, unsigned idx)
{
    struct bmp_recv_local *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->msg = mech_alloc_local(c->max_len + 4 + BMP_PAYLOAD);
    if (!l->msg) {
        free(l);
        return -ENOMEM;
    }
    c->idx = (int)idx;
    c->local = l;
    return 0;
}

static int bmp_send_begin(struct mech_chan *c, size_t len, void **buf)
{
    if (len > c->max_len)
        return -EMSGSIZE;
    *buf = (char *)c->local + 4;
    return 0;
}

static void send_to(struct mech_chan *c, unsigned i, const unsigned char *msg, size_t len)
{
    struct bmp_pair *p = pair_at(c, i);
    size_t stage = STAGE(c);
    struct bmp_send_local *s = (struct bmp_send_local *)((char *)c->local + stage) + i;
    size_t lines = (len + 4 + BMP_PAYLOAD - 1) / BMP_PAYLOAD;
    for (size_t k = 0; k < lines; k++) {
        while (s->next - s->acked >= BMP_S) {          /* out of credit: read acks */
            struct line *a = &p->ack[s->next_ack % BMP_S];
            if (atomic_load_explicit(&a->ctrl, memory_order_acquire) == s->next_ack + 1) {
                memcpy(&s->acked, a->payload, 8);
                s->next_ack++;
            } else {
                mech_relax(c);
            }
        }
        struct line *l = &p->data[s->next % BMP_S];
        memcpy(l->payload, msg + k * BMP_PAYLOAD, BMP_PAYLOAD);
        atomic_store_explicit(&l->ctrl, s->next + 1, memory_order_release);
        s->next++;
    }
}

static int bmp_send_end(struct mech_chan *c, int dst, void *buf, size_t len)
{
    unsigned char *msg = (unsigned char *)buf - 4;
    uint32_t l32 = (uint32_t)len;
    memcpy(msg, &l32, 4);
    if (dst >= (int)c->nrecv)
        return -EINVAL;
    for (unsigned i = 0; i < c->nrecv; i++)
        if (dst < 0 || dst == (int)i)
            send_to(c, i, msg, len);
    return 0;
}

static int bmp_recv_begin(struct mech_chan *c, size_t len, const void **buf, size_t *got)
{
    struct bmp_recv_local *r = c->local;
    struct bmp_pair *p = pair_at(c, (unsigned)c->idx);
    size_t lines = 1, total = 0;
    (void)len;
    for (size_t k = 0; k < lines; k++) {
        struct line *l = &p->data[r->next % BMP_S];
        while (atomic_load_explicit(&l->ctrl, memory_order_acquire) != r->next + 1)
            mech_relax(c);
        memcpy(r->msg + k * BMP_PAYLOAD, l->payload, BMP_PAYLOAD);
        if (k == 0) {
            uint32_t l32;
            memcpy(&l32, r->msg, 4);
            if (l32 > c->max_len)
                return -EPROTO;
            total = l32;
            lines = (total + 4 + BMP_PAYLOAD - 1) / BMP_PAYLOAD;
        }
        r->next++;
        if (++r->since_ack >= BMP_S / 2) {              /* acknowledge */
            struct line *a = &p->ack[r->acks % BMP_S];
            memcpy(a->payload, &r->next, 8);
            atomic_store_explicit(&a->ctrl, r->acks + 1, memory_order_release);
            r->acks++;
            r->since_ack = 0;
        }
    }
    *buf = r->msg + 4;
    *got = total;
    return 0;
}

static void bmp_recv_end(struct mech_chan *c) { (void)c; }

static void bmp_detach(struct mech_chan *c)
{
    if (c->idx >= 0) {
        struct bmp_recv_local *r = c->local;
        if (r)
            free(r->msg);
    }
    free(c->local);
    c->local = NULL;
}

static void bmp_teardown(struct mech_chan *c)
{
    mech_unmap(c->shared, c->nrecv * sizeof(struct bmp_pair));
    c->shared = NULL;
}

const struct mech mech_bmp = {
    .name = "bmp", .label = "Barrelfish MP (spin; yield if oversubscribed)",
    .flags = MECH_SPINS,
    .setup = bmp_setup,
    .sender_attach = bmp_sender_attach, .receiver_attach = bmp_receiver_attach,
    .send_begin = bmp_send_begin, .send_end = bmp_send_end,
    .recv_begin = bmp_recv_begin, .recv_end = bmp_recv_end,
    .detach = bmp_detach, .teardown = bmp_teardown,
};
