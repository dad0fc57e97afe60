/* Forked source/destination pairs running the study's measurements (see
 * driver.h). */
#define _GNU_SOURCE
#include "driver.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 2u            /* untimed transfers before each size: faults, first-touch */

double xfer_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double xfer_median(double *v, size_t n)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the group: shared control block, barrier, failure ---- */

#define NPROC (XFER_MAX_DST + 1)   /* process 0 is the source, 1 + d destination d */

struct proc_line { alignas(64) _Atomic uint64_t arrived; };   /* written by its process only */

/* One destination's view of one transfer, written before the closing barrier. */
struct dst_line {
    alignas(64) _Atomic uint64_t go;   /* transfer `go` may start: this destination's clock runs */
    double t0_ns, in_ns, end_ns;       /* clock started, data in hand, every byte read */
};

struct pair_ctl {
    struct proc_line proc[NPROC];
    struct dst_line dst[XFER_MAX_DST];
    alignas(64) double src_start_ns;   /* source: when it started the transfer (minus its loan) */
    double src_pub_ns;                 /* source: when it started publishing (zero-copy) */
    double src_loan_ns;                /* source: time in loan() */
    alignas(64) _Atomic int abort;
    _Atomic pid_t pid[NPROC];
    uintptr_t base[NPROC];   /* each process's buffer pool: the study's register_mem */
    int err[NPROC], refused[NPROC];
    char what[NPROC][128];
    struct xfer_size_result res[XFER_MAX_SIZES];
    struct xfer_disturb dist;
};

struct pair {
    struct pair_ctl *k;
    enum xfer_role role;
    unsigned me;             /* 0: the source, 1 + index: a destination */
    unsigned nproc;
    uint64_t n;              /* barriers passed */
};

static void pair_fail(struct pair_ctl *k, unsigned me, int rc, const char *step)
{
    if (!k->err[me]) {
        k->err[me] = rc;
        if (me == 0)
            snprintf(k->what[me], sizeof k->what[me], "source %s: %s", step, strerror(-rc));
        else
            snprintf(k->what[me], sizeof k->what[me], "destination %u %s: %s", me - 1, step,
                     strerror(-rc));
    }
    atomic_store(&k->abort, 1);
}

/* Barrier of the group: each process counts its arrivals in its own line
 * and waits for everyone's count. -ECANCELED once another one failed. */
static int barrier(struct pair *p)
{
    struct pair_ctl *k = p->k;
    unsigned spins = 0;
    p->n++;
    /* release pairs with the others' acquire below: everything this process
     * did before the barrier is visible to them after */
    atomic_store_explicit(&k->proc[p->me].arrived, p->n, memory_order_release);
    for (unsigned i = 0; i < p->nproc; i++) {
        while (atomic_load_explicit(&k->proc[i].arrived, memory_order_acquire) < p->n) {
            if (atomic_load_explicit(&k->abort, memory_order_relaxed))
                return -ECANCELED;
            xfer_relax(&spins);
        }
    }
    return 0;
}

/* The source on the first core, destinations round-robin from the second. */
static void pin(unsigned me)
{
    cpu_set_t have, one;
    if (sched_getaffinity(0, sizeof have, &have) != 0 || CPU_COUNT(&have) < 2)
        return;              /* one core: nothing to pin apart */
    int slot = (int)(me % (unsigned)CPU_COUNT(&have)), seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &have) && seen++ == slot) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            sched_setaffinity(0, sizeof one, &one);
            return;
        }
    }
}

typedef int (*pair_body)(struct pair *p, struct xfer_ctx *c, void *arg);

static void pair_child(struct pair_ctl *k, struct xfer_ctx c, unsigned me, unsigned nproc,
                       pair_body fn, void *arg)
{
    pin(me);
    c.role = me ? XFER_DST : XFER_SRC;
    c.index = me ? me - 1 : 0;
    atomic_store(&k->pid[me], getpid());
    unsigned spins = 0;
    unsigned other = me ? 0 : 1;
    while (!atomic_load(&k->pid[other]) && !atomic_load(&k->abort))
        xfer_relax(&spins);
    c.peer = atomic_load(&k->pid[other]);
    int rc = c.x->attach(&c);
    if (rc < 0) {
        k->refused[me] = rc == -EPERM || rc == -EACCES;
        pair_fail(k, me, rc, "attach");
    } else {
        struct pair p = { k, c.role, me, nproc, 0 };
        rc = fn(&p, &c, arg);
        if (rc < 0 && rc != -ECANCELED)
            pair_fail(k, me, rc, "transfer");
    }
    c.x->detach(&c);
    _exit(0);
}

