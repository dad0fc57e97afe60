/*
 * One one-to-many zimp channel per communicator, made at its first
 * collective that needs it: the root writes each chunk of a broadcast once
 * and every member reads it (the seeds' point: one write reaches all).
 * Barrier's release, Allreduce's and Allgather's results travel the same way.
 *
 * Every member is both a sender and a receiver of the channel, so a root
 * also reads back its own chunks (and drops them) to keep its receiver
 * record from holding the ring. Chunks carry the collective's sequence
 * number; chunks of a later collective met while waiting for an earlier
 * one (or while waiting for point-to-point traffic) are copied aside.
 *
 * MPI_Barrier has a page of its own shared by the members: a counter of
 * arrivals and a generation word. Rank 0 waits for the others' arrivals,
 * resets the counter, advances the generation and wakes the sleepers
 * (futex); the others poll it briefly (or, with more ranks than CPUs,
 * yield the CPU, or poll once the members last seen on their CPU are in:
 * bar_yield_until), then sleep on it
 * in slices, handling their inbox and checking for dead members between
 * slices. The page is a memfd of rank 0, opened by the others through
 * /proc/PID/fd during the channel's setup and closed right after: it never
 * has a name, in /dev/shm or anywhere, and goes when the last member unmaps
 * it. Where a member cannot open it, the barrier is a gather of empty
 * messages plus a release on the channel, as MPI_Ibarrier's.
 */
#include "mpi_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BC_SLOTS 16u
#define BC_SLOT_SIZE 32768u
#define BC_SLICE_NS (5 * 1000000LL)
#define BC_YIELD_NS (50 * 1000LL)   /* a receiver yields before it sleeps (ranks > CPUs) */
#define BC_SETUP_TAG 0x3fffffff  /* point-to-point tag of the setup (above every collective tag) */

enum { BC_DATA = 1, BC_GO = 2 };

struct bhdr {
    uint32_t kind, seq;
    int32_t root;
    uint32_t reserved;
    uint64_t len;         /* bytes of the whole broadcast */
    uint64_t off;         /* where this chunk goes */
};
_Static_assert(sizeof(struct bhdr) == 32, "bcast chunk header layout");

struct early {
    struct bhdr h;
    size_t n;
    struct early *next;
    char data[];
};

/* The barrier page; each word on a cache line of its own. */
struct shbar {
    _Atomic uint32_t arrived;
    char pad1[60];
    _Atomic uint32_t gen;         /* futex word */
    char pad2[60];
    _Atomic uint32_t sleepers;    /* members in (or about to enter) FUTEX_WAIT on gen */
    char pad3[60];
    _Atomic uint32_t root_sleeping;   /* the releaser in (or about to enter) FUTEX_WAIT on arrived */
    char pad4[60];
    _Atomic uint32_t inbox_sleepers;  /* members marked in inbox_asleep */
    char pad5[60];
    /* where each of the first BAR_SEATS members last arrived: hints for bar_yield_until */
    struct bar_seat {
        _Atomic uint32_t gen;     /* the generation it arrived in, + 1 */
        _Atomic int32_t cpu;      /* sched_getcpu() at that arrival (or a later yield) */
    } seat[256];
    /* member r sleeps on its inbox while one of its non-blocking collectives on this
     * communicator waits: who publishes on the channel nudges it (zm_bcast_inbox_sleep) */
    _Atomic uint8_t inbox_asleep[];
};
#define BAR_BYTES 4096u
#define BAR_SEATS (sizeof ((struct shbar *)0)->seat / sizeof ((struct shbar *)0)->seat[0])
#define BAR_ASLEEP_MAX (BAR_BYTES - offsetof(struct shbar, inbox_asleep))
#define BAR_SPIN_NS (8 * 1000LL)      /* the longest a member polls between two yields */
_Static_assert(offsetof(struct shbar, inbox_asleep) + 1024 <= BAR_BYTES, "barrier page layout");
#define SLEEP_MARKS 8u        /* communicators a sleeping rank marks itself on, at most */
#define BAR_SLICE_NS (1 * 1000000LL)  /* a sleeping member's inbox and liveness checks */
/*
 * With ranks > CPUs a waiter yields (or polls: bar_yield_until) for a while
 * before it sleeps: BAR_YIELD_TIGHT_NS after a wait of this communicator
 * that ended within BAR_TIGHT_NS (barriers in a tight loop), else
 * BAR_YIELD_NS. Sleeping members leave a CPU idle for a moment, the
 * scheduler pulls a rank over to it, and three of four ranks then share one
 * of two CPUs for a hundred milliseconds or so (a barrier costs two trips
 * through the scheduler there instead of one): with 50 us in a tight loop, 8
 * of 12 runs of 30 ms found that placement, with 1 ms 2 of 12. But a member
 * that waits longer (another computes or sleeps between barriers) would
 * yield and poll away up to 1 ms of CPU per barrier (an outside review: 11x
 * the CPU of 50 us when another rank slept 0.9 ms before each barrier).
 */
