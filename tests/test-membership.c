/* Membership: joining late, leaving, tables, borrows, end of stream, epoll. */
#include "task.h"

#include "shm/layout_int.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <time.h>

static void expect_seq(zimp_receiver *r, uint32_t sender, uint64_t seq, int64_t timeout)
{
    uint8_t buf[512];
    ssize_t n = zimp_recv(r, buf, sizeof buf, timeout);
    ASSERT_MSG(n >= 0, "expected sender %u seq %llu, got %s", sender,
               (unsigned long long)seq, err_text(n));
    uint32_t snd;
    uint64_t sq;
    ASSERT_MSG(msg_check(buf, (size_t)n, &snd, &sq), "corrupt message");
    ASSERT_MSG(snd == sender && sq == seq, "expected (%u,%llu) got (%u,%llu)", sender,
               (unsigned long long)seq, snd, (unsigned long long)sq);
}

/* ---- epoll over three channels ---- */

struct ep_tx { const char *name; long count; struct tpipe *done, *close; };

static void ep_tx_role(void *p)
{
    struct ep_tx *a = p;
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    for (long i = 0; i < a->count; i++)
        ASSERT_OK(send_msg(s, i & 1, 0, (uint64_t)i, 24 + (size_t)(i % 100), T_LONG));
    signal_byte(a->done);
    ASSERT_OK(wait_bytes(a->close, 1, tmo(30000)));
    zimp_sender_close(s);
}

TEST_IMPL(epoll_three_channels)
{
    enum { N = 3 };
    char names[N][128];
    zimp_receiver *r[N];
    long count = scaled(3000);
    int ep = epoll_create1(0);
    ASSERT(ep >= 0);
    for (int i = 0; i < N; i++) {
        char tag[8];
        snprintf(tag, sizeof tag, "e%d", i);
        chan_name(names[i], sizeof names[i], tag);
        create_chan(names[i], 16, 256, 0, 0);
        ASSERT_OK(zimp_receiver_open(names[i], &r[i]));
        int fd = zimp_receiver_fd(r[i]);
        ASSERT(fd >= 0);
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
        struct pollfd pfd = { fd, POLLIN, 0 };
        ASSERT_EQ(poll(&pfd, 1, 0), 0);          /* nothing waits yet */
    }
    struct tpipe done, closep;
    tpipe_open(&done);
    tpipe_open(&closep);
    pid_t tx[N];
    for (int i = 0; i < N; i++) {
        struct ep_tx a = { names[i], count, &done, &closep };
        tx[i] = spawn(ep_tx_role, &a);
    }
    long got[N] = { 0 };
    int ended[N] = { 0 };
    uint8_t buf[256];
    int phase = 0;                               /* 0: messages, 1: end of stream */
    for (;;) {
        int all = 1;
        for (int i = 0; i < N; i++)
            all &= phase == 0 ? got[i] == count : ended[i];
        if (all && phase == 1)
            break;
        if (all) {
            /* drained while senders still open: no descriptor may be readable */
            ASSERT_OK(wait_bytes(&done, N, tmo(30000)));
            for (int i = 0; i < N; i++) {
                ASSERT_EQ(zimp_recv(r[i], buf, sizeof buf, 0), -EAGAIN);
                struct pollfd pfd = { zimp_receiver_fd(r[i]), POLLIN, 0 };
                ASSERT_MSG(poll(&pfd, 1, 0) == 0, "fd of channel %d readable after draining", i);
            }
            struct epoll_event ev;
            ASSERT_EQ(epoll_wait(ep, &ev, 1, 0), 0);
            char c[N] = { 0 };
            put_bytes(closep.w, c, N);
            phase = 1;
            continue;
        }
        struct epoll_event evs[N];
        int k = epoll_wait(ep, evs, N, (int)tmo(5000));
        if (k < 0 && errno == EINTR)
            continue;
        ASSERT_MSG(k > 0, "epoll_wait: no readiness with messages/end pending (got %ld %ld %ld)",
                   got[0], got[1], got[2]);
        for (int e = 0; e < k; e++) {
            int i = (int)evs[e].data.u32;
            for (;;) {
                ssize_t n = zimp_recv(r[i], buf, sizeof buf, 0);
                if (n == -EAGAIN)
                    break;
                if (n == -EPIPE) {
                    ASSERT_MSG(phase == 1, "channel %d ended early", i);
                    ended[i] = 1;
                    break;
                }
                ASSERT_MSG(n >= 0, "channel %d: %s", i, err_text(n));
                uint32_t snd;
                uint64_t seq;
                ASSERT(msg_check(buf, (size_t)n, &snd, &seq));
                ASSERT_MSG(seq == (uint64_t)got[i], "channel %d: seq %llu expected %ld", i,
                           (unsigned long long)seq, got[i]);
                got[i]++;
            }
        }
    }
    for (int i = 0; i < N; i++) {
        ASSERT_CHILD_OK(tx[i], tmo(10000));
        zimp_receiver_close(r[i]);
        ASSERT_OK(zimp_unlink(names[i]));
    }
    close(ep);
    tpipe_close(&done);
    tpipe_close(&closep);
    return 0;
}

/* ---- late join ---- */

