/*
 * zimp-stress: randomized trials over the whole parameter space.
 *
 * A trial is drawn from one 64-bit seed: 1-8 sender and 0-4 receiver
 * processes, ring and slot geometry, table sizes, stall timeout, flags,
 * waiting mode, copy or zero-copy, timeouts, pacing, and a stream of events
 * (kill -9, SIGSTOP/SIGCONT, sender timeout-and-close, receiver close-reopen,
 * evictions of stalled receivers and senders), lossy receivers among them at a rate from one per second
 * to hundreds. The driver (this process) forks the members, injects the
 * events and replaces killed processes. Every member logs what it did into
 * anonymous shared memory; after the trial the driver checks the log
 * against the contract of <zimp/zimp.h>:
 *   - content and length of every message, no duplicate, per-sender order;
 *   - delivery: each receiver incarnation got every message published after
 *     its open returned (all of them if it drained the channel, else every
 *     one ordered before the last message it got); a lossy one may miss
 *     messages only after an -ENOBUFS, and no more than it was told it lost;
 *   - one total order across receivers (and senders);
 *   - errors only where the contract allows them (-EPIPE with no sender,
 *     -ECONNRESET only after an eviction, ...), no call past its timeout,
 *     no lost wakeup, no hang, no death by a signal the driver did not send.
 *
 * Usage: zimp-stress [--seed S | --trials N [--base-seed B]] [--keep-going]
 *        ZIMP_SOAK_S=seconds runs trials until that much time has passed.
 * See README.md.
 */
#include <zimp/zimp.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- limits ---- */
#define MAX_TX        8
#define MAX_RX        4
#define MAX_SLOTS     (MAX_TX + MAX_RX)
#define MSG_CAP       300000u           /* send attempts per trial */
#define RX_CAP        (4u * MSG_CAP + 200000u)
#define INC_CAP       8192u             /* incarnations per trial */
#define EV_CAP        16384u            /* evictions per trial */
#define MAX_VIOL      24
#define VIOL_LEN      420
#define BUF_MAX       (8192 + HEAP_LEN_MAX)
#define HEAP_LEN_MAX  (128u << 10)   /* longest large message of a heap trial */

#define NS_PER_US     1000LL
#define NS_PER_MS     1000000LL
#define NS_PER_S      1000000000LL

/* Marks in the receive log (g field); identified messages have g < MSG_CAP. */
#define MARK_ANON     0xFFFFFFFFu       /* a message too short to carry its id */
#define MARK_IDLE     0xFFFFFFFEu       /* a wait of >= IDLE_MIN timed out */
#define MARK_EPIPE    0xFFFFFFFDu       /* a receive returned -EPIPE */
#define MARK_GAP      0xFFFFFFFCu       /* -ENOBUFS (lossy): len = positions lost since the last */
#define LENKEY        0xC3A5C35Au

enum { ROLE_TX = 1, ROLE_RX = 2 };
enum { PH_IDLE, PH_LOAN, PH_BORROW };
enum { ST_NONE, ST_ATTEMPT, ST_OK, ST_FAIL };
enum { END_NONE, END_CLOSED, END_TMO_CLOSE, END_RESET, END_EPIPE, END_ERROR };
enum { EV_KILL_TX, EV_KILL_RX, EV_STOP, EV_TMO_CLOSE, EV_RX_CLOSE, EV_EVICT, NEV };
static const char *const ev_names[NEV] = { "killtx", "killrx", "stop", "tmoclose",
                                           "rxclose", "evict" };
static const char *const end_names[] = { "none", "closed", "timeout-close", "reset",
                                         "epipe", "error" };

/* ---- shared log (anonymous MAP_SHARED, made before any fork) ---- */
struct msgrec {                 /* one per send attempt; its index g is the message id */
    uint32_t inc;               /* sender incarnation */
    uint32_t seq;               /* per incarnation, one per attempt */
    uint32_t len;
    uint8_t state;              /* ST_* */
    uint8_t zc;
    uint8_t fail_publish;       /* rc came from zimp_publish (the loan had succeeded) */
    uint8_t pad;
    int32_t rc;
    int32_t pad2;
    int64_t t_claim;            /* before zimp_loan / zimp_send */
    int64_t t_pub;              /* before zimp_publish (= t_claim for zimp_send) */
    int64_t t_end;              /* after the call returned */
};

struct rxent {                  /* one per receive result a receiver logs */
    uint32_t inc;               /* written last: 0 = never completed */
    uint32_t g;                 /* message id or MARK_* */
    uint32_t len;
    uint32_t dur_us;            /* call duration, rounded up */
    int64_t t;                  /* call start */
};

struct increc {                 /* one per open (incarnation) */
    uint8_t role, end, epoll, churner, lossy;
    uint16_t slot, gen;
    int32_t pid;
    int32_t index;              /* zimp_sender_index / zimp_receiver_index */
    int32_t err;
    int64_t t_open_start, t_open_end;
    int64_t t_close;            /* before zimp_*_close (or the end of the session) */
    int64_t t_reset_s, t_reset_e;   /* the call that returned -ECONNRESET */
};

struct evrec {                  /* one per zimp_evict / zimp_evict_sender call */
    uint32_t kind;              /* ROLE_RX: zimp_evict, ROLE_TX: zimp_evict_sender */
    uint32_t target;
    int32_t rc;
    uint32_t by_inc;
    int64_t t_s, t_e;
};

struct slotsh {                 /* per worker slot; the driver writes the requests */
    uint32_t stopcnt;           /* odd while a SIGSTOP is pending or in effect */
    uint32_t phase;
    uint32_t req_tmo_close, req_close, req_evict;
    uint32_t cur_inc;
    const char *call;           /* zimp call in progress (literals: same in every fork) */
    int64_t call_t0;
} __attribute__((aligned(64)));

struct shared {
    uint32_t stop, senders_gone;
    uint32_t nmsg, nrx, ninc, nev;
    uint32_t full_msg, full_rx, full_inc, full_ev;
    uint32_t nviol;
    int64_t t0;
    char viol[MAX_VIOL][VIOL_LEN];
    struct slotsh slot[MAX_SLOTS];
    struct increc inc[INC_CAP];
    struct evrec ev[EV_CAP];
};

static struct shared *sh;
static struct msgrec *msgs;
static struct rxent *rxp;

