/*
 * Transport: one zimp channel per rank (its inbox) that every other rank
 * sends to, the startup handshake, the progress engine, blocking waits and
 * the detection of dead ranks.
 *
 * Memory: a rank owns one inbox (ZM_INBOX_SLOTS x ZM_SLOT_SIZE bytes) and
 * maps the N-1 inboxes of its peers as a sender (one cache-line record
 * each), so shared memory grows linearly with N in total and each rank's
 * mappings grow linearly too; nothing is per pair of ranks.
 *
 * Every blocking wait sleeps in zimp's blocking receive (futex) in slices of
 * zm.slice_ns (ZM_SLICE_NS unless ZIMP_MPI_SLICE_NS says otherwise), so more
 * ranks than cores make progress; between slices it
 * polls the pidfds of the peers, so a rank that died fails the calls that
 * depend on it within one slice plus zimp's own 10 ms bound. While the job
 * has no more ranks than this process has CPUs, a wait first polls without
 * giving the CPU away for up to zm.poll_ns (zm_poll_until): zimp's own spin
 * yields whenever the machine has more runnable tasks than CPUs, which on a
 * shared machine turns a sub-microsecond hand-off into a trip through the
 * scheduler.
 */
#include "mpi_int.h"

#include "../core/runnable.h"     /* the one internal piece shared with libzimp */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define ZM_INBOX_SLOTS 64u
#define ZM_SLOT_SIZE 16384u
#define ZM_SLICE_NS (5 * 1000000LL)       /* longest sleep between liveness checks */
#define ZM_SLICE_MIN_NS (1000000LL)       /* ZIMP_MPI_SLICE_NS's range */
#define ZM_SLICE_MAX_NS (60 * 1000000000LL)
#define ZM_START_TIMEOUT_NS (60LL * 1000000000LL)
#define ZM_HELLO_RESEND_NS (100 * 1000000LL)
#define ZM_POLL_NS (20 * 1000LL)          /* polling before a wait sleeps (ranks <= CPUs) */
#define ZM_POLL_MIN_NS 500LL              /* the adaptive poll budget's floor */
#define ZM_POLL_CAP_NS (64 * 1000LL)      /* the longest poll a missed end can teach */
#define ZM_NBC_SLICE_NS (200 * 1000LL)    /* sleeps while a collective's channel cannot nudge us */
#define ZM_NBC_YIELD_NS (50 * 1000LL)     /* yields before such a wait sleeps (ranks > CPUs) */
#define ZM_TX_SLICE_NS (200 * 1000LL)     /* sleeps while a queued send waits for room (nothing wakes us) */

struct zm_world zm;

/* A control message (ACK, FIN) decided while the inbox slot was borrowed. */
struct ctl {
    int to;
    struct zm_hdr h;
};
static struct ctl *ctl_q;
static size_t ctl_len, ctl_cap;
static bool inbox_borrowed;

/* Startup handshake state (HELLO to rank 0, GO back). */
struct hello {
    int32_t pid;
    uint32_t reserved;
    uint64_t probe_addr;
};
static struct hello *hellos;
static int hellos_seen;
static int32_t *go_pids;
static bool go_seen, go_cma;
static volatile uint64_t cma_probe = 0x7a696d702d6d7069ull;   /* "zimp-mpi" */

int64_t zm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = { ns / 1000000000LL, ns % 1000000000LL };
    nanosleep(&ts, NULL);
}

void zm_chan_name(char *out, size_t cap, const char *what)
{
    snprintf(out, cap, "%s.%s", zm.job, what);
}

static void inbox_name(char *out, size_t cap, int rank)
{
    char what[32];
    snprintf(what, sizeof what, "in%d", rank);
    zm_chan_name(out, cap, what);
}

