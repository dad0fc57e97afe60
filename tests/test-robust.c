/* Robustness: crashed senders and receivers, stuck receivers, bad segments. */
#include "task.h"
#include <dirent.h>
#include <sys/epoll.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* ---- a sender killed between zimp_loan and zimp_publish ---- */

struct victim_tx {
    const char *name;
    uint32_t id;
    int before;                 /* messages published first */
    int mid_loan;               /* then loan and stop inside the loan */
    struct tpipe *ready, *go;
};

static void victim_tx_role(void *p)
{
    struct victim_tx *a = p;
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    signal_byte(a->ready);
    if (a->go)
        ASSERT_OK(wait_bytes(a->go, 1, tmo(30000)));
    for (int i = 0; i < a->before; i++)
        ASSERT_OK(send_msg(s, i & 1, a->id, (uint64_t)i, 100, T_LONG));
    if (a->mid_loan) {
        void *lb;
        ASSERT_OK(zimp_loan(s, 100, &lb, T_LONG));
        memset(lb, 0xDD, 100);     /* never a valid message: must not be seen */
    }
    signal_byte(a->ready);
    for (;;)
        pause();
}

static void expect_from(zimp_receiver *r, uint32_t id, uint64_t seq, int64_t timeout)
{
    uint8_t buf[256];
    ssize_t n = zimp_recv(r, buf, sizeof buf, timeout);
    ASSERT_MSG(n >= 0, "expected (%u,%llu): %s", id, (unsigned long long)seq, err_text(n));
    uint32_t snd;
    uint64_t sq;
    ASSERT_MSG(msg_check(buf, (size_t)n, &snd, &sq), "received a corrupt or unpublished "
               "message (len %zd, first byte 0x%02x)", n, buf[0]);
    ASSERT_MSG(snd == id && sq == seq, "expected (%u,%llu) got (%u,%llu)", id,
               (unsigned long long)seq, snd, (unsigned long long)sq);
}

TEST_IMPL(sender_killed_mid_loan)
{
    char name[128];
    chan_name(name, sizeof name, "skl");
    create_chan(name, 8, 128, 4, 4);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    struct tpipe ready_a, ready_b, go_a, go_b;
    tpipe_open(&ready_a);
    tpipe_open(&ready_b);
    tpipe_open(&go_a);
    tpipe_open(&go_b);
    struct victim_tx a = { name, 1, 5, 1, &ready_a, &go_a };
    pid_t pa = spawn(victim_tx_role, &a);
    struct victim_tx b = { name, 2, 6, 0, &ready_b, &go_b };
    pid_t pb = spawn(victim_tx_role, &b);
    ASSERT_OK(wait_bytes(&ready_a, 1, tmo(10000)));
    ASSERT_OK(wait_bytes(&ready_b, 1, tmo(10000)));
    signal_byte(&go_a);
    ASSERT_OK(wait_bytes(&ready_a, 1, tmo(10000)));     /* A is inside its loan */
    ASSERT_OK(kill(pa, SIGKILL));                        /* left unreaped: a zombie */
    signal_byte(&go_b);
    int64_t t0 = now_ns();
    for (int i = 0; i < 5; i++)
        expect_from(r, 1, (uint64_t)i, 5 * NS_PER_S);
    for (int i = 0; i < 6; i++)     /* B's messages follow A's dead slot */
        expect_from(r, 2, (uint64_t)i, 5 * NS_PER_S);
    ASSERT_MSG(now_ns() - t0 < 3 * NS_PER_S, "receiving past the dead loan took %lld ms",
               (long long)((now_ns() - t0) / NS_PER_MS));
    ASSERT_OK(wait_bytes(&ready_b, 1, tmo(10000)));
    uint8_t buf[256];
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);      /* B is alive */
    /* B dies too (without a loan): no sender left -> -EPIPE */
    ASSERT_OK(kill(pb, SIGKILL));
    t0 = now_ns();
    ssize_t n = zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S);
    int64_t el = now_ns() - t0;
    ASSERT_EQ(n, -EPIPE);
    ASSERT_MSG(el < 2 * NS_PER_S, "-EPIPE after %lld ms", (long long)(el / NS_PER_MS));
    ASSERT_EQ(wait_child(pa, 1000), 128 + SIGKILL);
    ASSERT_EQ(wait_child(pb, 1000), 128 + SIGKILL);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    tpipe_close(&ready_a);
    tpipe_close(&ready_b);
    tpipe_close(&go_a);
    tpipe_close(&go_b);
    return 0;
}

struct sleeper_rx { const char *name; int expect; struct tpipe *ready; int64_t *woke; };

static void sleeper_rx_role(void *p)
{
    struct sleeper_rx *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    for (int i = 0; i < a->expect; i++)
        expect_from(r, 1, (uint64_t)i, T_LONG);
    signal_byte(a->ready);
    uint8_t buf[256];
    ssize_t n = zimp_recv(r, buf, sizeof buf, -1);   /* sleeps until the sender dies */
    *a->woke = now_ns();
    ASSERT_EQ(n, -EPIPE);
    zimp_receiver_close(r);
}