/* ---- small helpers ---- */
static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static void sleep_ns(int64_t ns)
{
    if (ns <= 0)
        return;
    struct timespec ts = { ns / NS_PER_S, ns % NS_PER_S };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static int sanitizer(void)
{
    const char *s = getenv("ZIMP_SANITIZER");
    return s && *s;
}

static int64_t scale(int64_t ns) { return sanitizer() ? 4 * ns : ns; }

/* Slack a blocking call may take beyond its timeout; hang bound at the end. */
#define SLACK_NS      scale(2 * NS_PER_S)
#define HANG_NS       scale(12 * NS_PER_S)
/* Waits this long or longer that time out are logged (lost-wakeup check). */
#define IDLE_MIN_NS   scale(600 * NS_PER_MS)
/* A message published this long before a wait timed out was lost by it. */
#define WAKE_MARGIN   scale(500 * NS_PER_MS)
#define EPOLL_WAIT_MS ((int)(scale(1500 * NS_PER_MS) / NS_PER_MS))

static const char *errname(long long rc)
{
    static __thread char buf[32];
    if (rc >= 0) {
        snprintf(buf, sizeof buf, "%lld", rc);
        return buf;
    }
    switch (-rc) {
#define E(x) case x: return "-" #x;
    E(EINVAL) E(ENOENT) E(EEXIST) E(EAGAIN) E(ETIMEDOUT) E(EPIPE) E(ECONNRESET)
    E(EMSGSIZE) E(EUSERS) E(EPROTO) E(EBUSY) E(EACCES) E(EPERM) E(ENOMEM) E(EBADF)
    E(ENOSPC) E(EINTR) E(ENOSYS) E(EBADMSG) E(EXDEV) E(EADDRINUSE) E(EMFILE)
    E(ESRCH) E(EFAULT) E(EOVERFLOW)
#undef E
    }
    snprintf(buf, sizeof buf, "-errno%lld", -rc);
    return buf;
}

struct rng { uint64_t s; };

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rnd(struct rng *r) { return mix64(r->s += 0x9e3779b97f4a7c15ULL); }
static uint64_t below(struct rng *r, uint64_t n) { return n ? rnd(r) % n : 0; }
static double unit(struct rng *r) { return (double)(rnd(r) >> 11) / 9007199254740992.0; }
static int chance(struct rng *r, double p) { return p > 0 && unit(r) < p; }
static int64_t loguni(struct rng *r, int64_t lo, int64_t hi)
{
    double l = log((double)lo), h = log((double)hi);
    return (int64_t)exp(l + (h - l) * unit(r));
}
static double pick3(struct rng *r, double a, double b, double c)
{
    uint64_t k = below(r, 3);
    return k == 0 ? a : k == 1 ? b : c;
}

/* ---- trial parameters ---- */
enum { LEN_UNIFORM, LEN_MAX, LEN_SMALL, LEN_MIXED };
static const char *const len_names[] = { "uniform", "max", "small", "mixed" };
enum { TMO_LONG, TMO_SHORT, TMO_MIXED };
static const char *const tmo_names[] = { "long", "short", "mixed" };

struct params {
    uint64_t seed;
    int ns, nr;
    uint32_t slots, slot_size, max_senders, max_receivers, flags;
    uint32_t cfg_slot_size;     /* what zimp_create gets (0: the default) */
    int heap;                   /* a channel with a heap: messages up to max_len */
    uint32_t max_len;           /* longest message sent: slot_size, or beyond with a heap */
    uint64_t stall_ns;
    int len_mode, tmo_mode, spin_mode;
    double p_epoll, p_zc_tx, p_zc_rx, p_hold, p_small_cap, p_evict_rx, p_evict_tx, p_churner;
    double p_lossy;             /* a receiver incarnation opens lossy */
    int hog;                    /* heap trials: a process fills the heap again and again (H5) */
    int64_t hold_max, tx_pause, rx_pause;
    double rate;
    double w[NEV];
    int64_t dur;
};

static void draw_params(struct params *p, struct rng *r, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    r->s = seed;
    p->seed = seed;
    /* one sender is the common case, and a channel made for one (max_senders 1) takes
     * the store-only path: draw it often */
    p->ns = chance(r, 0.3) ? 1 : 1 + (int)below(r, MAX_TX);
    p->nr = (int)below(r, MAX_RX + 1);
    /* small rings (2..16) are where trouble lives */
    int e = chance(r, 0.65) ? 1 + (int)below(r, 4) : 5 + (int)below(r, 4);
    p->slots = 1u << e;
    switch (below(r, 10)) {
    case 0: p->slot_size = 1 + (uint32_t)below(r, 3); break;        /* anonymous only */
    case 1: case 2: p->slot_size = 4 + (uint32_t)below(r, 60); break;
    case 3: case 4: case 5: case 6: p->slot_size = 64 + (uint32_t)below(r, 449); break;
    case 7: p->slot_size = 0; break;                                /* the default */
    default: p->slot_size = 513 + (uint32_t)below(r, 3584); break;
    }
    p->cfg_slot_size = p->slot_size;
    if (!p->slot_size)
        p->slot_size = ZIMP_DEFAULT_SLOT_SIZE;
    /* large messages through a heap: lengths on both sides of the slot size */
    p->heap = chance(r, 0.25);
    p->max_len = p->heap ? p->slot_size + 1 + (uint32_t)below(r, HEAP_LEN_MAX - p->slot_size) : p->slot_size;
    p->max_senders = (uint32_t)p->ns + (chance(r, 0.5) ? 0 : (uint32_t)below(r, MAX_TX + 1 - p->ns));
    p->max_receivers = (uint32_t)(p->nr ? p->nr : 1) + (chance(r, 0.5) ? 0 : (uint32_t)below(r, 4));
    p->stall_ns = chance(r, 0.5) ? 0 : (uint64_t)loguni(r, 5 * NS_PER_MS, 300 * NS_PER_MS);
    p->flags = (chance(r, 0.2) ? ZIMP_CHECKSUM : 0) | (chance(r, 0.15) ? ZIMP_ZERO_ON_RELEASE : 0);
    p->len_mode = (int)below(r, 4);
    p->tmo_mode = (int)below(r, 3);
    p->spin_mode = (int)below(r, 3);
    p->p_epoll = pick3(r, 0, 0.5, 1);
    p->p_zc_tx = pick3(r, 0, 0.5, 1);
    p->p_zc_rx = pick3(r, 0, 0.5, 1);
    p->p_hold = pick3(r, 0, 0.05, 0.3);
    p->hold_max = loguni(r, 10 * NS_PER_US, 3 * NS_PER_MS);
    p->p_small_cap = chance(r, 0.3) ? 0.05 : 0;
    p->tx_pause = chance(r, 0.5) ? 0 : loguni(r, NS_PER_US, 500 * NS_PER_US);
    p->rx_pause = chance(r, 0.6) ? 0 : loguni(r, NS_PER_US, 3 * NS_PER_MS);
    p->p_evict_rx = pick3(r, 0, 0.3, 1);
    p->p_evict_tx = pick3(r, 0, 0.3, 1);
    p->p_churner = chance(r, 0.3) ? pick3(r, 0.2, 0.5, 1) : 0;
    p->rate = chance(r, 0.1) ? 0 : exp(log(300.0) * unit(r));
    double sum = 0;
    for (int k = 0; k < NEV; k++) {
        p->w[k] = chance(r, 0.65) ? 0.2 + unit(r) : 0;
        sum += p->w[k];
    }
    if (sum == 0)
        p->w[below(r, NEV)] = 1;
    p->dur = (300 + (int64_t)below(r, 1200)) * NS_PER_MS;
    /* last, so that the draws above keep their meaning for older seeds */
    p->p_lossy = chance(r, 0.3) ? pick3(r, 0.3, 0.6, 1) : 0;
    p->hog = p->heap && chance(r, 0.5);
    /* a one-sender channel with F after each message, or (by default) membarrier in its receivers */
    if (p->max_senders == 1 && chance(r, 0.3))
        p->flags |= ZIMP_NO_MEMBARRIER;
}

static int fmt_params(char *b, size_t cap, const struct params *p)
{
    char ev[160] = "";
    size_t o = 0;
    for (int k = 0; k < NEV; k++)
        if (p->w[k] > 0)
            o += (size_t)snprintf(ev + o, sizeof ev - o, "%s%s:%.2f", o ? "," : "", ev_names[k], p->w[k]);
    return snprintf(b, cap,
        "seed=0x%016" PRIx64 " S=%d R=%d slots=%u size=%u%s heap=%d maxlen=%u len=%s maxS=%u maxR=%u stall=%.1fms"
        " flags=%s%s%s epoll=%.0f%% zctx=%.0f%% zcrx=%.0f%% hold=%.0f%%/%.2fms smallcap=%.0f%%"
        " txpause=%.3fms rxpause=%.3fms tmo=%s spin=%d evictrx=%.0f%% evicttx=%.0f%%"
        " churn=%.0f%% lossy=%.0f%% hog=%d rate=%.1f/s ev=[%s] dur=%lldms",
        p->seed, p->ns, p->nr, p->slots, p->slot_size, p->cfg_slot_size ? "" : "(default)", p->heap, p->max_len,
        len_names[p->len_mode], p->max_senders,
        p->max_receivers, (double)p->stall_ns / NS_PER_MS,
        (p->flags & ZIMP_CHECKSUM) ? "C" : "", (p->flags & ZIMP_ZERO_ON_RELEASE) ? "Z" : "",
        (p->flags & ZIMP_NO_MEMBARRIER) ? "F" : "", 100 * p->p_epoll, 100 * p->p_zc_tx, 100 * p->p_zc_rx, 100 * p->p_hold,
        (double)p->hold_max / NS_PER_MS, 100 * p->p_small_cap, (double)p->tx_pause / NS_PER_MS,
        (double)p->rx_pause / NS_PER_MS, tmo_names[p->tmo_mode], p->spin_mode,
        100 * p->p_evict_rx, 100 * p->p_evict_tx, 100 * p->p_churner, 100 * p->p_lossy, p->hog, p->rate, ev,
        (long long)(p->dur / NS_PER_MS));
}

/* ---- message content ---- */
static inline uint8_t pat(uint32_t g, size_t i)
{
    uint32_t x = g * 0x9E3779B1u + (uint32_t)i * 0x7FEB352Du;
    return (uint8_t)(x ^ (x >> 13) ^ (x >> 24));
}

/* id (4 bytes), then len^key^id (4 bytes), then a pattern of id and offset */
static void fill(uint8_t *b, size_t len, uint32_t g)
{
    size_t i = 0;
    if (len < 4) {
        for (; i < len; i++)
            b[i] = pat(MARK_ANON, i);
        return;
    }
    memcpy(b, &g, 4);
    i = 4;
    if (len >= 8) {
        uint32_t lf = (uint32_t)len ^ LENKEY ^ g;
        memcpy(b + 4, &lf, 4);
        i = 8;
    }
    for (; i < len; i++)
        b[i] = pat(g, i);
}

/* 0 if b holds a message fill() could write (its id in *g), else -1 and why. */
static int verify(const uint8_t *b, size_t len, uint32_t *g, char *why, size_t cap)
{
    size_t i = 0;
    if (len < 4) {
        *g = MARK_ANON;
        for (; i < len; i++)
            if (b[i] != pat(MARK_ANON, i))
                goto bad;
        return 0;
    }
    memcpy(g, b, 4);
    if (*g >= MSG_CAP) {
        snprintf(why, cap, "id field %u out of range (len %zu)", *g, len);
        return -1;
    }
    i = 4;
    if (len >= 8) {
        uint32_t lf;
        memcpy(&lf, b + 4, 4);
        if (lf != ((uint32_t)len ^ LENKEY ^ *g)) {
            snprintf(why, cap, "length field says %u, message is %zu bytes (id %u)",
                     lf ^ LENKEY ^ *g, len, *g);
            return -1;
        }
        i = 8;
    }
    for (; i < len; i++)
        if (b[i] != pat(*g, i))
            goto bad;
    return 0;
bad:
    snprintf(why, cap, "byte %zu of %zu is 0x%02x, expected 0x%02x (id %u)", i, len, b[i],
             pat(*g, i), len < 4 ? MARK_ANON : *g);
    return -1;
}

/* ---- worker side ---- */
/* Self-test of the checks (--inject): a receiver fakes one fault. */
enum { INJ_NONE, INJ_DROP, INJ_DUP, INJ_SWAP, INJ_CORRUPT, INJ_EPIPE, INJ_HANG, NINJ };
static const char *const inj_names[] = { "none", "drop", "dup", "swap", "corrupt", "epipe", "hang" };
static int inject;
static const char *overrides;   /* --set */

static struct {
    int role, slot;
    uint16_t gen;
    struct rng r;
    const struct params *p;
    char name[64];
    uint32_t inc;
    long injected;              /* messages until the fault (--inject), -1 once done */
    uint64_t missed;            /* a lossy receiver's count at its last -ENOBUFS */
    uint8_t buf[BUF_MAX];
} W;

static int stopping(void) { return __atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE); }
static double rel_ms(int64_t t) { return t ? (double)(t - sh->t0) / NS_PER_MS : -1.0; }

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...)
{
    uint32_t i = __atomic_fetch_add(&sh->nviol, 1, __ATOMIC_SEQ_CST);
    if (i >= MAX_VIOL)
        return;
    char text[VIOL_LEN - 100];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    snprintf(sh->viol[i], VIOL_LEN, "%s slot %d inc %u pid %d at %.3f ms: %s",
             W.role == ROLE_TX ? "sender" : "receiver", W.slot, W.inc, (int)getpid(),
             rel_ms(now_ns()), text);
}

/* A blocking call: no longer than its timeout plus slack unless we were stopped. */
struct guard { int64_t t0; uint32_t c0; };

static void guard_begin(struct guard *g, const char *call)
{
    struct slotsh *sl = &sh->slot[W.slot];
    g->c0 = __atomic_load_n(&sl->stopcnt, __ATOMIC_ACQUIRE);
    sl->call = call;
    g->t0 = now_ns();
    sl->call_t0 = g->t0;
}

static int64_t guard_end(struct guard *g, int64_t tmo, const char *call)
{
    struct slotsh *sl = &sh->slot[W.slot];
    int64_t t1 = now_ns();
    uint32_t c1 = __atomic_load_n(&sl->stopcnt, __ATOMIC_ACQUIRE);
    sl->call = NULL;
    if (g->c0 == c1 && !(c1 & 1) && t1 - g->t0 > tmo + SLACK_NS)
        violation("%s blocked %.1f ms with timeout %.1f ms", call,
                  (double)(t1 - g->t0) / NS_PER_MS, (double)tmo / NS_PER_MS);
    return t1;
}

static uint32_t inc_new(int role)
{
    uint32_t i = __atomic_add_fetch(&sh->ninc, 1, __ATOMIC_SEQ_CST);
    if (i >= INC_CAP) {
        __atomic_store_n(&sh->full_inc, 1, __ATOMIC_RELAXED);
        return 0;
    }
    struct increc *in = &sh->inc[i];
    in->role = (uint8_t)role;
    in->slot = (uint16_t)W.slot;
    in->gen = W.gen;
    in->pid = (int32_t)getpid();
    in->index = -1;
    W.inc = i;
    return i;
}

static void idle_until_stop(void)
{
    while (!stopping())
        sleep_ns(NS_PER_MS);
}

static void set_spin_tx(zimp_sender *s)
{
    uint64_t v = W.p->spin_mode == 1 ? 0 : W.p->spin_mode == 2 ? below(&W.r, 20000) : 5000;
    if (W.p->spin_mode && zimp_sender_set_spin(s, v) != 0)
        violation("zimp_sender_set_spin failed");
}

static void set_spin_rx(zimp_receiver *r)
{
    uint64_t v = W.p->spin_mode == 1 ? 0 : W.p->spin_mode == 2 ? below(&W.r, 20000) : 5000;
    if (W.p->spin_mode && zimp_receiver_set_spin(r, v) != 0)
        violation("zimp_receiver_set_spin failed");
}

static size_t pick_len(void)
{
    uint32_t m = W.p->max_len;
    switch (W.p->len_mode) {
    case LEN_MAX:
        return chance(&W.r, 0.8) ? m : below(&W.r, (uint64_t)m + 1);
    case LEN_SMALL:
        return below(&W.r, (uint64_t)(m < 64 ? m : 64) + 1);
    case LEN_MIXED:
        if (chance(&W.r, 0.05))
            return below(&W.r, (uint64_t)(m < 4 ? m : 4) + 1);    /* 0..4 */
        return chance(&W.r, 0.5) ? m : below(&W.r, (uint64_t)m + 1);
    default:
        return below(&W.r, (uint64_t)m + 1);
    }
}

static int64_t pick_tx_tmo(int short_req)
{
    int mode = W.p->tmo_mode;
    if (short_req || mode == TMO_SHORT || (mode == TMO_MIXED && chance(&W.r, 0.3)))
        return chance(&W.r, 0.4) ? 0 : (int64_t)below(&W.r, 2 * NS_PER_MS) + 1;
    return loguni(&W.r, 100 * NS_PER_MS, NS_PER_S);
}

static int64_t pick_rx_tmo(void)
{
    switch (below(&W.r, 8)) {
    case 0: return 0;
    case 1: return (int64_t)below(&W.r, NS_PER_MS) + 1;
    case 2: case 3: return IDLE_MIN_NS + (int64_t)below(&W.r, NS_PER_S);
    default: return loguni(&W.r, NS_PER_MS, 300 * NS_PER_MS);
    }
}

static void pause_for(int64_t max)
{
    if (max > 0)
        sleep_ns((int64_t)below(&W.r, (uint64_t)max) + 1);
}

/* An eviction is logged before the call (rc EV_PENDING) and completed after it,
 * so that one whose evictor was killed in between still counts as possible. */