/* ---- environment from zimprun ---- */

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static int read_env(void)
{
    const char *job = getenv("ZIMP_MPI_JOB");
    zm.rank = env_int("ZIMP_MPI_RANK", 0);
    zm.size = env_int("ZIMP_MPI_SIZE", 1);
    zm.launcher = (pid_t)env_int("ZIMP_MPI_LAUNCHER", 0);
    /*
     * The slice bounds how late a death is seen, and how late a wait that
     * nobody wakes ends. Tests raise it, so that a wait which depends on
     * running out its slice, instead of being woken, shows as a hang.
     */
    const char *slice = getenv("ZIMP_MPI_SLICE_NS");
    long long ns = slice && *slice ? atoll(slice) : 0;
    zm.slice_ns = ns < ZM_SLICE_MIN_NS || ns > ZM_SLICE_MAX_NS ? ZM_SLICE_NS : ns;
    if (!job || !*job) {                  /* a singleton, started without zimprun */
        zm.rank = 0;
        zm.size = 1;
        snprintf(zm.job, sizeof zm.job, "mpi.s%d", (int)getpid());
        return MPI_SUCCESS;
    }
    snprintf(zm.job, sizeof zm.job, "%s", job);
    if (zm.size < 1 || zm.rank < 0 || zm.rank >= zm.size)
        return MPI_ERR_OTHER;
    return MPI_SUCCESS;
}

/* ---- the startup handshake ---- */

static void block_on_inbox(int64_t ns);

static bool launcher_gone(void)
{
    return zm.launcher > 1 && getppid() != zm.launcher;
}

/* Opens a sender on rank r's inbox once it exists and its receiver is open. */
static int open_peer(int r, int64_t deadline)
{
    char name[ZIMP_NAME_MAX + 1];
    inbox_name(name, sizeof name, r);
    for (;;) {
        if (!zm.peers[r].tx) {
            int rc = zimp_sender_open(name, &zm.peers[r].tx);
            if (rc != 0 && rc != -ENOENT)
                return rc;
        }
        struct zimp_info info;
        if (zm.peers[r].tx && zimp_info(name, &info) == 0 && info.receivers >= 1)
            return 0;
        if (zm_now_ns() > deadline || launcher_gone())
            return -ETIMEDOUT;
        sleep_ns(1000000);
    }
}

static int create_inbox(void)
{
    char name[ZIMP_NAME_MAX + 1];
    inbox_name(name, sizeof name, zm.rank);
    struct zimp_config cfg = { 0 };
    cfg.slots = (uint32_t)env_int("ZIMP_MPI_INBOX_SLOTS", ZM_INBOX_SLOTS);
    cfg.slot_size = ZM_SLOT_SIZE;
    cfg.max_senders = (uint32_t)zm.size;
    cfg.max_receivers = 1;
    int rc = zimp_create(name, &cfg);
    if (rc == 0)
        rc = zimp_receiver_open(name, &zm.inbox);
    zm.eager_max = ZM_SLOT_SIZE - sizeof(struct zm_hdr);
    return rc;
}

/* Progresses until done() or the deadline (MPI_ERR_PENDING), or the launcher is gone. */
static int wait_startup(bool (*done)(void), int64_t deadline)
{
    while (!done()) {
        zm_progress(false);
        if (done())
            break;
        block_on_inbox(zm.slice_ns);
        if (launcher_gone())
            return MPI_ERR_OTHER;
        if (zm_now_ns() > deadline)
            return MPI_ERR_PENDING;
    }
    return MPI_SUCCESS;
}

static bool all_hellos(void) { return hellos_seen == zm.size - 1; }
static bool got_go(void) { return go_seen; }

/* Can rank 0 read every rank's memory with process_vm_readv? */
static bool cma_works(void)
{
    const char *env = getenv("ZIMP_MPI_CMA");
    if (env && strcmp(env, "0") == 0)
        return false;
    for (int r = 1; r < zm.size; r++) {
        uint64_t v = 0;
        struct iovec l = { &v, sizeof v }, rem = { (void *)(uintptr_t)hellos[r].probe_addr, sizeof v };
        if (process_vm_readv(hellos[r].pid, &l, 1, &rem, 1, 0) != sizeof v || v != cma_probe)
            return false;
    }
    return true;
}