TEST_IMPL(sender_killed_wakes_receivers)
{
    int64_t *woke = shared_alloc(4096);
    for (int mid = 1; mid >= 0; mid--) {
        char name[128];
        chan_name(name, sizeof name, mid ? "skw-loan" : "skw-idle");
        create_chan(name, 8, 128, 4, 4);
        struct tpipe rready, tready;
        tpipe_open(&rready);
        tpipe_open(&tready);
        struct sleeper_rx ra = { name, 3, &rready, woke };
        pid_t rx = spawn(sleeper_rx_role, &ra);
        ASSERT_OK(wait_bytes(&rready, 1, tmo(10000)));
        zimp_receiver *r;
        ASSERT_OK(zimp_receiver_open(name, &r));
        struct victim_tx ta = { name, 1, 3, mid, &tready, NULL };
        pid_t tx = spawn(victim_tx_role, &ta);
        ASSERT_OK(wait_bytes(&tready, 2, tmo(10000)));
        ASSERT_OK(wait_bytes(&rready, 1, tmo(10000)));
        sleep_ms(50);                               /* the child sleeps in the kernel */
        int64_t t_kill = now_ns();
        ASSERT_OK(kill(tx, SIGKILL));               /* not reaped before -EPIPE */
        for (int i = 0; i < 3; i++)
            expect_from(r, 1, (uint64_t)i, 5 * NS_PER_S);
        uint8_t buf[256];
        ssize_t n = zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S);
        int64_t el = now_ns() - t_kill;
        ASSERT_MSG(n == -EPIPE, "%s: %zd (%s)", mid ? "mid-loan" : "idle", n, err_text(n));
        ASSERT_MSG(el < 2 * NS_PER_S, "-EPIPE %lld ms after the kill", (long long)(el / NS_PER_MS));
        ASSERT_CHILD_OK(rx, tmo(5000));
        ASSERT_MSG(*woke - t_kill < 2 * NS_PER_S, "sleeping receiver woke %lld ms after the kill",
                   (long long)((*woke - t_kill) / NS_PER_MS));
        ASSERT_EQ(wait_child(tx, 1000), 128 + SIGKILL);
        zimp_receiver_close(r);
        ASSERT_OK(zimp_unlink(name));
        tpipe_close(&rready);
        tpipe_close(&tready);
    }
    shared_free(woke, 4096);
    return 0;
}

/* ---- a receiver killed while holding a zimp_read borrow ---- */

struct borrow_victim { const char *name; struct tpipe *ready; };

static void borrow_victim_role(void *p)
{
    struct borrow_victim *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    const void *rb;
    size_t len;
    ASSERT_OK(zimp_read(r, &rb, &len, T_LONG));
    signal_byte(a->ready);
    for (;;)
        pause();
}

struct survivor { const char *name; long count; struct tpipe *ready; };

static void survivor_role(void *p)
{
    struct survivor *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    uint8_t buf[256];
    for (long i = 0; i < a->count; i++) {
        ssize_t n = recv_msg(r, (int)(i % 3 == 0), buf, sizeof buf, T_LONG);
        ASSERT_MSG(n > 0, "survivor message %ld: %s", i, err_text(n));
        uint32_t snd;
        uint64_t seq;
        ASSERT(msg_check(buf, (size_t)n, &snd, &seq));
        ASSERT_MSG(seq == (uint64_t)i, "survivor got %llu expected %ld", (unsigned long long)seq, i);
    }
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S), -EPIPE);
    zimp_receiver_close(r);
}

TEST_IMPL(receiver_killed_mid_borrow)
{
    char name[128];
    chan_name(name, sizeof name, "rkb");
    create_chan(name, 4, 128, 2, 3);
    long count = 300;
    struct tpipe ready, vready;
    tpipe_open(&ready);
    tpipe_open(&vready);
    struct borrow_victim va = { name, &vready };
    pid_t v = spawn(borrow_victim_role, &va);
    struct survivor sa = { name, count + 1, &ready };   /* 0..count */
    pid_t s1 = spawn(survivor_role, &sa), s2 = spawn(survivor_role, &sa);
    ASSERT_OK(wait_bytes(&vready, 1, tmo(10000)));
    ASSERT_OK(wait_bytes(&ready, 2, tmo(10000)));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(send_msg(s, MODE_ZC, 0, 0, 100, T_LONG));
    ASSERT_OK(wait_bytes(&vready, 1, tmo(10000)));       /* message 0 borrowed */
    int64_t t_kill = now_ns();
    ASSERT_OK(kill(v, SIGKILL));                         /* left a zombie for now */
    for (long i = 1; i < count; i++) {
        int rc = send_msg(s, (int)(i & 1), 0, (uint64_t)i, 100, 5 * NS_PER_S);
        ASSERT_MSG(rc == 0, "send %ld after the borrower died: %s", i, err_text(rc));
        if (i == 4)                                     /* the slot the victim held */
            ASSERT_MSG(now_ns() - t_kill < 2 * NS_PER_S, "sender blocked %lld ms by a dead borrower",
                       (long long)((now_ns() - t_kill) / NS_PER_MS));
    }
    /* the dead receiver's table entry is reusable (table of 3 was full) */
    zimp_receiver *r = NULL;
    int rc = -EUSERS;
    for (int i = 0; i < 200 && rc == -EUSERS; i++) {
        rc = zimp_receiver_open(name, &r);
        if (rc == -EUSERS)
            sleep_ms(10);
    }
    ASSERT_MSG(rc == 0, "table entry of the killed receiver not reusable: %s", err_text(rc));
    ASSERT_OK(send_msg(s, MODE_COPY, 0, (uint64_t)count, 100, 5 * NS_PER_S));
    uint8_t buf[256];
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S), 100);
    zimp_receiver_close(r);
    zimp_sender_close(s);
    ASSERT_CHILD_OK(s1, tmo(20000));
    ASSERT_CHILD_OK(s2, tmo(20000));
    ASSERT_EQ(wait_child(v, 1000), 128 + SIGKILL);
    ASSERT_OK(zimp_unlink(name));
    tpipe_close(&ready);
    tpipe_close(&vready);
    return 0;
}