#define EV_PENDING 1
static struct evrec *ev_begin(uint32_t kind, uint32_t target)
{
    uint32_t i = __atomic_fetch_add(&sh->nev, 1, __ATOMIC_SEQ_CST);
    if (i >= EV_CAP) {
        __atomic_store_n(&sh->full_ev, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    struct evrec *e = &sh->ev[i];
    e->target = target;
    e->rc = EV_PENDING;
    e->by_inc = W.inc;
    e->t_s = now_ns();
    __atomic_store_n(&e->kind, kind, __ATOMIC_RELEASE);
    return e;
}

static void ev_end(struct evrec *e, int rc, int64_t te)
{
    if (!e)
        return;
    e->t_e = te;
    __atomic_store_n(&e->rc, rc, __ATOMIC_RELEASE);
}

/* Records an eviction before the call (t_s) and completes it after. */
static void evict_receivers(zimp_sender *s)
{
    unsigned idx[16];
    struct guard g;
    guard_begin(&g, "zimp_stalled");
    int n = zimp_stalled(s, idx, 16);
    guard_end(&g, 0, "zimp_stalled");
    if (n < 0) {
        if (n != -ECONNRESET)
            violation("zimp_stalled returned %s", errname(n));
        return;
    }
    for (int i = 0; i < n && i < 16; i++) {
        if (idx[i] >= W.p->max_receivers) {
            violation("zimp_stalled named receiver %u of %u", idx[i], W.p->max_receivers);
            continue;
        }
        struct evrec *e = ev_begin(ROLE_RX, idx[i]);
        guard_begin(&g, "zimp_evict");
        int rc = zimp_evict(s, idx[i]);
        ev_end(e, rc, guard_end(&g, 0, "zimp_evict"));
        if (rc != 0 && rc != -ENOENT && rc != -ECONNRESET)
            violation("zimp_evict(%u) returned %s", idx[i], errname(rc));
    }
}

static void evict_senders(zimp_sender *s, int own)
{
    unsigned idx[16];
    struct guard g;
    guard_begin(&g, "zimp_stalled_senders");
    int n = zimp_stalled_senders(s, idx, 16);
    guard_end(&g, 0, "zimp_stalled_senders");
    if (n < 0) {
        if (n != -ECONNRESET)
            violation("zimp_stalled_senders returned %s", errname(n));
        return;
    }
    for (int i = 0; i < n && i < 16; i++) {
        if (idx[i] >= W.p->max_senders || (int)idx[i] == own) {
            violation("zimp_stalled_senders named sender %u (own index %d, table %u)", idx[i],
                      own, W.p->max_senders);
            continue;
        }
        struct evrec *e = ev_begin(ROLE_TX, idx[i]);
        guard_begin(&g, "zimp_evict_sender");
        int rc = zimp_evict_sender(s, idx[i]);
        ev_end(e, rc, guard_end(&g, 0, "zimp_evict_sender"));
        if (rc != 0 && rc != -ENOENT && rc != -ECONNRESET)
            violation("zimp_evict_sender(%u) returned %s", idx[i], errname(rc));
    }
}

/* Records an incarnation's open (ended at t): true if it succeeded, else logs and pauses. */
static bool opened(struct increc *in, int rc, int64_t t, const char *call)
{
    if (rc) {
        in->err = rc;
        in->end = END_ERROR;
        violation("%s returned %s (%s)", call, errname(rc), zimp_last_detail());
        sleep_ns(5 * NS_PER_MS);
        return false;
    }
    in->t_open_end = t;
    return true;
}

/* Records the record index an incarnation was given and checks it against the table. */
static void check_index(struct increc *in, int idx, uint32_t table, const char *call)
{
    in->index = idx;
    if (idx < 0 || (uint32_t)idx >= table)
        violation("%s returned %d (table %u)", call, idx, table);
}

/* One sender incarnation: send until stop or until it should close. */
static void tx_session(zimp_sender *s, struct increc *in, int own)
{
    struct slotsh *sl = &sh->slot[W.slot];
    uint32_t seq = 0;
    int short_tries = 0;
    while (!stopping()) {
        int short_req = (int)__atomic_load_n(&sl->req_tmo_close, __ATOMIC_RELAXED);
        int64_t tmo = pick_tx_tmo(short_req);
        size_t len = pick_len();
        int zc = chance(&W.r, W.p->p_zc_tx);
        uint32_t gi = __atomic_fetch_add(&sh->nmsg, 1, __ATOMIC_SEQ_CST);
        if (gi >= MSG_CAP) {
            __atomic_store_n(&sh->full_msg, 1, __ATOMIC_RELAXED);
            idle_until_stop();
            return;
        }
        struct msgrec *m = &msgs[gi];
        m->inc = W.inc;
        m->seq = seq++;
        m->len = (uint32_t)len;
        m->zc = (uint8_t)zc;
        int rc;
        const char *call;
        struct guard g;
        if (zc) {
            void *buf = NULL;
            m->t_claim = now_ns();
            __atomic_store_n(&m->state, ST_ATTEMPT, __ATOMIC_RELEASE);
            guard_begin(&g, "zimp_loan");
            rc = zimp_loan(s, len, &buf, tmo);
            guard_end(&g, tmo, "zimp_loan");
            call = "zimp_loan";
            if (rc == 0) {
                if (!buf && len)
                    violation("zimp_loan returned 0 and a NULL buffer for %zu bytes", len);
                __atomic_store_n(&sl->phase, PH_LOAN, __ATOMIC_RELAXED);
                if (chance(&W.r, W.p->p_hold))
                    pause_for(W.p->hold_max);
                if (buf)
                    fill(buf, len, gi);
                m->fail_publish = 1;
                m->t_pub = now_ns();
                guard_begin(&g, "zimp_publish");
                rc = zimp_publish(s, buf, len);
                guard_end(&g, 0, "zimp_publish");
                __atomic_store_n(&sl->phase, PH_IDLE, __ATOMIC_RELAXED);
                call = "zimp_publish";
            }
        } else {
            fill(W.buf, len, gi);
            m->t_claim = m->t_pub = now_ns();
            __atomic_store_n(&m->state, ST_ATTEMPT, __ATOMIC_RELEASE);
            guard_begin(&g, "zimp_send");
            rc = zimp_send(s, W.buf, len, tmo);
            guard_end(&g, tmo, "zimp_send");
            call = "zimp_send";
        }
        m->t_end = now_ns();
        m->rc = rc;
        __atomic_store_n(&m->state, rc == 0 ? ST_OK : ST_FAIL, __ATOMIC_RELEASE);
        if (rc == 0) {
            if (short_req && ++short_tries > 50) {
                __atomic_store_n(&sl->req_tmo_close, 0, __ATOMIC_RELAXED);
                in->end = END_TMO_CLOSE;
                return;
            }
            pause_for(W.p->tx_pause);
            continue;
        }
        int is_publish = call[5] == 'p';
        if (!is_publish && (rc == -ETIMEDOUT || rc == -EAGAIN)) {
            if (rc == -EAGAIN && tmo != 0)
                violation("%s returned -EAGAIN with timeout %.3f ms", call, (double)tmo / NS_PER_MS);
            if (rc == -ETIMEDOUT && tmo == 0)
                violation("%s returned -ETIMEDOUT with timeout 0 (contract: -EAGAIN)", call);
            int req = (int)__atomic_exchange_n(&sl->req_evict, 0, __ATOMIC_RELAXED);
            if (req || chance(&W.r, W.p->p_evict_rx))
                evict_receivers(s);
            if (req || chance(&W.r, W.p->p_evict_tx))
                evict_senders(s, own);
            if (short_req) {
                __atomic_store_n(&sl->req_tmo_close, 0, __ATOMIC_RELAXED);
                in->end = END_TMO_CLOSE;
                return;
            }
            continue;
        }
        if (!is_publish && rc == -ENOMEM && W.p->hog) {
            /* the hog holds the heap and this channel holds nothing to wait for */
            sleep_ns(100 * NS_PER_US);
            continue;
        }
        if (rc == -ECONNRESET) {
            in->t_reset_s = is_publish ? m->t_pub : m->t_claim;
            in->t_reset_e = m->t_end;
            in->end = END_RESET;
            return;
        }
        violation("%s(len %zu, timeout %.3f ms) returned %s", call, len,
                  (double)tmo / NS_PER_MS, errname(rc));
        in->err = rc;
        in->end = END_ERROR;
        return;
    }
}

static void tx_main(void)
{
    struct slotsh *sl = &sh->slot[W.slot];
    while (!stopping()) {
        uint32_t ii = inc_new(ROLE_TX);
        if (!ii) {
            idle_until_stop();
            return;
        }
        struct increc *in = &sh->inc[ii];
        zimp_sender *s = NULL;
        struct guard g;
        in->t_open_start = now_ns();
        guard_begin(&g, "zimp_sender_open");
        int rc = zimp_sender_open(W.name, &s);
        if (!opened(in, rc, guard_end(&g, 0, "zimp_sender_open"), "zimp_sender_open"))
            continue;
        int idx = zimp_sender_index(s);
        check_index(in, idx, W.p->max_senders, "zimp_sender_index");
        sl->cur_inc = ii;
        set_spin_tx(s);
        tx_session(s, in, idx);
        in->t_close = now_ns();
        if (in->end == END_NONE)
            in->end = END_CLOSED;
        guard_begin(&g, "zimp_sender_close");
        zimp_sender_close(s);
        guard_end(&g, 0, "zimp_sender_close");
        if (!stopping())
            pause_for(2 * NS_PER_MS);
    }
}

static void rx_log(uint32_t g, uint32_t len, int64_t t0, int64_t t1)
{
    uint32_t i = __atomic_fetch_add(&sh->nrx, 1, __ATOMIC_SEQ_CST);
    if (i >= RX_CAP) {
        __atomic_store_n(&sh->full_rx, 1, __ATOMIC_RELAXED);
        return;
    }
    struct rxent *e = &rxp[i];
    int64_t d = (t1 - t0 + NS_PER_US - 1) / NS_PER_US;
    e->g = g;
    e->len = len;
    e->dur_us = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
    e->t = t0;
    __atomic_store_n(&e->inc, W.inc, __ATOMIC_RELEASE);
}

/* Checks and logs a received message (--inject fakes one fault here). */
static void rx_got(void *data, size_t len, int64_t t0, int64_t t1)
{
    static struct { uint32_t g, len; int64_t t0, t1; } held;
    uint32_t g;
    char why[160];
    int fault = inject && W.injected >= 0 && W.injected-- == 0;
    if (fault && inject == INJ_CORRUPT && len)
        ((uint8_t *)data)[len - 1] ^= 0x40;
    if (len > W.p->max_len)
        violation("received %zu bytes, longest sent %u", len, W.p->max_len);
    if (verify(data, len, &g, why, sizeof why)) {
        violation("corrupt message: %s", why);
        return;
    }
    if (fault) {
        W.injected = -1;
        switch (inject) {
        case INJ_DROP: return;
        case INJ_DUP: rx_log(g, (uint32_t)len, t0, t1); break;
        case INJ_EPIPE: rx_log(MARK_EPIPE, 0, t0, t1); break;
        case INJ_HANG: for (;;) sleep_ns(NS_PER_S);
        case INJ_SWAP:
            held.g = g, held.len = (uint32_t)len, held.t0 = t0, held.t1 = t1;
            W.injected = -2;
            return;
        }
    }
    rx_log(g, (uint32_t)len, t0, t1);
    if (W.injected == -2) {
        rx_log(held.g, held.len, held.t0, held.t1);
        W.injected = -1;
    }
}

/* -ENOBUFS of a lossy receiver: logs how many positions it lost since the last one. */
static void rx_gap(zimp_receiver *r, const char *call)
{
    uint64_t missed = 0;
    int rc = zimp_receiver_missed(r, &missed);
    if (rc != 0 || missed <= W.missed) {
        violation("%s returned -ENOBUFS, but zimp_receiver_missed gives %s, %llu (%llu before)", call,
                  errname(rc), (unsigned long long)missed, (unsigned long long)W.missed);
        return;
    }
    int64_t t = now_ns();
    rx_log(MARK_GAP, (uint32_t)(missed - W.missed < UINT32_MAX ? missed - W.missed : UINT32_MAX), t, t);
    W.missed = missed;
}

/* Returns 1 when the process should exit (the channel ended), else 0. */
static int rx_session(zimp_receiver *r, struct increc *in, int ep)
{
    struct slotsh *sl = &sh->slot[W.slot];
    long left = in->churner ? 1 + (long)below(&W.r, 60) : -1;
    struct epoll_event evs[4];
    for (;;) {
        if (!stopping()) {
            if (__atomic_exchange_n(&sl->req_close, 0, __ATOMIC_RELAXED) || left == 0) {
                in->end = END_CLOSED;
                return 0;
            }
        }
        int zc = chance(&W.r, W.p->p_zc_rx);
        int64_t tmo = ep >= 0 ? 0 : pick_rx_tmo();
        struct guard g;
        ssize_t n;
        size_t cap = BUF_MAX;
        if (zc) {
            const void *data = NULL;
            size_t len = 0;
            guard_begin(&g, "zimp_read");
            int rc = zimp_read(r, &data, &len, tmo);
            int64_t t1 = guard_end(&g, tmo, "zimp_read");
            if (rc == 0) {
                __atomic_store_n(&sl->phase, PH_BORROW, __ATOMIC_RELAXED);
                if (chance(&W.r, W.p->p_hold))
                    pause_for(W.p->hold_max);
                uint32_t gid;
                char why[160];
                int bad = len > W.p->max_len ? 2 : (!data && len) ? 3
                        : verify(data, len, &gid, why, sizeof why) ? 1 : 0;
                struct guard g2;
                guard_begin(&g2, "zimp_release");
                int rc2 = zimp_release(r);
                int64_t t2 = guard_end(&g2, 0, "zimp_release");
                __atomic_store_n(&sl->phase, PH_IDLE, __ATOMIC_RELAXED);
                if (rc2 == -ECONNRESET) {
                    /* evicted while borrowing: the data may have been overwritten */
                    in->t_reset_s = g2.t0;
                    in->t_reset_e = t2;
                    in->end = END_RESET;
                    return stopping();
                }
                if (rc2 == -ENOBUFS && in->lossy) {
                    /* written over while we read it: what we read is void, torn or not */
                    rx_gap(r, "zimp_release");
                    continue;
                }
                if (rc2 != 0)
                    violation("zimp_release returned %s", errname(rc2));
                if (bad == 1)
                    violation("corrupt borrowed message: %s", why);
                else if (bad)
                    violation("zimp_read gave %zu bytes at %p (slot size %u)", len, data,
                              W.p->slot_size);
                else
                    rx_log(gid, (uint32_t)len, g.t0, t1);
                if (left > 0)
                    left--;
                pause_for(W.p->rx_pause);
                continue;
            }
            n = rc;
        } else {
            if (chance(&W.r, W.p->p_small_cap))
                cap = below(&W.r, (uint64_t)W.p->max_len + 1);
            guard_begin(&g, "zimp_recv");
            n = zimp_recv(r, W.buf, cap, tmo);
            int64_t t1 = guard_end(&g, tmo, "zimp_recv");
            if (n >= 0) {
                if ((size_t)n > cap)
                    violation("zimp_recv returned %zd bytes into a buffer of %zu", n, cap);
                else
                    rx_got(W.buf, (size_t)n, g.t0, t1);
                if (left > 0)
                    left--;
                pause_for(W.p->rx_pause);
                continue;
            }
        }
        int64_t t1 = now_ns();
        const char *call = zc ? "zimp_read" : "zimp_recv";
        if (n == -ENOBUFS && in->lossy) {
            rx_gap(r, call);
            continue;
        }
        switch (n) {
        case -EAGAIN:
        case -ETIMEDOUT:
            if (n == -EAGAIN && tmo != 0)
                violation("%s returned -EAGAIN with timeout %.3f ms", call, (double)tmo / NS_PER_MS);
            if (n == -ETIMEDOUT && tmo == 0)
                violation("%s returned -ETIMEDOUT with timeout 0 (contract: -EAGAIN)", call);
            if (ep >= 0) {
                int64_t ws = now_ns();
                int k = epoll_wait(ep, evs, 4, EPOLL_WAIT_MS);
                int64_t we = now_ns();
                if (k < 0 && errno != EINTR)
                    violation("epoll_wait: %s", strerror(errno));
                if (k == 0)
                    rx_log(MARK_IDLE, 0, ws, we);
            } else if (tmo >= IDLE_MIN_NS) {
                rx_log(MARK_IDLE, 0, g.t0, t1);
            }
            continue;
        case -EPIPE:
            rx_log(MARK_EPIPE, 0, g.t0, t1);
            if (__atomic_load_n(&sh->senders_gone, __ATOMIC_ACQUIRE)) {
                in->end = END_EPIPE;
                return 1;
            }
            sleep_ns((int64_t)below(&W.r, 3 * NS_PER_MS) + 200 * NS_PER_US);
            continue;
        case -ECONNRESET:
            in->t_reset_s = g.t0;
            in->t_reset_e = t1;
            in->end = END_RESET;
            return stopping();
        case -EMSGSIZE:
            if (cap < W.p->max_len)
                continue;   /* the message stays queued; the next call gets it */
            /* fall through */
        default:
            violation("%s(cap %zu, timeout %.3f ms) returned %s (%s)", call, cap,
                      (double)tmo / NS_PER_MS, errname(n), zimp_last_detail());
            in->t_reset_s = g.t0;      /* the failing call */
            in->t_reset_e = t1;
            in->err = (int32_t)n;
            in->end = END_ERROR;
            return stopping();
        }
    }
}

static void rx_main(void)
{
    struct slotsh *sl = &sh->slot[W.slot];
    while (!stopping()) {
        uint32_t ii = inc_new(ROLE_RX);
        if (!ii) {
            idle_until_stop();
            return;
        }
        struct increc *in = &sh->inc[ii];
        in->epoll = (uint8_t)chance(&W.r, W.p->p_epoll);
        in->churner = (uint8_t)chance(&W.r, W.p->p_churner);
        in->lossy = (uint8_t)chance(&W.r, W.p->p_lossy);
        W.missed = 0;
        zimp_receiver *r = NULL;
        struct guard g;
        in->t_open_start = now_ns();
        const char *call = in->lossy ? "zimp_receiver_open_lossy" : "zimp_receiver_open";
        guard_begin(&g, call);
        int rc = in->lossy ? zimp_receiver_open_lossy(W.name, &r) : zimp_receiver_open(W.name, &r);
        int64_t t = guard_end(&g, 0, call);
        if (in->lossy && ((rc == -ENOTSUP) != !!(W.p->flags & ZIMP_ZERO_ON_RELEASE)))
            violation("zimp_receiver_open_lossy returned %s %s ZIMP_ZERO_ON_RELEASE (contract: -ENOTSUP "
                      "exactly there)", errname(rc), (W.p->flags & ZIMP_ZERO_ON_RELEASE) ? "with" : "without");
        if (in->lossy && rc == -ENOTSUP) {
            in->lossy = 0;              /* refused, as it must be: join lossless */
            in->t_open_start = now_ns();
            call = "zimp_receiver_open";
            guard_begin(&g, call);
            rc = zimp_receiver_open(W.name, &r);
            t = guard_end(&g, 0, call);
        }
        if (!opened(in, rc, t, call))
            continue;
        int idx = zimp_receiver_index(r);
        check_index(in, idx, W.p->max_receivers, "zimp_receiver_index");
        sl->cur_inc = ii;
        set_spin_rx(r);
        int ep = -1;
        if (in->epoll) {
            int fd = zimp_receiver_fd(r);
            if (fd < 0) {
                violation("zimp_receiver_fd returned %s", errname(fd));
                in->epoll = 0;
            } else {
                ep = epoll_create1(EPOLL_CLOEXEC);
                struct epoll_event ev = { .events = EPOLLIN };
                if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
                    violation("harness: epoll setup failed: %s", strerror(errno));
                    _exit(2);
                }
            }
        }
        int fin = rx_session(r, in, ep);
        if (ep >= 0)
            close(ep);
        in->t_close = now_ns();
        guard_begin(&g, "zimp_receiver_close");
        zimp_receiver_close(r);
        guard_end(&g, 0, "zimp_receiver_close");
        if (fin)
            return;
        if (!stopping())
            pause_for(3 * NS_PER_MS);
    }
}

static void worker(int role, int slot, uint16_t gen, const struct params *p, const char *name)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    W.role = role;
    W.slot = slot;
    W.gen = gen;
    W.p = p;
    W.r.s = mix64(p->seed ^ ((uint64_t)role << 48) ^ ((uint64_t)slot << 40) ^ ((uint64_t)gen << 8));
    snprintf(W.name, sizeof W.name, "%s", name);
    W.injected = role == ROLE_RX && slot == p->ns && gen == 1 ? 50 + (long)below(&W.r, 500) : -1;
    if (role == ROLE_TX)
        tx_main();
    else
        rx_main();
    _exit(0);
}