/* Rank 0 learns every pid and whether CMA works, then tells everyone. */
static int handshake(int64_t deadline)
{
    struct zm_hdr h = { 0 };
    h.src_world = zm.rank;
    if (zm.rank != 0) {
        struct hello me = { (int32_t)getpid(), 0, (uint64_t)(uintptr_t)&cma_probe };
        h.kind = ZM_M_HELLO;
        h.len = sizeof me;
        /*
         * zimp_info showed rank 0's receiver, but its open may not have
         * returned yet, and a receiver only gets what is published after
         * that: say HELLO again until GO comes (rank 0 ignores repeats).
         */
        int rc = MPI_ERR_PENDING;
        while (rc == MPI_ERR_PENDING && zm_now_ns() < deadline) {
            rc = zm_wire_send(0, &h, &me, sizeof me, NULL, 0);
            if (rc == MPI_SUCCESS)
                rc = wait_startup(got_go, zm_now_ns() + ZM_HELLO_RESEND_NS);
        }
        return rc;
    }
    int rc = wait_startup(all_hellos, deadline);
    if (rc)
        return rc;
    go_cma = cma_works();
    size_t n = (size_t)zm.size * sizeof(int32_t) + sizeof(int32_t);
    int32_t *go = calloc(1, n);
    if (!go)
        return MPI_ERR_NO_MEM;
    go[0] = go_cma;
    go[1] = (int32_t)getpid();
    for (int r = 1; r < zm.size; r++)
        go[r + 1] = hellos[r].pid;
    h.kind = ZM_M_GO;
    h.len = n;
    for (int r = 1; r < zm.size && rc == MPI_SUCCESS; r++)
        rc = zm_wire_send(r, &h, go, n, NULL, 0);
    for (int r = 0; r < zm.size; r++)
        zm.peers[r].pid = go[r + 1];
    free(go);
    return rc;
}

/* ---- liveness of peers ---- */

/* /proc/PID/stat: the start time (0: unreadable) and whether a zombie. */
/* pid's start time (clock ticks), whether it is a zombie and its threads; 0 if unknown. */
static unsigned long long proc_stat(pid_t pid, bool *zombie, long *threads)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    *zombie = false;
    *threads = 0;
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *q = strrchr(buf, ')');    /* the name may hold spaces and parentheses */
    char state;
    unsigned long long start = 0;
    /* fields 3 (state), 20 (num_threads) and 22 (starttime) */
    if (!q || sscanf(q + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %ld %*s %llu",
                     &state, threads, &start) != 3)
        return 0;
    *zombie = state == 'Z' || state == 'X' || state == 'x';
    return start;
}

static unsigned long long proc_start(pid_t pid, bool *zombie)
{
    long threads;
    return proc_stat(pid, zombie, &threads);
}

/* A pidfd for p (zimp__pidfd_open), -1 if none could be opened (*gone: no such process). */
static int pidfd_open_peer(struct zm_peer *p, bool *gone)
{
    return zimp__pidfd_open(p->pid, &p->pidfd_id, gone);
}

/*
 * Whether p->pidfd is still the pidfd we opened: a poll of a number the
 * program took says nothing about the peer (POLLNVAL, or a file that always
 * reads ready: a false death), and we must not close it.
 */
static bool pidfd_ours(const struct zm_peer *p)
{
    return zimp__fd_is(p->pidfd, &p->pidfd_id);
}

/* Without a pidfd: by /proc (gone, a zombie, or another process at the pid), else kill(pid, 0). */
static bool exited_by_proc(const struct zm_peer *p)
{
    bool zombie;
    unsigned long long start = proc_start(p->pid, &zombie);
    if (start == 0)
        return kill(p->pid, 0) != 0 && errno == ESRCH;
    return zombie || (p->start != 0 && start != p->start);
}

/*
 * Whether peer r has exited. revents: what a poll of its pidfd returned
 * (-1: not polled yet). A pidfd that is no longer ours is replaced by a
 * fresh one (the pid checked against the start time first), or the check
 * goes by /proc from then on.
 */