static void member_then_pause(void *p)
{
    struct borrow_victim *a = p;
    zimp_receiver *r;
    zimp_sender *s;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    ASSERT_OK(zimp_sender_open(a->name, &s));
    signal_byte(a->ready);
    for (;;)
        pause();
}

TEST_IMPL(killed_members_leave_tables)
{
    char name[128];
    chan_name(name, sizeof name, "kmt");
    create_chan(name, 8, 64, 2, 2);
    struct tpipe ready;
    tpipe_open(&ready);
    struct borrow_victim a = { name, &ready };
    pid_t p1 = spawn(member_then_pause, &a), p2 = spawn(member_then_pause, &a);
    ASSERT_OK(wait_bytes(&ready, 2, tmo(10000)));
    struct zimp_info info;
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.senders, 2);
    ASSERT_EQ(info.receivers, 2);
    zimp_receiver *r;
    zimp_sender *s;
    ASSERT_EQ(zimp_receiver_open(name, &r), -EUSERS);
    ASSERT_EQ(zimp_sender_open(name, &s), -EUSERS);
    kill(p1, SIGKILL);
    kill(p2, SIGKILL);
    /* dead (even unreaped) members are not counted and their entries come back */
    int64_t end = now_ns() + 2 * NS_PER_S;
    do {
        ASSERT_OK(zimp_info(name, &info));
    } while ((info.senders || info.receivers) && now_ns() < end && (sleep_ms(10), 1));
    ASSERT_EQ(info.senders, 0);
    ASSERT_EQ(info.receivers, 0);
    ASSERT_OK(zimp_receiver_open(name, &r));
    ASSERT_OK(zimp_sender_open(name, &s));
    zimp_receiver *r2;
    zimp_sender *s2;
    ASSERT_OK(zimp_receiver_open(name, &r2));
    ASSERT_OK(zimp_sender_open(name, &s2));
    ASSERT_OK(send_msg(s, MODE_COPY, 0, 0, 32, NS_PER_S));
    uint8_t buf[64];
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, NS_PER_S), 32);
    ASSERT_EQ(zimp_recv(r2, buf, sizeof buf, NS_PER_S), 32);
    zimp_receiver_close(r);
    zimp_receiver_close(r2);
    zimp_sender_close(s);
    zimp_sender_close(s2);
    ASSERT_EQ(wait_child(p1, 1000), 128 + SIGKILL);
    ASSERT_EQ(wait_child(p2, 1000), 128 + SIGKILL);
    ASSERT_OK(zimp_unlink(name));
    tpipe_close(&ready);
    return 0;
}

/* ---- a stuck receiver: stall timeout, zimp_stalled, zimp_evict ---- */

struct stuck_rx { const char *name; struct tpipe *ready; };

static void stuck_rx_role(void *p)
{
    struct stuck_rx *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    int idx = zimp_receiver_index(r);
    put_bytes(a->ready->w, &idx, sizeof idx);
    raise(SIGSTOP);                                  /* resumed after the eviction */
    uint8_t buf[256];
    const void *rb;
    size_t len;
    ssize_t n = zimp_recv(r, buf, sizeof buf, NS_PER_S);
    ASSERT_MSG(n == -ECONNRESET, "evicted receiver's recv: %zd (%s)", n, err_text(n));
    ASSERT_EQ(zimp_read(r, &rb, &len, 0), -ECONNRESET);
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, -1), -ECONNRESET);
    zimp_receiver_close(r);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "send with timeout -1 stayed blocked despite stall_timeout_ns\n";
    (void)!write(2, m, sizeof m - 1);
    _exit(1);
}

TEST_IMPL(stuck_receiver_evict)
{
    char name[128];
    chan_name(name, sizeof name, "stuck");
    struct zimp_config cfg = { .slots = 4, .slot_size = 128, .stall_timeout_ns = 50 * NS_PER_MS };
    ASSERT_OK(zimp_create(name, &cfg));
    struct tpipe vready, hready;
    tpipe_open(&vready);
    tpipe_open(&hready);
    struct stuck_rx va = { name, &vready };
    pid_t v = spawn(stuck_rx_role, &va);
    int vidx = -1;
    ASSERT_OK(get_bytes(vready.r, &vidx, sizeof vidx, tmo(10000)));
    ASSERT(vidx >= 0);
    ASSERT_OK(wait_stopped(v, tmo(10000)));
    long count = 21;
    struct survivor ha = { name, count, &hready };
    pid_t h = spawn(survivor_role, &ha);
    ASSERT_OK(wait_bytes(&hready, 1, tmo(10000)));

    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    unsigned idx[16];
    ASSERT_EQ(zimp_stalled(s, idx, 16), 0);
    for (int i = 0; i < 4; i++)
        ASSERT_OK(send_msg(s, MODE_COPY, 0, (uint64_t)i, 100, 0));
    signal(SIGALRM, on_alarm);
    alarm(under_sanitizer() ? 20 : 5);
    int64_t t0 = now_ns();
    int rc = send_msg(s, MODE_COPY, 0, 4, 100, -1);
    alarm(0);
    ASSERT_MSG(rc == -ETIMEDOUT, "send past a stopped receiver: %d (%s)", rc, err_text(rc));
    ASSERT(now_ns() - t0 < 3 * NS_PER_S);
    int n = zimp_stalled(s, idx, 16);
    ASSERT_MSG(n >= 1, "zimp_stalled: %d (%s)", n, err_text(n));
    int found = 0;
    for (int i = 0; i < n && i < 16; i++)
        found |= idx[i] == (unsigned)vidx;
    ASSERT_MSG(found, "stopped receiver %d not among the %d stalled", vidx, n);
    ASSERT_EQ(zimp_stalled(s, NULL, 0), n);          /* count only */
    ASSERT_OK(zimp_evict(s, (unsigned)vidx));
    ASSERT_EQ(zimp_stalled(s, idx, 16), 0);
    for (long i = 4; i < count; i++) {
        rc = send_msg(s, (int)(i & 1), 0, (uint64_t)i, 100, 2 * NS_PER_S);
        ASSERT_MSG(rc == 0, "send %ld after the eviction: %s", i, err_text(rc));
    }
    ASSERT_OK(kill(v, SIGCONT));
    ASSERT_CHILD_OK(v, tmo(10000));
    zimp_sender_close(s);
    ASSERT_CHILD_OK(h, tmo(10000));
    ASSERT_OK(zimp_unlink(name));
    tpipe_close(&vready);
    tpipe_close(&hready);
    return 0;
}