/* ---- driver ---- */
struct dslot {
    int role;
    pid_t pid;                  /* 0: none running */
    int killed;                 /* the driver sent SIGKILL to pid */
    int stopped;
    int64_t stop_t0, stop_until;
    int64_t respawn_at;         /* 0: none pending */
    uint16_t gen;
};

struct kill_rec { pid_t pid; int64_t t; };
struct stop_rec { int64_t t0, t1; };

struct trial {
    const struct params *p;
    struct rng r;
    char name[64];
    int nslots;
    struct dslot s[MAX_SLOTS];
    struct kill_rec *kills;
    size_t nkills, capkills;
    struct stop_rec *stops;
    size_t nstops, capstops;
    long n_ev[NEV];
    int64_t t_gone;             /* senders_gone set */
    /* violations found by the driver */
    char *dv;
    size_t dvlen, dvcap;
    int ndv;
};

static void dviol(struct trial *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dviol(struct trial *t, const char *fmt, ...)
{
    t->ndv++;
    if (t->ndv > 40)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    if (t->dvlen + (size_t)n + 8 > t->dvcap) {
        t->dvcap = (t->dvcap + (size_t)n + 8) * 2;
        t->dv = realloc(t->dv, t->dvcap);
    }
    memcpy(t->dv + t->dvlen, "  - ", 4);
    memcpy(t->dv + t->dvlen + 4, line, (size_t)n);
    t->dvlen += 4 + (size_t)n;
    t->dv[t->dvlen++] = '\n';
    t->dv[t->dvlen] = 0;
}

/*
 * The heap hog of a heap trial: a member of the channel's heap, outside the
 * channel, that allocates blocks (writing 0xee over each) until the heap is
 * full, which makes it take back what the channel holds for messages every
 * receiver released (H5); holds them a moment, gives them back, again. A
 * block taken back too early would be overwritten under a receiver that
 * checks it. Now and then it dies holding them (the heap's reaper frees
 * them). Exit 0, or 3 after an error no allocation may return.
 */
static void hog_main(const char *heap, const struct params *p, uint64_t seed)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct rng r = { seed };
    zimp_heap *h;
    if (zimp_heap_open(heap, &h) != 0)
        _exit(0);                       /* every record taken: no hog this time */
    size_t cap = 2 * ((size_t)p->slots + 4 * (size_t)p->ns + 16) + 8, n = 0;
    struct zimp_ref *refs = calloc(cap, sizeof *refs);
    while (refs && !stopping()) {
        void *buf;
        size_t len = p->max_len / 2 + 1 + (size_t)below(&r, p->max_len / 2);
        int rc = n < cap ? zimp_heap_alloc(h, len, &buf, &refs[n]) : -ENOMEM;
        if (rc == 0) {
            memset(buf, 0xee, len);
            n++;
            continue;
        }
        if (rc != -ENOMEM) {
            fprintf(stderr, "hog: zimp_heap_alloc(%zu) returned %s (%s)\n", len, errname(rc), zimp_last_detail());
            _exit(3);
        }
        if (chance(&r, 0.03))
            raise(SIGKILL);
        sleep_ns((int64_t)below(&r, 2 * NS_PER_MS));
        while (n > 0)
            if ((rc = zimp_heap_release(h, &refs[--n])) != 0) {
                fprintf(stderr, "hog: zimp_heap_release returned %s (%s)\n", errname(rc), zimp_last_detail());
                _exit(3);
            }
        sleep_ns((int64_t)below(&r, NS_PER_MS));
    }
    zimp_heap_close(h);
    _exit(0);
}

static pid_t spawn_hog(struct trial *t, const char *heap)
{
    fflush(stdout);
    fflush(stderr);
    uint64_t seed = rnd(&t->r) | 1;
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0)
        hog_main(heap, t->p, seed);
    return pid;
}

/* Whether the hog exited (0 in *pid then); a violation if it found an error. */
static void hog_check(struct trial *t, pid_t *pid, bool wait)
{
    int st;
    if (*pid <= 0 || waitpid(*pid, &st, wait ? 0 : WNOHANG) != *pid)
        return;
    *pid = 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
        dviol(t, "the heap hog exited with %d (its error is above)", WEXITSTATUS(st));
}

static void spawn(struct trial *t, int k)
{
    struct dslot *d = &t->s[k];
    fflush(stdout);
    fflush(stderr);
    d->gen++;
    __atomic_store_n(&sh->slot[k].phase, PH_IDLE, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->slot[k].req_close, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->slot[k].req_tmo_close, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->slot[k].req_evict, 0, __ATOMIC_RELAXED);
    sh->slot[k].call = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0)
        worker(d->role, k, d->gen, t->p, t->name);
    d->pid = pid;
    d->killed = 0;
    d->stopped = 0;
    d->respawn_at = 0;
}

static void resume(struct trial *t, int k)
{
    struct dslot *d = &t->s[k];
    if (!d->stopped)
        return;
    if (t->nstops == t->capstops) {
        t->capstops = t->capstops ? 2 * t->capstops : 256;
        t->stops = realloc(t->stops, t->capstops * sizeof *t->stops);
    }
    d->stopped = 0;
    if (d->pid)
        kill(d->pid, SIGCONT);
    __atomic_add_fetch(&sh->slot[k].stopcnt, 1, __ATOMIC_SEQ_CST);   /* even: running */
    t->stops[t->nstops++] = (struct stop_rec){ d->stop_t0, now_ns() };
}

