/* zimp through its public API. Zero-copy: zimp_loan/zimp_publish and
 * zimp_read/zimp_release. Copying: zimp_send/zimp_recv. Waiting mode via
 * zimp_*_set_spin: busy-wait (UINT64_MAX), blocking (0) or the library's
 * default (spin briefly, then sleep). */
#define _GNU_SOURCE
#include "../mech.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zimp/zimp.h>

#define ZC        0x10u
#define ZERO      0x20u   /* channel created with ZIMP_ZERO_ON_RELEASE */
#define SPIN_DEF  0u
#define SPIN_BUSY 1u
#define SPIN_NONE 2u

struct zimp_local {
    zimp_sender *s;
    zimp_receiver *r;
    void *copy;          /* copying path's private buffer */
};

/* The parent creates the channel (zimp_reap keeps a channel whose creator runs). */
struct zimp_shared {
    char name[64];
};

static int zm_setup(struct mech_chan *c)
{
    static unsigned seq;
    struct zimp_shared *sh = calloc(1, sizeof *sh);
    if (!sh)
        return -ENOMEM;
    snprintf(sh->name, sizeof sh->name, "zimp-bench-%d-%u", (int)getpid(), seq++);
    c->shared = sh;
    size_t slot = c->max_len < 64 ? 64 : c->max_len;
    uint32_t slots = (uint32_t)((32u << 20) / slot);
    slots = slots < 8 ? 8 : slots > 256 ? 256 : slots;
    /* Every run has one sender: a channel made for one takes the store-only path. */
    struct zimp_config cfg = {
        .slots = slots, .slot_size = (uint32_t)slot,
        .max_senders = 1, .max_receivers = c->nrecv < 64 ? 64 : c->nrecv,
        .flags = (c->m->variant & ZERO) ? ZIMP_ZERO_ON_RELEASE : 0,
    };
    return zimp_create(sh->name, &cfg);
}

static void apply_spin(struct mech_chan *c, struct zimp_local *l)
{
    unsigned mode = (unsigned)(c->m->variant & 0xf);
    if (mode == SPIN_DEF)
        return;
    uint64_t ns = mode == SPIN_BUSY ? UINT64_MAX : 0;
    if (l->s)
        zimp_sender_set_spin(l->s, ns);
    if (l->r)
        zimp_receiver_set_spin(l->r, ns);
}

static int zm_sender_attach(struct mech_chan *c)
{
    struct zimp_local *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    c->local = l;
    if (!(c->m->variant & ZC) && !(l->copy = mech_alloc_local(c->max_len)))
        return -ENOMEM;
    int rc = zimp_sender_open(((struct zimp_shared *)c->shared)->name, &l->s);
    if (rc < 0)
        return rc;
    apply_spin(c, l);
    return 0;
}

static int zm_receiver_attach(struct mech_chan *c, unsigned idx)
{
    struct zimp_local *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    c->idx = (int)idx;
    c->local = l;
    if (!(c->m->variant & ZC) && !(l->copy = mech_alloc_local(c->max_len)))
        return -ENOMEM;
    int rc = zimp_receiver_open(((struct zimp_shared *)c->shared)->name, &l->r);
    if (rc < 0)
        return rc;
    apply_spin(c, l);
    return 0;
}

static int zm_send_begin(struct mech_chan *c, size_t len, void **buf)
{
    struct zimp_local *l = c->local;
    if (c->m->variant & ZC)
        return zimp_loan(l->s, len, buf, -1);
    *buf = l->copy;
    return len <= c->max_len ? 0 : -EMSGSIZE;
}

static int zm_send_end(struct mech_chan *c, int dst, void *buf, size_t len)
{
    struct zimp_local *l = c->local;
    if (dst >= 0 && c->nrecv != 1)
        return -ENOTSUP;        /* a channel reaches all its receivers */
    if (c->m->variant & ZC)
        return zimp_publish(l->s, buf, len);
    return zimp_send(l->s, buf, len, -1);
}

static int zm_recv_begin(struct mech_chan *c, size_t len, const void **buf, size_t *got)
{
    struct zimp_local *l = c->local;
    (void)len;
    if (c->m->variant & ZC)
        return zimp_read(l->r, buf, got, -1);
    ssize_t n = zimp_recv(l->r, l->copy, c->max_len, -1);
    if (n < 0)
        return (int)n;
    *buf = l->copy;
    *got = (size_t)n;
    return 0;
}

static void zm_recv_end(struct mech_chan *c)
{
    struct zimp_local *l = c->local;
    if (c->m->variant & ZC)
        zimp_release(l->r);
}

static void zm_detach(struct mech_chan *c)
{
    struct zimp_local *l = c->local;
    if (!l)
        return;
    zimp_sender_close(l->s);
    zimp_receiver_close(l->r);
    free(l->copy);
    free(l);
    c->local = NULL;
}

static void zm_teardown(struct mech_chan *c)
{
    struct zimp_shared *sh = c->shared;
    if (!sh)
        return;
    zimp_unlink(sh->name);
    free(sh);
    c->shared = NULL;
}

#define ZIMP_MECH(id, nm, lbl, fl, var)                                          \
    const struct mech id = {                                                     \
        .name = nm, .label = lbl, .flags = fl, .variant = var,                   \
        .setup = zm_setup,                                                       \
        .sender_attach = zm_sender_attach, .receiver_attach = zm_receiver_attach, \
        .send_begin = zm_send_begin, .send_end = zm_send_end,                    \
        .recv_begin = zm_recv_begin, .recv_end = zm_recv_end,                    \
        .detach = zm_detach, .teardown = zm_teardown,                            \
    }

ZIMP_MECH(mech_zimp, "zimp", "zimp zero-copy", MECH_ZEROCOPY, ZC | SPIN_DEF);
ZIMP_MECH(mech_zimp_spin, "zimp-spin", "zimp zero-copy, busy-wait", MECH_ZEROCOPY | MECH_SPINS, ZC | SPIN_BUSY);
ZIMP_MECH(mech_zimp_block, "zimp-block", "zimp zero-copy, blocking", MECH_ZEROCOPY, ZC | SPIN_NONE);
ZIMP_MECH(mech_zimp_zero, "zimp-zero", "zimp zero-copy, zero on release", MECH_ZEROCOPY, ZC | ZERO | SPIN_DEF);
ZIMP_MECH(mech_zimp_copy, "zimp-copy", "zimp copying send/recv", 0, SPIN_DEF);
ZIMP_MECH(mech_zimp_copy_block, "zimp-copy-block", "zimp copying, blocking", 0, SPIN_NONE);