/* ---- segments that fail validation ---- */

static size_t read_segment(const char *name, uint8_t **out)
{
    char path[512];
    snprintf(path, sizeof path, "%s%s", SHM_PREFIX, name);
    int fd = open(path, O_RDONLY);
    ASSERT(fd >= 0);
    struct stat st;
    ASSERT_OK(fstat(fd, &st));
    uint8_t *b = malloc((size_t)st.st_size);
    ASSERT(b);
    ASSERT_EQ(pread(fd, b, (size_t)st.st_size, 0), st.st_size);
    close(fd);
    *out = b;
    return (size_t)st.st_size;
}

static void write_segment(const char *name, const uint8_t *b, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s%s", SHM_PREFIX, name);
    unlink(path);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT(fd >= 0);
    if (len)
        ASSERT_EQ(pwrite(fd, b, len, 0), len);
    close(fd);
}

TEST_IMPL(corrupt_segment_eproto)
{
    char good[128], bad[128];
    chan_name(good, sizeof good, "good");
    chan_name(bad, sizeof bad, "bad");
    create_chan(good, 4, 64, 2, 2);
    uint8_t *seg;
    size_t len = read_segment(good, &seg);
    uint8_t *copy = malloc(len);
    struct xrand rnd = { 42 };
    for (int k = 0; k < 6; k++) {
        const char *what = "";
        size_t l = len;
        memcpy(copy, seg, len);
        switch (k) {
        case 0:
            what = "magic flipped";
            for (int i = 0; i < 8; i++)
                copy[i] ^= 0xFF;
            break;
        case 1:
            what = "truncated to 64 bytes";
            l = 64;
            break;
        case 2:
            what = "truncated to half";
            l = len / 2;
            break;
        case 3:
            what = "random bytes";
            for (size_t i = 0; i < len; i++)
                copy[i] = (uint8_t)xrand_next(&rnd);
            break;
        case 4:
            what = "magic kept, rest random";
            for (size_t i = 8; i < len; i++)
                copy[i] = (uint8_t)xrand_next(&rnd);
            break;
        case 5:
            what = "segment size field doubled";
            for (size_t i = 8; i + 8 <= 256 && i + 8 <= len; i += 8) {
                uint64_t v;
                memcpy(&v, copy + i, 8);
                if (v == len) {
                    v *= 2;
                    memcpy(copy + i, &v, 8);
                }
            }
            break;
        }
        write_segment(bad, copy, l);
        zimp_sender *s = NULL;
        zimp_receiver *r = NULL;
        struct zimp_info info;
        int64_t t0 = now_ns();
        int rc = zimp_receiver_open(bad, &r);
        if (k == 5 && rc == 0) {                     /* no size field found to change */
            zimp_receiver_close(r);
        } else {
            ASSERT_MSG(rc == -EPROTO, "%s: receiver_open %d (%s)", what, rc, err_text(rc));
            ASSERT_MSG(*zimp_last_detail(), "%s: no detail", what);
            rc = zimp_sender_open(bad, &s);
            ASSERT_MSG(rc == -EPROTO, "%s: sender_open %d (%s)", what, rc, err_text(rc));
            rc = zimp_info(bad, &info);
            ASSERT_MSG(rc == -EPROTO, "%s: info %d (%s)", what, rc, err_text(rc));
        }
        ASSERT_MSG(now_ns() - t0 < 5 * NS_PER_S, "%s: validation took too long", what);
        ASSERT_OK(zimp_unlink(bad));
    }
    /* an empty file: refused (or waited for, bounded), never accepted */
    write_segment(bad, NULL, 0);
    zimp_receiver *r = NULL;
    int64_t t0 = now_ns();
    int rc = zimp_receiver_open(bad, &r);
    ASSERT_MSG(rc < 0, "empty segment accepted");
    ASSERT(now_ns() - t0 < 5 * NS_PER_S);
    zimp_unlink(bad);
    ASSERT(!shm_exists(bad));
    /* the good channel is unaffected */
    zimp_sender *s;
    ASSERT_OK(zimp_receiver_open(good, &r));
    ASSERT_OK(zimp_sender_open(good, &s));
    ASSERT_OK(zimp_send(s, "ok", 2, 0));
    char buf[8];
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, NS_PER_S), 2);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(good));
    free(seg);
    free(copy);
    return 0;
}