static bool peer_exited(int r, int revents)
{
    struct zm_peer *p = &zm.peers[r];
    if (p->dead || p->gone)
        return true;
    if (p->pidfd < 0 || !pidfd_ours(p)) {
        p->pidfd = -1;                    /* not closed: the number is the program's now */
        if (exited_by_proc(p))
            return true;
        bool gone;
        p->pidfd = pidfd_open_peer(p, &gone);   /* again at every check until one opens */
        if (gone)
            return true;
        if (p->pidfd >= 0 && exited_by_proc(p)) {   /* the pid was reused before the open */
            close(p->pidfd);
            p->pidfd = -1;
            return true;
        }
        revents = -1;
    }
    if (p->pidfd < 0)
        return exited_by_proc(p);
    if (revents < 0) {
        struct pollfd pfd = { p->pidfd, POLLIN, 0 };
        revents = poll(&pfd, 1, 0) > 0 ? pfd.revents : 0;
    }
    return (revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

bool zm_peer_exited(int r)
{
    return peer_exited(r, -1);
}

static void open_pidfds(void)
{
    for (int r = 0; r < zm.size; r++) {
        struct zm_peer *p = &zm.peers[r];
        p->pidfd = -1;
        if (r == zm.rank)
            continue;
        bool zombie;
        p->start = proc_start(p->pid, &zombie);
        bool gone;
        p->pidfd = pidfd_open_peer(p, &gone);
        if (p->pidfd < 0 || zombie)
            p->dead = true;       /* already gone (or pidfd unsupported: see docs) */
    }
}

/* Threads in this process, or 0 if unknown. */
static long zm_own_threads(void)
{
    bool zombie;
    long threads;
    proc_stat(getpid(), &zombie, &threads);
    return threads;
}

/*
 * Puts this rank on the (rank mod n)-th CPU it may use, then lets it go
 * again: the ranks leave MPI_Init spread over the CPUs, a placement the
 * scheduler has no reason to undo while they are equally busy. Left to
 * itself it may keep three of four ranks on one of two CPUs, where every
 * barrier then costs two trips through the scheduler instead of one
 * (measured: 3.6-4.9 against 1.9-2.5 us). Called at the end of MPI_Init:
 * the set-up before it sleeps and wakes every rank, and wake-ups may put
 * them anywhere. ZIMP_MPI_SPREAD=0 leaves placement alone, and so does a
 * process with threads of its own by now: one of them may set this
 * thread's mask between our reading it and giving it back (an outside
 * review saw 14 of 1,002 such changes undone).
 */
void zm_spread_over_cpus(void)
{
    const char *env = getenv("ZIMP_MPI_SPREAD");
    cpu_set_t allowed;
    if (zm.size < 2 || (env && strcmp(env, "0") == 0) || zm_own_threads() != 1 ||
        sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return;
    int ncpu = CPU_COUNT(&allowed);
    if (ncpu < 2)
        return;
    int want = zm.rank % ncpu, k = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed) || k++ != want)
            continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        if (sched_setaffinity(0, sizeof one, &one) == 0)    /* moves us there before it returns */
            sched_setaffinity(0, sizeof allowed, &allowed);
        return;
    }
}

int zm_transport_init(void)
{
    int rc = read_env();
    if (rc)
        return rc;
    zm.peers = calloc((size_t)zm.size, sizeof *zm.peers);
    if (!zm.peers)
        return MPI_ERR_NO_MEM;
    zm.peers[zm.rank].pid = getpid();
    zm.peers[zm.rank].pidfd = -1;
    zm.eager_max = ZM_SLOT_SIZE - sizeof(struct zm_hdr);
    if (zm.size == 1)
        return MPI_SUCCESS;
    cpu_set_t cpus;
    int ncpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    zm.poll_ns = zm.size <= ncpu ? ZM_POLL_NS : 0;
    const char *poll_env = getenv("ZIMP_MPI_POLL_NS");
    if (poll_env && *poll_env >= '0' && *poll_env <= '9') {
        zm.poll_ns = atoll(poll_env);
        zm.poll_fixed = true;
    }
    /* Let any rank read our buffers with process_vm_readv under Yama's scope 1. */
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    if (create_inbox() != 0)
        return MPI_ERR_OTHER;
    int64_t deadline = zm_now_ns() + ZM_START_TIMEOUT_NS;
    for (int r = 0; r < zm.size; r++)
        if (r != zm.rank && open_peer(r, deadline) != 0)
            return MPI_ERR_OTHER;
    if (zm.rank == 0 && !(hellos = calloc((size_t)zm.size, sizeof *hellos)))
        return MPI_ERR_NO_MEM;
    rc = handshake(deadline);
    /*
     * Everyone has opened every inbox it will ever use (rank 0 sent GO only
     * after every HELLO): the names can go, so no file outlives the job.
     */
    char name[ZIMP_NAME_MAX + 1];
    inbox_name(name, sizeof name, zm.rank);
    zimp_unlink(name);
    if (rc)
        return rc;
    if (zm.rank != 0) {
        for (int r = 0; r < zm.size; r++)
            zm.peers[r].pid = go_pids[r + 1];
        free(go_pids);
        go_pids = NULL;
    }
    zm.cma = go_cma;
    free(hellos);
    hellos = NULL;
    open_pidfds();
    return zm_coop_init();
}