TEST_IMPL(late_join_exact)
{
    char name[128];
    chan_name(name, sizeof name, "lj");
    create_chan(name, 64, 256, 0, 0);
    zimp_sender *s;
    zimp_receiver *r, *r2;
    ASSERT_OK(zimp_sender_open(name, &s));
    for (int i = 0; i < 10; i++)
        ASSERT_OK(send_msg(s, i & 1, 0, (uint64_t)i, 32, 0));
    ASSERT_OK(zimp_receiver_open(name, &r));
    uint8_t buf[64];
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
    for (int i = 10; i < 20; i++)
        ASSERT_OK(send_msg(s, i & 1, 0, (uint64_t)i, 32, 0));
    ASSERT_OK(zimp_receiver_open(name, &r2));
    ASSERT_OK(send_msg(s, MODE_COPY, 0, 20, 32, 0));
    for (int i = 10; i <= 20; i++)
        expect_seq(r, 0, (uint64_t)i, NS_PER_S);
    expect_seq(r2, 0, 20, NS_PER_S);
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
    ASSERT_EQ(zimp_recv(r2, buf, sizeof buf, 0), -EAGAIN);
    zimp_receiver_close(r);
    zimp_receiver_close(r2);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

TEST_IMPL(late_join_concurrent)
{
    char name[128];
    chan_name(name, sizeof name, "ljc");
    create_chan(name, 32, 256, 0, 0);
    struct join_plan plan = { .rounds = 20, .msgs = 200, .pause_ns = 3000000 };
    join_while_streaming(name, &plan);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ---- leaving, rejoining, tables ---- */

static void rejoin_child(void *p)
{
    const char *name = p;
    zimp_receiver *r;
    int rc = zimp_receiver_open(name, &r);
    ASSERT_MSG(rc == 0, "receiver_open in child: %s", err_text(rc));
    zimp_receiver_close(r);
}

TEST_IMPL(leave_rejoin)
{
    char name[128];
    chan_name(name, sizeof name, "lr");
    create_chan(name, 8, 256, 0, 0);            /* default table: 64 receivers */
    zimp_receiver *r[65];
    for (int round = 0; round < 3; round++) {
        char seen[64] = { 0 };
        for (int i = 0; i < 64; i++) {
            int rc = zimp_receiver_open(name, &r[i]);
            ASSERT_MSG(rc == 0, "round %d receiver %d: %s", round, i, err_text(rc));
            int idx = zimp_receiver_index(r[i]);
            ASSERT_MSG(idx >= 0 && idx < 64, "index %d", idx);
            ASSERT_MSG(!seen[idx], "index %d handed out twice", idx);
            seen[idx] = 1;
        }
        ASSERT_EQ(zimp_receiver_open(name, &r[64]), -EUSERS);
        for (int i = 0; i < 64; i++)
            zimp_receiver_close(r[i]);
    }

    /* a rejoining receiver gets only what is published after it reopened */
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(zimp_receiver_open(name, &r[0]));
    ASSERT_OK(send_msg(s, MODE_COPY, 0, 1, 32, 0));
    zimp_receiver_close(r[0]);
    ASSERT_OK(send_msg(s, MODE_COPY, 0, 2, 32, 0));
    ASSERT_OK(zimp_receiver_open(name, &r[0]));
    ASSERT_OK(send_msg(s, MODE_COPY, 0, 3, 32, 0));
    expect_seq(r[0], 0, 3, NS_PER_S);
    uint8_t buf[64];
    ASSERT_EQ(zimp_recv(r[0], buf, sizeof buf, 0), -EAGAIN);
    zimp_receiver_close(r[0]);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));

    /* processes joining and leaving a 4-entry table many times */
    chan_name(name, sizeof name, "lr4");
    create_chan(name, 8, 64, 0, 4);
    for (int i = 0; i < 20; i++)
        ASSERT_CHILD_OK(spawn(rejoin_child, name), tmo(10000));
    for (int i = 0; i < 4; i++)
        ASSERT_OK(zimp_receiver_open(name, &r[i]));
    for (int i = 0; i < 4; i++)
        zimp_receiver_close(r[i]);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

static void eusers_child(void *p)
{
    const char *name = p;
    zimp_receiver *r;
    zimp_sender *s;
    ASSERT_EQ(zimp_receiver_open(name, &r), -EUSERS);
    ASSERT_EQ(zimp_sender_open(name, &s), -EUSERS);
}

TEST_IMPL(table_full_eusers)
{
    char name[128];
    chan_name(name, sizeof name, "full");
    create_chan(name, 8, 64, 2, 4);
    zimp_receiver *r[5];
    zimp_sender *s[3];
    for (int i = 0; i < 4; i++)
        ASSERT_OK(zimp_receiver_open(name, &r[i]));
    ASSERT_EQ(zimp_receiver_open(name, &r[4]), -EUSERS);
    for (int i = 0; i < 2; i++)
        ASSERT_OK(zimp_sender_open(name, &s[i]));
    ASSERT_EQ(zimp_sender_open(name, &s[2]), -EUSERS);
    ASSERT_CHILD_OK(spawn(eusers_child, name), tmo(10000));
    zimp_receiver_close(r[1]);
    zimp_sender_close(s[0]);
    ASSERT_OK(zimp_receiver_open(name, &r[1]));
    ASSERT_OK(zimp_sender_open(name, &s[0]));
    ASSERT_EQ(zimp_receiver_open(name, &r[4]), -EUSERS);
    ASSERT_EQ(zimp_sender_open(name, &s[2]), -EUSERS);
    for (int i = 0; i < 4; i++)
        zimp_receiver_close(r[i]);
    for (int i = 0; i < 2; i++)
        zimp_sender_close(s[i]);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

TEST_IMPL(closed_receiver_releases)
{
    char name[128];
    chan_name(name, sizeof name, "crel");
    create_chan(name, 4, 64, 0, 0);
    zimp_sender *s;
    zimp_receiver *r, *idle;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(zimp_receiver_open(name, &r));
    ASSERT_OK(zimp_receiver_open(name, &idle));
    for (int i = 0; i < 4; i++)
        ASSERT_OK(send_msg(s, MODE_COPY, 0, (uint64_t)i, 32, 0));
    ASSERT_EQ(send_msg(s, MODE_COPY, 0, 4, 32, 0), -EAGAIN);
    zimp_receiver_close(idle);                 /* never read: must not hold the ring */
    const void *rb;
    size_t len;
    ASSERT_OK(zimp_read(r, &rb, &len, 0));     /* borrow message 0, then leave */
    zimp_receiver_close(r);
    for (int i = 4; i < 16; i++)
        ASSERT_OK(send_msg(s, MODE_COPY, 0, (uint64_t)i, 32, 0));
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ---- a borrow holds its slot ---- */

struct borrow_rx { const char *name; struct tpipe *ready, *release; };

static void borrow_rx_role(void *p)
{
    struct borrow_rx *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    const void *rb;
    size_t len;
    ASSERT_OK(zimp_read(r, &rb, &len, T_LONG));
    uint32_t snd;
    uint64_t seq;
    ASSERT(msg_check(rb, len, &snd, &seq) && seq == 0);
    signal_byte(a->ready);
    ASSERT_OK(wait_bytes(a->release, 1, tmo(30000)));
    /* the sender filled slots 1..3 meanwhile: message 0 is intact */
    ASSERT_MSG(msg_check(rb, len, &snd, &seq) && seq == 0, "borrowed message overwritten");
    ASSERT_OK(zimp_release(r));
    for (uint64_t i = 1; i <= 5; i++) {
        ASSERT_OK(zimp_read(r, &rb, &len, T_LONG));
        ASSERT(msg_check(rb, len, &snd, &seq));
        ASSERT_EQ(seq, i);
        ASSERT_OK(zimp_release(r));
    }
    zimp_receiver_close(r);
}

TEST_IMPL(borrow_blocks_slot)
{
    char name[128];
    chan_name(name, sizeof name, "bb");
    create_chan(name, 4, 128, 0, 0);
    struct tpipe ready, release;
    tpipe_open(&ready);
    tpipe_open(&release);
    struct borrow_rx a = { name, &ready, &release };
    pid_t rx = spawn(borrow_rx_role, &a);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(send_msg(s, MODE_ZC, 0, 0, 100, 0));
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));   /* message 0 borrowed */
    for (uint64_t i = 1; i <= 3; i++)
        ASSERT_OK(send_msg(s, i & 1, 0, i, 100, 0));
    ASSERT_EQ(send_msg(s, MODE_COPY, 0, 4, 100, 0), -EAGAIN);
    ASSERT_EQ(send_msg(s, MODE_ZC, 0, 4, 100, 100 * NS_PER_MS), -ETIMEDOUT);
    signal_byte(&release);
    ASSERT_OK(send_msg(s, MODE_COPY, 0, 4, 100, 5 * NS_PER_S));   /* slot 0 again */
    ASSERT_OK(send_msg(s, MODE_ZC, 0, 5, 100, T_LONG));
    zimp_sender_close(s);
    ASSERT_CHILD_OK(rx, tmo(20000));
    ASSERT_OK(zimp_unlink(name));
    tpipe_close(&ready);
    tpipe_close(&release);
    return 0;
}

/* ---- end of stream ---- */

struct gated_tx { const char *name; uint32_t id; int count; struct tpipe *ready, *go; };

static void gated_tx_role(void *p)
{
    struct gated_tx *a = p;
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    signal_byte(a->ready);
    ASSERT_OK(wait_bytes(a->go, 1, tmo(30000)));
    for (int i = 0; i < a->count; i++)
        ASSERT_OK(send_msg(s, i & 1, a->id, (uint64_t)i, 40, T_LONG));
    zimp_sender_close(s);
}

TEST_IMPL(epipe_after_senders_leave)
{
    char name[128];
    chan_name(name, sizeof name, "ep");
    create_chan(name, 16, 128, 0, 0);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    struct tpipe ready, goa, gob, goc;
    tpipe_open(&ready);
    tpipe_open(&goa);
    tpipe_open(&gob);
    tpipe_open(&goc);
    struct gated_tx a = { name, 1, 10, &ready, &goa }, b = { name, 2, 10, &ready, &gob };
    pid_t pa = spawn(gated_tx_role, &a), pb = spawn(gated_tx_role, &b);
    ASSERT_OK(wait_bytes(&ready, 2, tmo(10000)));
    signal_byte(&goa);
    for (int i = 0; i < 10; i++)
        expect_seq(r, 1, (uint64_t)i, T_LONG);
    ASSERT_CHILD_OK(pa, tmo(10000));
    uint8_t buf[128];
    /* one sender left, one still open: no end of stream */
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 100 * NS_PER_MS), -ETIMEDOUT);
    signal_byte(&gob);
    for (int i = 0; i < 10; i++)
        expect_seq(r, 2, (uint64_t)i, T_LONG);
    ASSERT_CHILD_OK(pb, tmo(10000));
    int64_t t0 = now_ns();
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S), -EPIPE);
    ASSERT_MSG(now_ns() - t0 < 2 * NS_PER_S, "-EPIPE took %lld ns", (long long)(now_ns() - t0));
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EPIPE);
    const void *rb;
    size_t len;
    ASSERT_EQ(zimp_read(r, &rb, &len, 0), -EPIPE);
    ASSERT_EQ(zimp_read(r, &rb, &len, -1), -EPIPE);

    /* a sender opening later makes messages flow again */
    struct gated_tx c = { name, 3, 5, &ready, &goc };
    pid_t pc = spawn(gated_tx_role, &c);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
    signal_byte(&goc);
    for (int i = 0; i < 5; i++)
        expect_seq(r, 3, (uint64_t)i, T_LONG);
    ASSERT_CHILD_OK(pc, tmo(10000));
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S), -EPIPE);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    tpipe_close(&ready);
    tpipe_close(&goa);
    tpipe_close(&gob);
    tpipe_close(&goc);
    return 0;
}