#define BAR_YIELD_NS (50 * 1000LL)
#define BAR_YIELD_TIGHT_NS (1000 * 1000LL)
#define BAR_TIGHT_NS (50 * 1000LL)

struct zm_bcast {
    struct shbar *bar;    /* NULL: the barrier goes through messages */
    int64_t bar_waited;   /* how long our last wait for a barrier lasted (ns) */
    zimp_receiver *rx;
    zimp_sender *tx;
    size_t chunk;         /* payload bytes per message */
    struct early *early;  /* FIFO of chunks read ahead */
    struct zm_bcast *next_open;
    struct zm_comm *comm;
};

static struct zm_bcast *open_list;

static bool comm_has_dead(const struct zm_comm *c)
{
    for (int i = 0; i < c->size; i++)
        if (zm_peer_dead(c->group->world[i]))
            return true;
    return false;
}

/* ---- the read-ahead queue ---- */

static void early_push(struct zm_bcast *b, const struct bhdr *h, const void *data, size_t n)
{
    struct early *e = malloc(sizeof *e + n);
    if (!e)
        zm_abort_job(MPI_ERR_NO_MEM, "out of memory keeping a broadcast chunk");
    e->h = *h;
    e->n = n;
    e->next = NULL;
    memcpy(e->data, data, n);
    struct early **p = &b->early;
    while (*p)
        p = &(*p)->next;
    *p = e;
}

static struct early *early_take(struct zm_bcast *b, uint32_t seq)
{
    for (struct early **p = &b->early; *p; p = &(*p)->next)
        if ((*p)->h.seq == seq) {
            struct early *e = *p;
            *p = e->next;
            return e;
        }
    return NULL;
}

static void nudge_sleepers(struct zm_comm *c);

/* Gives a read slot back; the room may be what a member asleep on its inbox waits for. */
static void chan_release(struct zm_comm *c)
{
    zimp_release(c->bc->rx);
    nudge_sleepers(c);
}

/*
 * Reads one message (waiting up to ns); keeps it aside unless it belongs to
 * `seq` (then h, data and n describe it and the slot stays borrowed: release
 * it with zimp_release). 1: a chunk of seq, 0: nothing for seq, <0: error.
 */
static int read_one(struct zm_comm *c, uint32_t seq, int64_t ns, struct bhdr *h, const void **data, size_t *n)
{
    struct zm_bcast *b = c->bc;
    const void *buf;
    size_t len;
    int rc = zimp_read(b->rx, &buf, &len, ns);
    if (rc == -EAGAIN || rc == -ETIMEDOUT)
        return 0;
    if (rc != 0)
        return rc == -EPIPE ? MPIX_ERR_PROC_FAILED : MPI_ERR_OTHER;
    if (len < sizeof *h) {
        chan_release(c);
        return 0;
    }
    memcpy(h, buf, sizeof *h);
    *data = (const char *)buf + sizeof *h;
    *n = len - sizeof *h;
    if (h->kind == BC_DATA && h->seq == seq && h->root != c->rank)
        return 1;
    if (h->kind == BC_DATA && h->root != c->rank)
        early_push(b, h, *data, *n);
    chan_release(c);
    return 0;
}

static void drain_one(struct zm_comm *c)
{
    struct bhdr h;
    const void *d;
    size_t n;
    /* seq 0xffffffff is never waited for: everything is kept aside (or dropped if ours). */
    while (read_one(c, UINT32_MAX, 0, &h, &d, &n) == 1)
        chan_release(c);
}

