/*
 * Cooperative rendezvous: a large message copied by both of its ranks at once.
 *
 * A rendezvous message (larger than an inbox slot, CMA available) is copied
 * once, by its receiver, with process_vm_readv (p2p.c). While it copies, the
 * sender only waits for the FIN: on a machine with a CPU for each rank, half
 * of the copying power stands idle. From ZM_COOP_MIN bytes on, the two ranks
 * share the copy instead:
 *
 *   sender    takes a claim record in its own claims page (a memfd every
 *             peer can map through /proc, like the barrier page) and names
 *             it in the RTS (next = copied = redo = 0);
 *   receiver  on matching: sends CTS (its buffer's address, the length) to
 *             the sender without blocking, then takes chunks of
 *             ZM_COOP_CHUNK bytes (fetch-add on `next`) and reads each one;
 *   sender    on CTS: takes chunks the same way and writes each one into the
 *             receiver's buffer (process_vm_writev);
 *   both      add each finished chunk's length to `copied`;
 *   receiver  once `next` has passed the end: waits until `copied` is the
 *             whole length (the sender's last chunk), reads again the chunk
 *             the sender could not write (`redo`), answers FIN.
 *
 * Invariants:
 *   C1  every chunk is taken by exactly one rank (the fetch-add), and the
 *       one who takes it adds its length to `copied` exactly once, copied
 *       or not (a failed write is named in `redo`, at most one: the sender
 *       stops taking after it);
 *   C2  nobody writes into the receiver's buffer after the receive
 *       completes: it completes only when `copied` is the whole length
 *       (every taken chunk is finished) or the sender is dead, and a chunk
 *       taken after that starts past the end (nothing to copy);
 *   C3  the sender's bytes stay put until the FIN, as for every rendezvous;
 *       the record is free again only when the send completes (FIN, or the
 *       receiver's death, or a cancel of an unmatched send), after which the
 *       receiver never touches it: it sends FIN after its last access;
 *   C4  a CTS acts only on the pending send its cookie names, from the rank
 *       that send goes to, and the CTS comes before that send's FIN (one
 *       sender's messages to an inbox stay in order).
 *
 * Nothing waits on the other rank except the receiver's end-of-copy wait,
 * which lasts at most the sender's one chunk in flight, or until the sender
 * is found dead. A sender that never sees the CTS (busy outside MPI) leaves
 * every chunk to the receiver, as before; a CTS that finds no room in the
 * sender's inbox is not sent.
 */
#include "mpi_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define ZM_COOP_MIN (256u << 10)          /* smaller messages: the receiver copies alone */
#define ZM_COOP_CHUNK (128u << 10)
#define ZM_CLAIMS 63                      /* records per page, after the header */
#define CLAIMS_MAGIC 0x7a6d2d636c61696dull   /* "zm-claim" */

struct zm_claim {
    _Atomic uint64_t next;    /* offset of the next chunk nobody has taken */
    _Atomic uint64_t copied;  /* bytes of taken chunks that are finished (C1) */
    _Atomic uint64_t redo;    /* 1 + offset of the chunk the sender could not write */
    char pad[40];
};

struct claims_page {
    uint64_t magic;
    int64_t pid;              /* the owner: a peer checks it after mapping */
    char pad[48];
    struct zm_claim rec[ZM_CLAIMS];
};
_Static_assert(sizeof(struct claims_page) == 4096, "one page");
_Static_assert(sizeof(struct zm_claim) == 64, "one cache line per record");

struct zm_cts {
    uint64_t addr;            /* the receiver's buffer */
    uint64_t len;             /* bytes to copy: the whole message */
};

static struct claims_page *mine;          /* NULL: no cooperative sends */
static int mine_fd = -1;
static struct stat mine_st;               /* what mine_fd is: the program may take the number */
static uint64_t used;                     /* bit i: record i belongs to a pending send */
static int *offered_to;                   /* per peer: our pending sends with a record */
static bool write_denied;                 /* process_vm_writev refused once: stop offering */

/* Per peer: its page, once mapped (or found unmappable). */
static struct claims_page **theirs;
static bool *theirs_failed;

/*
 * Off with more ranks than CPUs: no CPU waits idle for a sender to lend,
 * and a sender asleep answers the CTS a wake-up late (4 ranks on 2 CPUs:
 * 0.6-0.9x the bandwidth of the receiver copying alone).
 */