/* Waits for the group, killing it after limit_s. */
static int pair_reap(pid_t *pid, unsigned nproc, double limit_s)
{
    double deadline = xfer_now_ns() + limit_s * 1e9;
    int rc = 0, done[NPROC] = { 0 };
    unsigned left = nproc;
    while (left) {
        for (unsigned i = 0; i < nproc; i++) {
            int st;
            if (done[i] || waitpid(pid[i], &st, WNOHANG) != pid[i])
                continue;
            done[i] = 1, left--;
            if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && rc == 0)
                rc = -ECHILD;        /* crashed: a signal or a bad exit */
        }
        if (left && xfer_now_ns() > deadline) {
            for (unsigned i = 0; i < nproc; i++)
                if (!done[i])
                    kill(pid[i], SIGKILL);
            rc = -ETIMEDOUT;
            deadline = xfer_now_ns() + 10e9;
        }
        if (left)
            usleep(1000);
    }
    return rc;
}

static int pair_verdict(struct pair_ctl *k, unsigned nproc, int rc, char *note, size_t note_len)
{
    for (unsigned r = 0; r < nproc; r++) {
        if (k->refused[r]) {
            snprintf(note, note_len, "n/a (%s; the kernel refused ptrace access)", k->what[r]);
            return 1;
        }
    }
    for (unsigned r = 0; r < nproc; r++) {
        if (k->err[r] && k->err[r] != -ECANCELED) {
            snprintf(note, note_len, "error: %s", k->what[r]);
            return k->err[r];
        }
    }
    if (rc < 0)
        snprintf(note, note_len, "error: group %s", rc == -ETIMEDOUT ? "timed out" : "crashed");
    return rc;
}

/* unsupported(), init(), fork the group, reap it, finalize(). */
static int run_pair(const struct xfer *x, struct xfer_opts *o, size_t max_len, pair_body fn,
                    void *arg, struct pair_ctl *k, char *note, size_t note_len)
{
    unsigned ndst = o->ndst ? o->ndst : 1;
    struct xfer_ctx c = { .x = x, .max_len = max_len, .chunk = o->chunk, .depth = o->depth, .ndst = ndst };
    const char *why = x->unsupported ? x->unsupported(&c) : NULL;
    if (!why && ndst > 1 && !(x->flags & XFER_FANOUT))
        why = "one destination only";
    if (!why && ndst > XFER_MAX_DST)
        why = "too many destinations";
    if (why) {
        snprintf(note, note_len, "n/a (%s)", why);
        return 1;
    }
    int rc = x->init(&c);
    if (rc < 0) {
        snprintf(note, note_len, "n/a (set-up: %s)", strerror(-rc));
        x->finalize(&c);
        return 1;
    }
    o->chunk = c.chunk, o->depth = c.depth;
    unsigned nproc = ndst + 1;
    pid_t pid[NPROC];
    fflush(NULL);
    for (unsigned r = 0; r < nproc; r++) {
        pid[r] = fork();
        if (pid[r] == 0)
            pair_child(k, c, r, nproc, fn, arg);
        if (pid[r] < 0) {
            rc = -errno;
            atomic_store(&k->abort, 1);
            for (unsigned i = 0; i < r; i++) {
                kill(pid[i], SIGKILL);
                waitpid(pid[i], NULL, 0);
            }
            x->finalize(&c);
            snprintf(note, note_len, "error: fork: %s", strerror(-rc));
            return rc;
        }
    }
    rc = pair_reap(pid, nproc, o->limit_s);
    x->finalize(&c);
    return pair_verdict(k, nproc, rc, note, note_len);
}

/* ---- data: pattern, stamps, checks ---- */

/* Byte at pool offset p of transfer `tag` (0: the pool's resting content). */
static inline uint8_t pat(size_t p, uint64_t tag)
{
    return (uint8_t)(p * 131 + (p >> 8) * 7 + tag * 0x5b + 1);
}

static void fill(unsigned char *pool, size_t from, size_t to, uint64_t tag)
{
    for (size_t p = from; p < to; p++)
        pool[p] = pat(p, tag);
}