/* A receiver and two sender processes a and b, which sent 3 messages each and wait to close. */
struct ep_pair {
    char name[128];
    zimp_receiver *r;
    struct tpipe done, close_a, close_b;
    struct ep_tx a, b;
    pid_t pa, pb;
};

static void ep_pair_start(struct ep_pair *e, const char *tag)
{
    chan_name(e->name, sizeof e->name, tag);
    create_chan(e->name, 16, 128, 0, 0);
    ASSERT_OK(zimp_receiver_open(e->name, &e->r));
    tpipe_open(&e->done);
    tpipe_open(&e->close_a);
    tpipe_open(&e->close_b);
    e->a = (struct ep_tx){ e->name, 3, &e->done, &e->close_a };
    e->b = (struct ep_tx){ e->name, 3, &e->done, &e->close_b };
    e->pa = spawn(ep_tx_role, &e->a);
    e->pb = spawn(ep_tx_role, &e->b);
    ASSERT_OK(wait_bytes(&e->done, 2, tmo(10000)));
}

static void ep_pair_done(struct ep_pair *e)
{
    zimp_receiver_close(e->r);
    ASSERT_OK(zimp_unlink(e->name));
    tpipe_close(&e->done);
    tpipe_close(&e->close_a);
    tpipe_close(&e->close_b);
}

/*
 * A receiver that only polls (timeout 0) is told -EPIPE by its first poll
 * after the last sender closed, -EAGAIN while any sender is open (however
 * many polls), and reads again once a new sender opens.
 */
TEST_IMPL(epipe_poll_at_last_close)
{
    struct ep_pair e;
    ep_pair_start(&e, "epp");
    uint8_t buf[256];
    for (int i = 0; i < 6; i++)
        ASSERT_MSG(zimp_recv(e.r, buf, sizeof buf, 0) > 0, "message %d of 6 not there", i);
    for (int i = 0; i < 1000; i++)
        ASSERT_EQ(zimp_recv(e.r, buf, sizeof buf, 0), -EAGAIN);
    signal_byte(&e.close_a);
    ASSERT_CHILD_OK(e.pa, tmo(10000));
    for (int i = 0; i < 1000; i++)           /* b is still open */
        ASSERT_EQ(zimp_recv(e.r, buf, sizeof buf, 0), -EAGAIN);
    signal_byte(&e.close_b);
    ASSERT_CHILD_OK(e.pb, tmo(10000));
    ASSERT_EQ(zimp_recv(e.r, buf, sizeof buf, 0), -EPIPE);
    const void *rb;
    size_t len;
    for (int i = 0; i < 1000; i++)
        ASSERT_EQ(zimp_read(e.r, &rb, &len, 0), -EPIPE);

    struct ep_tx c = { e.name, 2, &e.done, &e.close_a };
    pid_t pc = spawn(ep_tx_role, &c);
    ASSERT_OK(wait_bytes(&e.done, 1, tmo(10000)));
    for (int i = 0; i < 2; i++)
        ASSERT_MSG(zimp_recv(e.r, buf, sizeof buf, 0) > 0, "late message %d of 2 not there", i);
    ASSERT_EQ(zimp_recv(e.r, buf, sizeof buf, 0), -EAGAIN);
    signal_byte(&e.close_a);
    ASSERT_CHILD_OK(pc, tmo(10000));
    ASSERT_EQ(zimp_recv(e.r, buf, sizeof buf, 0), -EPIPE);
    ep_pair_done(&e);
    return 0;
}

