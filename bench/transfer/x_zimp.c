/* zimp channels carrying a transfer, through the public API only:
 *   zimp-copy   one message per transfer, on a channel whose slot holds it
 *               (zimp_send copies in, zimp_recv copies out: two copies, not
 *               pipelined: the receiver starts when the whole message is in);
 *   zimp-chunk  the transfer as a pipeline of chunk-sized messages, written
 *               in place (zimp_loan/zimp_publish) and read in place
 *               (zimp_read/zimp_release), each side copying with the routine
 *               of the copy study: the shared buffer's pipeline on a channel;
 *   zimp-heap   placeholder for the shared heap (below).
 * Both wait by spinning (the sender and the receiver each own a core here). */
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
    zimp_sender *hold;       /* the creator's membership: a concurrent zimp_reap
                                (other tests on this machine) cannot take the channel */
};

struct zx_local {
    zimp_sender *s;
    zimp_receiver *r;
};

static int zx_create(struct xfer_ctx *c, uint32_t slots, size_t slot_size)
{
    static unsigned seq;
    struct zx_shared *sh = calloc(1, sizeof *sh);
    if (!sh)
        return -ENOMEM;
    c->shared = sh;
    snprintf(sh->name, sizeof sh->name, "zimp-xfer-%d-%u", (int)getpid(), seq++);
    struct zimp_config cfg = {
        .slots = slots, .slot_size = (uint32_t)(slot_size < 64 ? 64 : slot_size),
        .max_senders = 2, .max_receivers = 1,
    };
    int rc = zimp_create(sh->name, &cfg);
    return rc < 0 ? rc : zimp_sender_open(sh->name, &sh->hold);
}

static int zcopy_init(struct xfer_ctx *c)
{
    if (c->max_len > UINT32_MAX)
        return -EMSGSIZE;
    return zx_create(c, 2, c->max_len);
}

static int zchunk_init(struct xfer_ctx *c)
{
    if (!c->chunk)
        c->chunk = ZCHUNK_CHUNK;
    if (!c->depth)
        c->depth = ZCHUNK_DEPTH;
    if (c->chunk > UINT32_MAX)
        return -EMSGSIZE;
    return zx_create(c, c->depth, c->chunk);
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
    zimp_unlink(sh->name);
    free(sh);
    c->shared = NULL;
}

const struct xfer xfer_zimp_copy = {
    .name = "zimp-copy", .label = "zimp channel copy (slot holds the message)", .study_row = "-",
    .init = zcopy_init, .attach = zx_attach,
    .send = zcopy_send, .recv = zcopy_recv,
    .detach = zx_detach, .finalize = zx_finalize,
};

const struct xfer xfer_zimp_chunk = {
    .name = "zimp-chunk", .label = "zimp channel, pipelined chunks", .study_row = "-",
    .flags = XFER_CHUNKED,
    .init = zchunk_init, .attach = zx_attach,
    .send = zchunk_send, .recv = zchunk_recv,
    .detach = zx_detach, .finalize = zx_finalize,
};

/* ---- PLACEHOLDER: zimp heap handles ---------------------------------------
 * The shared heap exists (src/heap/, zimp_heap_*, docs/heap.md); this entry
 * keeps its row in every table and is reported n/a until the driver can
 * measure a destination that reads in place instead of into dst. What it
 * should do:
 *   init:   create a heap large enough for max_len, and a channel whose slot
 *           carries one handle;
 *   send:   zimp_heap_alloc(len) -> write the payload in place (in this
 *           study: copy from src, since the study's source buffer is the
 *           application's; a producer that builds its data in the heap
 *           skips even that) -> send the handle;
 *   recv:   receive the handle -> zimp_heap_resolve -> the consumer reads
 *           every byte in place (no copy into dst: the measurement's touch
 *           pass is the consumer's use) -> release the reference.
 * Set XFER_ZEROCOPY-like semantics in the driver then: dst is not written. */
static const char *heap_unsupported(const struct xfer_ctx *c)
{
    (void)c;
    return "zimp heap row not built yet (needs a zero-copy destination in the driver)";
}

static int heap_none(struct xfer_ctx *c)
{
    (void)c;
    return -ENOSYS;
}

static int heap_send(struct xfer_ctx *c, const void *src, void *peer_dst, size_t len)
{
    (void)c, (void)src, (void)peer_dst, (void)len;
    return -ENOSYS;
}

static int heap_recv(struct xfer_ctx *c, void *dst, const void *peer_src, size_t len)
{
    (void)c, (void)dst, (void)peer_src, (void)len;
    return -ENOSYS;
}

static void heap_nop(struct xfer_ctx *c)
{
    (void)c;
}

const struct xfer xfer_zimp_heap = {
    .name = "zimp-heap", .label = "zimp heap handles (zero-copy)", .study_row = "-",
    .flags = XFER_NOT_YET,
    .unsupported = heap_unsupported, .init = heap_none, .attach = heap_none,
    .send = heap_send, .recv = heap_recv,
    .detach = heap_nop, .finalize = heap_nop,
};