struct fuzz_args { const char *name; };

static void fuzz_child(void *p)
{
    struct fuzz_args *a = p;
    struct zimp_info info;
    zimp_info(a->name, &info);
    zimp_receiver *r = NULL;
    zimp_sender *s = NULL;
    int rr = zimp_receiver_open(a->name, &r);
    int rs = zimp_sender_open(a->name, &s);
    uint8_t buf[128];
    if (rs == 0) {
        zimp_send(s, buf, 16, 0);
        void *lb;
        if (zimp_loan(s, 8, &lb, 0) == 0)
            zimp_publish(s, lb, 8);
        unsigned idx[8];
        zimp_stalled(s, idx, 8);
    }
    if (rr == 0) {
        zimp_recv(r, buf, sizeof buf, 0);
        const void *rb;
        size_t len;
        if (zimp_read(r, &rb, &len, 0) == 0)
            zimp_release(r);
    }
    zimp_sender_close(s);
    zimp_receiver_close(r);
}

TEST_IMPL(attach_bitflips)
{
    char good[128], bad[128];
    chan_name(good, sizeof good, "fgood");
    chan_name(bad, sizeof bad, "fbad");
    create_chan(good, 4, 64, 2, 2);
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(good, &s));     /* a segment with live state in it */
    ASSERT_OK(zimp_send(s, "abc", 3, 0));
    uint8_t *seg;
    size_t len = read_segment(good, &seg);
    zimp_sender_close(s);
    uint8_t *copy = malloc(len);
    long iters = env_long("ZIMP_FUZZ_ITERS", scaled(400));
    uint64_t seed0 = (uint64_t)env_long("ZIMP_FUZZ_SEED", (long)getpid());
    for (long it = 0; it < iters; it++) {
        struct xrand rnd = { seed0 * 1000003u + (uint64_t)it };
        memcpy(copy, seg, len);
        size_t span = len < 8192 ? len : 8192;       /* header and tables */
        int flips = 1 + (int)xrand_below(&rnd, 8);
        for (int f = 0; f < flips; f++) {
            size_t at = (size_t)xrand_below(&rnd, span);
            switch (xrand_below(&rnd, 3)) {
            case 0: copy[at] ^= (uint8_t)(1u << xrand_below(&rnd, 8)); break;
            case 1: copy[at] = (uint8_t)xrand_next(&rnd); break;
            default: copy[at] = 0xFF; break;
            }
        }
        write_segment(bad, copy, len);
        struct fuzz_args fa = { bad };
        int st = wait_child(spawn(fuzz_child, &fa), tmo(10000));
        ASSERT_MSG(st == 0, "iteration %ld (ZIMP_FUZZ_SEED=%llu): child status %d", it,
                   (unsigned long long)seed0, st);
        zimp_unlink(bad);
    }
    ASSERT_OK(zimp_unlink(good));
    free(seg);
    free(copy);
    return 0;
}

/* ---- members joining and leaving while a blocked sender checks liveness ---- */

struct churn { const char *name; long cycles; int64_t end; };

static void churn_rx_role(void *p)
{
    struct churn *a = p;
    uint8_t buf[64];
    for (long c = 0; c < a->cycles && now_ns() < a->end; c++) {
        zimp_receiver *r;
        int rc = zimp_receiver_open(a->name, &r);
        if (rc == -EUSERS) {
            sleep_ms(1);
            continue;
        }
        ASSERT_MSG(rc == 0, "cycle %ld: open %s", c, err_text(rc));
        uint64_t prev = 0;
        for (int i = 0; i < 8; i++) {
            ssize_t n = recv_msg(r, i & 1, buf, sizeof buf, T_LONG);
            ASSERT_MSG(n > 0, "cycle %ld message %d: %s", c, i, err_text(n));
            uint32_t snd;
            uint64_t seq;
            ASSERT_MSG(msg_check(buf, (size_t)n, &snd, &seq), "cycle %ld: torn message", c);
            ASSERT_MSG(i == 0 || seq == prev + 1, "cycle %ld: seq %llu after %llu (lost or "
                       "overwritten while this receiver held it)", c, (unsigned long long)seq,
                       (unsigned long long)prev);
            prev = seq;
        }
        zimp_receiver_close(r);
    }
}