static void kill_slot(struct trial *t, int k)
{
    struct dslot *d = &t->s[k];
    if (t->nkills == t->capkills) {
        t->capkills = t->capkills ? 2 * t->capkills : 256;
        t->kills = realloc(t->kills, t->capkills * sizeof *t->kills);
    }
    t->kills[t->nkills++] = (struct kill_rec){ d->pid, now_ns() };
    d->killed = 1;
    kill(d->pid, SIGKILL);
    if (d->stopped)
        resume(t, k);      /* the stop ends with the process */
}

static const char *sig_text(int sig)
{
    static char b[32];
    const char *s = sigabbrev_np(sig);
    snprintf(b, sizeof b, "SIG%s", s ? s : "?");
    return b;
}

/* Reaps finished workers, judges how they ended, and schedules replacements. */
static void reap(struct trial *t, int64_t now, int respawn)
{
    for (;;) {
        int st;
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w <= 0)
            return;
        int k;
        for (k = 0; k < t->nslots; k++)
            if (t->s[k].pid == w)
                break;
        if (k == t->nslots)
            continue;
        struct dslot *d = &t->s[k];
        const char *role = d->role == ROLE_TX ? "sender" : "receiver";
        if (WIFSIGNALED(st)) {
            if (!(d->killed && WTERMSIG(st) == SIGKILL))
                dviol(t, "%s slot %d pid %d died of %s, which the driver did not send", role, k,
                      (int)w, sig_text(WTERMSIG(st)));
        } else if (WIFEXITED(st)) {
            if (WEXITSTATUS(st) != 0)
                dviol(t, "%s slot %d pid %d exited with status %d", role, k, (int)w,
                      WEXITSTATUS(st));
            else if (!stopping())
                dviol(t, "%s slot %d pid %d exited before the trial ended", role, k, (int)w);
        }
        if (d->stopped)
            resume(t, k);
        d->pid = 0;
        if (respawn && !stopping())
            d->respawn_at = now + (int64_t)below(&t->r, 20 * NS_PER_MS);
    }
}

static int pick_slot(struct trial *t, int role, int prefer_phase)
{
    int cand[MAX_SLOTS], n = 0, pref[MAX_SLOTS], np = 0;
    for (int k = 0; k < t->nslots; k++) {
        if (!t->s[k].pid || t->s[k].killed || (role && t->s[k].role != role))
            continue;
        cand[n++] = k;
        uint32_t ph = __atomic_load_n(&sh->slot[k].phase, __ATOMIC_RELAXED);
        if (prefer_phase > 0 ? ph == (uint32_t)prefer_phase : prefer_phase < 0 && ph != PH_IDLE)
            pref[np++] = k;
    }
    if (np && chance(&t->r, 0.6))
        return pref[below(&t->r, (uint64_t)np)];
    return n ? cand[below(&t->r, (uint64_t)n)] : -1;
}

static void do_event(struct trial *t, int64_t now)
{
    const struct params *p = t->p;
    double sum = 0, x;
    for (int k = 0; k < NEV; k++)
        sum += p->w[k];
    if (sum <= 0)
        return;
    x = unit(&t->r) * sum;
    int ev = 0;
    for (; ev < NEV - 1; ev++) {
        if (x < p->w[ev])
            break;
        x -= p->w[ev];
    }
    int k;
    switch (ev) {
    case EV_KILL_TX:
    case EV_KILL_RX:
        k = pick_slot(t, ev == EV_KILL_TX ? ROLE_TX : ROLE_RX, ev == EV_KILL_TX ? PH_LOAN : PH_BORROW);
        if (k < 0)
            return;
        kill_slot(t, k);
        break;
    case EV_STOP:
        k = pick_slot(t, 0, -1);       /* inside a loan or a borrow, mostly */
        if (k < 0 || t->s[k].stopped)
            return;
        __atomic_add_fetch(&sh->slot[k].stopcnt, 1, __ATOMIC_SEQ_CST);   /* odd: stopped */
        t->s[k].stopped = 1;
        t->s[k].stop_t0 = now_ns();
        t->s[k].stop_until = now + loguni(&t->r, NS_PER_MS, 500 * NS_PER_MS);
        kill(t->s[k].pid, SIGSTOP);
        break;
    case EV_TMO_CLOSE:
    case EV_EVICT:
        k = pick_slot(t, ROLE_TX, 0);
        if (k < 0)
            return;
        __atomic_store_n(ev == EV_EVICT ? &sh->slot[k].req_evict : &sh->slot[k].req_tmo_close, 1,
                         __ATOMIC_RELAXED);
        break;
    case EV_RX_CLOSE:
        k = pick_slot(t, ROLE_RX, 0);
        if (k < 0)
            return;
        __atomic_store_n(&sh->slot[k].req_close, 1, __ATOMIC_RELAXED);
        break;
    }
    t->n_ev[ev]++;
}

static int64_t next_gap(struct trial *t)
{
    double u = unit(&t->r);
    if (u < 1e-12)
        u = 1e-12;
    return (int64_t)(-log(u) / t->p->rate * (double)NS_PER_S);
}

/* Waits until no worker of `role` runs, or the hang bound; then kills the rest. */
static void wait_role(struct trial *t, int role, const char *what)
{
    int64_t end = now_ns() + HANG_NS;
    for (;;) {
        int64_t now = now_ns();
        reap(t, now, 0);
        int left = 0;
        for (int k = 0; k < t->nslots; k++)
            if (t->s[k].role == role && t->s[k].pid)
                left++;
        if (!left)
            return;
        if (now > end) {
            for (int k = 0; k < t->nslots; k++) {
                struct dslot *d = &t->s[k];
                if (d->role != role || !d->pid)
                    continue;
                struct slotsh *sl = &sh->slot[k];
                const char *call = sl->call;
                dviol(t, "hang: %s slot %d pid %d (inc %u) did not finish within %.1f s %s; in %s for %.1f ms",
                      role == ROLE_TX ? "sender" : "receiver", k, (int)d->pid, sl->cur_inc,
                      (double)HANG_NS / NS_PER_S, what, call ? call : "(no zimp call)",
                      call ? (double)(now - sl->call_t0) / NS_PER_MS : 0.0);
                d->killed = 1;
                kill(d->pid, SIGKILL);
            }
            end = now + 5 * NS_PER_S;
        }
        sleep_ns(500 * NS_PER_US);
    }
}

/* ---- checks ---- */
/* When the driver killed process pid, or 0 (pids are not reused within a trial). */
static int64_t kill_time(const struct trial *t, int32_t pid)
{
    for (size_t i = 0; i < t->nkills; i++)
        if (t->kills[i].pid == pid)
            return t->kills[i].t;
    return 0;
}

static int stopped_between(const struct trial *t, int64_t a, int64_t b)
{
    for (size_t i = 0; i < t->nstops; i++)
        if (t->stops[i].t0 <= b && t->stops[i].t1 >= a)
            return 1;
    for (int k = 0; k < t->nslots; k++)
        if (t->s[k].stopped && t->s[k].stop_t0 <= b)
            return 1;
    return 0;
}

struct ival { int64_t a, b; };

struct chk {
    struct trial *t;
    uint32_t nmsg, ninc, nrx, nev;
    int64_t t0;
    uint32_t *rx_start, *rx_idx;    /* receive entries grouped by incarnation */
    int64_t *evicted_at;            /* definite eviction (end of the evict call), per inc */
    struct ival *tx_member;         /* definite sender membership, per inc */
    uint32_t *ok_by_pub;            /* OK messages sorted by t_pub */
    uint32_t nok;
    uint32_t *mark;                 /* per message: last receiver inc that got it */
    uint32_t *last_seq_inc, *last_seq; /* per sender inc */
    uint8_t *recv_any;
};

static double rt(const struct chk *c, int64_t t) { return t ? (double)(t - c->t0) / NS_PER_MS : -1.0; }

static const char *inc_desc(const struct chk *c, uint32_t i, char *b, size_t cap)
{
    const struct increc *in = &sh->inc[i];
    snprintf(b, cap, "%s inc %u (slot %u gen %u pid %d index %d%s%s, open %.3f..%.3f ms, end %s at %.3f ms)",
             in->role == ROLE_TX ? "sender" : "receiver", i, in->slot, in->gen, in->pid, in->index,
             in->role == ROLE_RX ? (in->epoll ? ", epoll" : ", futex") : "", in->lossy ? ", lossy" : "",
             rt(c, in->t_open_start),
             rt(c, in->t_open_end), end_names[in->end < 6 ? in->end : 0], rt(c, in->t_close));
    return b;
}

static const char *msg_desc(const struct chk *c, uint32_t g, char *b, size_t cap)
{
    const struct msgrec *m = &msgs[g];
    snprintf(b, cap, "message %u (sender inc %u seq %u len %u %s, %s, claim %.3f publish %.3f..%.3f ms)",
             g, m->inc, m->seq, m->len, m->zc ? "loan" : "send",
             m->state == ST_OK ? "ok" : m->state == ST_FAIL ? errname(m->rc) : "unfinished",
             rt(c, m->t_claim), rt(c, m->t_pub), rt(c, m->t_end));
    return b;
}

static int cmp_pub(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return msgs[a].t_pub < msgs[b].t_pub ? -1 : msgs[a].t_pub > msgs[b].t_pub;
}

/* -ECONNRESET is allowed only when an eviction of the index overlapped the membership. */
static int evict_overlaps(const struct chk *c, uint32_t kind, const struct increc *in, int64_t until)
{
    for (uint32_t e = 0; e < c->nev; e++) {
        const struct evrec *ev = &sh->ev[e];
        int64_t te = ev->rc == EV_PENDING ? INT64_MAX : ev->t_e;
        if (ev->kind == kind && (ev->rc == 0 || ev->rc == EV_PENDING) &&
            (int32_t)ev->target == in->index && ev->t_s < until && te > in->t_open_start)
            return 1;
    }
    return 0;
}

static void check_epipe(struct chk *c, uint32_t i, int64_t cs, int64_t ce)
{
    struct trial *t = c->t;
    char b1[300], b2[300];
    int any = 0;
    struct ival *iv = malloc((c->ninc + 1) * sizeof *iv);
    uint32_t *who = malloc((c->ninc + 1) * sizeof *who);
    size_t n = 0;
    for (uint32_t s = 1; s <= c->ninc; s++) {
        const struct increc *in = &sh->inc[s];
        if (in->role != ROLE_TX)
            continue;
        if (in->t_open_start && in->t_open_start < ce)
            any = 1;
        const struct ival *m = &c->tx_member[s];
        if (m->a && m->a < m->b && m->b > cs && m->a < ce) {
            who[n] = s;
            iv[n++] = *m;
        }
    }
    if (!any) {
        dviol(t, "%s: -EPIPE at %.3f..%.3f ms, but no sender had opened the channel yet",
              inc_desc(c, i, b1, sizeof b1), rt(c, cs), rt(c, ce));
    } else {
        /* covered: at every instant of the call some sender was surely a member */
        int64_t cover = cs;
        for (int progress = 1; progress && cover < ce;) {
            progress = 0;
            for (size_t k = 0; k < n; k++)
                if (iv[k].a <= cover && iv[k].b > cover) {
                    cover = iv[k].b;
                    progress = 1;
                }
        }
        if (cover >= ce) {
            size_t k;
            for (k = 0; k < n && !(iv[k].a <= cs && iv[k].b >= ce); k++)
                ;
            dviol(t, "%s: -EPIPE at %.3f..%.3f ms while a sender was a member all along%s%s",
                  inc_desc(c, i, b1, sizeof b1), rt(c, cs), rt(c, ce), k < n ? ", e.g. " : "",
                  k < n ? inc_desc(c, who[k], b2, sizeof b2) : "");
        }
    }
    free(iv);
    free(who);
}

