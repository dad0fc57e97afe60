/*
 * The study's measurements on any struct xfer, each in a freshly forked
 * source and 1..XFER_MAX_DST destinations, pinned round-robin to the cores:
 *   xfer_run_sizes    time per transfer at each size (Table II, Figure 4)
 *   xfer_run_disturb  receiver/source working-set slowdown (Table IV proxy)
 *   xfer_run_setup    set-up and tear-down cost (Table III), in-process
 * Buffers shift by the transfer's length plus a cache line every iteration
 * and are reused only after `span` bytes (several times the last-level
 * cache), so no iteration finds its data left in the cache by the previous
 * one (the study's §III-A). Returns 0, 1 for n/a (note says why), or a
 * negative errno value (note says what failed).
 */
#ifndef ZIMP_BENCH_XFER_DRIVER_H
#define ZIMP_BENCH_XFER_DRIVER_H

#include "xfer.h"

#define XFER_MAX_SIZES 32

struct xfer_opts {
    size_t chunk;            /* XFER_CHUNKED mechanisms (0: default) */
    unsigned depth;
    unsigned ndst;           /* destinations (0 or 1: one; more: XFER_FANOUT only) */
    size_t span;             /* bytes the buffers shift over before reuse */
    int full_check;          /* fill and check every byte of every transfer */
    double limit_s;          /* kill the pair after this long */
};

struct xfer_size_result {
    size_t size;
    unsigned iters;          /* timed transfers */
    double p50_ns, min_ns;   /* per transfer, until the last destination read every byte */
    /* Medians of: until the last destination had the data (copied in, or in
     * place for zero-copy) before reading it; the same from the publication
     * on (zero-copy: without the loan; others: = deliver); the loan alone. */
    double p50_deliver_ns, p50_handoff_ns, p50_loan_ns;
};

struct xfer_disturb {
    /* [role][0: idle, 1: after a transfer, 2: after evicting the caches]:
     * median time of one walk over the working set, ns */
    double walk_ns[2][3];
};

/* Chosen effective chunk/depth are written back into o (the kernel's limits). */
int xfer_run_sizes(const struct xfer *x, struct xfer_opts *o, const size_t *sizes,
                   const unsigned *iters, unsigned nsizes, struct xfer_size_result *out,
                   char *note, size_t note_len);
int xfer_run_disturb(const struct xfer *x, struct xfer_opts *o, size_t size, size_t ws,
                     unsigned rounds, struct xfer_disturb *out, char *note, size_t note_len);
int xfer_run_setup(const struct xfer *x, const struct xfer_opts *o, size_t max_len,
                   unsigned iters, double *setup_ns, double *teardown_ns,
                   char *note, size_t note_len);

double xfer_now_ns(void);
double xfer_median(double *v, size_t n);   /* sorts v */

#endif