void zm_transport_fini(void)
{
    if (!zm.peers)
        return;
    zm_coop_fini();
    for (int r = 0; r < zm.size; r++) {
        zimp_sender_close(zm.peers[r].tx);
        if (pidfd_ours(&zm.peers[r]))
            close(zm.peers[r].pidfd);
    }
    zimp_receiver_close(zm.inbox);
    zm.inbox = NULL;
    free(zm.peers);
    zm.peers = NULL;
    free(ctl_q);
    ctl_q = NULL;
    ctl_len = ctl_cap = 0;
}

/* ---- handshake messages arrive through zm_deliver ---- */

void zm_startup_msg(const struct zm_hdr *h, const void *payload, size_t plen)
{
    if (h->kind == ZM_M_HELLO && hellos && plen >= sizeof(struct hello) && h->src_world > 0 &&
        h->src_world < zm.size && hellos[h->src_world].pid == 0) {
        memcpy(&hellos[h->src_world], payload, sizeof(struct hello));
        hellos_seen++;
    } else if (h->kind == ZM_M_GO && !go_seen && plen >= (size_t)(zm.size + 1) * sizeof(int32_t)) {
        go_pids = malloc(plen);
        if (!go_pids)
            return;
        memcpy(go_pids, payload, plen);
        go_cma = go_pids[0] != 0;
        go_seen = true;
    }
}

/* ---- sending ---- */

bool zm_peer_dead(int world_rank)
{
    return world_rank >= 0 && world_rank < zm.size && zm.peers[world_rank].dead;
}

/* Delivers a message to ourselves without a channel. */
static int send_local(const struct zm_hdr *h, const void *p1, size_t n1, struct zm_cursor *cur, size_t ncur)
{
    if (!ncur) {
        zm_deliver(h, p1, n1);
        return MPI_SUCCESS;
    }
    char *tmp = malloc(n1 + ncur);
    if (!tmp)
        return MPI_ERR_NO_MEM;
    if (n1)
        memcpy(tmp, p1, n1);
    zm_cursor_pack(cur, tmp + n1, ncur);
    zm_deliver(h, tmp, n1 + ncur);
    free(tmp);
    return MPI_SUCCESS;
}

bool zm_wire_try(int to, const struct zm_hdr *h, const void *p, size_t n)
{
    if (to == zm.rank || zm.peers[to].dead || !zm.peers[to].tx)
        return false;
    char *slot;
    if (zimp_loan(zm.peers[to].tx, sizeof *h + n, (void **)&slot, 0) != 0)
        return false;
    memcpy(slot, h, sizeof *h);
    if (n)
        memcpy(slot + sizeof *h, p, n);
    return zimp_publish(zm.peers[to].tx, slot, sizeof *h + n) == 0;
}

void zm_nudge(int to)
{
    struct zm_hdr h = { .kind = ZM_M_NUDGE, .src_world = zm.rank };
    zm_wire_try(to, &h, NULL, 0);
}

int zm_wire_send(int to, const struct zm_hdr *h, const void *p1, size_t n1,
                 struct zm_cursor *cur, size_t ncur)
{
    if (to == zm.rank)
        return send_local(h, p1, n1, cur, ncur);
    struct zm_peer *p = &zm.peers[to];
    size_t total = sizeof *h + n1 + ncur;
    void *slot;
    int rc = zimp_loan(p->tx, total, &slot, 0);
    while (rc == -EAGAIN || rc == -ETIMEDOUT) {
        /*
         * Its inbox is full: drain ours meanwhile (it may be waiting for
         * room in ours), then sleep a slice in zimp's blocking loan.
         */
        if (zm.progress_depth < 4 && !inbox_borrowed)
            zm_progress(true);
        zm_check_deaths(false);
        if (p->dead)
            return MPIX_ERR_PROC_FAILED;
        rc = zimp_loan(p->tx, total, &slot, 1000000);
    }
    if (rc != 0)
        return rc == -ECONNRESET || rc == -EPIPE ? MPIX_ERR_PROC_FAILED : MPI_ERR_OTHER;
    char *s = slot;
    memcpy(s, h, sizeof *h);
    if (n1)
        memcpy(s + sizeof *h, p1, n1);
    if (ncur)
        zm_cursor_pack(cur, s + sizeof *h + n1, ncur);
    rc = zimp_publish(p->tx, slot, total);
    return rc == 0 ? MPI_SUCCESS : MPI_ERR_OTHER;
}

