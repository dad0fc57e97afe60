/*
 * Channels made for one sender (max_senders = 1): claims and publications are
 * plain stores (docs/protocol.md, "A channel with one sender record"). These
 * tests aim at what the read-modify-writes used to guarantee: one sender at a
 * time, joins racing claims, wake-ups of sleeping receivers, and a sender that
 * dies with a claim; and at membarrier in the receivers in place of the
 * sender's fence: processes that cannot call it, or lose it.
 */
#include <stdbool.h>
#include <linux/membarrier.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "core/core_int.h"       /* ZIMP_FENCE_QUIET, the wait page (white-box) */
#include "deny_syscall.h"
#include "task.h"

/* ---- one sender at a time ---- */

struct solo_child { const char *name; struct tpipe *sent; };

static void open_solo_sender(void *p)
{
    struct solo_child *a = p;
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    ASSERT_OK(send_msg(s, MODE_ZC, 7, 1, 32, T_LONG));
    signal_byte(a->sent);
    /* killed by the parent while it holds the only sender record */
    for (;;)
        pause();
}

TEST_IMPL(solo_one_sender_at_a_time)
{
    char name[128];
    chan_name(name, sizeof name, "one");
    create_chan(name, 8, 64, 1, 2);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    zimp_sender *a, *b;
    ASSERT_OK(zimp_sender_open(name, &a));
    ASSERT_EQ(zimp_sender_open(name, &b), -EUSERS);
    /* nobody can evict the only sender: E1 is another sender's call */
    ASSERT_EQ(zimp_evict_sender(a, 0), -EINVAL);
    ASSERT_EQ(zimp_evict_sender(a, 1), -EINVAL);
    ASSERT_OK(send_msg(a, MODE_COPY, 1, 1, 32, T_LONG));
    zimp_sender_close(a);
    ASSERT_OK(zimp_sender_open(name, &b));
    ASSERT_OK(send_msg(b, MODE_ZC, 2, 1, 32, T_LONG));
    expect_msg(r, 1, 1, T_LONG);
    expect_msg(r, 2, 1, T_LONG);
    zimp_sender_close(b);

    /* a dead sender's record is taken over by the next one (D2) */
    struct tpipe sent;
    tpipe_open(&sent);
    struct solo_child c = { name, &sent };
    pid_t child = spawn(open_solo_sender, &c);
    ASSERT_OK(wait_bytes(&sent, 1, tmo(10000)));
    expect_msg(r, 7, 1, T_LONG);
    ASSERT_EQ(zimp_sender_open(name, &b), -EUSERS);
    kill(child, SIGKILL);
    ASSERT_EQ(wait_child(child, tmo(10000)), 128 + SIGKILL);
    ASSERT_OK(zimp_sender_open(name, &b));
    ASSERT_OK(send_msg(b, MODE_COPY, 3, 1, 32, T_LONG));
    expect_msg(r, 3, 1, T_LONG);
    zimp_sender_close(b);
    zimp_receiver_close(r);
    tpipe_close(&sent);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ---- joins racing claims (S3 without a read-modify-write) ---- */

/*
 * A sender streams into a 4-slot ring as fast as it can while receivers
 * join, read a while and leave. A joiner that a claim's stale view missed
 * must still never see a slot it reads overwritten: every message arrives
 * whole, in order, without a gap, from a first one published around its open.
 */
TEST_IMPL(solo_join_while_streaming)
{
    char name[128];
    chan_name(name, sizeof name, "join");
    create_chan(name, 4, 64, 1, 4);
    struct join_plan plan = { .rounds = (int)scaled(300), .msgs = 40, .vary = 1, .spin = 1 };
    join_while_streaming(name, &plan);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ---- wake-ups: P4's loads follow the fence ---- */

struct pp { const char *ping, *pong; int rounds; struct tpipe *ready; };

/*
 * The echoing side of a blocking ping-pong: receives round i on channel
 * `rx`, sends it back on `tx`, both handles sleeping at once (spin 0); a
 * byte on `ready` once both are open.
 */
static void echo_rounds(const char *rx, const char *tx, int rounds, struct tpipe *ready)
{
    zimp_receiver *r;
    zimp_sender *s;
    ASSERT_OK(zimp_receiver_open(rx, &r));
    ASSERT_OK(zimp_sender_open(tx, &s));
    ASSERT_OK(zimp_receiver_set_spin(r, 0));
    ASSERT_OK(zimp_sender_set_spin(s, 0));
    signal_byte(ready);
    uint8_t buf[64];
    uint32_t id;
    uint64_t seq;
    for (int i = 0; i < rounds; i++) {
        ssize_t n = recv_msg(r, i & 1, buf, sizeof buf, T_LONG);
        ASSERT_MSG(n == 24 && msg_check(buf, 24, &id, &seq) && seq == (uint64_t)i,
                   "round %d: %s", i, err_text(n));
        ASSERT_OK(send_msg(s, (i >> 1) & 1, 1, seq, 24, T_LONG));
    }
    zimp_sender_close(s);
    zimp_receiver_close(r);
}

/* The pinging side: sends round i on s, expects it back on r; the milliseconds it took. */
static int64_t ping_rounds(zimp_sender *s, zimp_receiver *r, int rounds)
{
    uint8_t buf[64];
    uint32_t id;
    uint64_t seq;
    int64_t t0 = now_ns();
    for (int i = 0; i < rounds; i++) {
        ASSERT_OK(send_msg(s, i & 1, 0, (uint64_t)i, 24, T_LONG));
        ssize_t n = recv_msg(r, (i >> 1) & 1, buf, sizeof buf, T_LONG);
        ASSERT_MSG(n == 24 && msg_check(buf, 24, &id, &seq) && id == 1 && seq == (uint64_t)i,
                   "round %d: %s", i, err_text(n));
    }
    return (now_ns() - t0) / NS_PER_MS;
}

static void pong_role(void *p)
{
    struct pp *a = p;
    echo_rounds(a->ping, a->pong, a->rounds, a->ready);
}

/*
 * Blocking ping-pong between two one-sender channels: each message finds its
 * receiver asleep on the futex. A wake-up lost between P2 and P4 would cost
 * the 10 ms liveness tick per round; the bound catches that many.
 */
TEST_IMPL(solo_blocking_pingpong)
{
    char ping[128], pong[128];
    chan_name(ping, sizeof ping, "ping");
    chan_name(pong, sizeof pong, "pong");
    create_chan(ping, 4, 64, 1, 1);
    create_chan(pong, 4, 64, 1, 1);
    int rounds = (int)scaled(2000);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(pong, &r));
    struct tpipe ready;
    tpipe_open(&ready);
    struct pp a = { ping, pong, rounds, &ready };
    pid_t child = spawn(pong_role, &a);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(ping, &s));
    ASSERT_OK(zimp_sender_set_spin(s, 0));
    ASSERT_OK(zimp_receiver_set_spin(r, 0));
    int64_t ms = ping_rounds(s, r, rounds);
    /* 2000 lost wake-ups would take 20 s; a round trip takes tens of microseconds */
    ASSERT_MSG(ms < tmo(15000), "%d blocking round trips took %lld ms", rounds, (long long)ms);
    ASSERT_CHILD_OK(child, tmo(10000));
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(ping));
    ASSERT_OK(zimp_unlink(pong));
    tpipe_close(&ready);
    return 0;
}