static void check_receiver(struct chk *c, uint32_t i)
{
    struct trial *t = c->t;
    const struct increc *in = &sh->inc[i];
    char b1[300], b2[300], b3[300];
    uint32_t a = c->rx_start[i], z = c->rx_start[i + 1];
    int64_t ev_at = c->evicted_at[i];
    int64_t B = INT64_MIN;      /* latest claim start among messages received */
    uint32_t Bg = 0;
    uint32_t anon_got = 0;
    uint64_t lost = 0;          /* positions a lossy receiver was told it lost */
    int reported = 0;

    for (uint32_t k = a; k < z; k++) {
        const struct rxent *e = &rxp[c->rx_idx[k]];
        int64_t ce = e->t + (int64_t)e->dur_us * NS_PER_US;
        if (e->g == MARK_GAP) {
            if (!in->lossy)
                dviol(t, "%s: -ENOBUFS, but it is not lossy", inc_desc(c, i, b1, sizeof b1));
            lost += e->len;
            continue;
        }
        if (e->g == MARK_IDLE) {
            /* a wait that timed out: was something readable long before it ended? */
            if (k + 1 >= z)
                continue;
            const struct rxent *nx = &rxp[c->rx_idx[k + 1]];
            int64_t ready = 0;
            const char *what = NULL;
            if (nx->g < c->nmsg && msgs[nx->g].state == ST_OK) {
                ready = msgs[nx->g].t_end;
                what = "message";
            } else if (nx->g == MARK_EPIPE && t->t_gone) {
                ready = t->t_gone;
                what = "end of the channel (-EPIPE)";
            }
            if (ready && ready < ce - WAKE_MARGIN && !stopped_between(t, ready - 20 * NS_PER_MS, ce)) {
                if (nx->g < c->nmsg)
                    msg_desc(c, nx->g, b2, sizeof b2);
                else
                    snprintf(b2, sizeof b2, "all senders gone at %.3f ms", rt(c, t->t_gone));
                dviol(t, "%s: lost wakeup: a %s wait %.3f..%.3f ms timed out although the %s was ready at %.3f ms and nothing was stopped: %s",
                      inc_desc(c, i, b1, sizeof b1), in->epoll ? "epoll" : "blocking receive",
                      rt(c, e->t), rt(c, ce), what, rt(c, ready), b2);
            }
            continue;
        }
        if (e->g == MARK_EPIPE) {
            check_epipe(c, i, e->t, ce);
            if (ev_at && e->t > ev_at)
                dviol(t, "%s: -EPIPE at %.3f ms after it was evicted at %.3f ms (contract: -ECONNRESET)",
                      inc_desc(c, i, b1, sizeof b1), rt(c, e->t), rt(c, ev_at));
            continue;
        }
        if (ev_at && e->t > ev_at && reported++ < 3)
            dviol(t, "%s: received a message in a call at %.3f ms after it was evicted at %.3f ms",
                  inc_desc(c, i, b1, sizeof b1), rt(c, e->t), rt(c, ev_at));
        if (e->g == MARK_ANON) {
            if (e->len >= 4)
                dviol(t, "%s: anonymous message of %u bytes", inc_desc(c, i, b1, sizeof b1), e->len);
            anon_got++;
            continue;
        }
        uint32_t g = e->g;
        if (g >= c->nmsg || msgs[g].state == ST_NONE) {
            dviol(t, "%s: received message id %u that no sender sent", inc_desc(c, i, b1, sizeof b1), g);
            continue;
        }
        const struct msgrec *m = &msgs[g];
        if (m->len != e->len)
            dviol(t, "%s: %s received with %u bytes", inc_desc(c, i, b1, sizeof b1),
                  msg_desc(c, g, b2, sizeof b2), e->len);
        if (m->state == ST_FAIL)
            dviol(t, "%s: received %s although its %s returned %s", inc_desc(c, i, b1, sizeof b1),
                  msg_desc(c, g, b2, sizeof b2),
                  m->fail_publish ? "zimp_publish" : m->zc ? "zimp_loan" : "zimp_send", errname(m->rc));
        if (c->mark[g] == i) {
            dviol(t, "%s: received %s twice", inc_desc(c, i, b1, sizeof b1), msg_desc(c, g, b2, sizeof b2));
            continue;
        }
        c->mark[g] = i;
        c->recv_any[g] = 1;
        if (c->last_seq_inc[m->inc] == i && c->last_seq[m->inc] >= m->seq)
            dviol(t, "%s: %s after seq %u of the same sender", inc_desc(c, i, b1, sizeof b1),
                  msg_desc(c, g, b2, sizeof b2), c->last_seq[m->inc]);
        c->last_seq_inc[m->inc] = i;
        c->last_seq[m->inc] = m->seq;
        if (ce < m->t_pub)
            dviol(t, "%s: %s received by %.3f ms, before its publish began", inc_desc(c, i, b1, sizeof b1),
                  msg_desc(c, g, b2, sizeof b2), rt(c, ce));
        if (m->state == ST_OK && m->t_end < in->t_open_start)
            dviol(t, "%s: received %s, published before its open began (I4)", inc_desc(c, i, b1, sizeof b1),
                  msg_desc(c, g, b2, sizeof b2));
        /* a was published before b was claimed: a precedes b in every order */
        if (m->state == ST_OK && m->t_end < B && reported++ < 3)
            dviol(t, "%s: received %s after %s, which was claimed after this one was published",
                  inc_desc(c, i, b1, sizeof b1), msg_desc(c, g, b2, sizeof b2),
                  msg_desc(c, Bg, b3, sizeof b3));
        if (m->t_claim > B) {
            B = m->t_claim;
            Bg = g;
        }
    }

    if (in->end == END_ERROR && in->t_reset_s) {
        const struct evrec *ev = NULL;
        for (uint32_t e = 0; e < c->nev && !ev; e++)
            if (sh->ev[e].kind == ROLE_RX && (int32_t)sh->ev[e].target == in->index &&
                (sh->ev[e].rc == 0 || sh->ev[e].rc == EV_PENDING) &&
                sh->ev[e].t_s < in->t_reset_e &&
                (sh->ev[e].rc == EV_PENDING || sh->ev[e].t_e > in->t_open_start))
                ev = &sh->ev[e];
        if (ev)
            dviol(t, "%s: the call that returned %s ran %.3f..%.3f ms; zimp_evict(%d) by sender inc %u ran %.3f..%.3f ms",
                  inc_desc(c, i, b1, sizeof b1), errname(in->err), rt(c, in->t_reset_s),
                  rt(c, in->t_reset_e), in->index, ev->by_inc, rt(c, ev->t_s), rt(c, ev->t_e));
        else
            dviol(t, "%s: the call that returned %s ran %.3f..%.3f ms; no eviction of its index",
                  inc_desc(c, i, b1, sizeof b1), errname(in->err), rt(c, in->t_reset_s),
                  rt(c, in->t_reset_e));
    }
    if (in->end == END_RESET && !evict_overlaps(c, ROLE_RX, in, in->t_reset_e))
        dviol(t, "%s: -ECONNRESET at %.3f..%.3f ms, but no eviction of index %d succeeded during its membership",
              inc_desc(c, i, b1, sizeof b1), rt(c, in->t_reset_s), rt(c, in->t_reset_e), in->index);

    /* delivery: every message published after the open returned */
    if (!in->t_open_end)
        return;
    int full = in->end == END_EPIPE;
    if (!full && B == INT64_MIN)
        return;
    int64_t O = in->t_open_end;
    uint32_t lo = 0, hi = c->nok;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (msgs[c->ok_by_pub[mid]].t_pub <= O)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t missing = 0, anon_need = 0, shown = lost ? 3 : 0;   /* a lossy one: counted below */
    uint32_t first_missing = UINT32_MAX;
    for (uint32_t k = lo; k < c->nok; k++) {
        uint32_t g = c->ok_by_pub[k];
        const struct msgrec *m = &msgs[g];
        if (!full && m->t_pub >= B)
            break;
        if (!full && m->t_end >= B)
            continue;
        if (m->len < 4) {
            anon_need++;
            continue;
        }
        if (c->mark[g] == i)
            continue;
        missing++;
        if (first_missing == UINT32_MAX)
            first_missing = g;
        if (shown++ < 3)
            dviol(t, "%s: missed %s (%s)", inc_desc(c, i, b1, sizeof b1), msg_desc(c, g, b2, sizeof b2),
                  full ? "it drained the channel to -EPIPE" :
                  "a message it received was claimed after this one was published");
    }
    if (lost) {
        /* each message it passed without getting was in a position it was told it lost */
        uint64_t anon_missing = anon_got < anon_need ? anon_need - anon_got : 0;
        if (missing + anon_missing > lost)
            dviol(t, "%s: missed %u messages (%llu anonymous), but -ENOBUFS reported %llu lost positions",
                  inc_desc(c, i, b1, sizeof b1), missing + (uint32_t)anon_missing,
                  (unsigned long long)anon_missing, (unsigned long long)lost);
        return;
    }
    if (missing > 3)
        dviol(t, "%s: missed %u messages in all", inc_desc(c, i, b1, sizeof b1), missing);
    if (anon_got < anon_need)
        dviol(t, "%s: received %u anonymous (< 4 byte) messages, at least %u were published after its open%s",
              inc_desc(c, i, b1, sizeof b1), anon_got, anon_need,
              full ? "" : " and before a message it received");
    if (anon_got) {
        uint32_t could = 0;
        for (uint32_t g = 0; g < c->nmsg; g++) {
            const struct msgrec *m = &msgs[g];
            if (m->len < 4 && m->state != ST_FAIL && m->state != ST_NONE &&
                (m->state == ST_ATTEMPT || m->t_end >= in->t_open_start))
                could++;
        }
        if (anon_got > could)
            dviol(t, "%s: received %u anonymous messages, only %u could have been published after its open",
                  inc_desc(c, i, b1, sizeof b1), anon_got, could);
    }
}

static void check_sender(struct chk *c, uint32_t i)
{
    struct trial *t = c->t;
    const struct increc *in = &sh->inc[i];
    char b1[300];
    if (in->end == END_RESET && !evict_overlaps(c, ROLE_TX, in, in->t_reset_e))
        dviol(t, "%s: -ECONNRESET at %.3f..%.3f ms, but no eviction of index %d succeeded during its membership",
              inc_desc(c, i, b1, sizeof b1), rt(c, in->t_reset_s), rt(c, in->t_reset_e), in->index);
}

/* Evicted senders' later calls must fail. */
static void check_evicted_senders(struct chk *c)
{
    char b1[300], b2[300];
    int shown = 0;
    for (uint32_t g = 0; g < c->nmsg; g++) {
        const struct msgrec *m = &msgs[g];
        if (m->state == ST_NONE || m->inc == 0 || m->inc > c->ninc)
            continue;
        int64_t ev = c->evicted_at[m->inc];
        if (!ev || m->t_claim <= ev)
            continue;
        int loan_ok = m->zc && (m->state == ST_OK || m->fail_publish);
        if ((m->state == ST_OK || loan_ok) && shown++ < 3)
            dviol(c->t, "%s: %s succeeded in a call after its eviction ended at %.3f ms",
                  inc_desc(c, m->inc, b1, sizeof b1), msg_desc(c, g, b2, sizeof b2), rt(c, ev));
    }
}