/* Queues a control message; zm_flush_ctl sends it once no slot is borrowed. */
void zm_queue_ctl(int to, const struct zm_hdr *h)
{
    if (ctl_len == ctl_cap) {
        size_t cap = ctl_cap ? ctl_cap * 2 : 16;
        struct ctl *q = realloc(ctl_q, cap * sizeof *q);
        if (!q)
            zm_abort_job(MPI_ERR_NO_MEM, "out of memory queueing a control message");
        ctl_q = q;
        ctl_cap = cap;
    }
    ctl_q[ctl_len++] = (struct ctl){ to, *h };
}

/*
 * Sends the queued control messages that fit: never waiting for room (a
 * call that progresses stays local), and in order per destination (one
 * that waits keeps the later ones to its rank behind it).
 */
static void flush_ctl(void)
{
    if (inbox_borrowed)
        return;
    int stuck[16], nstuck = 0;
    size_t keep = 0;
    for (size_t i = 0; i < ctl_len; i++) {
        struct ctl c = ctl_q[i];
        bool behind = nstuck == 16;
        for (int k = 0; k < nstuck && !behind; k++)
            behind = stuck[k] == c.to;
        /* A dead peer needs no answer; a failure here shows on its side. */
        if (!behind && (zm_peer_dead(c.to) || (c.to == zm.rank ? zm_wire_send(c.to, &c.h, NULL, 0, NULL, 0) == MPI_SUCCESS
                                                                 : zm_wire_try(c.to, &c.h, NULL, 0))))
            continue;
        if (!behind)
            stuck[nstuck++] = c.to;
        ctl_q[keep++] = c;
    }
    ctl_len = keep;
}

bool zm_ctl_pending(void)
{
    flush_ctl();
    return ctl_len > 0;
}

/* ---- progress ---- */

/* Handles one borrowed inbox message, then gives the slot back. */
static void handle_borrowed(const void *buf, size_t len)
{
    struct zm_hdr h;
    if (len >= sizeof h) {
        memcpy(&h, buf, sizeof h);
        zm_deliver(&h, (const char *)buf + sizeof h, len - sizeof h);
    }
    zimp_release(zm.inbox);
    inbox_borrowed = false;
}

/* Handles up to `max` waiting messages without blocking; how many. */
static int drain_inbox(int max)
{
    int n = 0;
    if (!zm.inbox || inbox_borrowed)
        return 0;
    while (n < max) {
        const void *buf;
        size_t len;
        if (zimp_read(zm.inbox, &buf, &len, 0) != 0)
            break;
        inbox_borrowed = true;
        handle_borrowed(buf, len);
        n++;
    }
    return n;
}

void zm_progress(bool full)
{
    zm.progress_depth++;
    drain_inbox(256);
    flush_ctl();
    zm_tx_push_all();
    if (full)
        zm_bcast_drain_all();
    if (zm.progress_depth == 1)
        zm_nbc_progress();
    zm.progress_depth--;
}

/* Sleeps up to one slice for the next inbox message and handles it. */
static void block_on_inbox(int64_t ns)
{
    if (!zm.inbox || inbox_borrowed) {
        sleep_ns(ns < 1000000 ? ns : 1000000);
        return;
    }
    const void *buf;
    size_t len;
    if (zimp_read(zm.inbox, &buf, &len, ns) == 0) {
        inbox_borrowed = true;
        zm.progress_depth++;
        handle_borrowed(buf, len);
        zm.progress_depth--;
    }
}