/* Marks the transfer's first and last 8 bytes (or all of it, or every
 * byte in full-check mode) with its tag, so stale data cannot pass. */
static void stamp(unsigned char *pool, size_t off, size_t len, uint64_t tag, int full)
{
    if (full || len <= 16) {
        fill(pool, off, off + len, tag);
        return;
    }
    fill(pool, off, off + 8, tag);
    fill(pool, off + len - 8, off + len, tag);
}

/* The len bytes at `data` are the transfer taken from pool offset off. */
static int check(const unsigned char *data, size_t off, size_t len, uint64_t tag, int full)
{
    size_t edge = full || len <= 16 ? len : 8;
    for (size_t i = 0; i < edge; i++)
        if (data[i] != pat(off + i, tag) || data[len - 1 - i] != pat(off + len - 1 - i, tag))
            return -EBADMSG;
    for (size_t i = edge; i + edge < len; i += 4096)   /* sampled: every page */
        if (data[i] != pat(off + i, 0))
            return -EBADMSG;
    return 0;
}

static size_t stride_of(size_t len)
{
    return ((len + 63) & ~(size_t)63) + 64;   /* shift by the transfer plus a line */
}

/* One transfer between two barriers. Each destination starts its clock,
 * then lets the source go; the source starts when all have, so no transfer
 * begins before a clock does. The time ends when the last destination has
 * read every byte it received, and starts when the source started (or, for
 * a one-sided get, when the first destination did). All clocks are
 * CLOCK_MONOTONIC on one machine.
 *
 * Zero-copy: the time is the source's loan() plus the rest from the
 * publication on; writing the message into the loaned buffer is the
 * application producing its data, which no mechanism's time includes (the
 * others find it in the source's buffer). The message is written with
 * non-temporal stores where the CPU has them: it lies in memory, not in a
 * cache, like the other mechanisms' source bytes. */
struct one {
    unsigned char *pool;
    uintptr_t peer_base;
    size_t off, len;
    uint64_t tag;
    int full;
    void *zbuf;                                   /* zero-copy source: the loan */
    double ns, deliver_ns, handoff_ns, loan_ns;   /* destination 0, after the transfer
                                                     (loan_ns: also the source's own) */
    uint64_t sink;
};

static int wait_go(struct pair *p, uint64_t tag)
{
    unsigned spins = 0;
    for (unsigned d = 0; d + 1 < p->nproc; d++) {
        while (atomic_load_explicit(&p->k->dst[d].go, memory_order_acquire) != tag) {
            if (atomic_load_explicit(&p->k->abort, memory_order_relaxed))
                return -ECANCELED;
            xfer_relax(&spins);
        }
    }
    return 0;
}

/* Zero-copy source, before the transfer's first barrier: the loan (timed)
 * and the application writing its message into it (not timed), so that the
 * destinations wait only for the publication, as they wait for the first
 * bytes of any other mechanism. */
static int source_produce(struct xfer_ctx *c, struct one *t)
{
    double l0 = xfer_now_ns();
    int rc = c->x->loan(c, t->len, &t->zbuf);
    if (rc < 0)
        return rc;
    t->loan_ns = xfer_now_ns() - l0;
    copy_fn produce = copy_routine(copy_unsupported(COPY_NT_AVX2) ? COPY_LIBC : COPY_NT_AVX2);
    produce(t->zbuf, t->pool + t->off, t->len);
    return 0;
}

static int source_turn(struct pair *p, struct xfer_ctx *c, struct one *t)
{
    struct pair_ctl *k = p->k;
    int rc = wait_go(p, t->tag);
    if (rc < 0)
        return rc;
    int zc = (c->x->flags & XFER_ZEROCOPY) != 0;
    /* read by the destinations after the closing barrier (its release) */
    double now = xfer_now_ns();
    k->src_pub_ns = now;
    k->src_loan_ns = zc ? t->loan_ns : 0;
    k->src_start_ns = now - k->src_loan_ns;
    return c->x->send(c, zc ? t->zbuf : t->pool + t->off, (void *)(t->peer_base + t->off), t->len);
}