void zm_bcast_drain_all(void)
{
    for (struct zm_bcast *b = open_list; b; b = b->next_open)
        drain_one(b->comm);
}

/* ---- setup ---- */

static void chan_name(struct zm_comm *c, char *out, size_t cap)
{
    char what[64];
    snprintf(what, sizeof what, "b%u.%d", c->ctx, c->group->world[0]);
    zm_chan_name(out, cap, what);
}

/* One int from or to `peer` on the collective context (the setup's tokens). */
static int p2p_token(struct zm_comm *c, int peer, bool send, int *v)
{
    struct zm_req *r;
    int rc = send ? zm_isend(v, 1, MPI_INT, peer, BC_SETUP_TAG, c, c->ctx + 1, ZM_MODE_STD, &r)
                  : zm_irecv(v, 1, MPI_INT, peer, BC_SETUP_TAG, c, c->ctx + 1, &r);
    return rc ? rc : zm_wait_free(r, MPI_STATUS_IGNORE);
}

static int open_both(struct zm_bcast *b, const char *name)
{
    int rc = zimp_receiver_open(name, &b->rx);
    if (rc == 0)
        rc = zimp_sender_open(name, &b->tx);
    return rc == 0 ? MPI_SUCCESS : MPI_ERR_OTHER;
}

/* ---- the barrier page ---- */

static struct shbar *bar_map(int fd)
{
    void *p = mmap(NULL, BAR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void bar_unmap(struct zm_bcast *b)
{
    if (b->bar)
        munmap(b->bar, BAR_BYTES);
    b->bar = NULL;
}

/* Rank 0: a fresh zeroed page; its fd (-1 if none could be made). */
static int bar_create(struct zm_bcast *b)
{
    if (getenv("ZIMP_MPI_SHM_BARRIER") && atoi(getenv("ZIMP_MPI_SHM_BARRIER")) == 0)
        return -1;
    int fd = memfd_create("zimp-mpi-barrier", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, BAR_BYTES) != 0 || !(b->bar = bar_map(fd))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Another member: maps rank 0's page through /proc; whether it could. */
static bool bar_attach(struct zm_comm *c, int fd)
{
    if (fd < 0)
        return false;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)zm.peers[c->group->world[0]].pid, fd);
    int mine = open(path, O_RDWR | O_CLOEXEC);
    if (mine < 0)
        return false;
    struct stat st;
    if (fstat(mine, &st) == 0 && st.st_size == BAR_BYTES)
        c->bc->bar = bar_map(mine);
    close(mine);
    return c->bc->bar != NULL;
}

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)w, op, val, ts, NULL, 0);
}

/*
 * A waiter's condition: the generation moved, or (the releaser) every
 * member arrived. `word` is the futex word it sleeps on.
 */
struct bar_wait {
    struct shbar *bar;
    _Atomic uint32_t *word;
    uint32_t gen;         /* the generation it arrived in */
    uint32_t all;         /* the releaser: the communicator's size; 0 for the others */
    int lead;             /* the member that ends the barrier after all arrived, or -1 */
};

static bool bar_ready(void *p)
{
    const struct bar_wait *w = p;
    if (atomic_load_explicit(&w->bar->gen, memory_order_acquire) != w->gen)
        return true;
    return w->all && atomic_load_explicit(&w->bar->arrived, memory_order_acquire) == w->all;
}

static bool comm_has_dead(const struct zm_comm *c);

/*
 * Whether a member that may still need a CPU for this barrier was last seen
 * on CPU `cpu` (one that has not arrived in generation g; a member without
 * a seat may). A barrier with a lead (a rooted collective follows) always
 * says yes: the lead still needs its CPU after everyone arrived, to end the
 * barrier and start the collective, which everyone else then waits for, so
 * polling buys nothing (an outside review: Barrier + Bcast 2-3.5x slower
 * while the lead's CPU mates polled; polling on the other CPU doubled the
 * small broadcasts' times in osu_zimp).
 */