/*
 * The poll budget adapts like zimp's spin: halved after a poll that found
 * nothing (the peer is busy, or descheduled: with the machine crowded both
 * ranks may share one CPU, and polling would only delay the peer), doubled
 * after one that succeeded, between ZM_POLL_MIN_NS and a ceiling; and
 * raised when what a poll gave up on came soon after (zm_poll_missed_end).
 * The ceiling is zm.poll_ns, or what the last such wait took (a rendezvous
 * of 64-256 KiB takes 10-40 us, longer than the 20 us default: each answer
 * then paid a futex wake-up, 5-25 us here), up to ZM_POLL_CAP_NS, a few
 * wake-ups' worth: a longer poll would spend more CPU than the wake-up it
 * saves. A wait longer than that, or a machine with more runnable tasks
 * than CPUs (another program's: the rank we wait for may need our CPU),
 * puts it back to zm.poll_ns. ZIMP_MPI_POLL_NS fixes it.
 */
static int64_t poll_budget = ZM_POLL_NS;
static int64_t poll_ceiling = ZM_POLL_NS;

/*
 * Whether the machine has more runnable tasks than this process has CPUs
 * (/proc/loadavg's running count, read at most every 10 ms): then a long
 * poll may keep the rank we wait for, or another program, off a CPU.
 */
static bool machine_crowded(void)
{
    static int64_t checked_at;
    static bool answer;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    if (checked_at && now - checked_at < 10 * 1000000LL)
        return answer;
    checked_at = now;
    return answer = zimp__runnable_exceeds_cpus();
}

static int64_t poll_started_at;          /* when the last poll began */
static int64_t poll_gave_up_at;          /* when the last poll gave up; 0: it did not */