TEST_IMPL(rejoin_under_load)
{
    /* Receivers keep taking over table entries (free or of killed members)
     * while a sender, blocked on a 4-slot ring, checks who is alive. */
    char name[128];
    chan_name(name, sizeof name, "churn");
    create_chan(name, 4, 64, 1, 4);
    struct tpipe ready;
    tpipe_open(&ready);
    int *stop = shared_alloc(4096);
    pid_t tx = fork();
    ASSERT(tx >= 0);
    if (tx == 0) {
        zimp_sender *s;
        ASSERT_OK(zimp_sender_open(name, &s));
        signal_byte(&ready);
        for (uint64_t i = 0; !__atomic_load_n(stop, __ATOMIC_RELAXED); i++)
            ASSERT_OK(send_msg(s, (int)(i & 1), 0, i, 32, T_LONG));
        zimp_sender_close(s);
        _exit(0);
    }
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    struct churn a = { name, scaled(3000), now_ns() + 4 * NS_PER_S };
    pid_t rx[3];
    for (int i = 0; i < 3; i++)
        rx[i] = spawn(churn_rx_role, &a);
    /* a fourth member that dies holding a borrow, again and again */
    struct xrand rnd = { (uint64_t)getpid() };
    while (now_ns() < a.end) {
        struct borrow_victim va = { name, &ready };
        pid_t v = spawn(borrow_victim_role, &va);
        wait_bytes(&ready, 2, 2000);                /* joined, then borrowing */
        sleep_ns((int64_t)xrand_below(&rnd, 2000000));
        kill(v, SIGKILL);
        waitpid(v, NULL, 0);
        char c[8];
        while (get_bytes(ready.r, c, 1, 0) == 0)
            ;
    }
    for (int i = 0; i < 3; i++)
        ASSERT_CHILD_OK(rx[i], tmo(20000));
    __atomic_store_n(stop, 1, __ATOMIC_RELAXED);
    ASSERT_CHILD_OK(tx, tmo(10000));
    ASSERT_OK(zimp_unlink(name));
    shared_free(stop, 4096);
    tpipe_close(&ready);
    return 0;
}

/* ---- a creator killed while creating ---- */

static void creator_role(void *p)
{
    const char *name = p;
    struct zimp_config cfg = { .slots = 1024, .slot_size = 4096 };   /* 4 MiB to set up */
    zimp_create(name, &cfg);
    for (;;)
        pause();
}

TEST_IMPL(creator_killed_mid_create)
{
    char name[128];
    chan_name(name, sizeof name, "cc");
    struct xrand rnd = { (uint64_t)getpid() };
    long iters = scaled(200);
    int reused = 0, kept = 0;
    pid_t *killed = calloc((size_t)iters, sizeof *killed);
    ASSERT(killed != NULL);
    for (long i = 0; i < iters; i++) {
        pid_t c = spawn(creator_role, name);
        killed[i] = c;
        sleep_ns((int64_t)xrand_below(&rnd, 3000000));
        kill(c, SIGKILL);
        ASSERT_EQ(wait_child(c, 5000), 128 + SIGKILL);
        struct zimp_config small = { .slots = 4, .slot_size = 64 };
        int64_t t0 = now_ns();
        int rc = zimp_create(name, &small);
        ASSERT_MSG(now_ns() - t0 < 5 * NS_PER_S, "iteration %ld: create took too long", i);
        struct zimp_info info;
        if (rc == 0) {
            reused++;                      /* nothing, or a half-made segment removed */
            ASSERT_OK(zimp_info(name, &info));
            ASSERT_EQ(info.slots, 4);
        } else {
            /* the dead creator had finished: a valid channel */
            ASSERT_MSG(rc == -EEXIST, "iteration %ld: create after a killed creator: %s (%s)",
                       i, err_text(rc), zimp_last_detail());
            kept++;
            zimp_receiver *r;
            rc = zimp_receiver_open(name, &r);
            ASSERT_MSG(rc == 0, "iteration %ld: -EEXIST but open gives %s (%s)", i,
                       err_text(rc), zimp_last_detail());
            zimp_receiver_close(r);
            ASSERT_OK(zimp_info(name, &info));
            ASSERT_EQ(info.slots, 1024);
        }
        ASSERT_OK(zimp_unlink(name));
    }
    /* The killed creators' temporary segments go with a sweep; none is left. */
    ASSERT(zimp_reap(NULL) >= 0);
    for (long i = 0; i < iters; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, ".zimp-tmp.%d.", (int)killed[i]);
        DIR *d = opendir("/dev/shm");
        ASSERT(d != NULL);
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            ASSERT_MSG(strncmp(e->d_name, prefix, strlen(prefix)) != 0,
                       "%s left after zimp_reap(NULL)", e->d_name);
        closedir(d);
    }
    free(killed);
    fprintf(stderr, "creator_killed_mid_create: %d names reused, %d complete channels kept\n",
            reused, kept);
    return 0;
}

/* ---- detection latency: how long survivors take to notice a death ---- */

/*
 * Opens a sender and says so with one message, "hello", then idles. Its
 * record is taken (zimp_info counts it) before its open has returned; one
 * killed in between never counted as opened, and receivers rightly owe no
 * -EPIPE for it. The hello proves the open done.
 */
static void idle_sender_role(void *p)
{
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(p, &s));
    ASSERT_OK(zimp_send(s, "hello", 5, -1));
    for (;;)
        pause();
}

/* Waits for idle_sender_role's hello. */
static void expect_hello(zimp_receiver *r)
{
    char buf[64];
    ssize_t n = zimp_recv(r, buf, sizeof buf, tmo(5000) * NS_PER_MS);
    ASSERT_MSG(n == 5 && memcmp(buf, "hello", 5) == 0, "the sender's hello: %zd (%s)", n,
               n < 0 ? err_text((int)n) : "wrong bytes");
}

/* Receiver roles write a byte to `ready` once their open returned: a record
 * is counted before its position is set, and only then does it hold what
 * is sent. */
struct idle_rx { const char *name; struct tpipe *ready; };

static void idle_receiver_role(void *p)
{
    const struct idle_rx *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    for (;;)
        pause();
}