static int destination_turn(struct pair *p, struct xfer_ctx *c, struct one *t)
{
    struct dst_line *me = &p->k->dst[c->index];
    int zc = (c->x->flags & XFER_ZEROCOPY) != 0;
    const unsigned char *data = t->pool + t->off;
    me->t0_ns = xfer_now_ns();
    atomic_store_explicit(&me->go, t->tag, memory_order_release);
    const void *view = NULL;
    int rc = zc ? c->x->view(c, &view, t->len)
                : c->x->recv(c, t->pool + t->off, (const void *)(t->peer_base + t->off), t->len);
    me->in_ns = xfer_now_ns();
    if (rc < 0)
        return rc;
    if (zc)
        data = view;
    t->sink += xfer_touch(data, t->len);   /* the consumer uses every byte */
    me->end_ns = xfer_now_ns();
    if (check(data, t->off, t->len, t->tag, t->full) < 0) {
        pair_fail(p->k, p->me, -EBADMSG, "data check (wrong or stale bytes)");
        return -EBADMSG;
    }
    return zc ? c->x->done(c) : 0;
}

/* Destination 0, after the closing barrier: the group's times. */
static void transfer_times(struct pair *p, const struct xfer_ctx *c, struct one *t)
{
    const struct pair_ctl *k = p->k;
    double start = k->src_start_ns, in = 0, end = 0;
    if (c->x->flags & XFER_GET)
        start = k->dst[0].t0_ns;
    for (unsigned d = 0; d + 1 < p->nproc; d++) {
        const struct dst_line *l = &k->dst[d];
        if ((c->x->flags & XFER_GET) && l->t0_ns < start)
            start = l->t0_ns;
        in = l->in_ns > in ? l->in_ns : in;
        end = l->end_ns > end ? l->end_ns : end;
    }
    t->ns = end - start;
    t->deliver_ns = in - start;
    t->handoff_ns = (c->x->flags & XFER_ZEROCOPY) ? in - k->src_pub_ns : t->deliver_ns;
    t->loan_ns = k->src_loan_ns;
}

static int transfer_once(struct pair *p, struct xfer_ctx *c, struct one *t)
{
    int rc = 0;
    if (p->role == XFER_SRC) {
        stamp(t->pool, t->off, t->len, t->tag, t->full);
        if (c->x->flags & XFER_ZEROCOPY)
            rc = source_produce(c, t);
    }
    if (rc == 0)
        rc = barrier(p);
    if (rc < 0)
        return rc;
    rc = p->role == XFER_SRC ? source_turn(p, c, t) : destination_turn(p, c, t);
    if (rc < 0)
        return rc;
    /* the source may reuse its bytes only when a one-sided get is done */
    rc = barrier(p);
    if (rc == 0 && p->role == XFER_SRC && !t->full)
        stamp(t->pool, t->off, t->len, 0, 0);
    if (rc == 0 && p->me == 1)
        transfer_times(p, c, t);
    return rc;
}

/* Maps this side's pool and swaps base addresses with the peer. */
static int pool_open(struct pair *p, size_t bytes, unsigned char **pool, uintptr_t *peer_base)
{
    *pool = xfer_map_local(bytes);
    if (!*pool)
        return -ENOMEM;
    if (p->role == XFER_SRC)
        fill(*pool, 0, bytes, 0);
    p->k->base[p->me] = (uintptr_t)*pool;
    int rc = barrier(p);
    *peer_base = p->k->base[p->me ? 0 : 1];
    return rc;
}

/* ---- sizes: Table II, Figure 4 ---- */

struct sizes_arg {
    const struct xfer_opts *o;
    const size_t *sizes;
    const unsigned *iters;
    unsigned nsizes;
    size_t max_len;
};

static int sizes_body(struct pair *p, struct xfer_ctx *c, void *arg)
{
    const struct sizes_arg *a = arg;
    size_t span = a->o->span, bytes = span + a->max_len;
    struct one t = { .full = a->o->full_check };
    int rc = pool_open(p, bytes, &t.pool, &t.peer_base);
    /* per transfer: total, delivered, handed off, loan */
    double *ns = malloc(sizeof *ns * 4 * (WARMUP + 4096));
    if (!ns)
        rc = rc ? rc : -ENOMEM;
    for (unsigned j = 0; rc == 0 && j < a->nsizes; j++) {
        unsigned iters = a->iters[j] > 4096 ? 4096 : a->iters[j], n = WARMUP + iters;
        t.len = a->sizes[j];
        for (unsigned i = 0; rc == 0 && i < n; i++) {
            t.off = (t.off + stride_of(t.len)) % span;
            t.tag++;
            rc = transfer_once(p, c, &t);
            ns[i] = t.ns, ns[n + i] = t.deliver_ns, ns[2 * n + i] = t.handoff_ns, ns[3 * n + i] = t.loan_ns;
        }
        if (rc == 0 && p->me == 1) {
            struct xfer_size_result *r = &p->k->res[j];
            r->size = t.len, r->iters = iters;
            r->p50_ns = xfer_median(ns + WARMUP, iters);
            r->min_ns = ns[WARMUP];            /* sorted by the median */
            r->p50_deliver_ns = xfer_median(ns + n + WARMUP, iters);
            r->p50_handoff_ns = xfer_median(ns + 2 * n + WARMUP, iters);
            r->p50_loan_ns = xfer_median(ns + 3 * n + WARMUP, iters);
        }
    }
    free(ns);
    xfer_unmap(t.pool, bytes);
    return rc;
}