static bool mate_pending(const struct zm_comm *c, const struct bar_wait *w, int cpu)
{
    if (cpu < 0 || (size_t)c->size > BAR_SEATS || w->lead >= 0)
        return true;
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && atomic_load_explicit(&w->bar->seat[r].gen, memory_order_relaxed) != w->gen + 1 &&
            atomic_load_explicit(&w->bar->seat[r].cpu, memory_order_relaxed) == cpu)
            return true;
    return false;
}

/*
 * With more ranks than CPUs, for up to BAR_YIELD_TIGHT_NS or BAR_YIELD_NS
 * (see there): yields the CPU while a member may need it (mate_pending),
 * and polls while every such member is in: the barrier then waits for
 * other CPUs only, and a yield would hand this CPU to a member that waits
 * too, putting a trip through the scheduler between the release and us.
 * The seats are hints (a member may have moved, a process of another
 * program may want the CPU): it yields at least every BAR_SPIN_NS.
 */
static bool bar_yield_until(const struct zm_comm *c, struct bar_wait *w, int64_t now)
{
    if (zm.poll_ns > 0)
        return false;
    int64_t end = now + (c->bc->bar_waited < BAR_TIGHT_NS ? BAR_YIELD_TIGHT_NS : BAR_YIELD_NS);
    int64_t spun_since = now;
    int cpu = sched_getcpu();
    for (;;) {
        bool yield = now - spun_since >= BAR_SPIN_NS || mate_pending(c, w, cpu);
        if (yield) {
            sched_yield();
            cpu = sched_getcpu();
            if ((size_t)c->rank < BAR_SEATS)
                atomic_store_explicit(&w->bar->seat[c->rank].cpu, cpu, memory_order_relaxed);
        } else {
            for (int i = 0; i < 64 && !bar_ready(w); i++) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
            }
        }
        if (bar_ready(w))
            return true;
        now = zm_now_ns();       /* one clock read a round */
        if (yield)
            spun_since = now;
        if (now >= end)
            return false;
    }
}

/* Polls, yields, then sleeps on w->word in slices until bar_ready; error if a member died. */
static int bar_wait_from(struct zm_comm *c, struct bar_wait *w, _Atomic uint32_t *sleeping, int64_t now)
{
    if (zm_poll_until(bar_ready, w) || bar_yield_until(c, w, now))
        return MPI_SUCCESS;
    for (;;) {
        struct timespec ts = { 0, BAR_SLICE_NS };
        atomic_fetch_add(sleeping, 1);
        uint32_t seen = atomic_load(w->word);
        if (!bar_ready(w))
            futex(w->word, FUTEX_WAIT, seen, &ts);
        atomic_fetch_sub(sleeping, 1);
        if (bar_ready(w)) {
            zm_poll_missed_end();
            return MPI_SUCCESS;
        }
        /* Senders waiting for room in our inbox, pending non-blocking operations, deaths. */
        zm_progress(false);
        zm_check_deaths(false);
        if (bar_ready(w))
            return MPI_SUCCESS;
        if (comm_has_dead(c))
            return MPIX_ERR_PROC_FAILED;
    }
}

/* bar_wait_from, timed: how long it lasted sets how long the next one yields. */
static int bar_wait(struct zm_comm *c, struct bar_wait *w, _Atomic uint32_t *sleeping)
{
    if (bar_ready(w)) {
        c->bc->bar_waited = 0;
        return MPI_SUCCESS;
    }
    int64_t t0 = zm_now_ns();
    int rc = bar_wait_from(c, w, sleeping, t0);
    c->bc->bar_waited = zm_now_ns() - t0;
    return rc;
}

/*
 * Ends barrier generation g if every member arrived and nobody ended it
 * yet: the counter goes from size to 0 exactly once (CAS), then the
 * generation moves and the sleepers are woken.
 */
static bool bar_release(struct shbar *bar, uint32_t all, uint32_t g)
{
    uint32_t n = all;
    if (!atomic_compare_exchange_strong(&bar->arrived, &n, 0))
        return false;
    atomic_store(&bar->gen, g + 1);
    if (atomic_load(&bar->sleepers))
        futex(&bar->gen, FUTEX_WAKE, INT_MAX, NULL);
    if (atomic_load(&bar->root_sleeping))
        futex(&bar->arrived, FUTEX_WAKE, 1, NULL);
    return true;
}