/* One total order: the union of every receiver's and sender's order is acyclic. */
static void check_total_order(struct chk *c)
{
    struct trial *t = c->t;
    size_t cap = (size_t)c->nrx + c->nmsg + 1, ne = 0;
    uint32_t *from = malloc(cap * sizeof *from), *to = malloc(cap * sizeof *to);
    uint32_t *who = malloc(cap * sizeof *who);
    for (uint32_t i = 1; i <= c->ninc; i++) {
        if (sh->inc[i].role != ROLE_RX)
            continue;
        uint32_t prev = UINT32_MAX;
        for (uint32_t k = c->rx_start[i]; k < c->rx_start[i + 1]; k++) {
            uint32_t g = rxp[c->rx_idx[k]].g;
            if (g >= c->nmsg)
                continue;
            if (prev != UINT32_MAX && prev != g) {
                from[ne] = prev;
                to[ne] = g;
                who[ne++] = i;
            }
            prev = g;
        }
    }
    uint32_t *lastg = malloc((c->ninc + 1) * sizeof *lastg);
    for (uint32_t i = 0; i <= c->ninc; i++)
        lastg[i] = UINT32_MAX;
    for (uint32_t g = 0; g < c->nmsg; g++) {
        if (!c->recv_any[g] || msgs[g].inc == 0 || msgs[g].inc > c->ninc)
            continue;
        uint32_t s = msgs[g].inc;
        if (lastg[s] != UINT32_MAX) {
            from[ne] = lastg[s];
            to[ne] = g;
            who[ne++] = s;
        }
        lastg[s] = g;
    }
    uint32_t *indeg = calloc(c->nmsg + 1, sizeof *indeg);
    uint32_t *ostart = calloc(c->nmsg + 2, sizeof *ostart);
    uint32_t *oadj = malloc((ne + 1) * sizeof *oadj);
    for (size_t e = 0; e < ne; e++) {
        indeg[to[e]]++;
        ostart[from[e] + 1]++;
    }
    for (uint32_t g = 0; g < c->nmsg; g++)
        ostart[g + 1] += ostart[g];
    uint32_t *fillp = malloc((c->nmsg + 1) * sizeof *fillp);
    memcpy(fillp, ostart, (c->nmsg + 1) * sizeof *fillp);
    for (size_t e = 0; e < ne; e++)
        oadj[fillp[from[e]]++] = (uint32_t)e;
    uint32_t *queue = malloc((c->nmsg + 1) * sizeof *queue), qh = 0, qt = 0, done = 0, nodes = 0;
    for (uint32_t g = 0; g < c->nmsg; g++) {
        if (!c->recv_any[g])
            continue;
        nodes++;
        if (!indeg[g])
            queue[qt++] = g;
    }
    while (qh < qt) {
        uint32_t g = queue[qh++];
        done++;
        for (uint32_t k = ostart[g]; k < ostart[g + 1]; k++) {
            uint32_t h = to[oadj[k]];
            if (--indeg[h] == 0)
                queue[qt++] = h;
        }
    }
    if (done < nodes) {
        /* walk back along edges between leftover nodes to show one cycle */
        uint32_t *pred = malloc((c->nmsg + 1) * sizeof *pred);
        for (uint32_t g = 0; g < c->nmsg; g++)
            pred[g] = UINT32_MAX;
        for (size_t e = 0; e < ne; e++)
            if (indeg[to[e]] && indeg[from[e]])
                pred[to[e]] = (uint32_t)e;
        uint32_t start = UINT32_MAX;
        for (uint32_t g = 0; g < c->nmsg && start == UINT32_MAX; g++)
            if (c->recv_any[g] && indeg[g])
                start = g;
        /* find a node on the cycle */
        uint32_t g = start;
        for (uint32_t k = 0; k < nodes && pred[g] != UINT32_MAX; k++)
            g = from[pred[g]];
        char text[900];
        size_t o = (size_t)snprintf(text, sizeof text, "no single total order (%u messages on cycles); cycle:",
                                    nodes - done);
        uint32_t h = g;
        for (int k = 0; k < 8 && pred[h] != UINT32_MAX; k++) {
            uint32_t e = pred[h];
            o += (size_t)snprintf(text + o, sizeof text - o, " %u<%u by %s inc %u;", from[e], to[e],
                                  sh->inc[who[e]].role == ROLE_RX ? "receiver" : "sender", who[e]);
            h = from[e];
            if (h == g || o >= sizeof text - 80)
                break;
        }
        dviol(t, "%s", text);
        free(pred);
    }
    free(from); free(to); free(who); free(lastg); free(indeg); free(ostart); free(oadj);
    free(fillp); free(queue);
}

static void check_trial(struct trial *t)
{
    struct chk c;
    memset(&c, 0, sizeof c);
    c.t = t;
    c.t0 = sh->t0;
    c.nmsg = sh->nmsg < MSG_CAP ? sh->nmsg : MSG_CAP;
    c.ninc = sh->ninc < INC_CAP ? sh->ninc : INC_CAP - 1;
    c.nrx = sh->nrx < RX_CAP ? sh->nrx : RX_CAP;
    c.nev = sh->nev < EV_CAP ? sh->nev : EV_CAP;

    /* worker-reported violations */
    uint32_t nv = sh->nviol;
    for (uint32_t i = 0; i < nv && i < MAX_VIOL; i++)
        dviol(t, "%s", sh->viol[i]);
    if (nv > MAX_VIOL)
        dviol(t, "... and %u more reported by workers", nv - MAX_VIOL);
    if (sh->full_rx) {
        fprintf(stderr, "note: receive log full, delivery not checked\n");
        return;
    }

    /* group receive entries by incarnation, keeping each one's order */
    c.rx_start = calloc(c.ninc + 2, sizeof *c.rx_start);
    c.rx_idx = malloc((c.nrx + 1) * sizeof *c.rx_idx);
    for (uint32_t k = 0; k < c.nrx; k++) {
        uint32_t i = rxp[k].inc;
        if (i && i <= c.ninc)
            c.rx_start[i + 1]++;
    }
    for (uint32_t i = 0; i <= c.ninc; i++)
        c.rx_start[i + 1] += c.rx_start[i];
    uint32_t *pos = malloc((c.ninc + 2) * sizeof *pos);
    memcpy(pos, c.rx_start, (c.ninc + 2) * sizeof *pos);
    for (uint32_t k = 0; k < c.nrx; k++) {
        uint32_t i = rxp[k].inc;
        if (i && i <= c.ninc)
            c.rx_idx[pos[i]++] = k;
    }
    free(pos);

    /* definite membership of senders; definite evictions */
    c.tx_member = calloc(c.ninc + 1, sizeof *c.tx_member);
    c.evicted_at = calloc(c.ninc + 1, sizeof *c.evicted_at);
    for (uint32_t i = 1; i <= c.ninc; i++) {
        const struct increc *in = &sh->inc[i];
        int64_t tk = kill_time(t, in->pid);
        int64_t end = in->t_close ? in->t_close : INT64_MAX;
        if (tk && tk < end)
            end = tk;
        if (!in->t_open_end)
            continue;
        int64_t b = end;
        for (uint32_t e = 0; e < c.nev; e++) {
            const struct evrec *ev = &sh->ev[e];
            if (ev->kind != in->role || (ev->rc != 0 && ev->rc != EV_PENDING) ||
                (int32_t)ev->target != in->index)
                continue;
            /* possibly this incarnation: not surely a member from the call's start */
            if ((ev->rc == EV_PENDING || ev->t_e > in->t_open_start) && ev->t_s < b)
                b = ev->t_s;
            if (ev->rc != 0)
                continue;
            /* surely this incarnation: it held the index all through the call */
            if (in->t_open_end < ev->t_s && end > ev->t_e &&
                (!c.evicted_at[i] || ev->t_e < c.evicted_at[i]))
                c.evicted_at[i] = ev->t_e;
        }
        if (in->role == ROLE_TX) {
            c.tx_member[i].a = in->t_open_end;
            c.tx_member[i].b = b;
        }
    }

    c.ok_by_pub = malloc((c.nmsg + 1) * sizeof *c.ok_by_pub);
    for (uint32_t g = 0; g < c.nmsg; g++)
        if (msgs[g].state == ST_OK)
            c.ok_by_pub[c.nok++] = g;
    qsort(c.ok_by_pub, c.nok, sizeof *c.ok_by_pub, cmp_pub);
    c.mark = calloc(c.nmsg + 1, sizeof *c.mark);
    c.recv_any = calloc(c.nmsg + 1, 1);
    c.last_seq_inc = calloc(c.ninc + 1, sizeof *c.last_seq_inc);
    c.last_seq = calloc(c.ninc + 1, sizeof *c.last_seq);

    for (uint32_t i = 1; i <= c.ninc; i++) {
        if (sh->inc[i].role == ROLE_RX)
            check_receiver(&c, i);
        else if (sh->inc[i].role == ROLE_TX)
            check_sender(&c, i);
    }
    check_evicted_senders(&c);
    check_total_order(&c);

    free(c.rx_start); free(c.rx_idx); free(c.tx_member); free(c.evicted_at);
    free(c.ok_by_pub); free(c.mark); free(c.recv_any); free(c.last_seq_inc); free(c.last_seq);
}

/* ---- one trial ---- */
/* Clears what the last trial wrote (entries are read only up to the counters). */
static void reset_shared(void)
{
    size_t nm = sh->nmsg < MSG_CAP ? sh->nmsg : MSG_CAP;
    size_t nr = sh->nrx < RX_CAP ? sh->nrx : RX_CAP;
    memset(msgs, 0, nm * sizeof *msgs);
    memset(rxp, 0, nr * sizeof *rxp);
    memset(sh, 0, sizeof *sh);
}

/* Returns 0 if the trial passed, 1 if it found a violation. */
static int run_trial(const struct params *p, long no, int verbose)
{
    struct trial t;
    memset(&t, 0, sizeof t);
    t.p = p;
    struct rng pr;
    struct params again;
    draw_params(&again, &pr, p->seed);   /* the driver's event stream follows the parameters */
    t.r = pr;
    snprintf(t.name, sizeof t.name, "zs%d-%ld", (int)getpid(), no);
    reset_shared();

    char pline[900];
    fmt_params(pline, sizeof pline, p);
    printf("[%4ld] %s\n", no, pline);
    fflush(stdout);

    struct zimp_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.slots = p->slots;
    cfg.slot_size = p->cfg_slot_size;
    cfg.max_senders = p->max_senders;
    cfg.max_receivers = p->max_receivers;
    cfg.stall_timeout_ns = p->stall_ns;
    cfg.flags = p->flags;
    /* Large messages: a heap with room for a full ring, a loan per sender and
     * the blocks of killed senders (the heap frees them at its next call). */
    char heap[sizeof t.name + 8];
    snprintf(heap, sizeof heap, "%s-h", t.name);
    if (p->heap) {
        uint64_t block = ((uint64_t)p->max_len + 255) / 256 * 256;
        struct zimp_heap_config hc = { .size = (p->slots + 4 * (uint64_t)p->ns + 16) * block,
                                       .max_members = 63 };
        zimp_heap_unlink(heap);
        int hrc = zimp_heap_create(heap, &hc);
        if (hrc != 0) {
            printf("FAIL seed=0x%016" PRIx64 ": zimp_heap_create returned %s (%s)\n", p->seed,
                   errname(hrc), zimp_last_detail());
            return 1;
        }
        cfg.heap = heap;
    }
    int rc = zimp_create(t.name, &cfg);
    if (rc == -EEXIST) {
        zimp_unlink(t.name);
        rc = zimp_create(t.name, &cfg);
    }
    int64_t t_start = now_ns();
    if (rc != 0) {
        printf("FAIL seed=0x%016" PRIx64 ": zimp_create returned %s (%s)\n", p->seed, errname(rc),
               zimp_last_detail());
        return 1;
    }

    t.nslots = p->ns + p->nr;
    for (int k = 0; k < t.nslots; k++)
        t.s[k].role = k < p->ns ? ROLE_TX : ROLE_RX;
    sh->t0 = now_ns();
    /* receivers first, mostly: senders alone fill the message log in no time */
    int rx_first = chance(&t.r, 0.7);
    for (int k = 0; k < t.nslots; k++)
        if ((t.s[k].role == ROLE_RX) == rx_first)
            spawn(&t, k);
    for (int k = 0; k < t.nslots; k++)
        if ((t.s[k].role == ROLE_RX) != rx_first)
            spawn(&t, k);

    pid_t hog = p->heap && p->hog ? spawn_hog(&t, heap) : 0;
    int64_t end = sh->t0 + p->dur;
    int64_t next_ev = p->rate > 0 ? sh->t0 + next_gap(&t) : INT64_MAX;
    for (;;) {
        int64_t now = now_ns();
        reap(&t, now, 1);
        if (now >= end)
            break;
        if (hog) {
            hog_check(&t, &hog, false);
            if (!hog && !t.ndv)
                hog = spawn_hog(&t, heap);      /* it died holding blocks: another one */
        }
        for (int k = 0; k < t.nslots; k++) {
            struct dslot *d = &t.s[k];
            if (!d->pid && d->respawn_at && now >= d->respawn_at)
                spawn(&t, k);
            if (d->stopped && now >= d->stop_until)
                resume(&t, k);
        }
        while (now >= next_ev) {
            do_event(&t, now);
            next_ev += next_gap(&t);
        }
        sleep_ns(300 * NS_PER_US);
    }

    /* stop: no more events; continue everyone; senders leave, receivers drain to -EPIPE */
    __atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
    for (int k = 0; k < t.nslots; k++)
        resume(&t, k);
    wait_role(&t, ROLE_TX, "after the stop (senders)");
    t.t_gone = now_ns();
    __atomic_store_n(&sh->senders_gone, 1, __ATOMIC_RELEASE);
    wait_role(&t, ROLE_RX, "after every sender left (receivers draining)");
    hog_check(&t, &hog, true);                  /* it stops at the stop */
    int64_t t_done = now_ns();

    rc = zimp_unlink(t.name);
    if (rc != 0)
        dviol(&t, "zimp_unlink returned %s", errname(rc));
    if (p->heap) {
        /* Every block went with the channel, or with its dead holder. */
        zimp_heap *h;
        struct zimp_heap_stats st;
        if ((rc = zimp_heap_open(heap, &h)) != 0) {
            dviol(&t, "zimp_heap_open after the trial returned %s", errname(rc));
        } else {
            zimp_heap_reap(h);
            if (zimp_heap_stats(h, &st) == 0 && st.blocks != 0)
                dviol(&t, "%llu heap blocks (%llu bytes) left after the channel and every member went",
                      (unsigned long long)st.blocks, (unsigned long long)st.used);
            zimp_heap_close(h);
        }
        zimp_heap_unlink(heap);
    }

    check_trial(&t);

    uint32_t nmsg = sh->nmsg < MSG_CAP ? sh->nmsg : MSG_CAP, ok = 0, fail = 0, ntx = 0, nrxi = 0;
    for (uint32_t g = 0; g < nmsg; g++) {
        ok += msgs[g].state == ST_OK;
        fail += msgs[g].state == ST_FAIL;
    }
    uint32_t ninc = sh->ninc < INC_CAP ? sh->ninc : INC_CAP - 1, nevok = 0, nlossy = 0, ngaps = 0;
    uint64_t nlost = 0;
    for (uint32_t i = 1; i <= ninc; i++) {
        ntx += sh->inc[i].role == ROLE_TX;
        nrxi += sh->inc[i].role == ROLE_RX;
        nlossy += sh->inc[i].lossy;
    }
    for (uint32_t k = 0; k < (sh->nrx < RX_CAP ? sh->nrx : RX_CAP); k++)
        if (rxp[k].g == MARK_GAP)
            ngaps++, nlost += rxp[k].len;
    uint32_t nev = sh->nev < EV_CAP ? sh->nev : EV_CAP;
    for (uint32_t e = 0; e < nev; e++)
        nevok += sh->ev[e].rc == 0;
    printf("       msgs=%u ok=%u failed=%u received=%u tx_inc=%u rx_inc=%u", nmsg, ok, fail,
           sh->nrx < RX_CAP ? sh->nrx : RX_CAP, ntx, nrxi);
    if (nlossy)
        printf(" (lossy %u: %u gaps, %llu positions lost)", nlossy, ngaps, (unsigned long long)nlost);
    printf(" events:");
    for (int k = 0; k < NEV; k++)
        if (t.n_ev[k])
            printf(" %s=%ld", ev_names[k], t.n_ev[k]);
    printf(" evictions=%u/%u%s%s run=%.2fs total=%.2fs -> %s\n", nevok, nev,
           sh->full_msg ? " (message cap reached)" : "", sh->full_inc ? " (incarnation cap reached)" : "",
           (double)(t_done - sh->t0) / NS_PER_S, (double)(now_ns() - t_start) / NS_PER_S,
           t.ndv ? "FAIL" : "ok");
    if (t.ndv) {
        printf("FAIL seed=0x%016" PRIx64 " (replay: zimp-stress --seed 0x%016" PRIx64 "%s%s%s%s)\n  params: %s\n%s",
               p->seed, p->seed, overrides ? " --set " : "", overrides ? overrides : "",
               inject ? " --inject " : "", inject ? inj_names[inject] : "", pline, t.dv);
        if (t.ndv > 40)
            printf("  ... %d violations in all\n", t.ndv);
    }
    if (verbose > 1) {
        char b[300];
        struct chk c;
        memset(&c, 0, sizeof c);
        c.t = &t;
        c.t0 = sh->t0;
        for (uint32_t i = 1; i <= ninc; i++) {
            uint32_t got = 0;
            for (uint32_t k = 0; k < (sh->nrx < RX_CAP ? sh->nrx : RX_CAP); k++)
                got += rxp[k].inc == i && rxp[k].g < MARK_EPIPE;
            printf("       %s err=%s got=%u\n", inc_desc(&c, i, b, sizeof b), errname(sh->inc[i].err), got);
        }
        for (uint32_t e = 0; e < nev; e++)
            printf("       %s(%u) by inc %u at %.3f..%.3f ms: %s\n",
                   sh->ev[e].kind == ROLE_RX ? "zimp_evict" : "zimp_evict_sender", sh->ev[e].target,
                   sh->ev[e].by_inc, rt(&c, sh->ev[e].t_s), rt(&c, sh->ev[e].t_e),
                   sh->ev[e].rc == EV_PENDING ? "unfinished" : errname(sh->ev[e].rc));
        for (size_t k = 0; k < t.nkills; k++)
            printf("       kill pid %d at %.3f ms\n", (int)t.kills[k].pid, rt(&c, t.kills[k].t));
        for (size_t k = 0; k < t.nstops; k++)
            printf("       stop %.3f..%.3f ms\n", rt(&c, t.stops[k].t0), rt(&c, t.stops[k].t1));
    }
    fflush(stdout);
    free(t.kills);
    free(t.stops);
    free(t.dv);
    return t.ndv ? 1 : 0;
}