int xfer_run_sizes(const struct xfer *x, struct xfer_opts *o, const size_t *sizes,
                   const unsigned *iters, unsigned nsizes, struct xfer_size_result *out,
                   char *note, size_t note_len)
{
    struct pair_ctl *k = xfer_map_shared(sizeof *k);
    if (!k)
        return -ENOMEM;
    size_t max_len = 0;
    for (unsigned j = 0; j < nsizes; j++)
        max_len = sizes[j] > max_len ? sizes[j] : max_len;
    struct sizes_arg a = { o, sizes, iters, nsizes < XFER_MAX_SIZES ? nsizes : XFER_MAX_SIZES, max_len };
    note[0] = 0;
    int rc = run_pair(x, o, max_len, sizes_body, &a, k, note, note_len);
    memcpy(out, k->res, sizeof *out * a.nsizes);
    xfer_unmap(k, sizeof *k);
    return rc;
}

/* ---- cache disturbance: Table IV proxy ---- */

/* A random cyclic walk over the working set's cache lines (Sattolo's
 * shuffle): every step a dependent load, so the hardware prefetcher cannot
 * hide a line that was evicted. */
static uint64_t *walk_build(size_t ws)
{
    size_t lines = ws / 64;
    uint64_t *b = xfer_map_local(ws);
    size_t *perm = malloc(sizeof *perm * lines);
    if (!b || !perm) {
        free(perm);
        xfer_unmap(b, ws);
        return NULL;
    }
    for (size_t i = 0; i < lines; i++)
        perm[i] = i;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (size_t i = lines - 1; i > 0; i--) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        size_t j = (size_t)(r % i), tmp = perm[i];
        perm[i] = perm[j], perm[j] = tmp;
    }
    for (size_t i = 0; i < lines; i++)
        b[i * 8] = perm[i] * 8;
    free(perm);
    return b;
}

static double walk_ns(const uint64_t *b, size_t ws, uint64_t *sink)
{
    double t0 = xfer_now_ns();
    uint64_t w = 0;
    for (size_t n = ws / 64; n > 0; n--)
        w = b[w];
    *sink += w;
    return xfer_now_ns() - t0;
}

struct disturb_arg {
    const struct xfer_opts *o;
    size_t size, ws;
    unsigned rounds;
};

/* One round of mode m (0 idle, 1 transfer, 2 evict) and the timed walk. */
static int disturb_round(struct pair *p, struct xfer_ctx *c, struct one *t, int mode,
                         const uint64_t *walk, size_t ws, const unsigned char *evict,
                         size_t evict_len, double *ns)
{
    walk_ns(walk, ws, &t->sink);
    walk_ns(walk, ws, &t->sink);            /* now resident */
    int rc;
    if (mode == 1) {
        rc = transfer_once(p, c, t);         /* ends with a barrier */
    } else {
        rc = barrier(p);
        if (rc == 0 && mode == 2)
            t->sink += xfer_touch(evict, evict_len);
        if (rc == 0)
            rc = barrier(p);
    }
    *ns = walk_ns(walk, ws, &t->sink);
    return rc;
}