/*
 * The same with a dead sender's record still taken (killed, never reclaimed:
 * no joiner needed it). The last live sender's close must still end a poll
 * at once, every poll after it says -EPIPE too (not -EAGAIN until the next
 * check), and a receive with a short timeout made after the close, even
 * right after a liveness check, returns -EPIPE, not -ETIMEDOUT: the records
 * left are all dead, which only their pidfds tell.
 */
TEST_IMPL(epipe_at_last_close_beside_dead)
{
    struct ep_pair e;
    ep_pair_start(&e, "epd");
    ASSERT_OK(kill(e.pa, SIGKILL));
    ASSERT_EQ(wait_child(e.pa, tmo(10000)), 128 + SIGKILL);
    uint8_t buf[256];
    for (int i = 0; i < 6; i++)
        ASSERT_MSG(zimp_recv(e.r, buf, sizeof buf, 0) > 0, "message %d of 6 not there", i);
    int64_t t0 = now_ns();
    while (now_ns() - t0 < 30 * NS_PER_MS)   /* a's death found meanwhile; b still open */
        ASSERT_EQ(zimp_recv(e.r, buf, sizeof buf, 0), -EAGAIN);
    signal_byte(&e.close_b);
    ASSERT_CHILD_OK(e.pb, tmo(10000));
    ASSERT_EQ(zimp_recv(e.r, buf, sizeof buf, 0), -EPIPE);
    t0 = now_ns();
    while (now_ns() - t0 < 30 * NS_PER_MS)   /* it stays ended: no sender can publish */
        ASSERT_EQ(zimp_recv(e.r, buf, sizeof buf, 0), -EPIPE);

    for (int round = 0; round < 5; round++) {
        struct ep_tx c = { e.name, 1, &e.done, &e.close_a };
        pid_t pc = spawn(ep_tx_role, &c);
        ASSERT_OK(wait_bytes(&e.done, 1, tmo(10000)));
        ASSERT_EQ(zimp_recv(e.r, buf, sizeof buf, T_LONG), 24);
        ASSERT_EQ(zimp_recv(e.r, buf, sizeof buf, 2 * NS_PER_MS), -ETIMEDOUT);   /* a check just ran */
        signal_byte(&e.close_a);
        ASSERT_CHILD_OK(pc, tmo(10000));
        ASSERT_EQ(zimp_recv(e.r, buf, sizeof buf, NS_PER_MS), -EPIPE);
    }
    ep_pair_done(&e);
    return 0;
}

/*
 * Senders that close while holding a loan abandon its position; a receiver
 * passes such positions by its liveness check (R5). A burst of them, with
 * messages between, is passed at once, not one per 10 ms check: 30 of them
 * would take 290 ms at least that way; the bound catches that.
 */
TEST_IMPL(abandoned_burst_passed_at_once)
{
    enum { N = 30 };
    char name[128];
    chan_name(name, sizeof name, "abb");
    create_chan(name, 128, 64, N + 1, 2);
    for (int mode = 0; mode < 2; mode++) {              /* polls, then timed receives */
        zimp_receiver *r;
        zimp_sender *s;
        void *buf;
        ASSERT_OK(zimp_receiver_open(name, &r));
        for (int i = 0; i < N; i++) {
            ASSERT_OK(zimp_sender_open(name, &s));
            ASSERT_OK(send_msg(s, MODE_COPY, 0, (uint64_t)i, 32, T_LONG));
            ASSERT_OK(zimp_loan(s, 32, &buf, T_LONG));
            zimp_sender_close(s);                       /* the loan's position is abandoned */
        }
        ASSERT_OK(zimp_sender_open(name, &s));
        ASSERT_OK(send_msg(s, MODE_COPY, 0, N, 32, T_LONG));
        uint8_t m[64];
        int64_t t0 = now_ns();
        for (uint64_t want = 0; want <= N;) {
            ssize_t n = zimp_recv(r, m, sizeof m, mode ? 100 * NS_PER_MS : 0);
            if (n == -EAGAIN || n == -ETIMEDOUT)
                continue;
            uint32_t from;
            uint64_t seq;
            ASSERT_MSG(n == 32 && msg_check(m, 32, &from, &seq) && seq == want, "got %zd, seq %llu, want %llu",
                       n, (unsigned long long)seq, (unsigned long long)want);
            want++;
            ASSERT_MSG(now_ns() - t0 < 200 * NS_PER_MS, "abandoned positions passed one per check");
        }
        zimp_sender_close(s);
        ASSERT_EQ(zimp_recv(r, m, sizeof m, T_LONG), -EPIPE);
        zimp_receiver_close(r);
    }
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

struct delayed_tx { const char *name; long delay_ms; int count; };

static void delayed_tx_role(void *p)
{
    struct delayed_tx *a = p;
    sleep_ms(a->delay_ms);
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    for (int i = 0; i < a->count; i++)
        ASSERT_OK(send_msg(s, i & 1, 4, (uint64_t)i, 40, T_LONG));
    zimp_sender_close(s);
}

TEST_IMPL(no_sender_yet_waits)
{
    char name[128];
    chan_name(name, sizeof name, "ns");
    create_chan(name, 16, 128, 0, 0);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    uint8_t buf[128];
    const void *rb;
    size_t len;
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
    ASSERT_EQ(zimp_read(r, &rb, &len, 0), -EAGAIN);
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 150 * NS_PER_MS), -ETIMEDOUT);
    struct delayed_tx a = { name, 200, 3 };
    pid_t tx = spawn(delayed_tx_role, &a);
    for (int i = 0; i < 3; i++)
        expect_seq(r, 4, (uint64_t)i, T_LONG);   /* waits across the sender's arrival */
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S), -EPIPE);
    ASSERT_CHILD_OK(tx, tmo(10000));
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ---- fork ---- */

struct fork_args { const char *name, *other; };

static void fork_child(void *p)
{
    struct fork_args *a = p;
    zimp_sender *s;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    ASSERT_OK(zimp_sender_open(a->name, &s));
    ASSERT_OK(send_msg(s, MODE_ZC, 7, 100, 64, 0));
    expect_seq(r, 7, 100, NS_PER_S);             /* not the parent's earlier message */
    zimp_sender_close(s);
    zimp_receiver_close(r);
    /* a new channel, created and used in the child */
    ASSERT_OK(zimp_create(a->other, NULL));
    ASSERT_OK(zimp_receiver_open(a->other, &r));
    ASSERT_OK(zimp_sender_open(a->other, &s));
    ASSERT_OK(send_msg(s, MODE_COPY, 8, 0, 64, 0));
    expect_seq(r, 8, 0, NS_PER_S);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(a->other));
}