int zm_coop_init(void)
{
    if (zm.size == 1 || !zm.cma)
        return MPI_SUCCESS;
    theirs = calloc((size_t)zm.size, sizeof *theirs);
    theirs_failed = calloc((size_t)zm.size, sizeof *theirs_failed);
    offered_to = calloc((size_t)zm.size, sizeof *offered_to);
    if (!theirs || !theirs_failed || !offered_to)
        return MPI_ERR_NO_MEM;
    const char *env = getenv("ZIMP_MPI_COOP");
    cpu_set_t cpus;
    int ncpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    if ((env && strcmp(env, "0") == 0) || (zm.size > ncpu && !(env && strcmp(env, "1") == 0)))
        return MPI_SUCCESS;
    int fd = memfd_create("zimp-mpi-claims", MFD_CLOEXEC);
    if (fd < 0)
        return MPI_SUCCESS;                    /* no cooperative sends: not an error */
    void *p = MAP_FAILED;
    if (ftruncate(fd, sizeof *mine) == 0)
        p = mmap(NULL, sizeof *mine, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return MPI_SUCCESS;
    }
    mine = p;
    mine->magic = CLAIMS_MAGIC;
    mine->pid = getpid();
    mine_fd = fd;
    fstat(fd, &mine_st);
    return MPI_SUCCESS;
}

void zm_coop_fini(void)
{
    for (int r = 0; theirs && r < zm.size; r++)
        if (theirs[r])
            munmap(theirs[r], sizeof *theirs[r]);
    free(theirs);
    free(theirs_failed);
    free(offered_to);
    theirs = NULL;
    theirs_failed = NULL;
    offered_to = NULL;
    if (mine)
        munmap(mine, sizeof *mine);
    struct stat st;
    if (mine_fd >= 0 && fstat(mine_fd, &st) == 0 && st.st_dev == mine_st.st_dev && st.st_ino == mine_st.st_ino)
        close(mine_fd);                   /* else the program took the number: its file now */
    mine = NULL;
    mine_fd = -1;
    used = 0;
}

/* ---- the sender's side ---- */

void zm_coop_offer(struct zm_req *r, size_t bytes, struct zm_rts *rts)
{
    rts->claim = 0;
    rts->claims_fd = -1;
    if (!mine || write_denied || bytes < ZM_COOP_MIN || used == (1ull << ZM_CLAIMS) - 1)
        return;
    unsigned i = (unsigned)__builtin_ctzll(~used);
    struct zm_claim *cl = &mine->rec[i];
    atomic_store_explicit(&cl->next, 0, memory_order_relaxed);
    atomic_store_explicit(&cl->copied, 0, memory_order_relaxed);
    atomic_store_explicit(&cl->redo, 0, memory_order_relaxed);
    /* The RTS's publication (a release) orders these before the receiver's first look. */
    used |= 1ull << i;
    offered_to[r->peer_world]++;
    r->claim = i + 1;
    rts->claim = i + 1;
    rts->claims_fd = mine_fd;
}

void zm_coop_retire(struct zm_req *r)
{
    if (r->claim && offered_to) {         /* after zm_coop_fini: nothing to give back */
        used &= ~(1ull << (r->claim - 1));
        offered_to[r->peer_world]--;
    }
    r->claim = 0;
}

static int cma_write(int to, uint64_t addr, const char *src, size_t len)
{
    while (len) {
        struct iovec l = { (void *)src, len }, rem = { (void *)(uintptr_t)addr, len };
        ssize_t n = process_vm_writev(zm.peers[to].pid, &l, 1, &rem, 1, 0);
        if (n <= 0)
            return n < 0 ? errno : EIO;
        src += n;
        addr += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

/* CTS: the receiver matched our send; copy chunks into its buffer (C1, C4). */
void zm_coop_cts(const struct zm_hdr *h, const void *payload, size_t plen)
{
    struct zm_cts cts;
    if (plen < sizeof cts)
        return;
    memcpy(&cts, payload, sizeof cts);
    struct zm_req *r = zm_req_by_cookie(h->cookie);
    if (!r || r->kind != ZM_R_SEND || r->complete || !r->claim || r->peer_world != h->src_world ||
        !mine)
        return;
    const char *src = r->tmp ? r->tmp : zm_contig_ptr(r->type, r->buf, (size_t)r->count);
    if (!src || cts.len > zm_data_bytes(r->type, r->count))
        return;
    struct zm_claim *cl = &mine->rec[r->claim - 1];
    for (;;) {
        uint64_t off = atomic_fetch_add(&cl->next, ZM_COOP_CHUNK);
        if (off >= cts.len)
            return;
        size_t len = cts.len - off < ZM_COOP_CHUNK ? (size_t)(cts.len - off) : ZM_COOP_CHUNK;
        int err = cma_write(h->src_world, cts.addr + off, src + off, len);
        if (err) {
            atomic_store_explicit(&cl->redo, off + 1, memory_order_release);
            write_denied |= err == EPERM || err == EACCES || err == ENOSYS;
        }
        atomic_fetch_add(&cl->copied, len);
        if (err)
            return;
    }
}

/* ---- the receiver's side ---- */

/* The sender's claims page, mapped on first use through /proc (NULL: cannot). */
static struct claims_page *page_of(int from, int fd)
{
    if (theirs[from] || theirs_failed[from])
        return theirs[from];
    theirs_failed[from] = true;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)zm.peers[from].pid, fd);
    int f = open(path, O_RDWR | O_CLOEXEC);
    if (f < 0)
        return NULL;
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(f, &st) == 0 && st.st_size == (off_t)sizeof(struct claims_page))
        p = mmap(NULL, sizeof(struct claims_page), PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    close(f);
    if (p == MAP_FAILED)
        return NULL;
    struct claims_page *cp = p;
    if (cp->magic != CLAIMS_MAGIC || cp->pid != zm.peers[from].pid) {   /* another file by now */
        munmap(p, sizeof *cp);
        return NULL;
    }
    theirs_failed[from] = false;
    return theirs[from] = cp;
}

