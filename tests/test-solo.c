/*
 * Channels made for one sender (max_senders = 1): claims and publications are
 * plain stores (docs/protocol.md, "A channel with one sender record"). These
 * tests aim at what the read-modify-writes used to guarantee: one sender at a
 * time, joins racing claims, wake-ups of sleeping receivers, and a sender that
 * dies with a claim.
 */
#include <sys/mman.h>

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

static void pong_role(void *p)
{
    struct pp *a = p;
    zimp_receiver *r;
    zimp_sender *s;
    ASSERT_OK(zimp_receiver_open(a->ping, &r));
    ASSERT_OK(zimp_sender_open(a->pong, &s));
    ASSERT_OK(zimp_receiver_set_spin(r, 0));
    ASSERT_OK(zimp_sender_set_spin(s, 0));
    signal_byte(a->ready);
    uint8_t buf[64];
    uint32_t id;
    uint64_t seq;
    for (int i = 0; i < a->rounds; i++) {
        ssize_t n = recv_msg(r, i & 1, buf, sizeof buf, T_LONG);
        ASSERT_MSG(n == 24 && msg_check(buf, 24, &id, &seq) && seq == (uint64_t)i,
                   "round %d: %s", i, err_text(n));
        ASSERT_OK(send_msg(s, (i >> 1) & 1, 1, seq, 24, T_LONG));
    }
    zimp_sender_close(s);
    zimp_receiver_close(r);
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
    int64_t ms = (now_ns() - t0) / NS_PER_MS;
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