bool zm_poll_until(bool (*ready)(void *), void *arg)
{
    if (zm.poll_ns <= 0)
        return false;
    if (poll_ceiling < zm.poll_ns || zm.poll_fixed)
        poll_ceiling = zm.poll_ns;
    if (poll_budget > poll_ceiling)
        poll_budget = poll_ceiling;
    int64_t now = zm_now_ns(), end = now + poll_budget;
    poll_started_at = now;
    do {
        for (int i = 0; i < 16; i++) {
            if (ready(arg)) {
                poll_budget = poll_budget * 2 < poll_ceiling ? poll_budget * 2 : poll_ceiling;
                poll_gave_up_at = 0;
                return true;
            }
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    } while ((now = zm_now_ns()) < end);
    poll_budget = poll_budget / 2 > ZM_POLL_MIN_NS ? poll_budget / 2 : ZM_POLL_MIN_NS;
    poll_gave_up_at = now;
    return false;
}

/*
 * A wait whose poll gave up has ended. If a poll a little longer than the
 * wait (up to the cap) would have caught its end without a trip through
 * the kernel, poll that long from now on. Without this, two ranks in a
 * ping-pong that both fell asleep once stay asleep, each answer waiting
 * for a wake-up (5 us here), so that no poll ever succeeds again.
 */
void zm_poll_missed_end(void)
{
    if (!poll_gave_up_at)
        return;
    int64_t now = zm_now_ns(), took = now - poll_started_at;
    int64_t cap = zm.poll_fixed || machine_crowded() ? zm.poll_ns : ZM_POLL_CAP_NS;
    if (now - poll_gave_up_at <= zm.poll_ns || took <= cap) {
        int64_t need = took + took / 4;
        need = need < zm.poll_ns ? zm.poll_ns : need > cap ? cap : need;
        poll_ceiling = need;
        poll_budget = need;
    } else {
        poll_ceiling = zm.poll_ns;       /* a long wait: polling would not have caught it */
    }
    poll_gave_up_at = 0;
}

bool zm_yield_until(bool (*ready)(void *), void *arg, int64_t ns)
{
    if (zm.poll_ns > 0)
        return false;
    int64_t end = zm_now_ns() + ns;
    do {
        if (ready(arg))
            return true;
        sched_yield();
    } while (zm_now_ns() < end);
    return ready(arg);
}

/* Handles the inbox's messages at hand; then done(arg). */
struct inbox_poll {
    bool (*done)(void *);
    void *arg;
};

static bool inbox_ready(void *p)
{
    const struct inbox_poll *ip = p;
    if (zm.nbc_head) {                    /* what they wait for may come on a channel too */
        zm_progress(true);
        return ip->done(ip->arg);
    }
    /* One message at a time: once the wait is over, no further (empty) read. */
    for (int n = 0; n < 256 && drain_inbox(1) == 1; n++) {
        flush_ctl();
        if (ip->done(ip->arg))
            return true;
    }
    return false;
}

void zm_wait_for(bool (*done)(void *), void *arg)
{
    for (;;) {
        zm_progress(false);
        if (done(arg))
            return;
        zm_check_deaths(false);
        if (done(arg))
            return;
        struct inbox_poll ip = { done, arg };
        if (zm_poll_until(inbox_ready, &ip))
            return;
        /* More ranks than CPUs: a collective's next step needs another rank to run. */
        if (zm.nbc_head && zm_yield_until(inbox_ready, &ip, ZM_NBC_YIELD_NS))
            return;
        if (done(arg))
            return;
        /*
         * A pending non-blocking collective may next hear from its
         * communicator's channel, which does not wake an inbox: mark us
         * asleep there (its publishers then nudge our inbox), and look at
         * the channels once more after the mark, for what came before it.
         */
        int64_t slice = zm.slice_ns;
        bool marked = false;
        if (zm.nbc_head) {
            marked = zm_bcast_inbox_sleep(true);
            if (!marked)
                slice = ZM_NBC_SLICE_NS;
            zm_progress(true);
            if (done(arg)) {
                if (marked)
                    zm_bcast_inbox_sleep(false);
                return;
            }
        }
        /* A queued send (p2p.c) waits for room in a receiver's inbox: its
         * releases wake zimp's senders, not our inbox, so look again soon. */
        if ((zm_tx_push_all() || zm_ctl_pending()) && slice > ZM_TX_SLICE_NS)
            slice = ZM_TX_SLICE_NS;
        block_on_inbox(slice);
        if (marked)
            zm_bcast_inbox_sleep(false);
        flush_ctl();                      /* an ACK or FIN the message just handled asked for */
        if (done(arg)) {
            zm_poll_missed_end();
            return;
        }
        zm_progress(true);
    }
}

/* ---- deaths ---- */

void zm_check_deaths(bool force)
{
    int64_t now = zm_now_ns();
    if (zm.size == 1 || (!force && now < zm.next_death_check))
        return;
    zm.next_death_check = now + zm.slice_ns;
    struct pollfd *fds = calloc((size_t)zm.size, sizeof *fds);
    if (!fds)
        return;
    int n = 0;
    bool suspect = false;                 /* a peer to look at closer: gone, or no (own) pidfd */
    for (int r = 0; r < zm.size; r++) {
        struct zm_peer *p = &zm.peers[r];
        if (r == zm.rank || p->dead)
            continue;
        if (p->pidfd >= 0 && pidfd_ours(p))
            fds[n++] = (struct pollfd){ .fd = p->pidfd, .events = POLLIN };
        else
            suspect = true;               /* peer_exited replaces a lost pidfd, or asks /proc */
        suspect |= p->gone;
    }
    if ((n && poll(fds, (nfds_t)n, 0) > 0) || suspect) {
        /* What a dead rank published before it died is still ours: take it first. */
        drain_inbox(1 << 20);
        for (int r = 0; r < zm.size; r++) {
            struct zm_peer *p = &zm.peers[r];
            if (r == zm.rank || p->dead)
                continue;
            int revents = 0;
            for (int i = 0; i < n; i++)
                if (fds[i].fd == p->pidfd)
                    revents = fds[i].revents;
            bool died = p->gone || ((revents || p->pidfd < 0 || !pidfd_ours(p)) && peer_exited(r, revents));
            if (died && !zm.peers[r].dead) {
                zm.peers[r].dead = true;
                zm_fail_dead(r);
            }
        }
    }
    free(fds);
}

int zm_cma_read(int from, uint64_t addr, void *dst, size_t len)
{
    char *d = dst;
    while (len) {
        struct iovec l = { d, len }, r = { (void *)(uintptr_t)addr, len };
        ssize_t n = process_vm_readv(zm.peers[from].pid, &l, 1, &r, 1, 0);
        if (n < 0 && errno == ESRCH) {
            zm.peers[from].gone = true;  /* marked dead by the next zm_check_deaths */
            return MPIX_ERR_PROC_FAILED;
        }
        if (n <= 0)
            return MPI_ERR_OTHER;
        d += n;
        addr += (uint64_t)n;
        len -= (size_t)n;
    }
    return MPI_SUCCESS;
}