static int disturb_body(struct pair *p, struct xfer_ctx *c, void *arg)
{
    const struct disturb_arg *a = arg;
    size_t span = a->o->span, bytes = span + a->size, evict_len = 2 * xfer_llc_bytes();
    struct one t = { .len = a->size };
    uint64_t *walk = walk_build(a->ws);
    unsigned char *evict = xfer_map_local(evict_len);
    double *ns[3];
    for (int m = 0; m < 3; m++)
        ns[m] = malloc(sizeof(double) * a->rounds);
    int rc = walk && evict && ns[0] && ns[1] && ns[2] ? 0 : -ENOMEM;
    if (rc == 0)
        rc = pool_open(p, bytes, &t.pool, &t.peer_base);
    for (unsigned i = 0; rc == 0 && i < 3 * a->rounds; i++) {
        int mode = (int)(i % 3);
        if (mode == 1) {
            t.off = (t.off + stride_of(t.len)) % span;
            t.tag++;
        }
        rc = disturb_round(p, c, &t, mode, walk, a->ws, evict, evict_len, &ns[mode][i / 3]);
    }
    for (int m = 0; m < 3; m++) {
        if (rc == 0 && p->me <= 1)      /* the source and destination 0 */
            p->k->dist.walk_ns[p->role][m] = xfer_median(ns[m], a->rounds);
        free(ns[m]);
    }
    xfer_unmap(t.pool, bytes);
    xfer_unmap(evict, evict_len);
    xfer_unmap(walk, a->ws);
    return rc;
}

int xfer_run_disturb(const struct xfer *x, struct xfer_opts *o, size_t size, size_t ws,
                     unsigned rounds, struct xfer_disturb *out, char *note, size_t note_len)
{
    struct pair_ctl *k = xfer_map_shared(sizeof *k);
    if (!k)
        return -ENOMEM;
    struct disturb_arg a = { o, size, ws, rounds ? rounds : 1 };
    note[0] = 0;
    int rc = run_pair(x, o, size, disturb_body, &a, k, note, note_len);
    *out = k->dist;
    xfer_unmap(k, sizeof *k);
    return rc;
}

/* ---- set-up and tear-down: Table III ---- */

/* A process to point at: the mechanisms that reach into the peer's memory
 * open it at attach time. */
static pid_t idle_peer(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        xfer_allow_peer_access();
        for (;;)
            pause();
    }
    return pid;
}

static int setup_once(const struct xfer *x, const struct xfer_opts *o, size_t max_len, pid_t peer,
                      double *setup_ns, double *teardown_ns, const char **step)
{
    struct xfer_ctx a = { .x = x, .max_len = max_len, .chunk = o->chunk, .depth = o->depth, .ndst = 1,
                          .peer = peer };
    double t0 = xfer_now_ns();
    int rc = x->init(&a);
    struct xfer_ctx b = a;
    a.role = XFER_SRC, b.role = XFER_DST;
    *step = "init";
    if (rc == 0 && (*step = "attach source", rc = x->attach(&a)) == 0)
        *step = "attach destination", rc = x->attach(&b);
    double t1 = xfer_now_ns();
    x->detach(&b);
    x->detach(&a);
    x->finalize(&a);
    *setup_ns = t1 - t0;
    *teardown_ns = xfer_now_ns() - t1;
    return rc;
}

int xfer_run_setup(const struct xfer *x, const struct xfer_opts *o, size_t max_len,
                   unsigned iters, double *setup_ns, double *teardown_ns,
                   char *note, size_t note_len)
{
    struct xfer_ctx probe = { .x = x, .max_len = max_len, .chunk = o->chunk, .depth = o->depth, .ndst = 1 };
    const char *why = x->unsupported ? x->unsupported(&probe) : NULL;
    note[0] = 0;
    if (why) {
        snprintf(note, note_len, "n/a (%s)", why);
        return 1;
    }
    double *s = malloc(sizeof *s * iters), *t = malloc(sizeof *t * iters);
    pid_t peer = idle_peer();
    int rc = s && t && peer > 0 ? 0 : -ENOMEM;
    const char *step = "";
    for (unsigned i = 0; rc == 0 && i < iters; i++)
        rc = setup_once(x, o, max_len, peer, &s[i], &t[i], &step);
    if (peer > 0) {
        kill(peer, SIGKILL);
        waitpid(peer, NULL, 0);
    }
    if (rc == 0) {
        *setup_ns = xfer_median(s, iters);
        *teardown_ns = xfer_median(t, iters);
    } else {
        snprintf(note, note_len, "%s (%s: %s)", rc == -EPERM || rc == -EACCES ? "n/a" : "error",
                 step, strerror(-rc));
        rc = rc == -EPERM || rc == -EACCES ? 1 : rc;
    }
    free(s);
    free(t);
    return rc;
}
