/* zimp channels carrying a transfer, through the public API only:
 *   zimp-copy   one message per transfer, on a channel whose slot holds it
 *               (zimp_send copies in, zimp_recv copies out: two copies, not
 *               pipelined: the receiver starts when the whole message is in);
 *   zimp-chunk  the transfer as a pipeline of chunk-sized messages, written
 *               in place (zimp_loan/zimp_publish) and read in place
 *               (zimp_read/zimp_release), each side copying with the routine
 *               of the copy study: the shared buffer's pipeline on a channel;
 *   zimp-heap   zero-copy: a channel created with a heap; the source loans
 *               the message (a heap block beyond the slot size), writes it
 *               in place and publishes it; every receiver reads it where it
 *               lies (zimp_read) and releases it. No byte is copied.
 * All wait by spinning (the sender and the receivers each own a core here)
 * and serve one to many: every receiver gets every message. */
#define _GNU_SOURCE
#include "xfer.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zimp/zimp.h>

#define ZCHUNK_CHUNK 65536u
#define ZCHUNK_DEPTH 4u

struct zx_shared {
    char name[64];
    char heap[64];           /* zimp-heap: the heap's name, "" otherwise */
    zimp_sender *hold;       /* the creator's membership: a concurrent zimp_reap
                                (other tests on this machine) cannot take the channel */
};

struct zx_local {
    zimp_sender *s;
    zimp_receiver *r;
};

/* heap_size > 0: create a heap of that size first, for the channel's large messages. */
static int zx_create(struct xfer_ctx *c, uint32_t slots, size_t slot_size, uint64_t heap_size)
{
    static unsigned seq;
    struct zx_shared *sh = calloc(1, sizeof *sh);
    if (!sh)
        return -ENOMEM;
    c->shared = sh;
    snprintf(sh->name, sizeof sh->name, "zimp-xfer-%d-%u", (int)getpid(), seq++);
    struct zimp_config cfg = {
        .slots = slots, .slot_size = (uint32_t)(slot_size < 64 ? 64 : slot_size),
        .max_senders = 2, .max_receivers = c->ndst ? c->ndst : 1,
    };
    if (heap_size) {
        struct zimp_heap_config hc = { .size = heap_size };
        snprintf(sh->heap, sizeof sh->heap, "%s", sh->name);
        int rc = zimp_heap_create(sh->heap, &hc);
        if (rc < 0) {
            sh->heap[0] = 0;
            return rc;
        }
        cfg.heap = sh->heap;
    }
    int rc = zimp_create(sh->name, &cfg);
    return rc < 0 ? rc : zimp_sender_open(sh->name, &sh->hold);
}

static int zcopy_init(struct xfer_ctx *c)
{
    if (c->max_len > UINT32_MAX)
        return -EMSGSIZE;
    return zx_create(c, 2, c->max_len, 0);
}

static int zchunk_init(struct xfer_ctx *c)
{
    if (!c->chunk)
        c->chunk = ZCHUNK_CHUNK;
    if (!c->depth)
        c->depth = ZCHUNK_DEPTH;
    if (c->chunk > UINT32_MAX)
        return -EMSGSIZE;
    return zx_create(c, c->depth, c->chunk, 0);
}

static int zx_attach(struct xfer_ctx *c)
{
    const struct zx_shared *sh = c->shared;
    struct zx_local *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    c->local = l;
    if (c->role == XFER_SRC) {
        int rc = zimp_sender_open(sh->name, &l->s);
        return rc < 0 ? rc : zimp_sender_set_spin(l->s, UINT64_MAX);
    }
    int rc = zimp_receiver_open(sh->name, &l->r);
    return rc < 0 ? rc : zimp_receiver_set_spin(l->r, UINT64_MAX);
}

static int zcopy_send(struct xfer_ctx *c, const void *src, void *peer_dst, size_t len)
{
    struct zx_local *l = c->local;
    (void)peer_dst;
    return zimp_send(l->s, src, len, -1);
}

static int zcopy_recv(struct xfer_ctx *c, void *dst, const void *peer_src, size_t len)
{
    struct zx_local *l = c->local;
    (void)peer_src;
    ssize_t n = zimp_recv(l->r, dst, len, -1);
    if (n < 0)
        return (int)n;
    return (size_t)n == len ? 0 : -EPROTO;
}

static int zchunk_send(struct xfer_ctx *c, const void *src, void *peer_dst, size_t len)
{
    struct zx_local *l = c->local;
    const unsigned char *from = src;
    (void)peer_dst;
    for (size_t off = 0; off < len; off += c->chunk) {
        size_t n = len - off < c->chunk ? len - off : c->chunk;
        void *slot;
        int rc = zimp_loan(l->s, n, &slot, -1);
        if (rc < 0)
            return rc;
        xcopy_in(slot, from + off, n, len);
        if ((rc = zimp_publish(l->s, slot, n)) < 0)
            return rc;
    }
    return 0;
}