/*
 * Every member reads the generation, then counts itself in. Who ends the
 * barrier depends on what follows it (c->bar_lead, the same choice on every
 * member: coll.c's coll_enter):
 *  - by default the last member to arrive, at once: nobody waits for a
 *    second hop, which is what a barrier followed by anything but a rooted
 *    collective wants (on 2 CPUs with 4 ranks every hop is a trip through
 *    the scheduler);
 *  - where the barrier was last followed by a collective rooted at rank L
 *    (Bcast, Scatter, Gather, Reduce at L; Allreduce, Allgather at 0), L
 *    ends it and leaves first, so its broadcast is on its way while the
 *    others wake up; the last member to arrive only wakes L.
 * The releaser (L, or rank 0 by default) also ends the barrier itself when
 * it sees every member in, so any mixture of the two ways still ends each
 * generation exactly once (bar_release).
 */
int zm_shm_barrier(struct zm_comm *c)
{
    struct shbar *bar = c->bc ? c->bc->bar : NULL;
    if (!bar)
        return MPI_ERR_UNSUPPORTED_OPERATION;
    uint32_t all = (uint32_t)c->size;
    int lead = c->bar_lead - 1;
    int releaser = lead >= 0 ? lead : 0;
    uint32_t g = atomic_load(&bar->gen);
    if ((size_t)c->rank < BAR_SEATS && zm.poll_ns == 0) {      /* seats: only with ranks > CPUs */
        atomic_store_explicit(&bar->seat[c->rank].cpu, sched_getcpu(), memory_order_relaxed);
        atomic_store_explicit(&bar->seat[c->rank].gen, g + 1, memory_order_relaxed);
    }
    uint32_t n = atomic_fetch_add(&bar->arrived, 1) + 1;
    int rc = MPI_SUCCESS;
    if (n == all && (lead < 0 || c->rank == lead) && bar_release(bar, all, g)) {
        /* ended it ourselves */
    } else if (c->rank == releaser) {
        struct bar_wait w = { bar, &bar->arrived, g, all, lead };
        while ((rc = bar_wait(c, &w, &bar->root_sleeping)) == MPI_SUCCESS &&
               atomic_load(&bar->gen) == g && !bar_release(bar, all, g))
            ;
    } else {
        if (n == all && atomic_load(&bar->root_sleeping))
            futex(&bar->arrived, FUTEX_WAKE, 1, NULL);
        struct bar_wait w = { bar, &bar->gen, g, 0, lead };
        rc = bar_wait(c, &w, &bar->sleepers);
    }
    if (rc == MPI_SUCCESS)
        c->bar_watch = true;
    return rc;
}

void zm_shm_barrier_forget(struct zm_comm *c)
{
    if (c->bc)
        c->bc->bar_waited = 0;
}

/* ---- the channel's setup ---- */

/* Waits for rank 0's GO: after it, every member's receiver is open. */
static int wait_go(struct zm_comm *c)
{
    for (;;) {
        const void *buf;
        size_t len;
        int rc = zimp_read(c->bc->rx, &buf, &len, BC_SLICE_NS);
        if (rc == 0) {
            struct bhdr h = { 0 };
            if (len >= sizeof h)
                memcpy(&h, buf, sizeof h);
            zimp_release(c->bc->rx);
            if (h.kind == BC_GO) {
                if (!h.reserved)          /* someone could not map the barrier page */
                    bar_unmap(c->bc);
                return MPI_SUCCESS;
            }
            continue;
        }
        if (rc != -ETIMEDOUT && rc != -EAGAIN)
            return MPI_ERR_OTHER;
        zm_progress(false);
        zm_check_deaths(false);
        if (comm_has_dead(c))
            return MPIX_ERR_PROC_FAILED;
    }
}