static void *map_shared(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    return p;
}

/* --set key=value,...: narrows a failing trial down (applied after the draw). */

static void set_params(struct params *p)
{
    if (!overrides)
        return;
    char *dup = strdup(overrides), *save = NULL;
    for (char *kv = strtok_r(dup, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) {
            fprintf(stderr, "--set: %s is not key=value\n", kv);
            exit(2);
        }
        *eq = 0;
        const char *k = kv;
        double v = atof(eq + 1);
        int ev;
        for (ev = 0; ev < NEV && strcmp(k, ev_names[ev]); ev++)
            ;
        if (ev < NEV) p->w[ev] = v;
        else if (!strcmp(k, "S")) p->ns = (int)v;
        else if (!strcmp(k, "R")) p->nr = (int)v;
        else if (!strcmp(k, "slots")) p->slots = (uint32_t)v;
        else if (!strcmp(k, "size")) p->slot_size = p->cfg_slot_size = (uint32_t)v;
        else if (!strcmp(k, "heap")) p->heap = v != 0;
        else if (!strcmp(k, "maxlen")) p->max_len = (uint32_t)v;
        else if (!strcmp(k, "maxS")) p->max_senders = (uint32_t)v;
        else if (!strcmp(k, "maxR")) p->max_receivers = (uint32_t)v;
        else if (!strcmp(k, "stall")) p->stall_ns = (uint64_t)(v * NS_PER_MS);
        else if (!strcmp(k, "flags")) p->flags = (uint32_t)v;
        else if (!strcmp(k, "epoll")) p->p_epoll = v / 100;
        else if (!strcmp(k, "zctx")) p->p_zc_tx = v / 100;
        else if (!strcmp(k, "zcrx")) p->p_zc_rx = v / 100;
        else if (!strcmp(k, "hold")) p->p_hold = v / 100;
        else if (!strcmp(k, "evictrx")) p->p_evict_rx = v / 100;
        else if (!strcmp(k, "evicttx")) p->p_evict_tx = v / 100;
        else if (!strcmp(k, "churn")) p->p_churner = v / 100;
        else if (!strcmp(k, "lossy")) p->p_lossy = v / 100;
        else if (!strcmp(k, "hog")) p->hog = v != 0;
        else if (!strcmp(k, "rate")) p->rate = v;
        else if (!strcmp(k, "dur")) p->dur = (int64_t)(v * NS_PER_MS);
        else if (!strcmp(k, "tmo")) p->tmo_mode = (int)v % 3;
        else {
            fprintf(stderr, "--set: unknown key %s\n", k);
            exit(2);
        }
    }
    free(dup);
    if (!p->slot_size)
        p->slot_size = ZIMP_DEFAULT_SLOT_SIZE;
    if (!p->heap || p->max_len < p->slot_size)
        p->max_len = p->heap ? HEAP_LEN_MAX : p->slot_size;
    if (p->ns < 1 || p->ns > MAX_TX || p->nr < 0 || p->nr > MAX_RX || p->slot_size > 4096 ||
        p->max_len > HEAP_LEN_MAX + 4096 || p->max_senders < (uint32_t)p->ns ||
        p->max_receivers < (uint32_t)p->nr) {
        fprintf(stderr, "--set: parameters out of range\n");
        exit(2);
    }
}

/* --inject: a receiver that keeps its incarnation, copies, and sees identified messages */
static void inject_params(struct params *p)
{
    if (!inject)
        return;
    if (p->nr == 0)
        p->nr = 1;
    if (p->max_receivers < (uint32_t)p->nr)
        p->max_receivers = (uint32_t)p->nr;
    if (p->slot_size < 16)
        p->slot_size = p->cfg_slot_size = 16;
    if (!p->heap)
        p->max_len = p->slot_size;
    p->p_zc_rx = 0;
    p->p_churner = 0;
    p->p_lossy = 0;
    p->p_evict_rx = 0;
    p->w[EV_KILL_RX] = p->w[EV_RX_CLOSE] = p->w[EV_EVICT] = 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: zimp-stress [--seed S] [--trials N] [--base-seed B] [--keep-going]\n"
            "  --seed S       replay the one trial of seed S\n"
            "  --trials N     run N trials with seeds derived from the base seed\n"
            "  --base-seed B  base seed (default: from the clock; printed)\n"
            "  --keep-going   do not stop at the first failing trial\n"
            "  --set k=v,...  override parameters after the draw (S, R, slots, size, maxS, maxR,\n"
            "                 stall [ms], flags, epoll/zctx/zcrx/hold/evictrx/evicttx/churn [%%],\n"
            "                 rate [/s], dur [ms], tmo (0 long, 1 short, 2 mixed),\n"
            "                 event weights killtx, killrx, stop, tmoclose, rxclose, evict)\n"
            "  --inject F     self-test: one receiver fakes fault F (drop, dup, swap, corrupt,\n"
            "                 epipe, hang); every trial should then FAIL\n"
            "  ZIMP_SOAK_S=seconds   run trials until that much time has passed\n"
            "  ZIMP_SANITIZER=...    non-empty: bounds x4, fewer trials\n");
    exit(2);
}

int main(int argc, char **argv)
{
    uint64_t seed = 0, base = 0;
    int have_seed = 0, have_base = 0, keep_going = 0, have_trials = 0;
    long trials = sanitizer() ? 10 : 40;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
            have_seed = 1;
        } else if (!strcmp(argv[i], "--trials") && i + 1 < argc) {
            trials = strtol(argv[++i], NULL, 0);
            have_trials = 1;
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
            overrides = argv[++i];
        } else if (!strcmp(argv[i], "--base-seed") && i + 1 < argc) {
            base = strtoull(argv[++i], NULL, 0);
            have_base = 1;
        } else if (!strcmp(argv[i], "--inject") && i + 1 < argc) {
            i++;
            for (inject = 1; inject < NINJ && strcmp(argv[i], inj_names[inject]); inject++)
                ;
            if (inject == NINJ)
                usage();
        } else if (!strcmp(argv[i], "--keep-going")) {
            keep_going = 1;
        } else {
            usage();
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    sh = map_shared(sizeof *sh);
    msgs = map_shared((size_t)MSG_CAP * sizeof *msgs);
    rxp = map_shared((size_t)RX_CAP * sizeof *rxp);

    struct params p;
    struct rng r;
    if (have_seed) {
        draw_params(&p, &r, seed);
        set_params(&p);
        inject_params(&p);
        int f = run_trial(&p, 0, getenv("ZIMP_STRESS_VERBOSE") ? 2 : 1);
        printf("%s\n", f ? "zimp-stress: FAILED" : "zimp-stress: passed");
        return f;
    }
    if (!have_base)
        base = mix64((uint64_t)now_ns() ^ ((uint64_t)getpid() << 32));
    const char *soak = getenv("ZIMP_SOAK_S");
    int64_t soak_ns = soak && *soak ? (int64_t)(atof(soak) * NS_PER_S) : 0;
    /* the default run stays short whatever the trials drawn */
    int64_t budget = soak_ns ? soak_ns : scale(100 * NS_PER_S);
    printf("zimp-stress: base seed 0x%016" PRIx64 ", %s\n", base, soak_ns ? "soak" : "trials");
    int64_t start = now_ns();
    long failed = 0, n = 0;
    uint64_t *bad = NULL;
    for (long i = 0; soak_ns ? now_ns() - start < soak_ns : i < trials; i++) {
        if (!soak_ns && !have_trials && now_ns() - start > budget) {
            printf("zimp-stress: time budget spent after %ld trials\n", n);
            break;
        }
        draw_params(&p, &r, mix64(base + (uint64_t)i));
        set_params(&p);
        inject_params(&p);
        n++;
        if (run_trial(&p, i, 0)) {
            bad = realloc(bad, (size_t)(failed + 1) * sizeof *bad);
            bad[failed++] = p.seed;
            if (!keep_going)
                break;
        }
    }
    printf("zimp-stress: %ld trials in %.1f s, %ld failed (base seed 0x%016" PRIx64 ")\n", n,
           (double)(now_ns() - start) / NS_PER_S, failed, base);
    for (long i = 0; i < failed; i++)
        printf("  failed: zimp-stress --seed 0x%016" PRIx64 "%s%s\n", bad[i], overrides ? " --set " : "",
               overrides ? overrides : "");
    free(bad);
    return failed ? 1 : 0;
}