TEST_IMPL(fork_child_opens_new)
{
    char name[128], other[128];
    chan_name(name, sizeof name, "fk");
    chan_name(other, sizeof other, "fk2");
    create_chan(name, 16, 128, 0, 0);
    zimp_sender *s;
    zimp_receiver *r;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(zimp_receiver_open(name, &r));
    ASSERT_OK(send_msg(s, MODE_COPY, 0, 0, 64, 0));
    struct fork_args a = { name, other };
    ASSERT_CHILD_OK(spawn(fork_child, &a), tmo(10000));
    /* the parent's handles still work after the child came and went */
    expect_seq(r, 0, 0, NS_PER_S);
    expect_seq(r, 7, 100, NS_PER_S);
    ASSERT_OK(send_msg(s, MODE_ZC, 0, 1, 64, NS_PER_S));
    expect_seq(r, 0, 1, NS_PER_S);
    struct zimp_info info;
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.senders, 1);
    ASSERT_EQ(info.receivers, 1);
    zimp_receiver_close(r);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ---- spin settings ---- */

struct spin_args { const char *name; uint64_t spin; long count; struct tpipe *ready; };

static void spin_rx_role(void *p)
{
    struct spin_args *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    ASSERT_OK(zimp_receiver_set_spin(r, a->spin));
    signal_byte(a->ready);
    for (long i = 0; i < a->count; i++)
        expect_seq(r, 0, (uint64_t)i, T_LONG);
    uint8_t buf[64];
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S), -EPIPE);
    zimp_receiver_close(r);
}

TEST_IMPL(spin_modes)
{
    const uint64_t spins[] = { 0, 1000, UINT64_MAX, ZIMP_SPIN_ADAPTIVE };
    for (int k = 0; k < 4; k++) {
        char name[128], tag[8];
        snprintf(tag, sizeof tag, "sp%d", k);
        chan_name(name, sizeof name, tag);
        create_chan(name, 8, 64, 0, 0);
        struct tpipe ready;
        tpipe_open(&ready);
        struct spin_args a = { name, spins[k], scaled(5000), &ready };
        pid_t rx = spawn(spin_rx_role, &a);
        ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
        zimp_sender *s;
        ASSERT_OK(zimp_sender_open(name, &s));
        ASSERT_OK(zimp_sender_set_spin(s, spins[k]));
        for (long i = 0; i < a.count; i++)
            ASSERT_OK(send_msg(s, (int)(i & 1), 0, (uint64_t)i, 32, T_LONG));
        zimp_sender_close(s);
        ASSERT_CHILD_OK(rx, tmo(30000));

        /* a timeout is honoured whatever the spin budget */
        zimp_receiver *r;
        ASSERT_OK(zimp_receiver_open(name, &r));
        ASSERT_OK(zimp_receiver_set_spin(r, spins[k]));
        ASSERT_OK(zimp_sender_open(name, &s));
        uint8_t buf[64];
        struct timespec c0, c1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        int64_t t0 = now_ns();
        ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 100 * NS_PER_MS), -ETIMEDOUT);
        ASSERT(now_ns() - t0 >= 95 * NS_PER_MS && now_ns() - t0 < 5 * NS_PER_S);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        /* idle waiting burns no CPU, unless busy-waiting was asked for */
        int64_t cpu = (c1.tv_sec - c0.tv_sec) * NS_PER_S + (c1.tv_nsec - c0.tv_nsec);
        if (spins[k] != UINT64_MAX)
            ASSERT_MSG(cpu < 30 * NS_PER_MS, "spin %llu: %.1f ms of CPU in a 100 ms idle wait",
                       (unsigned long long)spins[k], cpu / 1e6);
        zimp_sender_close(s);
        zimp_receiver_close(r);
        ASSERT_OK(zimp_unlink(name));
        tpipe_close(&ready);
    }
    return 0;
}

/* ---- flags ---- */