/* Tells the sender of h where to write; false if its inbox has no room now. */
static bool send_cts(const struct zm_hdr *h, const char *dst, size_t n)
{
    struct zm_hdr cts_h = { .kind = ZM_M_CTS, .src_world = zm.rank, .cookie = h->cookie };
    struct zm_cts cts = { (uint64_t)(uintptr_t)dst, n };
    return zm_wire_try(h->src_world, &cts_h, &cts, sizeof cts);
}

int zm_coop_read(const struct zm_hdr *h, const struct zm_rts *rts, char *dst, size_t n)
{
    int from = h->src_world;
    struct zm_claim *cl = NULL;
    if (rts->claim >= 1 && rts->claim <= ZM_CLAIMS && n == h->len && n >= ZM_COOP_MIN && theirs) {
        struct claims_page *cp = page_of(from, rts->claims_fd);
        cl = cp ? &cp->rec[rts->claim - 1] : NULL;
    }
    /*
     * A sender busy receiving from us (our own cooperative send to it is
     * pending) has no CPU to lend: in both directions at once sharing the
     * chunks only added CTS traffic and waits (0.8-0.9x the bandwidth).
     */
    if (!cl || offered_to[from] > 0 || !send_cts(h, dst, n))
        return zm_cma_read(from, rts->addr, dst, n);
    int rc = MPI_SUCCESS;
    for (;;) {
        uint64_t off = atomic_fetch_add(&cl->next, ZM_COOP_CHUNK);
        if (off >= n)
            break;
        size_t len = n - off < ZM_COOP_CHUNK ? (size_t)(n - off) : ZM_COOP_CHUNK;
        if (rc == MPI_SUCCESS)                /* after a failure: take, do not copy (C1) */
            rc = zm_cma_read(from, rts->addr + off, dst + off, len);
        atomic_fetch_add(&cl->copied, len);
    }
    /*
     * C2: the sender's chunks in flight, at most one (about 10-20 us). A
     * sender stopped in the middle of one (SIGSTOP) holds us: yield first,
     * then sleep, doubling from 10 us to 1 ms, so that we burn no CPU.
     */
    int64_t nap = 10000;
    for (unsigned spins = 0; atomic_load_explicit(&cl->copied, memory_order_acquire) < n; spins++) {
        if (spins % 64 == 63 && zm_peer_exited(from))
            return MPIX_ERR_PROC_FAILED;
        if (spins < 256) {
            sched_yield();
            continue;
        }
        struct timespec ts = { 0, nap };
        nanosleep(&ts, NULL);
        nap = nap * 2 > 1000000 ? 1000000 : nap * 2;
        if (zm_peer_exited(from))
            return MPIX_ERR_PROC_FAILED;
    }
    uint64_t redo = atomic_load_explicit(&cl->redo, memory_order_acquire);
    if (redo && rc == MPI_SUCCESS) {
        uint64_t off = redo - 1;
        size_t len = n - off < ZM_COOP_CHUNK ? (size_t)(n - off) : ZM_COOP_CHUNK;
        rc = zm_cma_read(from, rts->addr + off, dst + off, len);
    }
    return rc;
}
