/* Shared buffer with a pipelined chunked copy (the study's "shared buffer",
 * §II-A, generalised from its two buffers to a ring of `depth` chunks): the
 * source copies chunk k+1 into the ring while the destination copies chunk
 * k out. Each side publishes its progress as a chunk count in its own cache
 * line; counts never reset, so a slot's owner follows from them alone:
 *   slot of chunk q = q % depth
 *   the source may fill chunk q once consumed > q - depth (every destination's)
 *   the destination may empty chunk q once produced > q
 * One to many: the source copies each chunk in once, every destination
 * copies it out, and the slowest one holds the ring.
 * The segment is a named POSIX shared-memory object (what two unrelated
 * processes would use), created by init() and mapped by each attach(). */
#define _GNU_SOURCE
#include "xfer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define SHMBUF_CHUNK 65536u
#define SHMBUF_DEPTH 2u
#define SHMBUF_HDR   4096u   /* chunks start page-aligned */

struct count_line { alignas(64) _Atomic uint64_t n; };

struct shmbuf_hdr {
    alignas(64) _Atomic uint64_t produced;          /* written by the source only */
    struct count_line consumed[XFER_MAX_DST];       /* each by its destination only */
};
_Static_assert(sizeof(struct shmbuf_hdr) <= SHMBUF_HDR, "header fits before the chunks");

struct shmbuf_shared {
    char name[64];
    size_t chunk, depth, map_len;
    unsigned ndst;
};

struct shmbuf_local {
    struct shmbuf_hdr *h;
    unsigned char *ring;
    uint64_t next;           /* this side's next chunk number */
    uint64_t seen;           /* cached: the other side's count (the source: the least) */
};

static uint64_t least_consumed(const struct shmbuf_shared *s, struct shmbuf_hdr *h)
{
    uint64_t least = UINT64_MAX;
    for (unsigned d = 0; d < s->ndst; d++) {
        uint64_t n = atomic_load_explicit(&h->consumed[d].n, memory_order_acquire);
        least = n < least ? n : least;
    }
    return least;
}

static void shmbuf_geometry(const struct xfer_ctx *c, size_t *chunk, size_t *depth)
{
    *chunk = c->chunk ? c->chunk : SHMBUF_CHUNK;
    *depth = c->depth ? c->depth : SHMBUF_DEPTH;
}

static int shmbuf_init(struct xfer_ctx *c)
{
    static unsigned seq;
    struct shmbuf_shared *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    c->shared = s;
    shmbuf_geometry(c, &s->chunk, &s->depth);
    s->ndst = c->ndst ? c->ndst : 1;
    c->chunk = s->chunk, c->depth = (unsigned)s->depth;
    s->map_len = SHMBUF_HDR + s->chunk * s->depth;
    snprintf(s->name, sizeof s->name, "/zimp-xfer-%d-%u", (int)getpid(), seq++);
    int fd = shm_open(s->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
        return -errno;
    int rc = ftruncate(fd, (off_t)s->map_len) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

static int shmbuf_attach(struct xfer_ctx *c)
{
    struct shmbuf_shared *s = c->shared;
    struct shmbuf_local *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    c->local = l;
    int fd = shm_open(s->name, O_RDWR, 0);
    if (fd < 0)
        return -errno;
    /* MAP_POPULATE: page faults belong to set-up, not to the first transfer */
    void *p = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return -errno;
    l->h = p;
    l->ring = (unsigned char *)p + SHMBUF_HDR;
    return 0;
}

static int shmbuf_send(struct xfer_ctx *c, const void *src, void *peer_dst, size_t len)
{
    const struct shmbuf_shared *s = c->shared;
    struct shmbuf_local *l = c->local;
    const unsigned char *from = src;
    (void)peer_dst;
    for (size_t off = 0; off < len; off += s->chunk, l->next++) {
        size_t n = len - off < s->chunk ? len - off : s->chunk;
        unsigned spins = 0;
        /* acquire pairs with the destinations' release of `consumed`: their
         * reads of the slot are done before we overwrite it */
        while (l->seen + s->depth <= l->next) {
            l->seen = least_consumed(s, l->h);
            if (l->seen + s->depth <= l->next)
                xfer_relax(&spins);
        }
        xcopy_in(l->ring + (l->next % s->depth) * s->chunk, from + off, n, len);
        /* release pairs with the destination's acquire: the chunk's bytes
         * are visible before the count that announces them */
        atomic_store_explicit(&l->h->produced, l->next + 1, memory_order_release);
    }
    return 0;
}

static int shmbuf_recv(struct xfer_ctx *c, void *dst, const void *peer_src, size_t len)
{
    const struct shmbuf_shared *s = c->shared;
    struct shmbuf_local *l = c->local;
    unsigned char *to = dst;
    (void)peer_src;
    for (size_t off = 0; off < len; off += s->chunk, l->next++) {
        size_t n = len - off < s->chunk ? len - off : s->chunk;
        unsigned spins = 0;
        while (l->seen <= l->next) {
            l->seen = atomic_load_explicit(&l->h->produced, memory_order_acquire);
            if (l->seen <= l->next)
                xfer_relax(&spins);
        }
        xcopy_out(to + off, l->ring + (l->next % s->depth) * s->chunk, n, len);
        atomic_store_explicit(&l->h->consumed[c->index].n, l->next + 1, memory_order_release);
    }
    return 0;
}

static void shmbuf_detach(struct xfer_ctx *c)
{
    struct shmbuf_shared *s = c->shared;
    struct shmbuf_local *l = c->local;
    if (l && l->h)
        munmap(l->h, s->map_len);
    free(l);
    c->local = NULL;
}

static void shmbuf_finalize(struct xfer_ctx *c)
{
    struct shmbuf_shared *s = c->shared;
    if (!s)
        return;
    shm_unlink(s->name);
    free(s);
    c->shared = NULL;
}

const struct xfer xfer_shmbuf = {
    .name = "shmbuf", .label = "shared buffer, pipelined copy", .study_row = "Shared buffer",
    .flags = XFER_CHUNKED | XFER_FANOUT,
    .init = shmbuf_init, .attach = shmbuf_attach,
    .send = shmbuf_send, .recv = shmbuf_recv,
    .detach = shmbuf_detach, .finalize = shmbuf_finalize,
};