static int setup_root(struct zm_comm *c, const char *name)
{
    struct zimp_config cfg = { 0 };
    cfg.slots = BC_SLOTS;
    cfg.slot_size = BC_SLOT_SIZE;
    cfg.max_senders = (uint32_t)c->size;
    cfg.max_receivers = (uint32_t)c->size;
    if (zimp_create(name, &cfg) != 0)
        return MPI_ERR_OTHER;
    int rc = open_both(c->bc, name);
    int fd = bar_create(c->bc), all_mapped = fd >= 0;
    for (int r = 1; r < c->size && !rc; r++)
        rc = p2p_token(c, r, true, &fd);
    for (int r = 1; r < c->size && !rc; r++) {
        int mapped = 0;
        rc = p2p_token(c, r, false, &mapped);
        all_mapped &= mapped;
    }
    if (fd >= 0)
        close(fd);                        /* every member has mapped it (or failed) */
    zimp_unlink(name);                    /* everyone has it open (or failed): no file left */
    struct bhdr go = { .kind = BC_GO, .reserved = (uint32_t)all_mapped };
    if (!rc && zimp_send(c->bc->tx, &go, sizeof go, -1) != 0)
        rc = MPI_ERR_OTHER;
    return rc ? rc : wait_go(c);
}

int zm_bcast_setup(struct zm_comm *c)
{
    if (c->bc || c->size == 1)
        return MPI_SUCCESS;
    c->bc = calloc(1, sizeof *c->bc);
    if (!c->bc)
        return MPI_ERR_NO_MEM;
    c->bc->chunk = BC_SLOT_SIZE - sizeof(struct bhdr);
    c->bc->comm = c;
    char name[ZIMP_NAME_MAX + 1];
    chan_name(c, name, sizeof name);
    int rc, fd = -1;
    if (c->rank == 0) {
        rc = setup_root(c, name);
    } else {
        rc = p2p_token(c, 0, false, &fd);
        if (!rc)
            rc = open_both(c->bc, name);
        int mapped = bar_attach(c, fd);
        if (!rc)
            rc = p2p_token(c, 0, true, &mapped);
        if (!rc)
            rc = wait_go(c);
    }
    c->bc->next_open = open_list;
    open_list = c->bc;
    return rc;
}

void zm_bcast_close(struct zm_comm *c)
{
    struct zm_bcast *b = c->bc;
    if (!b)
        return;
    for (struct zm_bcast **p = &open_list; *p; p = &(*p)->next_open)
        if (*p == b) {
            *p = b->next_open;
            break;
        }
    bar_unmap(b);
    zimp_receiver_close(b->rx);
    zimp_sender_close(b->tx);
    while (b->early) {
        struct early *e = b->early;
        b->early = e->next;
        free(e);
    }
    free(b);
    c->bc = NULL;
}

/* ---- waking ranks asleep on their inbox ---- */

static struct zm_comm *marked[SLEEP_MARKS];
static unsigned nmarked;

static void inbox_asleep_set(struct zm_comm *c, bool on)
{
    struct shbar *bar = c->bc->bar;
    uint8_t was = atomic_exchange(&bar->inbox_asleep[c->rank], on);
    if (was != on) {
        if (on)
            atomic_fetch_add(&bar->inbox_sleepers, 1);
        else
            atomic_fetch_sub(&bar->inbox_sleepers, 1);
    }
}

/*
 * Dekker with nudge_sleepers: we store our mark, then look at the channel
 * (the caller's progress); a publisher publishes, then looks at the marks.
 * One of the two sees the other.
 */
bool zm_bcast_inbox_sleep(bool on)
{
    if (!on) {
        for (unsigned i = 0; i < nmarked; i++)
            inbox_asleep_set(marked[i], false);
        nmarked = 0;
        return true;
    }
    nmarked = 0;
    for (struct zm_req *r = zm.nbc_head; r; r = r->next_nbc) {
        struct zm_comm *c = r->comm;
        bool seen = false;
        for (unsigned i = 0; i < nmarked && !seen; i++)
            seen = marked[i] == c;
        if (seen)
            continue;
        if (!c || !c->bc || !c->bc->bar || (size_t)c->rank >= BAR_ASLEEP_MAX || nmarked == SLEEP_MARKS) {
            zm_bcast_inbox_sleep(false);
            return false;
        }
        inbox_asleep_set(c, true);
        marked[nmarked++] = c;
    }
    atomic_thread_fence(memory_order_seq_cst);
    return true;
}