/* ---- a sender that dies with a claim ---- */

static void die_mid_loan(void *p)
{
    const char *name = p;
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    for (uint64_t i = 0; i < 3; i++)
        ASSERT_OK(send_msg(s, MODE_ZC, 5, i, 40, T_LONG));
    void *buf;
    ASSERT_OK(zimp_loan(s, 40, &buf, T_LONG));
    memset(buf, 0xee, 20);          /* half written, then gone */
    raise(SIGKILL);
}

TEST_IMPL(solo_sender_dies_mid_loan)
{
    char name[128];
    chan_name(name, sizeof name, "die");
    create_chan(name, 4, 64, 1, 2);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    pid_t child = spawn(die_mid_loan, name);
    ASSERT_EQ(wait_child(child, tmo(10000)), 128 + SIGKILL);
    for (uint64_t i = 0; i < 3; i++)
        expect_msg(r, 5, i, T_LONG);
    /* the abandoned claim is passed over; the next sender takes the record */
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    for (uint64_t i = 0; i < 10; i++) {
        ASSERT_OK(send_msg(s, (int)(i & 1), 6, i, 40, T_LONG));
        expect_msg(r, 6, i, T_LONG);
    }
    zimp_sender_close(s);
    uint8_t buf[64];
    ASSERT_EQ(recv_msg(r, MODE_COPY, buf, sizeof buf, T_LONG), -EPIPE);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ---- membarrier in place of F (docs/protocol.md, "membarrier") ---- */

/* Whether this process may call membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED). */
static bool membarrier_callable(void)
{
    return syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0;
}

/* From now on membarrier fails with EPERM in this process, as under a seccomp profile that denies it. */
static void deny_membarrier(void)
{
    ASSERT_OK(deny_syscall(__NR_membarrier, EPERM));
    ASSERT(!membarrier_callable() && errno == EPERM);
}

static uint32_t info_flags(const char *name)
{
    struct zimp_info in;
    ASSERT_OK(zimp_info(name, &in));
    return in.flags;
}

static uint32_t info_receivers(const char *name)
{
    struct zimp_info in;
    ASSERT_OK(zimp_info(name, &in));
    return in.receivers;
}

static void create_solo(const char *name, uint32_t flags)
{
    struct zimp_config c = { .slots = 4, .slot_size = 64, .max_senders = 1, .max_receivers = 2, .flags = flags };
    ASSERT_OK(zimp_create(name, &c));
}

/*
 * Creates one-sender channel `name` relying on membarrier; false (and a
 * note, and no channel) where this machine denies membarrier, and the test
 * has nothing to check.
 */
static bool create_membarrier_chan(const char *name)
{
    create_solo(name, 0);
    if (!(info_flags(name) & ZIMP_NO_MEMBARRIER))
        return true;
    fprintf(stderr, "note: membarrier is denied here: every one-sender channel fences\n");
    ASSERT_OK(zimp_unlink(name));
    return false;
}

/*
 * The child, denied membarrier: it cannot receive on a channel whose sender
 * relies on it (-EPERM, no record taken), but it can send on one (it fences),
 * and receive on a ZIMP_NO_MEMBARRIER channel. Then a blocking ping-pong with
 * the parent: the child sends on `mb` (fenced: registration refused) and
 * receives on `fenced`; the parent receives on `mb` with its membarrier.
 */
struct mb_child { const char *mb, *fenced; int rounds; bool used; struct tpipe *ready; };

static void denied_child(void *p)
{
    struct mb_child *a = p;
    deny_membarrier();
    zimp_receiver *r;
    int rc = zimp_receiver_open(a->mb, &r);
    if (a->used) {
        ASSERT_MSG(rc == -EPERM, "receiver open without membarrier: %s", err_text(rc));
        ASSERT_MSG(strstr(zimp_last_detail(), "ZIMP_NO_MEMBARRIER") != NULL, "detail: %s", zimp_last_detail());
        ASSERT_EQ(info_receivers(a->mb), 1);        /* the parent's only */
    } else {
        ASSERT_OK(rc);                              /* nobody relies on membarrier here */
        zimp_receiver_close(r);
    }
    echo_rounds(a->fenced, a->mb, a->rounds, a->ready);
}

TEST_IMPL(solo_membarrier_denied)
{
    char mb[128], fenced[128], multi[128];
    chan_name(mb, sizeof mb, "mb");
    chan_name(fenced, sizeof fenced, "fenced");
    chan_name(multi, sizeof multi, "multi");
    bool callable = membarrier_callable();
    struct zimp_config bad = { .max_senders = 1, .flags = 0x8 };
    ASSERT_EQ(zimp_create(mb, &bad), -EINVAL);
    ASSERT_EQ(zimp_info(mb, &(struct zimp_info){ 0 }), -ENOENT);
    create_solo(mb, 0);
    create_solo(fenced, ZIMP_NO_MEMBARRIER);
    create_chan(multi, 4, 64, 2, 2);
    /* One sender relies on membarrier wherever its creator can call it; zimp_info says which. */
    ASSERT_EQ(info_flags(mb) & ZIMP_NO_MEMBARRIER, callable ? 0u : ZIMP_NO_MEMBARRIER);
    ASSERT_EQ(info_flags(fenced) & ZIMP_NO_MEMBARRIER, ZIMP_NO_MEMBARRIER);
    ASSERT_EQ(info_flags(multi) & ZIMP_NO_MEMBARRIER, 0u);      /* many senders: CAS, no question */
    if (!callable)
        fprintf(stderr, "note: membarrier is denied here: only the fenced paths run\n");

    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(mb, &r));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(fenced, &s));
    ASSERT_OK(zimp_sender_set_spin(s, 0));
    ASSERT_OK(zimp_receiver_set_spin(r, 0));
    struct tpipe ready;
    tpipe_open(&ready);
    int rounds = (int)scaled(500);
    struct mb_child a = { mb, fenced, rounds, callable, &ready };
    pid_t child = spawn(denied_child, &a);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    int64_t ms = ping_rounds(s, r, rounds);
    ASSERT_MSG(ms < tmo(10000), "%d blocking round trips took %lld ms", rounds, (long long)ms);
    ASSERT_CHILD_OK(child, tmo(10000));
    zimp_sender_close(s);
    zimp_receiver_close(r);
    tpipe_close(&ready);
    ASSERT_OK(zimp_unlink(mb));
    ASSERT_OK(zimp_unlink(fenced));
    ASSERT_OK(zimp_unlink(multi));
    return 0;
}