/* Spawns a receiver role taking a struct idle_rx; returns once its open returned. */
static pid_t spawn_open_receiver(void (*role)(void *), const char *name)
{
    struct tpipe ready;
    tpipe_open(&ready);
    struct idle_rx arg = { name, &ready };
    pid_t pid = spawn(role, &arg);
    ASSERT_EQ(wait_bytes(&ready, 1, tmo(5000)), 0);
    tpipe_close(&ready);
    return pid;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/*
 * Kills the only sender of a channel whose receiver sleeps in zimp_recv, and
 * the only (stuck) receiver of a channel whose sender sleeps for room; times
 * the death-to-notice interval. Documented bound: 100 ms; asserted with slack.
 */
TEST_IMPL(crash_detection_latency)
{
    enum { TRIALS = 30 };
    int64_t rx[TRIALS], tx[TRIALS];
    for (int t = 0; t < TRIALS; t++) {
        char name[128];
        char tag[32];
        snprintf(tag, sizeof tag, "det%d", t);
        chan_name(name, sizeof name, tag);
        create_chan(name, 4, 64, 2, 2);

        /* a dead sender, noticed by a sleeping receiver (-EPIPE) */
        zimp_receiver *r;
        ASSERT_OK(zimp_receiver_open(name, &r));
        ASSERT_OK(zimp_receiver_set_spin(r, 0));
        pid_t sp = spawn(idle_sender_role, name);
        expect_hello(r);
        uint8_t buf[64];
        ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
        sleep_ms(20);                         /* the receiver's check timer is mid-period */
        ASSERT_OK(kill(sp, SIGKILL));
        int64_t t0 = now_ns();
        ssize_t n = zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S);
        rx[t] = now_ns() - t0;
        ASSERT_EQ(n, -EPIPE);
        ASSERT_EQ(wait_child(sp, 5000), 128 + SIGKILL);
        zimp_receiver_close(r);

        /* a dead receiver that held the ring full, noticed by a sleeping sender */
        zimp_sender *s;
        ASSERT_OK(zimp_sender_open(name, &s));
        ASSERT_OK(zimp_sender_set_spin(s, 0));
        pid_t rp = spawn_open_receiver(idle_receiver_role, name);
        for (int i = 0; i < 4; i++)
            ASSERT_OK(zimp_send(s, buf, 8, NS_PER_S));
        ASSERT_EQ(zimp_send(s, buf, 8, 0), -EAGAIN);
        ASSERT_OK(kill(rp, SIGKILL));
        t0 = now_ns();
        ASSERT_OK(zimp_send(s, buf, 8, 5 * NS_PER_S));
        tx[t] = now_ns() - t0;
        ASSERT_EQ(wait_child(rp, 5000), 128 + SIGKILL);
        zimp_sender_close(s);
        ASSERT_OK(zimp_unlink(name));
    }
    qsort(rx, TRIALS, sizeof rx[0], cmp_i64);
    qsort(tx, TRIALS, sizeof tx[0], cmp_i64);
    fprintf(stderr, "crash_detection_latency: %d trials each; dead sender -> receiver -EPIPE: "
            "median %.1f ms, max %.1f ms; dead receiver -> sender unblocked: median %.1f ms, "
            "max %.1f ms\n", TRIALS, rx[TRIALS / 2] / 1e6, rx[TRIALS - 1] / 1e6,
            tx[TRIALS / 2] / 1e6, tx[TRIALS - 1] / 1e6);
    /* the bound is 100 ms; a loaded 2-core machine (or a sanitizer) adds scheduling delay */
    ASSERT_MSG(rx[TRIALS - 1] < 2 * NS_PER_S && tx[TRIALS - 1] < 2 * NS_PER_S,
               "detection took %lld / %lld ms", (long long)(rx[TRIALS - 1] / NS_PER_MS),
               (long long)(tx[TRIALS - 1] / NS_PER_MS));
    return 0;
}

/* ---- integrity: receivers map message data read-only ---- */

static void scribbler_role(void *p)
{
    const struct idle_rx *a = p;
    zimp_receiver *r;
    const void *buf;
    size_t len;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    ASSERT_OK(zimp_read(r, &buf, &len, 5 * NS_PER_S));
    ((volatile char *)(uintptr_t)buf)[0] = 'X';   /* must fault: the slot is read-only */
    _exit(3);
}

/*
 * A buggy receiver that writes into a borrowed message dies of SIGSEGV in
 * its own process; another receiver still reads the message intact.
 */