/* After a publication on c's channel: nudges the members asleep on their inbox. */
static void nudge_sleepers(struct zm_comm *c)
{
    struct shbar *bar = c->bc->bar;
    if (!bar)
        return;
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&bar->inbox_sleepers, memory_order_relaxed) == 0)
        return;
    for (int r = 0; r < c->size && (size_t)r < BAR_ASLEEP_MAX; r++)
        if (r != c->rank && atomic_load_explicit(&bar->inbox_asleep[r], memory_order_relaxed))
            zm_nudge(c->group->world[r]);
}

/* ---- sending ---- */

/* Publishes one chunk, waiting for room while draining unless timeout is 0: 1 published, 0 no room, -error. */
static int publish_chunk(struct zm_comm *c, const struct bhdr *h, struct zm_cursor *cur, size_t n,
                         int64_t timeout)
{
    struct zm_bcast *b = c->bc;
    void *slot;
    int rc = zimp_loan(b->tx, sizeof *h + n, &slot, 0);
    while ((rc == -EAGAIN || rc == -ETIMEDOUT) && timeout != 0) {
        drain_one(c);                     /* our own receiver may be what holds the ring */
        zm_progress(false);
        zm_check_deaths(false);
        if (comm_has_dead(c))
            return -MPIX_ERR_PROC_FAILED;
        rc = zimp_loan(b->tx, sizeof *h + n, &slot, 1000000);
    }
    if (rc == -EAGAIN || rc == -ETIMEDOUT)
        return 0;
    if (rc != 0)
        return -MPI_ERR_OTHER;
    memcpy(slot, h, sizeof *h);
    zm_cursor_pack(cur, (char *)slot + sizeof *h, n);
    if (zimp_publish(b->tx, slot, sizeof *h + n) != 0)
        return -MPI_ERR_OTHER;
    nudge_sleepers(c);
    drain_one(c);
    return 1;
}

int zm_bcast_send(struct zm_comm *c, uint32_t seq, const void *buf, int count, struct zm_type *t)
{
    if (c->size == 1)
        return MPI_SUCCESS;
    size_t bytes = zm_data_bytes(t, count), off = 0;
    struct zm_cursor cur;
    zm_cursor_init(&cur, t, buf, (size_t)count);
    do {                                  /* at least one message, also for 0 bytes */
        size_t n = bytes - off < c->bc->chunk ? bytes - off : c->bc->chunk;
        struct bhdr h = { BC_DATA, seq, c->rank, 0, bytes, off };
        int rc = publish_chunk(c, &h, &cur, n, -1);
        if (rc < 0)
            return -rc;
        off += n;
    } while (off < bytes);
    return MPI_SUCCESS;
}

/* ---- receiving ---- */

struct rx_state {
    size_t want, got;     /* bytes of the broadcast, bytes seen */
    bool started;
    int err;
    struct zm_cursor cur;
    size_t cap;
};

/* Puts one chunk into the receive buffer (bytes beyond cap are dropped). */
static void rx_chunk(struct rx_state *s, const struct bhdr *h, const void *data, size_t n)
{
    if (!s->started) {
        s->started = true;
        s->want = (size_t)h->len;
        if (s->want > s->cap)
            s->err = MPI_ERR_TRUNCATE;
    }
    size_t room = s->got < s->cap ? s->cap - s->got : 0;
    zm_cursor_unpack(&s->cur, data, n < room ? n : room);
    s->got += n;
}

static bool rx_done(const struct rx_state *s)
{
    return s->started && s->got >= s->want;
}

/* Takes what is at hand (read-ahead queue, then the channel without waiting). */
static int rx_poll(struct zm_comm *c, uint32_t seq, struct rx_state *s, int64_t ns)
{
    struct early *e;
    while (!rx_done(s) && (e = early_take(c->bc, seq)) != NULL) {
        rx_chunk(s, &e->h, e->data, e->n);
        free(e);
    }
    while (!rx_done(s)) {
        struct bhdr h;
        const void *d = NULL;             /* set by read_one when it returns 1 */
        size_t n = 0;
        int rc = read_one(c, seq, ns, &h, &d, &n);
        if (rc < 0)
            return rc;
        if (rc == 0)
            return MPI_SUCCESS;
        rx_chunk(s, &h, d, n);
        chan_release(c);
        ns = 0;
    }
    return MPI_SUCCESS;
}