/*
 * A receiver that opened with membarrier and then lost it (a filter
 * installed after its open) misses no message: it sleeps in short naps and
 * arms its descriptor with the 10 ms tick. The sender pauses before each
 * message so that the receiver is asleep (or armed) when it comes.
 */
struct late_child { const char *name; int msgs; struct tpipe *ready; };

static void late_denied_child(void *p)
{
    struct late_child *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    ASSERT_OK(zimp_receiver_set_spin(r, 0));
    deny_membarrier();
    int ep = epoll_watch(r);
    signal_byte(a->ready);
    uint8_t buf[64];
    for (int i = 0; i < a->msgs; i++) {
        if (i & 1) {                 /* the descriptor's way: poll, then a non-blocking read */
            ssize_t n;
            while ((n = recv_msg(r, MODE_COPY, buf, sizeof buf, 0)) == -EAGAIN) {
                struct epoll_event ev;
                ASSERT(epoll_wait(ep, &ev, 1, (int)tmo(10000)) >= 0);
            }
            uint32_t id;
            uint64_t seq;
            ASSERT_MSG(n == 24 && msg_check(buf, 24, &id, &seq) && seq == (uint64_t)i, "message %d: %s", i, err_text(n));
        } else {
            expect_msg(r, 0, (uint64_t)i, T_LONG);
        }
    }
    close(ep);
    zimp_receiver_close(r);
}