TEST_IMPL(receiver_data_readonly)
{
    char name[128];
    chan_name(name, sizeof name, "ro");
    create_chan(name, 4, 64, 1, 4);
    zimp_receiver *good;
    ASSERT_OK(zimp_receiver_open(name, &good));
    pid_t bad = spawn_open_receiver(scribbler_role, name);
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(zimp_send(s, "intact", 6, NS_PER_S));
    int st = wait_child(bad, tmo(10000));
    ASSERT_MSG(died_of_write_fault(st), "writing into a borrowed message: status %d", st);
    char buf[64];
    ASSERT_EQ(zimp_recv(good, buf, sizeof buf, NS_PER_S), 6);
    ASSERT(memcmp(buf, "intact", 6) == 0);
    zimp_sender_close(s);
    zimp_receiver_close(good);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ---- a receiver waiting in epoll learns of its sender's death ---- */

/*
 * The descriptor exists before the sender opens; a non-blocking receive then
 * sees the sender (liveness cache) before the descriptor is re-armed. When
 * the sender is killed, epoll must wake the receiver, which gets -EPIPE.
 */
TEST_IMPL(epoll_sender_death)
{
    char name[128];
    chan_name(name, sizeof name, "eds");
    create_chan(name, 4, 64, 2, 2);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    int ep = epoll_watch(r);
    struct epoll_event out;
    pid_t sp = spawn(idle_sender_role, name);
    expect_hello(r);
    uint8_t buf[64];
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);   /* re-arms the descriptor */
    while (epoll_wait(ep, &out, 1, 0) > 0)                      /* drain spurious readiness */
        ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
    ASSERT_OK(kill(sp, SIGKILL));
    int64_t t0 = now_ns();
    /* Only the descriptor wakes us. It may fire before the death is visible
     * (the kill is asynchronous; a receiver that cannot be notified also
     * ticks every ZIMP_CHECK_NS): such a wake-up must read -EAGAIN. */
    ssize_t n = epoll_receive(r, ep, buf, sizeof buf, 2000);
    int64_t el = now_ns() - t0;
    ASSERT_MSG(n == -EPIPE, "receive after the sender's death: %zd (%s)", n, err_text((int)n));
    fprintf(stderr, "epoll_sender_death: readable %.2f ms after the kill\n", el / 1e6);
    ASSERT_EQ(wait_child(sp, 5000), 128 + SIGKILL);
    close(ep);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ---- the program replaces or closes the library's pidfds ---- */

/*
 * A program may close the descriptors it did not open (daemons close
 * 3..1023) or dup2 over them. The receiver's cached pidfd of its sender is
 * then another file (/dev/null reads ready: it looked like a death) or no
 * file at all (POLLNVAL: a real death was never seen). Neither may fool the
 * liveness check: no -EPIPE while the sender lives, -EPIPE soon after it
 * dies; and the library must not close the program's descriptor.
 */
TEST_IMPL(pidfds_replaced)
{
    /* replace 2: the program closes ours and opens its own pidfd of the same sender,
     * which takes the number (on pidfs with the same inode as ours). */
    for (int replace = 2; replace >= 0; replace--) {
        char name[128];
        chan_name(name, sizeof name, replace == 2 ? "pfd-own" : replace ? "pfd-dup2" : "pfd-close");
        create_chan(name, 8, 128, 2, 2);
        zimp_receiver *r;
        ASSERT_OK(zimp_receiver_open(name, &r));
        struct tpipe ready;
        tpipe_open(&ready);
        struct victim_tx ta = { name, 1, 1, 0, &ready, NULL };
        pid_t tx = spawn(victim_tx_role, &ta);
        ASSERT_OK(wait_bytes(&ready, 2, tmo(10000)));
        expect_from(r, 1, 0, 5 * NS_PER_S);
        uint8_t buf[256];
        ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 50 * NS_PER_MS), -ETIMEDOUT);  /* checks liveness */
        int fds[16];
        static const char *const pidfd[] = { "[pidfd]", NULL };
        int n = find_fds(fds, 16, pidfd);
        ASSERT_MSG(n >= 1, "the receiver holds no pidfd of its sender");
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        ASSERT(devnull >= 0);
        for (int i = 0; i < n; i++) {
            if (replace == 2) {
                ASSERT(close(fds[i]) == 0);
                ASSERT_EQ(syscall(SYS_pidfd_open, tx, 0), fds[i]);   /* the lowest free number */
            } else {
                ASSERT(replace ? dup2(devnull, fds[i]) == fds[i] : close(fds[i]) == 0);
            }
        }
        for (int i = 0; i < 3; i++)                           /* alive: no false -EPIPE */
            ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 30 * NS_PER_MS), -ETIMEDOUT);
        int64_t t_kill = now_ns();
        ASSERT_OK(kill(tx, SIGKILL));
        ssize_t got = zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S);
        int64_t el = now_ns() - t_kill;
        ASSERT_MSG(got == -EPIPE, "variant %d: %zd (%s)", replace, got, err_text(got));
        ASSERT_MSG(el < 2 * NS_PER_S, "-EPIPE %lld ms after the kill", (long long)(el / NS_PER_MS));
        zimp_receiver_close(r);
        for (int i = 0; replace && i < n; i++)                 /* still the program's /dev/null */
            ASSERT_MSG(fcntl(fds[i], F_GETFD) >= 0, "the library closed descriptor %d", fds[i]);
        for (int i = 0; replace && i < n; i++)
            close(fds[i]);
        close(devnull);
        ASSERT_EQ(wait_child(tx, 1000), 128 + SIGKILL);
        ASSERT_OK(zimp_unlink(name));
        tpipe_close(&ready);
    }
    return 0;
}

/*
 * The program takes every descriptor zimp opened for a receiver with a
 * notification descriptor (the segment, the socket, the epoll set) by
 * putting /dev/null over it: closing the receiver must leave the program's
 * descriptors open.
 */
TEST_IMPL(descriptors_taken)
{
    char name[128];
    chan_name(name, sizeof name, "taken");
    create_chan(name, 8, 128, 2, 2);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    ASSERT(zimp_receiver_fd(r) >= 0);
    static const char *const ours[] = { "zimp.", "socket:", "eventpoll", NULL };
    int fds[64];
    int n = find_fds(fds, 64, ours);
    ASSERT_MSG(n >= 2, "found %d of the receiver's descriptors", n);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT(devnull >= 0);
    for (int i = 0; i < n; i++)
        ASSERT(dup2(devnull, fds[i]) == fds[i]);
    zimp_receiver_close(r);
    for (int i = 0; i < n; i++)
        ASSERT_MSG(fcntl(fds[i], F_GETFD) >= 0, "zimp closed the program's descriptor %d", fds[i]);
    for (int i = 0; i < n; i++)
        close(fds[i]);
    close(devnull);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}