/* zm_poll_until's condition: a chunk of the broadcast was taken (or an error). */
struct rx_poll_arg {
    struct zm_comm *c;
    uint32_t seq;
    struct rx_state *s;
    int rc;
};

static bool rx_progressed(void *p)
{
    struct rx_poll_arg *a = p;
    size_t before = a->s->got;
    bool started = a->s->started;
    a->rc = rx_poll(a->c, a->seq, a->s, 0);
    return a->rc || a->s->got != before || a->s->started != started;
}

int zm_bcast_recv(struct zm_comm *c, uint32_t seq, int root, void *buf, int count, struct zm_type *t)
{
    (void)root;
    if (c->size == 1)
        return MPI_SUCCESS;
    struct rx_state s = { 0 };
    s.cap = zm_data_bytes(t, count);
    zm_cursor_init(&s.cur, t, buf, (size_t)count);
    while (!rx_done(&s)) {
        /* Poll first (while ranks <= CPUs), then sleep in zimp's wait for a slice. */
        struct rx_poll_arg pa = { c, seq, &s, 0 };
        bool got = zm_poll_until(rx_progressed, &pa) || zm_yield_until(rx_progressed, &pa, BC_YIELD_NS);
        int rc = got ? pa.rc : rx_poll(c, seq, &s, BC_SLICE_NS);
        if (rc)
            return rc;
        if (!got)
            zm_poll_missed_end();
        if (rx_done(&s))
            break;
        zm_progress(false);
        zm_check_deaths(false);
        if (!comm_has_dead(c))
            continue;
        /*
         * A member that died may have done so after the root published the
         * rest (it read it and left: MPI_Finalize). Take what is there first.
         */
        int rc2 = rx_poll(c, seq, &s, 0);
        if (rc2 || !rx_done(&s))
            return rc2 ? rc2 : MPIX_ERR_PROC_FAILED;
    }
    return s.err;
}

/* ---- non-blocking pieces ---- */

struct zm_bcast_op {
    struct zm_comm *c;
    uint32_t seq;
    bool root;
    struct zm_type *t;
    /* root */
    struct zm_cursor cur;
    size_t bytes, off;
    bool sent_any;
    /* others */
    struct rx_state s;
};

struct zm_bcast_op *zm_bcast_op_new(struct zm_comm *c, uint32_t seq, int root, void *buf, int count,
                                    struct zm_type *t)
{
    struct zm_bcast_op *op = calloc(1, sizeof *op);
    if (!op)
        return NULL;
    op->c = c;
    op->seq = seq;
    op->root = c->rank == root;
    op->t = t;
    zm_type_ref(t);
    op->bytes = zm_data_bytes(t, count);
    zm_cursor_init(&op->cur, t, buf, (size_t)count);
    op->s.cap = op->bytes;
    zm_cursor_init(&op->s.cur, t, buf, (size_t)count);
    return op;
}

int zm_bcast_op_step(struct zm_bcast_op *op)
{
    struct zm_comm *c = op->c;
    if (c->size == 1)
        return 1;
    if (!op->root) {
        int rc = rx_poll(c, op->seq, &op->s, 0);
        if (rc)
            return -rc;
        if (rx_done(&op->s))
            return op->s.err ? -op->s.err : 1;
        return comm_has_dead(c) ? -MPIX_ERR_PROC_FAILED : 0;
    }
    if (comm_has_dead(c))
        return -MPIX_ERR_PROC_FAILED;
    while (!op->sent_any || op->off < op->bytes) {
        size_t n = op->bytes - op->off < c->bc->chunk ? op->bytes - op->off : c->bc->chunk;
        struct bhdr h = { BC_DATA, op->seq, c->rank, 0, op->bytes, op->off };
        int rc = publish_chunk(c, &h, &op->cur, n, 0);
        if (rc <= 0)
            return rc;
        op->sent_any = true;
        op->off += n;
    }
    return 1;
}

void zm_bcast_op_free(struct zm_bcast_op *op)
{
    if (op) {
        zm_type_unref(op->t);
        free(op);
    }
}