TEST_IMPL(flag_checksum)
{
    char name[128];
    chan_name(name, sizeof name, "ck");
    struct zimp_config cfg = { .slots = 8, .slot_size = 512, .flags = ZIMP_CHECKSUM };
    ASSERT_OK(zimp_create(name, &cfg));
    struct zimp_info info;
    ASSERT_OK(zimp_info(name, &info));
    ASSERT(info.flags & ZIMP_CHECKSUM);
    zimp_sender *s;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    ASSERT_OK(zimp_sender_open(name, &s));
    for (int i = 0; i < 100; i++) {
        ASSERT_OK(send_msg(s, i & 1, 0, (uint64_t)i, 16 + (size_t)i * 4, NS_PER_S));
        uint8_t buf[512];
        ssize_t n = recv_msg(r, (i >> 1) & 1, buf, sizeof buf, NS_PER_S);
        ASSERT_EQ(n, 16 + i * 4);
        uint32_t snd;
        uint64_t seq;
        ASSERT(msg_check(buf, (size_t)n, &snd, &seq) && seq == (uint64_t)i);
    }
    /* a message changed in shared memory after publication is refused */
    uint8_t pattern[64];
    for (int i = 0; i < 64; i++)
        pattern[i] = (uint8_t)(0x5A ^ (i * 29));
    ASSERT_OK(zimp_send(s, pattern, sizeof pattern, NS_PER_S));
    struct segmap sm = map_shm_file("zimp.", name);
    uint8_t *hit = memmem(sm.base, sm.size, pattern, sizeof pattern);
    ASSERT_MSG(hit != NULL, "message bytes not found in the segment");
    hit[10] ^= 0x01;
    uint8_t buf[512];
    ssize_t n = zimp_recv(r, buf, sizeof buf, NS_PER_S);
    ASSERT_MSG(n == -EBADMSG, "corrupted message: recv returned %zd (%s)", n, err_text(n));
    munmap(sm.base, sm.size);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

TEST_IMPL(flag_zero_on_release)
{
    char name[128];
    chan_name(name, sizeof name, "zr");
    struct zimp_config cfg = { .slots = 2, .slot_size = 256, .flags = ZIMP_ZERO_ON_RELEASE };
    ASSERT_OK(zimp_create(name, &cfg));
    struct zimp_info info;
    ASSERT_OK(zimp_info(name, &info));
    zimp_sender *s;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    ASSERT_OK(zimp_sender_open(name, &s));
    uint8_t junk[200];
    memset(junk, 0xA5, sizeof junk);
    for (uint32_t i = 0; i < info.slots; i++)
        ASSERT_OK(zimp_send(s, junk, sizeof junk, NS_PER_S));
    for (uint32_t i = 0; i < info.slots; i++) {
        const void *rb;
        size_t len;
        ASSERT_OK(zimp_read(r, &rb, &len, NS_PER_S));
        ASSERT_EQ(len, sizeof junk);
        ASSERT_OK(zimp_release(r));
    }
    /* every slot was released by every receiver: loans see zeroed memory */
    for (uint32_t i = 0; i < info.slots; i++) {
        void *lb;
        ASSERT_OK(zimp_loan(s, sizeof junk, &lb, NS_PER_S));
        const uint8_t *b = lb;
        for (size_t k = 0; k < sizeof junk; k++)
            ASSERT_MSG(b[k] == 0, "slot %u byte %zu = 0x%02x after release", i, k, b[k]);
        ASSERT_OK(zimp_publish(s, lb, 0));
        uint8_t buf[256];
        ASSERT_EQ(zimp_recv(r, buf, sizeof buf, NS_PER_S), 0);
    }
    /* A loan's bytes that never went out, published short or given back, are zeroed too. */
    for (uint32_t i = 0; i < info.slots; i++) {
        void *lb;
        ASSERT_OK(zimp_loan(s, sizeof junk, &lb, NS_PER_S));
        memset(lb, 0xA5, sizeof junk);
        if (i == 0) {
            ASSERT_OK(zimp_publish(s, lb, 10));
            uint8_t buf[256];
            ASSERT_EQ(zimp_recv(r, buf, sizeof buf, NS_PER_S), 10);
        } else {
            ASSERT_OK(zimp_unloan(s, lb));
        }
    }
    uint8_t none[8];
    ASSERT_EQ(zimp_recv(r, none, sizeof none, 0), -EAGAIN);   /* passes the skipped position */
    for (uint32_t i = 0; i < info.slots; i++) {
        void *lb;
        ASSERT_OK(zimp_loan(s, sizeof junk, &lb, NS_PER_S));
        const uint8_t *b = lb;
        for (size_t k = 0; k < sizeof junk; k++)
            ASSERT_MSG(b[k] == 0, "slot %u byte %zu = 0x%02x after a loan %s", i, k, b[k],
                       i == 0 ? "published short" : "given back");
        ASSERT_OK(zimp_unloan(s, lb));
        ASSERT_EQ(zimp_recv(r, none, sizeof none, 0), -EAGAIN);
    }
    /* ... and a loan its sender closed on, abandoned (another sender goes on). */
    zimp_sender *s2;
    ASSERT_OK(zimp_sender_open(name, &s2));
    void *lb;
    ASSERT_OK(zimp_loan(s, sizeof junk, &lb, NS_PER_S));
    memset(lb, 0xA5, sizeof junk);
    zimp_sender_close(s);
    ASSERT_EQ(zimp_recv(r, none, sizeof none, tmo(200) * NS_PER_MS), -ETIMEDOUT);  /* passes it */
    for (uint32_t i = 0; i < info.slots; i++) {
        ASSERT_OK(zimp_loan(s2, sizeof junk, &lb, NS_PER_S));
        const uint8_t *b = lb;
        for (size_t k = 0; k < sizeof junk; k++)
            ASSERT_MSG(b[k] == 0, "byte %zu = 0x%02x after a close abandoned the loan", k, b[k]);
        ASSERT_OK(zimp_unloan(s2, lb));
        ASSERT_EQ(zimp_recv(r, none, sizeof none, 0), -EAGAIN);
    }
    s = s2;
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

struct zeroer { const char *name; struct tpipe *ready, *stay; };

/* Reads message 0 in place and keeps it, alive, until told (or killed). */
static void zeroer_role(void *p)
{
    struct zeroer *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    int32_t idx = zimp_receiver_index(r);
    put_bytes(a->ready->w, &idx, sizeof idx);
    const void *rb;
    size_t len;
    ASSERT_OK(zimp_read(r, &rb, &len, T_LONG));
    signal_byte(a->ready);
    wait_bytes(a->stay, 1, tmo(60000));
}

/*
 * Z3: a receiver evicted while it zeroes a message it read (stopped in the
 * middle of a long memset, say) holds the slot it zeroes, not the ring.
 * Its record is written to say so (zeroing = q + 1, as Z0 leaves it), it is
 * evicted, and the sender goes on, passing that slot by: every message
 * reaches the live receiver, and the slot's data is not written while the
 * record says zeroing. Once it says done, the slot is used again. With one
 * sender record (the store-only path) and with two.
 */
TEST_IMPL(zero_on_release_evicted_zeroing)
{
    for (uint32_t senders = 1; senders <= 2; senders++) {
        char name[128];
        chan_name(name, sizeof name, senders == 1 ? "ze1" : "ze2");
        struct zimp_config cfg = { .slots = 4, .slot_size = 256, .max_senders = senders,
                                   .max_receivers = 4, .flags = ZIMP_ZERO_ON_RELEASE };
        ASSERT_OK(zimp_create(name, &cfg));
        zimp_sender *s;
        zimp_receiver *r;
        ASSERT_OK(zimp_sender_open(name, &s));
        ASSERT_OK(zimp_receiver_open(name, &r));
        struct tpipe ready, stay;
        tpipe_open(&ready);
        tpipe_open(&stay);
        struct zeroer z = { name, &ready, &stay };
        pid_t pid = spawn(zeroer_role, &z);
        int32_t idx;
        ASSERT_OK(get_bytes(ready.r, &idx, sizeof idx, tmo(5000)));
        ASSERT_OK(send_msg(s, MODE_COPY, 0, 0, 200, T_LONG));
        expect_msg(r, 0, 0, T_LONG);
        ASSERT_OK(wait_bytes(&ready, 1, tmo(5000)));         /* it holds message 0 */

        struct segmap sm = map_shm_file("zimp.", name);
        uint8_t *base = sm.base;
        const struct zimp_header *h = sm.base;
        struct zimp_receiver_rec *rr = (void *)(base + h->off_receivers + (uint64_t)idx * h->receiver_stride);
        const uint8_t *slot0 = base + h->off_data;           /* message 0's bytes */
        struct zimp_slot *hdr0 = (void *)(base + h->off_slots);
        uint8_t kept[200];
        memcpy(kept, slot0, sizeof kept);
        zimp_store_sc(&rr->zeroing, 1);                      /* Z0 for position 0 */
        ASSERT_OK(zimp_evict(s, (unsigned)idx));

        /* Before Z3 passed the slot by, the claim of position 4 waited for ever. */
        for (uint64_t i = 1; i <= 12; i++) {
            int rc = send_msg(s, (int)(i & 1), 0, i, 200, T_LONG);
            ASSERT_MSG(rc == 0, "message %llu beside an evicted receiver zeroing: %s",
                       (unsigned long long)i, err_text(rc));
            expect_msg(r, 0, i, T_LONG);
        }
        ASSERT_MSG(memcmp(slot0, kept, sizeof kept) == 0, "the slot being zeroed was written");
        ASSERT_MSG(zimp_load_sc(&hdr0->seq) == (12 | ZIMP_SEQ_SKIP) + 1,
                   "slot 0 holds seq %#llx, not position 12 skipped",
                   (unsigned long long)zimp_load_sc(&hdr0->seq));
        zimp_store_sc(&rr->zeroing, 0);                      /* it is done */
        for (uint64_t i = 13; i <= 20; i++) {
            ASSERT_OK(send_msg(s, MODE_COPY, 0, i, 200, T_LONG));
            expect_msg(r, 0, i, T_LONG);
        }
        ASSERT_MSG(memcmp(slot0, kept, sizeof kept) != 0, "the slot was not used again once zeroed");

        /* Dead while zeroing: it zeroes nothing more, the slot is used again. */
        zimp_store_sc(&rr->zeroing, 21);                     /* position 20, slot 0 */
        ASSERT_OK(kill(pid, SIGKILL));
        ASSERT_EQ(wait_child(pid, tmo(10000)), 128 + SIGKILL);
        for (uint64_t i = 21; i <= 28; i++) {
            ASSERT_OK(send_msg(s, MODE_COPY, 0, i, 200, T_LONG));
            expect_msg(r, 0, i, T_LONG);
        }
        ASSERT_MSG(zimp_load_sc(&hdr0->seq) == 28 + 1, "slot 0 holds seq %#llx, not position 28: the "
                   "slot of a dead zeroer was not used again", (unsigned long long)zimp_load_sc(&hdr0->seq));
        munmap(sm.base, sm.size);
        zimp_sender_close(s);
        zimp_receiver_close(r);
        ASSERT_OK(zimp_unlink(name));
        tpipe_close(&ready);
        tpipe_close(&stay);
    }
    return 0;
}

struct zrx { const char *name; struct tpipe *ready; long count; int zero_copy; };

static void zero_rx_role(void *p)
{
    struct zrx *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    uint8_t buf[512];
    for (long i = 0; i < a->count; i++) {
        ssize_t n = recv_msg(r, a->zero_copy, buf, sizeof buf, T_LONG);
        ASSERT_MSG(n >= 0, "message %ld: %s", i, err_text(n));
        uint32_t snd;
        uint64_t seq;
        ASSERT_MSG(msg_check(buf, (size_t)n, &snd, &seq) && seq == (uint64_t)i,
                   "message %ld corrupt or out of order (zeroed too early?)", i);
    }
    zimp_receiver_close(r);
}

/*
 * ZIMP_ZERO_ON_RELEASE with several receivers (copying and zero-copy, one
 * joining mid-stream): nobody sees a message zeroed before it read it, and
 * once all are done every slot reads back as zeros.
 */
TEST_IMPL(zero_on_release_many)
{
    char name[128];
    chan_name(name, sizeof name, "zrm");
    struct zimp_config cfg = { .slots = 16, .slot_size = 512, .flags = ZIMP_ZERO_ON_RELEASE };
    ASSERT_OK(zimp_create(name, &cfg));
    long count = scaled(20000);
    struct tpipe ready;
    tpipe_open(&ready);
    struct zrx a[3];
    pid_t kids[3];
    for (int k = 0; k < 3; k++) {
        a[k] = (struct zrx){ name, &ready, count, k & 1 };
        kids[k] = spawn(zero_rx_role, &a[k]);
    }
    ASSERT_OK(wait_bytes(&ready, 3, tmo(10000)));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    struct xrand rnd = { (uint64_t)getpid() };
    for (long i = 0; i < count; i++) {
        size_t len = sizeof(struct tmsg) + (size_t)xrand_below(&rnd, 512 - sizeof(struct tmsg));
        ASSERT_OK(send_msg(s, (int)(i & 1), 0, (uint64_t)i, len, T_LONG));
        if (i == count / 2) {           /* a late joiner takes part in zeroing from now on */
            zimp_receiver *late;
            ASSERT_OK(zimp_receiver_open(name, &late));
            zimp_receiver_close(late);
        }
    }
    for (int k = 0; k < 3; k++)
        ASSERT_CHILD_OK(kids[k], tmo(60000));
    for (uint32_t i = 0; i < cfg.slots; i++) {
        void *lb;
        ASSERT_OK(zimp_loan(s, 512, &lb, NS_PER_S));
        for (size_t b = 0; b < 512; b++)
            ASSERT_MSG(((uint8_t *)lb)[b] == 0, "slot %u byte %zu not zeroed", i, b);
        ASSERT_OK(zimp_publish(s, lb, 0));
    }
    zimp_sender_close(s);
    tpipe_close(&ready);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/*
 * Z5: a receiver that joins is the last reader of the messages it passes
 * without reading them. Receiver A reads m while C, still a member, has not:
 * A leaves the zeroing to C, which closes without reading m. m's bytes stay
 * in the segment (nobody of the channel was its last reader) until D opens:
 * its join passes m (published before its start), finds nobody else reading
 * it and zeroes it. D does not receive m.
 */
TEST_IMPL(zero_on_release_joiner_zeroes_what_a_leaver_left)
{
    char name[128];
    chan_name(name, sizeof name, "zjl");
    struct zimp_config cfg = { .slots = 8, .slot_size = 256, .max_receivers = 4,
                               .flags = ZIMP_ZERO_ON_RELEASE };
    ASSERT_OK(zimp_create(name, &cfg));
    zimp_receiver *a, *c, *d;
    zimp_sender *s;
    ASSERT_OK(zimp_receiver_open(name, &a));
    ASSERT_OK(zimp_receiver_open(name, &c));
    ASSERT_OK(zimp_sender_open(name, &s));
    static const char secret[] = "zero-on-release: the bytes a leaver left behind";
    ASSERT_OK(zimp_send(s, secret, sizeof secret, NS_PER_S));
    char buf[256];
    ASSERT_EQ(zimp_recv(a, buf, sizeof buf, NS_PER_S), (ssize_t)sizeof secret);
    ASSERT(memcmp(buf, secret, sizeof secret) == 0);
    struct segmap seg = map_shm_file("zimp.", name);
    ASSERT_MSG(memmem(seg.base, seg.size, secret, sizeof secret) != NULL,
               "A zeroed the message while C had not read it");
    zimp_receiver_close(c);                               /* leaves without reading it */
    ASSERT_MSG(memmem(seg.base, seg.size, secret, sizeof secret) != NULL,
               "closing C zeroed the message");
    ASSERT_OK(zimp_receiver_open(name, &d));
    ASSERT_MSG(memmem(seg.base, seg.size, secret, sizeof secret) == NULL,
               "the message's bytes are still in the segment after D joined");
    ASSERT_EQ(zimp_recv(d, buf, sizeof buf, 0), -EAGAIN);  /* published before it joined */
    ASSERT_OK(zimp_send(s, "after", 6, NS_PER_S));           /* both still receive */
    ASSERT_EQ(zimp_recv(a, buf, sizeof buf, NS_PER_S), 6);
    ASSERT_EQ(zimp_recv(d, buf, sizeof buf, NS_PER_S), 6);
    munmap(seg.base, seg.size);
    zimp_receiver_close(a);
    zimp_receiver_close(d);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

struct idle_rx { const char *name; struct tpipe *ready; };

/* A receiver that opens, says so, and waits to be killed. */
static void idle_rx_role(void *p)
{
    struct idle_rx *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    pause();
}

/* Whether the segment holds `n` bytes of value `b` in a row. */
static bool seg_has_run(const char *name, uint8_t b, size_t n)
{
    struct segmap seg = map_shm_file("zimp.", name);
    uint8_t run[512];
    memset(run, b, n);
    bool found = memmem(seg.base, seg.size, run, n) != NULL;
    munmap(seg.base, seg.size);
    return found;
}

/*
 * Z5's edges, from an outside review: (a) a reader that died before reading
 * keeps its record ACTIVE until a sender frees it (D1), which kept the others
 * and the joiner from zeroing; a joiner judges its liveness. (b) A message
 * left unzeroed and then written over by shorter ones kept its tail (each
 * last reader zeroes its own message's length); a joiner zeroes whole slots.
 */
TEST_IMPL(zero_on_release_joiner_clears_dead_readers_and_tails)
{
    char name[128];
    struct zimp_config cfg = { .slots = 4, .slot_size = 512, .max_receivers = 4,
                               .flags = ZIMP_ZERO_ON_RELEASE };
    uint8_t msg[512], buf[512];
    zimp_receiver *i, *x, *d;
    zimp_sender *s;

    /* (a) X dies unread: its record stays ACTIVE, with head 0 */
    chan_name(name, sizeof name, "zjd");
    ASSERT_OK(zimp_create(name, &cfg));
    ASSERT_OK(zimp_receiver_open(name, &i));
    struct tpipe ready;
    tpipe_open(&ready);
    struct idle_rx a = { name, &ready };
    pid_t child = spawn(idle_rx_role, &a);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    ASSERT_OK(zimp_sender_open(name, &s));
    memset(msg, 0xab, 400);
    for (int k = 0; k < 4; k++)
        ASSERT_OK(zimp_send(s, msg, 400, NS_PER_S));
    for (int k = 0; k < 4; k++)
        ASSERT_EQ(zimp_recv(i, buf, sizeof buf, NS_PER_S), 400);
    ASSERT_MSG(seg_has_run(name, 0xab, 400), "zeroed while a reader's record was ACTIVE");
    ASSERT_OK(zimp_receiver_open(name, &d));
    ASSERT_MSG(!seg_has_run(name, 0xab, 64), "the dead reader's messages are still there after a join");
    zimp_receiver_close(d);
    zimp_receiver_close(i);
    zimp_sender_close(s);
    tpipe_close(&ready);
    ASSERT_OK(zimp_unlink(name));

    /* (b) X closes unread; shorter messages then reuse the slots */
    chan_name(name, sizeof name, "zjt");
    ASSERT_OK(zimp_create(name, &cfg));
    ASSERT_OK(zimp_receiver_open(name, &i));
    ASSERT_OK(zimp_receiver_open(name, &x));
    ASSERT_OK(zimp_sender_open(name, &s));
    memset(msg, 0xcd, 400);
    for (int k = 0; k < 4; k++)
        ASSERT_OK(zimp_send(s, msg, 400, NS_PER_S));
    for (int k = 0; k < 4; k++)
        ASSERT_EQ(zimp_recv(i, buf, sizeof buf, NS_PER_S), 400);
    zimp_receiver_close(x);
    memset(msg, 0x11, 64);
    for (int k = 0; k < 4; k++) {
        ASSERT_OK(zimp_send(s, msg, 64, NS_PER_S));
        ASSERT_EQ(zimp_recv(i, buf, sizeof buf, NS_PER_S), 64);   /* the last reader: zeroes 64 B */
    }
    ASSERT_MSG(seg_has_run(name, 0xcd, 300), "the left message's tails are gone before a join");
    ASSERT_MSG(!seg_has_run(name, 0x11, 64), "a message its last reader released is still there");
    ASSERT_OK(zimp_receiver_open(name, &d));
    ASSERT_MSG(!seg_has_run(name, 0xcd, 64), "tails of the left message are still there after a join");
    zimp_receiver_close(d);
    zimp_receiver_close(i);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/*
 * Every message published after the open returned is delivered, also one
 * whose position was claimed before (a loan held across the open), while
 * messages published before the open are not: sender A sends m0, loans m1;
 * sender B sends m2 (published, after A's claim); the receiver opens; A
 * publishes m1; B sends m3. The receiver gets m1 then m3.
 */
TEST_IMPL(late_join_during_loan)
{
    char name[128];
    chan_name(name, sizeof name, "ljl");
    create_chan(name, 8, 64, 2, 2);
    zimp_sender *a, *b;
    zimp_receiver *early, *late;
    ASSERT_OK(zimp_receiver_open(name, &early));
    ASSERT_OK(zimp_sender_open(name, &a));
    ASSERT_OK(zimp_sender_open(name, &b));
    ASSERT_OK(send_msg(a, MODE_COPY, 0, 0, 32, NS_PER_S));            /* m0 */
    void *lb;
    ASSERT_OK(zimp_loan(a, 32, &lb, NS_PER_S));                         /* m1 claimed */
    ASSERT_OK(send_msg(b, MODE_ZC, 1, 0, 32, NS_PER_S));               /* m2 published */
    ASSERT_OK(zimp_receiver_open(name, &late));
    msg_fill(lb, 32, 0, 1);
    ASSERT_OK(zimp_publish(a, lb, 32));                                 /* m1 */
    ASSERT_OK(send_msg(b, MODE_COPY, 1, 1, 32, NS_PER_S));             /* m3 */
    uint8_t buf[64];
    uint32_t snd;
    uint64_t seq;
    /* the early receiver: all four, in position order m0 m1 m2 m3 */
    const uint32_t es[4] = { 0, 0, 1, 1 };
    const uint64_t eq[4] = { 0, 1, 0, 1 };
    for (int i = 0; i < 4; i++) {
        ssize_t n = zimp_recv(early, buf, sizeof buf, NS_PER_S);
        ASSERT_MSG(n == 32 && msg_check(buf, 32, &snd, &seq) && snd == es[i] && seq == eq[i],
                   "early receiver, message %d: n=%zd sender %u seq %llu", i, n, snd,
                   (unsigned long long)seq);
    }
    /* the late one: m1 (claimed before, published after its open), then m3 */
    ssize_t n = zimp_recv(late, buf, sizeof buf, NS_PER_S);
    ASSERT_MSG(n == 32 && msg_check(buf, 32, &snd, &seq) && snd == 0 && seq == 1,
               "late receiver missed the loan published after its open (n=%zd %u/%llu)", n, snd,
               (unsigned long long)seq);
    n = zimp_recv(late, buf, sizeof buf, NS_PER_S);
    ASSERT_MSG(n == 32 && msg_check(buf, 32, &snd, &seq) && snd == 1 && seq == 1,
               "late receiver: expected m3, got n=%zd %u/%llu", n, snd, (unsigned long long)seq);
    ASSERT_EQ(zimp_recv(late, buf, sizeof buf, 0), -EAGAIN);
    zimp_sender_close(a);
    zimp_sender_close(b);
    zimp_receiver_close(early);
    zimp_receiver_close(late);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}