TEST_IMPL(solo_membarrier_lost_after_open)
{
    char name[128];
    chan_name(name, sizeof name, "late");
    if (!create_membarrier_chan(name))
        return 0;
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    struct tpipe ready;
    tpipe_open(&ready);
    struct late_child a = { name, (int)scaled(60), &ready };
    pid_t child = spawn(late_denied_child, &a);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    for (int i = 0; i < a.msgs; i++) {
        usleep(2000);
        ASSERT_OK(send_msg(s, i & 1, 0, (uint64_t)i, 24, T_LONG));
    }
    ASSERT_CHILD_OK(child, tmo(10000));
    zimp_sender_close(s);
    tpipe_close(&ready);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/*
 * A seccomp filter that answers every membarrier call with 0 without
 * running it: the receiver must not trust it (-EPERM), and a sender must
 * not count itself registered, so it fences for good (sender_fences stays 1)
 * where a registered one stops after M3's run of publications that find
 * nobody asleep (0). The receiver busy-waits: it never sleeps.
 */
struct lie_child { const char *name; int msgs; bool lie; struct tpipe *opened; };

static void lying_sender(void *p)
{
    struct lie_child *a = p;
    if (a->lie) {
        ASSERT_OK(deny_syscall(__NR_membarrier, 0));
        zimp_receiver *r;
        int rc = zimp_receiver_open(a->name, &r);
        ASSERT_MSG(rc == -EPERM, "receiver open under a lying filter: %s", err_text(rc));
    }
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    signal_byte(a->opened);
    for (int i = 0; i < a->msgs; i++)
        ASSERT_OK(send_msg(s, i & 1, 0, (uint64_t)i, 24, T_LONG));
    zimp_sender_close(s);
}

static uint32_t sender_fences_word(const char *name)
{
    struct segmap m = map_shm_file(ZIMP_SHM_PREFIX, name);
    const struct zimp_header *h = m.base;
    uint32_t v = zimp_load_sc(&((struct zimp_wait *)((char *)m.base + h->off_wait))->sender_fences);
    munmap(m.base, m.size);
    return v;
}

TEST_IMPL(solo_membarrier_lying)
{
    char name[128];
    chan_name(name, sizeof name, "lie");
    if (!create_membarrier_chan(name))
        return 0;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    ASSERT_OK(zimp_receiver_set_spin(r, UINT64_MAX));
    struct tpipe opened;
    tpipe_open(&opened);
    for (int lie = 0; lie < 2; lie++) {
        struct lie_child a = { name, (int)(2 * ZIMP_FENCE_QUIET), lie != 0, &opened };
        pid_t child = spawn(lying_sender, &a);
        /* after a drain, -EPIPE is the answer until a sender opens */
        ASSERT_OK(wait_bytes(&opened, 1, tmo(10000)));
        for (int i = 0; i < a.msgs; i++)
            expect_msg(r, 0, (uint64_t)i, T_LONG);
        ASSERT_CHILD_OK(child, tmo(10000));
        /* a registered sender stopped fencing; one that only believed it registered never started */
        ASSERT_EQ(sender_fences_word(name), lie ? 1u : 0u);
        uint8_t buf[64];
        ASSERT_EQ(recv_msg(r, MODE_COPY, buf, sizeof buf, T_LONG), -EPIPE);
    }
    tpipe_close(&opened);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/*
 * M3 counts a receiver armed for poll/epoll as asleep: once a run of
 * publications that find nobody waiting has stopped the sender's fence
 * (sender_fences 0), a publication that finds an armed receiver starts it
 * again. Otherwise every arm issued a membarrier (441,448 of them for
 * 50,000 messages to 16 epoll receivers).
 */
TEST_IMPL(solo_membarrier_epoll_fences)
{
    char name[128];
    chan_name(name, sizeof name, "ep");
    if (!create_membarrier_chan(name))
        return 0;
    zimp_receiver *r;
    zimp_sender *s;
    ASSERT_OK(zimp_receiver_open(name, &r));
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_EQ(sender_fences_word(name), 1u);             /* fencing from its open */
    for (uint64_t i = 0; i <= ZIMP_FENCE_QUIET; i++) {
        ASSERT_OK(send_msg(s, (int)(i & 1), 0, i, 24, T_LONG));
        expect_msg(r, 0, i, T_LONG);
    }
    ASSERT_EQ(sender_fences_word(name), 0u);             /* nobody was waiting */
    int ep = epoll_watch(r);                             /* arms: nothing to read */
    ASSERT_OK(send_msg(s, MODE_COPY, 0, ZIMP_FENCE_QUIET + 1, 24, T_LONG));
    ASSERT_EQ(sender_fences_word(name), 1u);
    struct epoll_event ev;
    ASSERT_EQ(epoll_wait(ep, &ev, 1, (int)tmo(10000)), 1);
    expect_msg(r, 0, ZIMP_FENCE_QUIET + 1, 0);
    close(ep);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}