static int zchunk_recv(struct xfer_ctx *c, void *dst, const void *peer_src, size_t len)
{
    struct zx_local *l = c->local;
    unsigned char *to = dst;
    (void)peer_src;
    for (size_t off = 0; off < len; off += c->chunk) {
        size_t n = len - off < c->chunk ? len - off : c->chunk;
        const void *slot;
        size_t got;
        int rc = zimp_read(l->r, &slot, &got, -1);
        if (rc < 0)
            return rc;
        if (got == n)
            xcopy_out(to + off, slot, n, len);
        rc = zimp_release(l->r);
        if (got != n)
            return -EPROTO;
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void zx_detach(struct xfer_ctx *c)
{
    struct zx_local *l = c->local;
    if (!l)
        return;
    zimp_sender_close(l->s);
    zimp_receiver_close(l->r);
    free(l);
    c->local = NULL;
}

static void zx_finalize(struct xfer_ctx *c)
{
    struct zx_shared *sh = c->shared;
    if (!sh)
        return;
    zimp_sender_close(sh->hold);
    zimp_unlink(sh->name);   /* frees the heap blocks the channel held */
    if (sh->heap[0])
        zimp_heap_unlink(sh->heap);
    free(sh);
    c->shared = NULL;
}

const struct xfer xfer_zimp_copy = {
    .name = "zimp-copy", .label = "zimp channel copy (slot holds the message)", .study_row = "-",
    .flags = XFER_FANOUT,
    .init = zcopy_init, .attach = zx_attach,
    .send = zcopy_send, .recv = zcopy_recv,
    .detach = zx_detach, .finalize = zx_finalize,
};

const struct xfer xfer_zimp_chunk = {
    .name = "zimp-chunk", .label = "zimp channel, pipelined chunks", .study_row = "-",
    .flags = XFER_CHUNKED | XFER_FANOUT,
    .init = zchunk_init, .attach = zx_attach,
    .send = zchunk_send, .recv = zchunk_recv,
    .detach = zx_detach, .finalize = zx_finalize,
};

/* ---- zimp-heap: large messages on a channel, zero-copy ----
 * Messages of at most ZHEAP_SLOT bytes take the slot path (the loan is the
 * slot itself), longer ones a heap block. A block goes back to the heap when
 * its slot is reused (docs/heap.md, H2): with ZHEAP_SLOTS slots, a heap of
 * ZHEAP_SLOTS + 1 largest messages lets every loan allocate at once (the
 * blocks of the last ZHEAP_SLOTS messages are still held when the next one
 * is allocated). Two slots are enough here: one transfer is in flight at a
 * time, and the ring cannot fill. */
#define ZHEAP_SLOTS 2u
#define ZHEAP_SLOT  4096u

static int zheap_init(struct xfer_ctx *c)
{
    if (c->max_len > ((size_t)2 << 30) - 1)
        return -EMSGSIZE;
    size_t block = (c->max_len + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    uint64_t heap = (uint64_t)(ZHEAP_SLOTS + 1) * block + ((uint64_t)1 << 20);
    return zx_create(c, ZHEAP_SLOTS, ZHEAP_SLOT, heap);
}

static int zheap_loan(struct xfer_ctx *c, size_t len, void **buf)
{
    struct zx_local *l = c->local;
    return zimp_loan(l->s, len, buf, -1);
}

/* src is the loaned buffer, written in place */
static int zheap_send(struct xfer_ctx *c, const void *src, void *peer_dst, size_t len)
{
    struct zx_local *l = c->local;
    (void)peer_dst;
    return zimp_publish(l->s, (void *)src, len);
}

static int zheap_view(struct xfer_ctx *c, const void **buf, size_t len)
{
    struct zx_local *l = c->local;
    size_t got;
    int rc = zimp_read(l->r, buf, &got, -1);
    if (rc < 0)
        return rc;
    if (got != len) {
        zimp_release(l->r);
        return -EPROTO;
    }
    return 0;
}

static int zheap_done(struct xfer_ctx *c)
{
    struct zx_local *l = c->local;
    return zimp_release(l->r);
}

const struct xfer xfer_zimp_heap = {
    .name = "zimp-heap", .label = "zimp large messages (heap, zero-copy)", .study_row = "-",
    .flags = XFER_ZEROCOPY | XFER_FANOUT,
    .init = zheap_init, .attach = zx_attach,
    .send = zheap_send,
    .detach = zx_detach, .finalize = zx_finalize,
    .loan = zheap_loan, .view = zheap_view, .done = zheap_done,
};
