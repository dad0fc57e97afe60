/*
 * zimp_transfer: the SMP data-transfer study (seed 002) redone with today's
 * mechanisms. Its own interface, after the study's Table I, because what it
 * measures is one transfer at a time from a source buffer the application
 * owns to a destination buffer the application owns (shifted every
 * iteration, as the study did), with both processes released together by a
 * barrier. bench/mech.h instead streams messages that the mechanism places
 * (send_begin hands out the mechanism's own buffer), which suits the
 * one-to-many micro-benchmark but hides the source copy this study is about.
 *
 * Life of a mechanism (one source -> ndst destination processes):
 *   parent:      unsupported() -> init()                       (before fork)
 *   each child:  attach() -> { barrier, send() | recv() }* -> detach()
 *   parent:      finalize()                                    (after all exited)
 * send() is the study's copy_remote (the source's part), recv() its
 * copy_local (the destination's part); a one-sided mechanism leaves one of
 * them empty. Every call returns 0 or a negative errno value; nothing prints.
 *
 * A zero-copy mechanism (XFER_ZEROCOPY) moves no bytes: the source writes
 * the message into the mechanism's memory (loan(), then send() publishes
 * it), and each destination reads it where it lies (view(), then done()).
 * Every destination gets every transfer (one-to-many) when ndst > 1, which
 * only mechanisms flagged XFER_FANOUT accept.
 */
#ifndef ZIMP_BENCH_XFER_H
#define ZIMP_BENCH_XFER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum xfer_role { XFER_SRC = 0, XFER_DST = 1 };

/* struct xfer.flags */
#define XFER_GET     0x01u  /* one-sided, driven by the destination (Kaput get) */
#define XFER_PUT     0x02u  /* one-sided, driven by the source (Kaput put) */
#define XFER_CHUNKED 0x04u  /* pipelines chunks of xfer_ctx.chunk bytes (tunable) */
#define XFER_NOT_YET 0x08u  /* placeholder: reported n/a, never run */
#define XFER_ZEROCOPY 0x10u /* loan/send at the source, view/done at each destination */
#define XFER_FANOUT  0x20u  /* one source to ndst > 1 destinations, each gets every byte */

#define XFER_MAX_DST 8u

struct xfer;

/* One mechanism instance. The driver zero-fills it and sets x, max_len,
 * chunk, depth before init(); role and peer before attach(). */
struct xfer_ctx {
    const struct xfer *x;
    size_t max_len;          /* largest transfer that will be made */
    size_t chunk;            /* XFER_CHUNKED: bytes per chunk (0: the mechanism's default) */
    unsigned depth;          /* XFER_CHUNKED: chunks in flight (0: default) */
    unsigned ndst;           /* destinations (1 unless XFER_FANOUT) */
    enum xfer_role role;
    unsigned index;          /* destination: 0 .. ndst-1 */
    pid_t peer;              /* the other process (a destination's: the source;
                                the source's: destination 0) */
    void *shared;            /* made by init(), inherited across fork */
    void *local;             /* made by attach(), this process only */
};

struct xfer {
    const char *name;        /* command-line id: "shmbuf" */
    const char *label;       /* for tables and plots */
    const char *study_row;   /* the study's row it corresponds to, or "-" */
    unsigned flags;
    /* NULL when max_len/chunk can run here, else why not (a kernel limit). */
    const char *(*unsupported)(const struct xfer_ctx *c);
    /* XFER_CHUNKED: lowers chunk and depth to what the kernel allows and
     * writes back what it uses. */
    int  (*init)(struct xfer_ctx *c);
    /* May fail with -EPERM/-EACCES where the kernel refuses the access
     * (ptrace policy): the driver then reports the mechanism n/a. */
    int  (*attach)(struct xfer_ctx *c);
    /* Source: move len bytes from src. peer_dst is where they must land in
     * the destination's address space (used by XFER_PUT only). */
    int  (*send)(struct xfer_ctx *c, const void *src, void *peer_dst, size_t len);
    /* Destination: make len bytes appear at dst. peer_src is where they are
     * in the source's address space (used by XFER_GET only). */
    int  (*recv)(struct xfer_ctx *c, void *dst, const void *peer_src, size_t len);
    void (*detach)(struct xfer_ctx *c);
    void (*finalize)(struct xfer_ctx *c);
    /* XFER_ZEROCOPY only. Source: a writable buffer of len bytes in the
     * mechanism's memory; the message is written there, then send(c, buf,
     * NULL, len) publishes it. */
    int  (*loan)(struct xfer_ctx *c, size_t len, void **buf);
    /* Destination: the next message, read in place (read-only), until done(). */
    int  (*view)(struct xfer_ctx *c, const void **buf, size_t len);
    int  (*done)(struct xfer_ctx *c);
};

/* Registry (xfer_list.c), in table order. */
extern const struct xfer *const xfer_all[];
const struct xfer *xfer_find(const char *name);

/* ---- copy routines (copy.c): the study's Figure 2 ---- */

enum copy_kind { COPY_LIBC = 0, COPY_MOVSB, COPY_NT_AVX2, COPY_NKINDS };
#define COPY_NT_MIN 512      /* below this the non-temporal routine is libc memcpy */
#define COPY_CLASSES 40      /* size classes: floor(log2(total)) */

typedef void (*copy_fn)(void *dst, const void *src, size_t n);

const char *copy_name(enum copy_kind k);
/* NULL if this CPU can run routine k, else why not. */
const char *copy_unsupported(enum copy_kind k);
copy_fn copy_routine(enum copy_kind k);
/* Routines used for a transfer of `total` bytes, per size class: the best
 * of all, and the best that writes through the cache. Set from the
 * Figure 2 measurement, or forced for every size (libc by default). */
void copy_choose(const enum copy_kind best[COPY_CLASSES],
                 const enum copy_kind best_cached[COPY_CLASSES]);
void copy_force(enum copy_kind k);
enum copy_kind copy_choice(size_t total);
int copy_class(size_t total);
/* Copy n bytes of a transfer of `total` bytes into its final destination:
 * the routine that won at that total. */
void xcopy_out(void *dst, const void *src, size_t n, size_t total);
/* Copy into a staging buffer the peer reads next: never non-temporal,
 * since stores that bypass the cache would make the peer read DRAM. */
void xcopy_in(void *dst, const void *src, size_t n, size_t total);

/* ---- helpers (util.c) ---- */

/* Spin-wait step: pause, and yield the core after a long wait so that a
 * descheduled peer on a busy machine can run. */
void xfer_relax(unsigned *spins);
/* The consumer's read of every byte it received; returns a sum so the
 * compiler cannot drop the reads. */
uint64_t xfer_touch(const void *buf, size_t len);
/* MAP_SHARED|MAP_ANONYMOUS (inherited across fork), NULL on failure. */
void *xfer_map_shared(size_t len);
/* Private, page-aligned, pre-faulted memory, NULL on failure. */
void *xfer_map_local(size_t len);
void xfer_unmap(void *p, size_t len);
long xfer_read_long(const char *path);   /* first number in a file, -1 if none */
size_t xfer_llc_bytes(void);             /* last-level cache size (32 MiB if unknown) */
/* Lets a sibling read or write this process's memory under Yama. */
void xfer_allow_peer_access(void);

#endif
